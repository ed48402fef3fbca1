"""Throughput of the simulator's path: randomize -> submit -> store -> aggregate (issue 8's target: 20,000 reports
per second on SQLite on the reference machine, p = 10 Stein-GLM reports).

For each batch size, a fresh SQLite database (in a temporary folder), a ``stein-glm`` campaign of dimension 10, and
``--n`` simulated participants through :func:`service.campaigns.simulate.simulate`: the real randomizer
(``SteinGlmSpec.randomize``, one Gaussian report of 65 numbers each), the function the HTTP batch route calls
(``submit_reports``: schema validation, the serialised check-and-append of the local ledger, the running aggregate),
one transaction per batch. Also timed alone: the randomizer and the validation, to show where the time goes.
Writes ``benchmarks/results/simulate_throughput.json`` and ``.png``.

    .venv/bin/python -m benchmarks.simulate_throughput                      # about a minute
    .venv/bin/python -m benchmarks.simulate_throughput --n 290000 --batches 20000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from service.campaigns import campaigns, simulate
from service.client.device import make_report

P = 10


def problem(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, P)) / np.sqrt(P)
    y = (rng.random(n) < 1 / (1 + np.exp(-x.sum(axis=1)))).astype(float)
    return x, y


def one_run(n: int, batch: int, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    with harness.temporary_folder("marginalia-simulate-") as folder:
        engine = harness.temporary_database(folder / "bench.db")
        features = [f"x{j}" for j in range(P)]
        campaigns.create_campaign(engine, "bench", "stein-glm", features, "y", None, 5, n ** -1.1,
                                  {"norm_bound": 1.5, "participants": n})
        state = campaigns.public_state(campaigns.get_campaign(engine, "bench"))
        start = time.perf_counter()
        result = simulate.simulate(engine, "bench", x, y, seed=1, batch=batch)
        seconds = time.perf_counter() - start
        randomize = time.perf_counter()
        rng = np.random.default_rng(2)
        for lo in range(0, n, batch):
            make_report(state, x[lo:lo + batch], y[lo:lo + batch], rng)
        randomize = time.perf_counter() - randomize
        info = campaigns.get_campaign(engine, "bench")
        assert info.rounds[0].reports == n, info.rounds
        size = Path(f"{folder}/bench.db").stat().st_size
        engine.dispose()
    return {"n": n, "batch": batch, "seconds": seconds, "reports_per_second": n / seconds,
            "randomize_seconds": randomize, "store_and_aggregate_seconds": seconds - randomize,
            "database_bytes_per_report": size / n, "simulator_seconds": result.seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--batches", type=int, nargs="+", default=[2_000, 10_000, 20_000, 50_000])
    harness.add_outputs(parser, "simulate_throughput")
    args = parser.parse_args()
    x, y = problem(args.n)
    records = []
    for batch in args.batches:
        record = one_run(args.n, batch, x, y)
        records.append(record)
        print(f"batch {batch:>6d}: {record['reports_per_second']:>9,.0f} reports/s ({record['seconds']:.2f} s for "
              f"{args.n:,}; randomizing {record['randomize_seconds']:.2f} s), "
              f"{record['database_bytes_per_report']:.0f} database bytes per report")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"records": records, "p": P, "target_reports_per_second": 20_000,
                                    "backend": "sqlite"}, indent=1))
    plot(records, harness.outputs(args)[1])
    print(f"wrote {args.json} and {harness.outputs(args)[1]}")


def plot(records: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    fig, axis = plt.subplots(figsize=(6, 4))
    batches = [r["batch"] for r in records]
    axis.semilogx(batches, [r["reports_per_second"] for r in records], "o-", label="randomize + submit + store")
    axis.semilogx(batches, [r["n"] / r["store_and_aggregate_seconds"] for r in records], "s--",
                  label="submit + store + aggregate only")
    axis.axhline(20_000, color="grey", linestyle=":", label="target 20,000/s")
    axis.set_xlabel("reports per batch (one transaction each)")
    axis.set_ylabel("reports per second (SQLite)")
    axis.set_title("simulator path, p = 10 Stein-GLM reports")
    axis.legend()
    axis.grid(True, which="both", alpha=0.3)
    harness.save_figure(fig, path)


if __name__ == "__main__":
    main()
