"""What a large body costs a real server before and after its key is checked (issue 27, finding 3).

The audit sent a 94 MB JSON body to ``POST /datasets`` with no key: it was parsed for 5.25 s before the 401, ``GET
/health`` stalled 5.09 s and the worker grew from 0.52 to 1.08 GB. This starts ``marginalia serve --workers 1`` (one
worker: every request meets the one event loop) on loopback over a temporary SQLite database, once per scenario so
that each peak is its own, and sends, from a raw socket, one body while a second connection asks ``GET /health``
every 20 ms:

* ``no-key``: 94 MB upload-shaped JSON (a one-column table), no key: time to the answer, bytes the server took;
* ``steward-parsed``: the same body with a steward key (within the upload's 96 MiB limit: read, then decoded and
  validated in a worker thread; its 62 M characters of CSV are within the schema's 64 Mi, so it is loaded);
* ``steward-over-limit``: a 120 MB body with a steward key (over the upload limit: 413 by its Content-Length);
* ``analyst-upload``: the 94 MB body with an analyst key (403 before reading);
* ``no-key-tokens``, ``steward-tokens``: 94 MB of 23.5 million one-letter names in the upload's ``categorical`` list
  (the most work per byte for the JSON decoder; refused with a 422 once decoded and validated).

Reported per scenario: the status, the time to the answer, /health's largest and median latency while the request
ran, and the worker's resident memory before, after and at its peak (``VmRSS``, ``VmHWM`` of /proc). Run it from a
checkout to measure that checkout's code (``serve`` runs from the repository of this file)::

    .venv/bin/python -m benchmarks.body_edge [--megabytes 94] [--json benchmarks/results/body_edge.json]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from pathlib import Path

import httpx

from benchmarks import harness
from db.migrate import open_database
from service.access import auth
from service.api.server import background_server, serve_command

CHUNK = 1 << 20


def upload_body(megabytes: float) -> bytes:
    """An upload of a one-column table ``a`` coded 0..1, ``megabytes`` MB of JSON (3 bytes a row: ``0\\n``)."""
    rows = int(megabytes * 1e6 / 3)
    csv = "a\n" + "0\n" * rows
    return json.dumps({"name": "big", "csv": csv, "domain": {"a": 2}}).encode()


def token_body(megabytes: float) -> bytes:
    """An upload whose ``categorical`` list holds ``megabytes`` MB of one-letter names: 23.5 million JSON tokens in
    94 MB, the most work per byte a body can ask of the JSON decoder (the schema admits 10,000; that is known only
    once the list is decoded)."""
    count = int(megabytes * 1e6 / 4)
    return (b'{"name": "big", "csv": "a\\n0\\n", "domain": {"a": 2}, "categorical": [' + b'"a",' * count
            + b'"a"]}')


def rss(pid: int) -> dict[str, float]:
    """The process's resident memory now and at its peak, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {name: int(fields[key].split()[0]) / 1024 for name, key in (("rss_mb", "VmRSS"), ("peak_mb", "VmHWM"))}


