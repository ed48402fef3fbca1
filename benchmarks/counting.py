"""Benchmark: counting all 45 pairwise marginals of nist_taxi in SQL, against pandas (issue 2, "Performance").

Loads nist_taxi (226k rows, 10 columns) into a fresh SQLite file and a fresh database of a throwaway
PostgreSQL (service/tools/pgserver.py), then times, in interleaved rounds so that both sides see the same machine:

* the reference: ``DataFrame.groupby([a, b]).size()`` for each pair, on an in-memory DataFrame of the same rows;
* SQL counting of the same 45 pairs on each backend, as the service does it (``TableCountOracle.counts_many``),
  and the variants it was chosen over (the code before this change, one query per pair, GROUPING SETS,
  SQLite pragmas, PostgreSQL work_mem / parallel workers / ANALYZE, SQLite indexes).

Every variant's counts are checked against a numpy bincount of the rows once, in an untimed warm-up round
(which also warms every cache), before the timed rounds. Rows never leave the database to be counted: every SQL
variant fetches GROUP BY counts only. Writes ``results/counting.json`` and ``results/counting.png`` and prints
a table. Run from the repository root::

    .venv/bin/python -m benchmarks.counting [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, create_engine, event, func, select, text

from benchmarks import harness
from db import tables
from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.data import datasets
from service.data.oracle import COVER_MAX_CELLS, TableCountOracle, marginalize, plan_cover
from service.tools.pgserver import PostgresServer, PostgresUnavailable, start_server

TARGET_RATIO = 3.0
DATASET = "nist_taxi"
Pair = tuple[str, str]
Counts = dict[Pair, np.ndarray]


@dataclass
class Variant:
    name: str
    backend: str  # "pandas", "sqlite" or "postgresql"
    description: str
    run: Callable[[], object]
    check: bool = True  # whether run() returns dense counts to verify
    headline: bool = False
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


# the reference ------------------------------------------------------------------------------------
def pandas_pairs(frame: pd.DataFrame, pairs: Sequence[Pair]) -> Callable[[], object]:
    def run() -> object:
        return [frame.groupby(list(pair)).size() for pair in pairs]

    return run


def pandas_cover(frame: pd.DataFrame, pairs: Sequence[Pair], groups: Sequence[tuple[str, ...]]) -> Callable[[], object]:
    """Informational: pandas given the same covering plan as the SQL path (count groups, sum to pairs)."""

    def run() -> object:
        out: dict[Pair, pd.Series] = {}
        for group in groups:
            sizes = frame.groupby(list(group)).size()
            for pair in itertools.combinations(group, 2):
                if pair in pairs and pair not in out:
                    out[pair] = sizes.groupby(level=list(pair)).sum()
        return out

    return run


# SQL variants -------------------------------------------------------------------------------------
def _columns(stored: datasets.StoredDataset, attributes: Sequence[str]) -> list[str]:
    return [stored.sql_columns[a] for a in attributes]


def _before_change(connection, table, columns: Sequence[str], shape: tuple[int, ...]) -> np.ndarray:  # noqa: ANN001
    """``count_marginal`` as of commit 211955d (the baseline): GROUP BY the columns, SQLAlchemy rows."""
    cols = [table.c[name] for name in columns]
    counts = np.zeros(shape, dtype=np.int64)
    rows = connection.execute(select(*cols, func.count()).group_by(*cols)).fetchall()
    if rows:
        array = np.asarray(rows, dtype=np.int64)
        counts[tuple(array[:, :-1].T)] = array[:, -1]
    return counts


def _columns_raw(connection, table, columns: Sequence[str], shape: tuple[int, ...]) -> np.ndarray:  # noqa: ANN001
    """GROUP BY the columns (no cell index), fetched with the DB-API cursor: isolates the cell index."""
    listed = ", ".join(columns)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(f"SELECT {listed}, COUNT(*) FROM {table.name} GROUP BY {listed}")
        array = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, len(columns) + 1)
    finally:
        cursor.close()
    counts = np.zeros(shape, dtype=np.int64)
    counts[tuple(array[:, :-1].T)] = array[:, -1]
    return counts


def per_pair(engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair], count) -> Callable[[], Counts]:  # noqa: ANN001
    table = tables.data_table(stored.data_table, list(stored.domain.sizes().values()))

    def run() -> Counts:
        with engine.connect() as connection:
            return {p: count(connection, table, _columns(stored, p), stored.domain.shape(p)) for p in pairs}

    return run


def oracle_many(engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair], max_cells: int):  # noqa: ANN201
    """The service's path: a fresh oracle (empty cache) each time."""

    def run() -> Counts:
        return TableCountOracle(engine, stored).counts_many(pairs, max_cells=max_cells)  # type: ignore[return-value]

    return run


