"""Load benchmark of the HTTP API: concurrent analysts asking for answers from stored releases.

16 client threads (each its own :class:`service.client.Client`, i.e. HTTP keep-alive + JSON + a
pandas DataFrame or a fitted model) ask a real ``marginalia serve`` on 127.0.0.1 for random 1- and
2-way marginals and, for a quarter of the requests, DD-SSP linear or logistic fits answered from
those releases (free, no new release); then the same service calls are made in-process (16
threads) on the same database. Reported: p50/p99 latency, requests per second, and the
HTTP/in-process ratios. The target for answers that need no new release is p99 < 200 ms.

Every distinct request is made once before timing starts (caches warm); that cost is reported
separately as ``warmup``.

    .venv/bin/python -m benchmarks.api_load [--requests-per-client 150] [--clients 16]

Writes benchmarks/results/api_load.json and benchmarks/results/api_load.png.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.harness import DATA
from db.engine import make_engine
from service.access import auth
from service.accounting import accountant
from service.api.server import background_server
from service.client import Client
from service.data import datasets
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine

TARGET_P99_MS = 200.0

# (dataset, categorical columns, mechanism, workload, privacy) of the stored releases
RELEASES = [
    ("titanic", ("Sex", "Embarked"), "laplace", "target:Survived", {"epsilon": 1.0}),
    ("titanic", ("Sex", "Embarked"), "gaussian", "all-1way", {"rho": 0.1}),
]


def prepare(folder: Path) -> tuple[str, str, list[int], dict[int, list[str]]]:
    """A SQLite database with the releases; returns (url, analyst key, release ids, columns)."""
    url = f"sqlite:///{folder / 'bench.db'}"
    engine = harness.temporary_database(folder / "bench.db")
    ids, columns = [], {}
    for name, categorical, mechanism, workload, privacy in RELEASES:
        if name not in [d.name for d in datasets.list_datasets(engine)]:
            source = DATA / name
            datasets.load_coded_csv(engine, name, source / f"{name}.csv", source / f"{name}-domain.json", categorical)
            accountant.set_budget(engine, name, 10.0, 1e-6)
        # no seed: the API answers nothing from a seeded release, and latency does not depend on the noise
        outcome = release_engine.release_marginals(engine, name, mechanism, workload, **privacy)
        ids.append(outcome.release_id)
        columns[outcome.release_id] = list(datasets.get_dataset(engine, name).domain.names)
    _, key = auth.create_key(engine, "analyst", "benchmark")
    engine.dispose()
    return url, key, ids, columns


# DD-SSP fits answered from the stored releases (task, target, features), all free; the releases measured 1-way
# marginals (and the target's), so the fits read pairs never measured together: allowed (allow_unmeasured), as they
# were before the service refused them by default; what is measured is the latency of a free answer
FITS = [
    ("linear", "Fare", ["Pclass", "Sex", "Age", "SibSp", "Parch", "Embarked"]),
    ("logistic", "Sex", ["Pclass", "Fare", "Age", "Survived"]),
]
FIT_SHARE = 0.25  # a quarter of the requests are fits, the rest marginals

Query = tuple[str, int, object]  # ("marginal", release, attributes) or ("fit", release, (task, target, features))


def queries(ids: Sequence[int], columns: dict[int, list[str]], count: int, seed: int) -> list[Query]:
    """``count`` requests fixed by ``seed``: 1- and 2-way marginals, and DD-SSP fits (``FIT_SHARE``)."""
    rng = random.Random(seed)
    marginals = [("marginal", r, list(c)) for r in ids for k in (1, 2) for c in itertools.combinations(columns[r], k)]
    fits = [("fit", r, fit) for r in ids for fit in FITS]
    return [fits[rng.randrange(len(fits))] if rng.random() < FIT_SHARE else marginals[rng.randrange(len(marginals))]
            for _ in range(count)]


def over_http(session: Client, query: Query) -> None:
    kind, release_id, what = query
    if kind == "marginal":
        session.marginal(release_id, what)
        return
    task, target, features = what
    fit = session.fit_linear if task == "linear" else session.fit_logistic
    fit("titanic", target, features, release=release_id, allow_unmeasured=True)


def in_process(engine, query: Query) -> None:  # noqa: ANN001
    kind, release_id, what = query
    if kind == "marginal":
        answers.answer_marginal(engine, release_id, list(what))
        return
    task, target, features = what
    fit_regression(engine, "titanic", task, target, features, release_id=release_id, allow_unmeasured=True)


def timed(clients: int, work: list[list[Query]], call: Callable[[int, Query], None]) -> tuple[np.ndarray, float]:
    """Run each client's list of queries in its own thread; latencies (s) and wall time (s)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        for query in work[i]:
            start = time.perf_counter()
            call(i, query)
            latencies[i].append(time.perf_counter() - start)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, range(clients)))
    return np.asarray([x for row in latencies for x in row]), time.perf_counter() - start


