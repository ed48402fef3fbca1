"""Micro-benchmark of the report batch wire format (``workloads/local/wire.py``) against JSON lists.

Stein-GLM reports at p = 10 (``xx``: 55 floats, ``xy``: 10 floats per report, made by the real randomizer), batches
of 1,000 to 100,000 reports. For each format and batch size: bytes per report, and reports per second of encoding
(the client's or simulator's side) and of decoding (the server's side) on one core, best of ``--repeats`` runs. JSON is
what ``httpx``/FastAPI would carry without the binary format (``json.dumps`` of nested lists, ``json.loads`` then
``numpy.asarray``). Decoding ``<f8`` on a little-endian machine returns views of the received bytes (no copy), so its
rate is bounded by parsing the header, not by the batch's size. Writes ``benchmarks/results/wire_throughput.json``
and ``.png``.

    .venv/bin/python -m benchmarks.wire_throughput            # about a minute
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from workloads.local.protocols import SteinGlmSpec
from workloads.local.wire import decode_batch, encode_batch


def reports(count: int, p: int = 10) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    spec = SteinGlmSpec(dimension=p, norm_bound=3.0, label_bound=1.0, epsilon=2.0, delta=1e-6)
    x = rng.normal(size=(count, p)) / np.sqrt(p)
    y = rng.choice([-1.0, 1.0], size=count)
    return spec.randomize(0, spec.initial_state(), {"x": x, "y": y}, rng)


def json_encode(batch: dict[str, np.ndarray]) -> bytes:
    return json.dumps({"round": 0, "reports": {k: v.tolist() for k, v in batch.items()}}).encode()


def json_decode(payload: bytes) -> dict[str, np.ndarray]:
    data = json.loads(payload)
    return {k: np.asarray(v, dtype=float) for k, v in data["reports"].items()}


FORMATS = {
    "binary <f8": (lambda b: encode_batch(b, 0), decode_batch),
    "binary <f4": (lambda b: encode_batch(b, 0, dtype="<f4"), decode_batch),
    "json lists": (json_encode, json_decode),
}


def best_seconds(call, repeats: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    harness.add_outputs(parser, "wire_throughput")
    args = parser.parse_args()
    records = []
    for size in args.sizes:
        batch = reports(size)
        for name, (encode, decode) in FORMATS.items():
            payload = encode(batch)
            decoded = decode(payload)
            assert all(decoded[k].shape == batch[k].shape for k in batch) if isinstance(decoded, dict) else True
            encode_s = best_seconds(lambda: encode(batch), args.repeats)  # noqa: B023
            decode_s = best_seconds(lambda: decode(payload), args.repeats)  # noqa: B023
            record = {"format": name, "reports": size, "bytes_per_report": len(payload) / size,
                      "encode_reports_per_s": size / encode_s, "decode_reports_per_s": size / decode_s}
            records.append(record)
            print(f"{name:11s} {size:>7d} reports  {record['bytes_per_report']:7.1f} B/report  encode "
                  f"{record['encode_reports_per_s']:>12,.0f}/s  decode {record['decode_reports_per_s']:>12,.0f}/s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"records": records, "p": 10, "fields": {"xx": 55, "xy": 10}}, indent=1))
    plot(records, harness.outputs(args)[1])
    print(f"wrote {args.json} and {harness.outputs(args)[1]}")


def plot(records: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for axis, key, title in zip(axes, ("encode_reports_per_s", "decode_reports_per_s"), ("encode", "decode"),
                                strict=True):
        for name in FORMATS:
            rows = [r for r in records if r["format"] == name]
            axis.loglog([r["reports"] for r in rows], [r[key] for r in rows], "o-", label=name)
        axis.set_title(f"{title} (p = 10 Stein-GLM reports, one core)")
        axis.set_xlabel("reports per batch")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("reports per second")
    axes[0].legend()
    harness.save_figure(fig, path)


if __name__ == "__main__":
    main()