def planned(
    engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair], groups: Sequence[tuple[str, ...]],
    one_scan: bool,
) -> Callable[[], Counts]:
    """The oracle's plan with the statement shape forced: one GROUPING SETS scan, or one query per group."""
    table = tables.data_table(stored.data_table, list(stored.domain.sizes().values()))

    def run() -> Counts:
        with engine.connect() as connection:
            counted = tables.count_marginals(
                connection, table, [(_columns(stored, g), stored.domain.shape(g)) for g in groups], one_scan=one_scan
            )
        out: Counts = {}
        for group, counts in zip(groups, counted, strict=True):
            for pair in itertools.combinations(group, 2):
                if pair in pairs and pair not in out:
                    out[pair] = marginalize(counts, group, pair)
        return out

    return run


def threaded(
    engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair], groups: Sequence[tuple[str, ...]],
    workers: int = 2,
) -> Callable[[], Counts]:
    """The plan's groups split over ``workers`` connections counting at once (both drivers release the GIL
    while the database works): what a second core buys, which pandas does not use."""
    table = tables.data_table(stored.data_table, list(stored.domain.sizes().values()))
    parts = [list(groups[i::workers]) for i in range(workers)]

    def count(part: list[tuple[str, ...]]) -> list[np.ndarray]:
        with engine.connect() as connection:
            return tables.count_marginals(
                connection, table, [(_columns(stored, g), stored.domain.shape(g)) for g in part], one_scan=False
            )

    def run() -> Counts:
        with ThreadPoolExecutor(workers) as pool:
            counted = list(pool.map(count, parts))
        out: Counts = {}
        for part, arrays in zip(parts, counted, strict=True):
            for group, counts in zip(part, arrays, strict=True):
                for pair in itertools.combinations(group, 2):
                    if pair in pairs and pair not in out:
                        out[pair] = marginalize(counts, group, pair)
        return out

    return run


@contextmanager
def work_mem(value: str) -> Iterator[None]:
    saved = tables.ONE_SCAN_WORK_MEM
    tables.ONE_SCAN_WORK_MEM = value
    try:
        yield
    finally:
        tables.ONE_SCAN_WORK_MEM = saved


def with_work_mem(run: Callable[[], Counts], value: str) -> Callable[[], Counts]:
    def wrapped() -> Counts:
        with work_mem(value):
            return run()

    return wrapped


def sqlite_engine_with(url: str, pragmas: Sequence[str]) -> Engine:
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]  # noqa: ANN001
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    return engine


def _count_pairs_one_scan(engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair]) -> list[np.ndarray]:
    table = tables.data_table(stored.data_table, list(stored.domain.sizes().values()))
    with engine.connect() as connection:
        return tables.count_marginals(
            connection, table, [(_columns(stored, p), stored.domain.shape(p)) for p in pairs], one_scan=True
        )


def _indexed_plan(
    engine: Engine, stored: datasets.StoredDataset, pairs: Sequence[Pair], groups: Sequence[tuple[str, ...]]
) -> Callable[[], Counts]:
    """Each plan group counted by GROUP BY its columns, which SQLite streams from a covering index."""
    table = tables.data_table(stored.data_table, list(stored.domain.sizes().values()))

    def run() -> Counts:
        out: Counts = {}
        with engine.connect() as connection:
            for group in groups:
                counts = _columns_raw(connection, table, _columns(stored, group), stored.domain.shape(group))
                for pair in itertools.combinations(group, 2):
                    if pair in pairs and pair not in out:
                        out[pair] = marginalize(counts, group, pair)
        return out

    return run


