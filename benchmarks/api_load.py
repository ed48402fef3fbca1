"""Load benchmark of the HTTP API: concurrent analysts asking for answers from stored releases.

16 client threads (each its own :class:`service.client.Client`, i.e. HTTP keep-alive + JSON + a
pandas DataFrame or a fitted model) ask a real ``marginalia serve`` on 127.0.0.1 for random 1- and
2-way marginals and, for a quarter of the requests, DD-SSP linear or logistic fits answered from
those releases (free, no new release: the releases measured every pair the fits read, so no answer
is the model's extrapolation), once per ``--workers`` count of server processes; then the same
service calls are made in-process (16 threads) on the same database. The database is a temporary
SQLite file; with ``--postgresql`` the same protocol then runs again on a new database of a throwaway
PostgreSQL server (service/tools/pgserver.py, as ``benchmarks.counting`` starts it). Reported per
backend and kind of request: p50/p99 latency and requests per second, and the HTTP/in-process
ratios. Targets (issue 22): p99 < 200 ms for fits and < 100 ms for marginals at 16 clients.

Every distinct request is made once before timing starts (caches warm); that cost is reported
separately as ``warmup``.

    .venv/bin/python -m benchmarks.api_load [--requests-per-client 150] [--clients 16] [--workers 1 2] [--postgresql]

Writes benchmarks/results/api_load.json (results under ``backends``: ``sqlite``, ``postgresql``) and
benchmarks/results/api_load.png.
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
from db.migrate import open_database
from service.access import auth
from service.accounting import accountant
from service.api.server import background_server, default_workers, serve_command
from service.client import Client
from service.data import datasets
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine

#: p99 targets (ms) per kind of request at 16 clients (issue 22)
TARGET_P99_MS = {"fit": 200.0, "marginal": 100.0}

# (dataset, categorical columns, mechanism, workload, privacy) of the stored releases: every pair is measured, so
# the fits below read measured pairs only (no allow_unmeasured)
RELEASES = [
    ("titanic", ("Sex", "Embarked"), "laplace", "all-2way", {"epsilon": 1.0}),
    ("titanic", ("Sex", "Embarked"), "gaussian", "all-2way", {"rho": 0.1}),
]


def prepare(url: str, releases: int | None = None) -> tuple[str, list[int], dict[int, list[str]]]:
    """The releases (the first ``releases`` of :data:`RELEASES`, all by default) in the new, empty database ``url``
    (upgraded here); returns (analyst key, release ids, columns)."""
    engine = open_database(url)
    ids, columns = [], {}
    for name, categorical, mechanism, workload, privacy in RELEASES[:releases]:
        if name not in [d.name for d in datasets.list_datasets(engine)]:
            source = DATA / name
            # PostgreSQL: the rows in the database too (the default folder of Parquet tables would be the working one)
            store = "duckdb" if url.startswith("sqlite") else "sql"
            datasets.load_coded_csv(engine, name, source / f"{name}.csv", source / f"{name}-domain.json", categorical,
                                    store=store)
            accountant.set_budget(engine, name, 10.0, 1e-6)
        # no seed: the API answers nothing from a seeded release, and latency does not depend on the noise
        outcome = release_engine.release_marginals(engine, name, mechanism, workload, **privacy)
        ids.append(outcome.release_id)
        columns[outcome.release_id] = list(datasets.get_dataset(engine, name).domain.names)
    _, key = auth.create_key(engine, "analyst", "benchmark")
    engine.dispose()
    return key, ids, columns


# DD-SSP fits answered from the stored releases (task, target, features), all free: the releases measured every pair
# among their columns
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
    fit("titanic", target, features, release=release_id)


def in_process(engine, query: Query) -> None:  # noqa: ANN001
    kind, release_id, what = query
    if kind == "marginal":
        answers.answer_marginal(engine, release_id, list(what))
        return
    task, target, features = what
    fit_regression(engine, "titanic", task, target, features, release_id=release_id)


def timed(clients: int, work: list[list[Query]], call: Callable[[int, Query], None]) -> tuple[np.ndarray, float]:
    """Run each client's list of queries in its own thread; latencies (s, in the order of ``flat(work)``) and wall
    time (s)."""
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


def flat(work: list[list[Query]]) -> list[Query]:
    return [query for queries_of_client in work for query in queries_of_client]


def by_kind(work: list[list[Query]], latencies: np.ndarray, wall: float) -> dict[str, dict[str, float]]:
    """The summary of all requests, of the marginals and of the fits, each kind against its p99 target."""
    kinds = np.asarray([query[0] for query in flat(work)])
    result = {"all": summary(latencies, wall)}
    for kind, target in TARGET_P99_MS.items():
        chosen = latencies[kinds == kind]
        if chosen.size:
            result[kind] = {**summary(chosen, wall), "target_p99_ms": target,
                            "meets_target": bool(np.percentile(chosen, 99) * 1e3 < target)}
    return result


def summary(latencies: np.ndarray, wall: float) -> dict[str, float]:
    """Latency percentiles (ms) and throughput; ``requests_per_second`` counts these requests over the whole run."""
    return {
        "requests": int(latencies.size),
        "p50_ms": float(np.percentile(latencies, 50) * 1e3),
        "p99_ms": float(np.percentile(latencies, 99) * 1e3),
        "max_ms": float(latencies.max() * 1e3),
        "mean_ms": float(latencies.mean() * 1e3),
        "requests_per_second": float(latencies.size / wall),
        "wall_seconds": float(wall),
    }


def plot(curves: dict[str, dict[str, np.ndarray]], kinds: np.ndarray, clients: int, path: Path) -> None:
    """Latency CDFs of marginals and fits (columns) per backend (rows), per server setup and in process, with the p99
    targets."""
    plt = harness.pyplot()
    figure, grid = plt.subplots(len(curves), 2, figsize=(11, 4 * len(curves)), sharey=True, squeeze=False)
    for axes, (backend, runs) in zip(grid, curves.items(), strict=True):
        for axis, (kind, target) in zip(axes, TARGET_P99_MS.items(), strict=True):
            for label, values in runs.items():
                ordered = np.sort(values[kinds == kind]) * 1e3
                if ordered.size:
                    axis.plot(ordered, np.arange(1, ordered.size + 1) / ordered.size, label=label)
            axis.axvline(target, color="grey", linestyle="--", label=f"p99 target {target:g} ms")
            axis.axhline(0.99, color="lightgrey", linestyle=":")
            axis.set_xscale("log")
            axis.set_xlabel("latency (ms, log scale)")
            axis.set_title(f"{backend}: {kind}s from stored releases, {clients} clients", fontsize=10)
            axis.legend(fontsize=8)
        axes[0].set_ylabel("fraction of requests")
    harness.save_figure(figure, path)


def measure(url: str, folder: Path, args: argparse.Namespace) -> tuple[dict[str, object], dict[str, np.ndarray],
                                                                      np.ndarray, int]:
    """The protocol on the new database ``url``: HTTP at each ``--workers`` count, then in process. Returns (this
    backend's results, latencies per run in the order of the plan, kind of each request, distinct requests)."""
    load_at_start = os.getloadavg()[0]  # other work on the machine inflates every latency
    key, ids, columns = prepare(url, args.releases)
    plan = queries(ids, columns, args.clients * args.requests_per_client, args.seed)
    work = [plan[i :: args.clients] for i in range(args.clients)]
    kinds = np.asarray([query[0] for query in flat(work)])
    distinct = list({json.dumps(q): q for q in plan}.values())
    http: dict[str, dict[str, object]] = {}
    curves: dict[str, np.ndarray] = {}
    for workers in args.workers:
        def command(port: int, workers: int = workers) -> list[str]:
            return serve_command(port, workers)

        with background_server(url, folder / "server.log", command) as server:
            sessions = [Client(server.url, key, timeout=120) for _ in range(args.clients)]
            start = time.perf_counter()
            # each worker process has its own caches, and each client's keep-alive connection stays with one
            # worker: every client asks every distinct question once, so that every worker is warm
            for session in sessions:
                for query in distinct:
                    over_http(session, query)
            warmup = time.perf_counter() - start
            latencies, wall = timed(args.clients, work, lambda i, q, s=sessions: over_http(s[i], q))
            for session in sessions:
                session.close()
        http[f"workers={workers}"] = {"workers": workers, **by_kind(work, latencies, wall), "warmup_seconds": warmup}
        curves[f"HTTP, {workers} worker{'s' if workers > 1 else ''}"] = latencies

    engine = make_engine(url)
    start = time.perf_counter()
    for query in distinct:
        in_process(engine, query)
    local_warmup = time.perf_counter() - start
    local, local_wall = timed(args.clients, work, lambda i, q: in_process(engine, q))
    engine.dispose()
    curves["in process (same service calls, one process)"] = local

    best = http[f"workers={max(args.workers)}"]
    local_summary = {**by_kind(work, local, local_wall), "warmup_seconds": local_warmup}
    result = {
        "load_average_1min_at_start": load_at_start,
        "http": http,
        "in_process": local_summary,
        "ratio_http_to_in_process": {  # at the largest worker count
            "p50": best["all"]["p50_ms"] / local_summary["all"]["p50_ms"],
            "p99": best["all"]["p99_ms"] / local_summary["all"]["p99_ms"],
            "requests_per_second": best["all"]["requests_per_second"] / local_summary["all"]["requests_per_second"],
        },
        "meets_target": {name: all(run[kind]["meets_target"] for kind in TARGET_P99_MS if kind in run)
                         for name, run in http.items()},
    }
    return result, curves, kinds, len(distinct)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests-per-client", type=int, default=150)
    parser.add_argument("--workers", type=int, nargs="+", default=sorted({1, default_workers()}),
                        help="server worker processes; one HTTP run per count (default: 1 and one per core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--releases", type=int, default=None,
                        help="only the first N stored releases (smoke runs: each logistic fit's first answer fits the "
                             "release's model)")
    parser.add_argument("--postgresql", action="store_true",
                        help="after SQLite, run the same protocol on a throwaway PostgreSQL server")
    harness.add_outputs(parser, "api_load")
    args = parser.parse_args()
    if min(args.workers) < 1:
        raise harness.BenchError(f"--workers must be positive, got {args.workers}")
    out, png = harness.outputs(args)
    backends: dict[str, dict[str, object]] = {}
    curves: dict[str, dict[str, np.ndarray]] = {}
    with harness.temporary_folder("marginalia-api-load-") as folder:
        # the releases are made afresh on each backend; the plan depends only on the seed, the sizes and the columns
        backends["sqlite"], curves["SQLite"], kinds, distinct = measure(f"sqlite:///{folder / 'bench.db'}", folder,
                                                                         args)
        backends["sqlite"]["database"] = "sqlite (temporary file)"
        if args.postgresql:
            with harness.postgresql_server() as server:
                url = harness.postgresql_database(server, "bench")
                backends["postgresql"], curves["PostgreSQL"], _, _ = measure(url, folder, args)
            backends["postgresql"]["database"] = "postgresql (throwaway local server, service/tools/pgserver.py)"
    result = {
        "benchmark": "api_load: marginals and DD-SSP fits from stored releases",
        "fit_share": FIT_SHARE,
        "fits": [{"task": t, "target": y, "features": f} for t, y, f in FITS],
        "clients": args.clients,
        "requests_per_client": args.requests_per_client,
        "distinct_queries": distinct,
        "releases": [{"dataset": d, "mechanism": m, "workload": w, **p} for d, _, m, w, p in RELEASES[:args.releases]],
        "target_p99_ms": TARGET_P99_MS,
        "machine": harness.machine(),
        "backends": backends,
    }
    harness.write_json(out, result, indent=2)
    plot(curves, kinds, args.clients, png)
    print(json.dumps(result, indent=2))

if __name__ == "__main__":
    main()