def send(url: str, body: bytes, key: str | None, declared: int | None = None) -> dict[str, object]:
    """POST ``body`` to /datasets over a raw socket as curl does for a large body: the headers with ``Expect:
    100-continue``, then the body only once the server asks for it (``100 Continue``, sent when the app first reads
    the body); the status, the seconds to the final answer's status line and the bytes sent before it."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    headers = ["POST /datasets HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
               f"Content-Length: {declared if declared is not None else len(body)}", "Expect: 100-continue",
               "Connection: close"]
    if key is not None:
        headers.append(f"Authorization: Bearer {key}")
    start = time.perf_counter()
    sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
    sent, answer = 0, b""
    while True:
        answer += sock.recv(65536)
        if answer.startswith(b"HTTP/1.1 100") and b"\r\n\r\n" in answer:
            answer = answer.split(b"\r\n\r\n", 1)[1]
            for offset in range(0, len(body), CHUNK):
                sock.sendall(body[offset:offset + CHUNK])
            sent = len(body)
        elif b"\r\n" in answer:
            break
    seconds = time.perf_counter() - start
    while piece := sock.recv(65536):
        answer += piece
    sock.close()
    status = int(answer.split(b" ", 2)[1])
    text = answer.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")
    return {"status": status, "seconds_to_answer": round(seconds, 3), "bytes_sent_before_answer": sent,
            "answer": text[:160]}


def health_during(url: str, stop: threading.Event, latencies: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            start = time.perf_counter()
            client.get("/health")
            latencies.append(time.perf_counter() - start)
            time.sleep(0.02)


def scenario(name: str, body: bytes, role: str | None, declared: int | None = None) -> dict[str, object]:
    with harness.temporary_folder("marginalia-body-edge-") as folder:
        url = f"sqlite:///{folder / 'edge.db'}"
        engine = open_database(url)
        key = None if role is None else auth.create_key(engine, role, role)[1]
        engine.dispose()
        with background_server(url, folder / "server.log", command=lambda port: serve_command(port, workers=1)) as srv:
            pid = srv.process.pid
            before = rss(pid)
            stop, latencies = threading.Event(), []
            poller = threading.Thread(target=health_during, args=(srv.url, stop, latencies), daemon=True)
            poller.start()
            time.sleep(0.3)
            result = send(srv.url, body, key, declared)
            stop.set()
            poller.join(timeout=60)
            after = rss(pid)
    return {"scenario": name, "body_bytes": len(body), **result,
            "health_max_ms": round(1000 * max(latencies), 1), "health_median_ms": round(1000 * statistics.median(
                latencies), 1), "health_requests": len(latencies), "rss_before_mb": round(before["rss_mb"]),
            "rss_after_mb": round(after["rss_mb"]), "rss_peak_mb": round(after["peak_mb"])}


def draw(results: list[dict[str, object]], path: Path) -> None:
    """/health's worst and median latency while each scenario's body was on its way, and the time to its answer."""
    plt = harness.pyplot()
    names = [str(r["scenario"]) for r in results]
    fig, ax = plt.subplots(figsize=(8, 4))
    positions = range(len(names))
    width = 0.27
    for offset, (key, label) in enumerate((("health_max_ms", "/health, worst"), ("health_median_ms", "/health, median"),
                                           ("seconds_to_answer", "the body's answer"))):
        values = [float(r[key]) * (1000 if key == "seconds_to_answer" else 1) for r in results]
        ax.bar([p + (offset - 1) * width for p in positions], values, width, label=label)
    ax.set_xticks(list(positions), names, rotation=20, ha="right")
    ax.set_ylabel("milliseconds")
    ax.set_yscale("log")
    ax.set_title(f"{results[0]['body_bytes'] / 1e6:.0f} MB to POST /datasets against marginalia serve (1 worker)")
    harness.finish_axes(ax, len(names))
    harness.save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=94.0,
                        help="the body's size (default 94, the audit's; the over-limit body is 120 whatever it is)")
    harness.add_outputs(parser, "body_edge")
    args = parser.parse_args(argv)
    if not args.megabytes > 0:
        raise harness.BenchError(f"--megabytes must be positive, got {args.megabytes}")
    out, plot = harness.outputs(args)
    body = upload_body(args.megabytes)
    tokens = token_body(args.megabytes)
    results = [scenario("no-key", body, None), scenario("no-key-tokens", tokens, None),
               scenario("analyst-upload", body, "analyst"), scenario("steward-over-limit", upload_body(120), "steward"),
               scenario("steward-parsed", body, "steward"), scenario("steward-tokens", tokens, "steward")]
    for row in results:
        print(json.dumps(row))
    harness.write_json(out, {"machine": harness.machine(), "megabytes": args.megabytes, "results": results})
    draw(results, plot)
    harness.wrote(out, plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