def _checkpointed_size(path: Path) -> int:
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


# loading ------------------------------------------------------------------------------------------
def load(engine: Engine, csv: Path, domain: Path) -> dict[str, float]:
    upgrade_to_head(engine)
    start = time.perf_counter()
    info = datasets.load_coded_csv(engine, DATASET, csv, domain, store="sql")  # the SQL variants read data_<id>
    seconds = time.perf_counter() - start
    return {"rows": info.rows, "seconds": seconds, "rows_per_second": info.rows / seconds}


def new_postgres_database(server: PostgresServer, name: str) -> str:
    admin = create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        # Autovacuum would ANALYZE the new table at a moment of its choosing; the benchmark measures both
        # states explicitly instead (this is the benchmark's throwaway cluster).
        connection.execute(text("ALTER SYSTEM SET autovacuum = off"))
        connection.execute(text("SELECT pg_reload_conf()"))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.url(name)


# timing -------------------------------------------------------------------------------------------
def verify(variant: Variant, truth: Counts) -> None:
    result = variant.run()
    if variant.backend == "pandas" and isinstance(result, list):  # the reference: one Series per pair
        for (pair, expected), series in zip(truth.items(), result, strict=True):
            dense = np.zeros_like(expected)
            dense[tuple(np.asarray(series.index.get_level_values(i)) for i in range(2))] = series.to_numpy()
            if not np.array_equal(dense, expected):
                raise AssertionError(f"pandas' counts of {pair} differ from numpy's bincount")
        return
    if not variant.check:
        return
    assert isinstance(result, dict)
    for pair, expected in truth.items():
        if not np.array_equal(np.asarray(result[pair]), expected):
            raise AssertionError(f"{variant.name}: counts of {pair} differ from numpy's bincount")


def time_rounds(
    variants: Sequence[Variant], truth: Counts, repeats: int, label: str, server_cpu: Callable[[], float]
) -> None:
    """Warm-up (verified) round, then ``repeats`` rounds of every variant in turn. Wall seconds, and CPU
    seconds: this process's, plus the PostgreSQL server's for PostgreSQL variants (less sensitive than wall
    time to other work on the machine)."""
    print(f"[{label}] warm-up and verification", flush=True)
    for variant in variants:
        verify(variant, truth)
    for r in range(repeats):
        print(f"[{label}] round {r + 1}/{repeats}", flush=True)
        for variant in variants:
            server_before = server_cpu() if variant.backend == "postgresql" else 0.0
            cpu_before = time.process_time()
            start = time.perf_counter()
            variant.run()
            variant.seconds.append(time.perf_counter() - start)
            cpu = time.process_time() - cpu_before
            if variant.backend == "postgresql":
                cpu += server_cpu() - server_before
            variant.cpu.append(cpu)