def summary(latencies: np.ndarray, wall: float) -> dict[str, float]:
    return {
        "requests": int(latencies.size),
        "p50_ms": float(np.percentile(latencies, 50) * 1e3),
        "p99_ms": float(np.percentile(latencies, 99) * 1e3),
        "max_ms": float(latencies.max() * 1e3),
        "mean_ms": float(latencies.mean() * 1e3),
        "requests_per_second": float(latencies.size / wall),
        "wall_seconds": float(wall),
    }


def plot(http: np.ndarray, local: np.ndarray, path: Path) -> None:
    plt = harness.pyplot()
    figure, axis = plt.subplots(figsize=(7, 4))
    for label, values in (("HTTP (real server, Python client)", http), ("in process (same service calls)", local)):
        ordered = np.sort(values) * 1e3
        axis.plot(ordered, np.arange(1, ordered.size + 1) / ordered.size, label=label)
    axis.axvline(TARGET_P99_MS, color="grey", linestyle="--", label="p99 target 200 ms")
    axis.set_xscale("log")
    axis.set_xlabel("latency (ms, log scale)")
    axis.set_ylabel("fraction of requests")
    axis.set_title("Marginals and DD-SSP fits from stored releases, 16 concurrent clients")
    axis.legend()
    harness.save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests-per-client", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    harness.add_outputs(parser, "api_load")
    args = parser.parse_args()
    out, png = harness.outputs(args)
    load_at_start = os.getloadavg()[0]  # other work on the machine inflates every latency
    with harness.temporary_folder("marginalia-api-load-") as folder:
        url, key, ids, columns = prepare(folder)
        plan = queries(ids, columns, args.clients * args.requests_per_client, args.seed)
        work = [plan[i :: args.clients] for i in range(args.clients)]
        distinct = list({json.dumps(q): q for q in plan}.values())

        with background_server(url, folder / "server.log") as server:
            sessions = [Client(server.url, key, timeout=120) for _ in range(args.clients)]
            start = time.perf_counter()
            for query in distinct:
                over_http(sessions[0], query)
            http_warmup = time.perf_counter() - start
            http, http_wall = timed(args.clients, work, lambda i, q: over_http(sessions[i], q))
            for session in sessions:
                session.close()

        engine = make_engine(url)
        start = time.perf_counter()
        for query in distinct:
            in_process(engine, query)
        local_warmup = time.perf_counter() - start
        local, local_wall = timed(args.clients, work, lambda i, q: in_process(engine, q))
        engine.dispose()

    result = {
        "benchmark": "api_load: marginals and DD-SSP fits from stored releases",
        "fit_share": FIT_SHARE,
        "fits": [{"task": t, "target": y, "features": f} for t, y, f in FITS],
        "clients": args.clients,
        "requests_per_client": args.requests_per_client,
        "distinct_queries": len(distinct),
        "releases": [{"dataset": d, "mechanism": m, "workload": w, **p} for d, _, m, w, p in RELEASES],
        "database": "sqlite (temporary file)",
        "http": {**summary(http, http_wall), "warmup_seconds": http_warmup},
        "in_process": {**summary(local, local_wall), "warmup_seconds": local_warmup},
        "target_p99_ms": TARGET_P99_MS,
        "machine": {**harness.machine(), "load_average_1min_at_start": load_at_start},
    }
    result["ratio_http_to_in_process"] = {
        "p50": result["http"]["p50_ms"] / result["in_process"]["p50_ms"],
        "p99": result["http"]["p99_ms"] / result["in_process"]["p99_ms"],
        "requests_per_second": result["http"]["requests_per_second"] / result["in_process"]["requests_per_second"],
    }
    result["meets_target"] = result["http"]["p99_ms"] < TARGET_P99_MS
    harness.write_json(out, result, indent=2)
    plot(http, local, png)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