def postgres_cpu(server: PostgresServer) -> Callable[[], float]:
    """CPU seconds used so far by the throwaway server: the postmaster (with its reaped children, e.g.
    parallel workers) and its live children (the backends), read from /proc (Linux)."""
    postmaster = int((server.directory / "data" / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid, parent = int(stat.parent.name), int(fields[1])
            if pid == postmaster:  # utime, stime, cutime, cstime
                total += sum(int(x) for x in fields[11:15])
            elif parent == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    return read


def summarise(variants: Sequence[Variant], reference: Variant, phase: str) -> list[dict[str, object]]:
    best_ref, median_ref = min(reference.seconds), statistics.median(reference.seconds)
    cpu_ref = statistics.median(reference.cpu)
    rows = []
    for v in variants:
        best, median, cpu = min(v.seconds), statistics.median(v.seconds), statistics.median(v.cpu)
        rows.append({
            "phase": phase, "name": v.name, "backend": v.backend, "description": v.description,
            "headline": v.headline, "seconds": [round(x, 5) for x in v.seconds], "best": best, "median": median,
            "ratio_best": best / best_ref, "ratio_median": median / median_ref,
            "cpu_seconds": [round(x, 5) for x in v.cpu], "cpu_median": cpu, "cpu_ratio_median": cpu / cpu_ref,
            "within_target": median / median_ref <= TARGET_RATIO, "verified": v.check,
        })
    return rows


# output -------------------------------------------------------------------------------------------
def print_table(rows: Sequence[dict[str, object]]) -> None:
    print(f"\n{'phase':10s} {'variant':44s} {'best s':>7s} {'median s':>8s} {'x pandas':>8s} {'(best)':>7s} "
          f"{'cpu s':>6s} {'cpu x':>6s}")
    for row in rows:
        mark = " *" if row["headline"] else ""
        print(f"{row['phase']:10s} {str(row['name']) + mark:44s} {row['best']:7.3f} {row['median']:8.3f} "
              f"{row['ratio_median']:8.2f} {row['ratio_best']:7.2f} {row['cpu_median']:6.2f} "
              f"{row['cpu_ratio_median']:6.2f}")
    print(f"* = the service's path. x pandas: median / median of pandas groupby per pair in the same rounds; "
          f"(best): best / best; cpu: median CPU seconds (PostgreSQL: client + server) and its ratio. "
          f"Target: within {TARGET_RATIO:g}x.")


def plot(rows: Sequence[dict[str, object]], path: Path, subtitle: str) -> None:
    plt = harness.pyplot()
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    rows = [r for r in rows if r["phase"] == "main"]
    colours = {"pandas": "#7f7f7f", "sqlite": "#1f77b4", "postgresql": "#ff7f0e"}
    labels = [f"{r['name']}{'  *' if r['headline'] else ''}" for r in rows]
    y = np.arange(len(rows))[::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 0.42 * len(rows) + 2.5), sharey=True)
    left.barh(y, [r["best"] for r in rows], color=[colours[r["backend"]] for r in rows])
    left.plot([r["median"] for r in rows], y, "k|", markersize=12, label="median")
    left.set_xscale("log")
    left.xaxis.set_major_formatter(ScalarFormatter())
    left.xaxis.set_minor_formatter(NullFormatter())
    left.set_xlabel("seconds for all 45 pairs (bar: best, tick: median)")
    left.set_yticks(y, labels)
    left.legend(loc="upper right")
    ratios, cpu = [r["ratio_median"] for r in rows], [r["cpu_ratio_median"] for r in rows]
    right.barh(y, ratios, color=[colours[r["backend"]] for r in rows])
    right.plot(cpu, y, "kD", markersize=4, label="CPU-time ratio")
    right.axvline(TARGET_RATIO, color="red", linestyle="--", label=f"target {TARGET_RATIO:g}x")
    right.axvline(1.0, color="black", linewidth=0.8)
    right.set_xscale("log")
    right.xaxis.set_major_formatter(ScalarFormatter())
    right.xaxis.set_minor_formatter(NullFormatter())
    right.set_xlim(right=max(max(ratios), max(cpu)) * 2.2)
    right.set_xlabel("x pandas (bar: median wall time; diamond: median CPU time)")
    for yy, ratio, c in zip(y, ratios, cpu, strict=True):
        right.text(max(ratio, c) * 1.12, yy, f"{ratio:.2f}x", va="center", fontsize=8)
    right.legend(loc="upper right")
    fig.suptitle(f"Counting the 45 pairwise marginals of nist_taxi (226k rows): SQL vs pandas groupby\n{subtitle}")
    harness.save_figure(fig, path, dpi=110)


def _subtitle(rows: Sequence[dict[str, object]], repeats: int, load: float) -> str:
    headline = {r["backend"]: r for r in rows if r["headline"] and r["phase"] == "main"}
    return (f"service path: sqlite {headline['sqlite']['ratio_median']:.2f}x, postgresql "
            f"{headline['postgresql']['ratio_median']:.2f}x pandas (median of {repeats} rounds; * = service path); "
            f"load average {load:.1f} at start")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--data", type=Path, default=harness.DATA / "nist_taxi",
                        help="folder of nist-taxi.csv + domain")
    harness.add_outputs(parser, "counting")
    parser.add_argument("--max-cells", type=int, default=COVER_MAX_CELLS, help="plan_cover's cap (default %(default)s)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG from the JSON in --json")
    args = parser.parse_args(argv)
    out, png = harness.outputs(args)
    if args.plot_only:
        report = json.loads(out.read_text())
        plot(report["results"], png,
             _subtitle(report["results"], report["repeats"], report["machine"]["loadavg_start"][0]))
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    csv, domain_file = args.data / "nist-taxi.csv", args.data / "nist-taxi-domain.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()

    frame = pd.read_csv(csv)
    names = list(json.loads(domain_file.read_text()))
    frame = frame[names]
    sizes = json.loads(domain_file.read_text())
    pairs: list[Pair] = list(itertools.combinations(names, 2))
    truth: Counts = {}
    for a, b in pairs:
        index = frame[a].to_numpy() * sizes[b] + frame[b].to_numpy()
        truth[(a, b)] = np.bincount(index, minlength=sizes[a] * sizes[b]).reshape(sizes[a], sizes[b])

    workdir = Path(tempfile.mkdtemp(prefix="marginalia-bench-"))
    sqlite_url = f"sqlite:///{workdir / 'bench.db'}"
    sqlite = make_engine(sqlite_url)
    loads = {"sqlite": load(sqlite, csv, domain_file)}
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        parser.exit(2, f"counting benchmark: PostgreSQL is needed and could not start: {exc}\n")
    try:
        cpu_of_server = postgres_cpu(server)
        postgres = make_engine(new_postgres_database(server, "bench"))
        loads["postgresql"] = load(postgres, csv, domain_file)
        stored = datasets.get_dataset(sqlite, DATASET)
        stored_pg = datasets.get_dataset(postgres, DATASET)
        groups = plan_cover(pairs, stored.domain, args.max_cells)
        print(f"loaded {loads['sqlite']['rows']} rows; plan: {len(groups)} groups for {len(pairs)} pairs", flush=True)
        reference = Variant("pandas groupby per pair", "pandas", "DataFrame.groupby([a, b]).size() for each pair",
                            pandas_pairs(frame, pairs), check=False, headline=True)

        # phase 1: PostgreSQL right after the load, before any ANALYZE (autovacuum is off) -----------
        fresh = [
            Variant("pandas groupby per pair", "pandas", reference.description, reference.run, check=False),
            Variant("pg: counts_many, no ANALYZE", "postgresql", "the service's path on a table without statistics",
                    oracle_many(postgres, stored_pg, pairs, args.max_cells)),
            Variant("pg: per-pair cell index, no ANALYZE", "postgresql", "45 queries, table without statistics",
                    per_pair(postgres, stored_pg, pairs, tables.count_marginal)),
        ]
        time_rounds(fresh, truth, args.repeats, "before ANALYZE", cpu_of_server)
        with postgres.connect() as connection:
            start = time.perf_counter()
            connection.exec_driver_sql(f"ANALYZE {stored_pg.data_table}")
            connection.commit()
            analyze_seconds = time.perf_counter() - start

        # phase 2: everything, warm, PostgreSQL analysed ------------------------------------------------
        sqlite_pragmas = sqlite_engine_with(
            sqlite_url, ["PRAGMA cache_size=-65536", "PRAGMA temp_store=MEMORY", "PRAGMA mmap_size=268435456"])
        sqlite_small_cache = sqlite_engine_with(sqlite_url, ["PRAGMA cache_size=-500"])
        parallel = create_engine(
            postgres.url, connect_args={"options": "-c max_parallel_workers_per_gather=2 -c parallel_setup_cost=0 "
                                                   "-c parallel_tuple_cost=0 -c min_parallel_table_scan_size=0"})
        main_variants = [
            reference,
            Variant("pandas, same covering plan (info)", "pandas",
                    "pandas groupby on the plan's groups, summed to pairs: what the plan trick gives pandas",
                    pandas_cover(frame, pairs, groups), check=False),
            Variant("sqlite: counts_many", "sqlite", f"TableCountOracle.counts_many: {len(groups)} GROUP BY queries "
                    "on cell indexes, summed to pairs", oracle_many(sqlite, stored, pairs, args.max_cells),
                    headline=True),
            Variant("sqlite: plan on 2 connections (threads)", "sqlite", "groups split over 2 connections at once",
                    threaded(sqlite, stored, pairs, groups)),
            Variant("sqlite: per-pair cell index", "sqlite", "count_marginal x45 (cell index, DB-API cursor)",
                    per_pair(sqlite, stored, pairs, tables.count_marginal)),
            Variant("sqlite: per-pair columns, raw cursor", "sqlite", "GROUP BY a, b x45, DB-API cursor",
                    per_pair(sqlite, stored, pairs, _columns_raw)),
            Variant("sqlite: before (211955d)", "sqlite", "GROUP BY a, b x45 through SQLAlchemy rows",
                    per_pair(sqlite, stored, pairs, _before_change)),
            Variant("sqlite: counts_many + big cache/temp/mmap", "sqlite",
                    "cache_size 64MB, temp_store MEMORY, mmap_size 256MB",
                    oracle_many(sqlite_pragmas, stored, pairs, args.max_cells)),
            Variant("sqlite: counts_many + cache 500kB", "sqlite", "cache_size 500kB",
                    oracle_many(sqlite_small_cache, stored, pairs, args.max_cells)),
            Variant("pg: counts_many", "postgresql", f"TableCountOracle.counts_many: one GROUPING SETS scan of "
                    f"{len(groups)} cell indexes, work_mem {tables.ONE_SCAN_WORK_MEM}",
                    oracle_many(postgres, stored_pg, pairs, args.max_cells), headline=True),
            Variant("pg: plan, one query per group", "postgresql", f"{len(groups)} GROUP BY queries",
                    planned(postgres, stored_pg, pairs, groups, one_scan=False)),
            Variant("pg: plan on 2 connections (threads)", "postgresql", "groups split over 2 connections at once",
                    threaded(postgres, stored_pg, pairs, groups)),
            Variant("pg: plan, GROUPING SETS, work_mem 4MB", "postgresql", "the default work_mem: sorts some sets",
                    with_work_mem(planned(postgres, stored_pg, pairs, groups, one_scan=True), "4MB")),
            Variant("pg: plan, one query per group, parallel", "postgresql",
                    "parallel plans forced (2 workers per gather, zero parallel costs)",
                    planned(parallel, stored_pg, pairs, groups, one_scan=False)),
            Variant("pg: GROUPING SETS of 45 pairs", "postgresql", "one scan, no plan",
                    lambda: dict(zip(pairs, _count_pairs_one_scan(postgres, stored_pg, pairs), strict=True))),
            Variant("pg: per-pair cell index", "postgresql", "count_marginal x45",
                    per_pair(postgres, stored_pg, pairs, tables.count_marginal)),
            Variant("pg: per-pair columns, raw cursor", "postgresql", "GROUP BY a, b x45, DB-API cursor",
                    per_pair(postgres, stored_pg, pairs, _columns_raw)),
            Variant("pg: before (211955d)", "postgresql", "GROUP BY a, b x45 through SQLAlchemy rows",
                    per_pair(postgres, stored_pg, pairs, _before_change)),
        ]
        time_rounds(main_variants, truth, args.repeats, "main", cpu_of_server)

        # phase 3: the plan's cell cap ------------------------------------------------------------------
        caps = sorted({1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22} - {args.max_cells})
        sweep = [Variant("pandas groupby per pair", "pandas", reference.description, reference.run, check=False)]
        for cap in caps:
            count = len(plan_cover(pairs, stored.domain, cap))
            sweep.append(Variant(f"sqlite: counts_many, max_cells 2^{cap.bit_length() - 1}", "sqlite",
                                 f"{count} groups", oracle_many(sqlite, stored, pairs, cap)))
            sweep.append(Variant(f"pg: counts_many, max_cells 2^{cap.bit_length() - 1}", "postgresql",
                                 f"{count} groups", oracle_many(postgres, stored_pg, pairs, cap)))
        time_rounds(sweep, truth, args.repeats, "cap sweep", cpu_of_server)

        # phase 4: SQLite with one covering index per plan group (built after the load) -------------
        sqlite_bytes = _checkpointed_size(workdir / "bench.db")
        start = time.perf_counter()
        raw = sqlite3.connect(workdir / "bench.db")
        for i, group in enumerate(groups):
            raw.execute(f"CREATE INDEX bench_ix{i} ON {stored.data_table} ({', '.join(_columns(stored, group))})")
        raw.commit()
        raw.close()
        index_seconds = time.perf_counter() - start
        size_with_indexes = _checkpointed_size(workdir / "bench.db")
        indexed = [
            Variant("pandas groupby per pair", "pandas", reference.description, reference.run, check=False),
            Variant("sqlite: plan by indexed columns", "sqlite",
                    "GROUP BY the group's columns, streamed from its covering index (no sort)",
                    _indexed_plan(sqlite, stored, pairs, groups)),
            Variant("sqlite: counts_many, indexes present", "sqlite", "the cell-index query still sorts",
                    oracle_many(sqlite, stored, pairs, args.max_cells)),
        ]
        time_rounds(indexed, truth, args.repeats, "indexes", cpu_of_server)
        with postgres.connect() as connection:
            pg_bytes = connection.exec_driver_sql(f"SELECT pg_table_size('{stored_pg.data_table}')").scalar_one()
            pg_version = connection.exec_driver_sql("SHOW server_version").scalar_one()
        for engine in (sqlite, sqlite_pragmas, sqlite_small_cache, postgres, parallel):
            engine.dispose()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    rows = (summarise(fresh, fresh[0], "no-analyze") + summarise(main_variants, reference, "main")
            + summarise(sweep, sweep[0], "cap-sweep") + summarise(indexed, indexed[0], "indexes"))
    report = {
        "benchmark": "counting",
        "command": " ".join(["python", "-m", "benchmarks.counting", *(argv if argv is not None else sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "loadavg_start": load_before, "loadavg_end": os.getloadavg(),
                    "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "postgresql": pg_version,
                     "pandas": pd.__version__, "numpy": np.__version__},
        "dataset": {"name": DATASET, "rows": loads["sqlite"]["rows"], "columns": len(names), "pairs": len(pairs)},
        "target_ratio": TARGET_RATIO,
        "repeats": args.repeats,
        "ratio_definition": "ratio_median: median wall seconds / median wall seconds of pandas groupby per pair in "
                            "the same phase (same rounds); ratio_best: best / best; cpu_ratio_median: the same with "
                            "CPU seconds (this process, plus the PostgreSQL server's processes for PostgreSQL rows)",
        "load": loads,
        "postgresql": {"analyze_seconds": analyze_seconds, "table_bytes": pg_bytes},
        "plan": {"max_cells": args.max_cells, "groups": [list(g) for g in groups],
                 "cells": [math.prod(stored.domain.shape(g)) for g in groups]},
        "sqlite_indexes": {"build_seconds": index_seconds, "file_bytes_before": sqlite_bytes,
                           "file_bytes_after": size_with_indexes},
        "results": rows,
    }
    harness.write_json(out, report, indent=2)
    plot(rows, png, _subtitle(rows, args.repeats, load_before[0]))
    print_table(rows)
    for backend, load_row in loads.items():
        print(f"load {backend}: {load_row['rows']} rows in {load_row['seconds']:.2f} s "
              f"({load_row['rows_per_second']:,.0f} rows/s)")
    print(f"wrote {out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
