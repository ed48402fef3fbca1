"""Benchmark: DP-IHT with its clipped gradient sums computed inside DuckDB, against the distinct-rows path (issue 21).

For each size (default 1M rows: the coded adult training table resampled with replacement, written as CSV under
``--folder`` by :func:`benchmarks.load_memory.write_table` and loaded into the default engine, DuckDB), one DP-IHT
release of the logistic model ``income>50K ~ every other column`` (intercept, reduced one-hot for the categorical
columns, scalar for the ordinal ones; ``--iterations`` T, sparsity 10, epsilon 1, delta 1e-5, seeded) by each path,
each with a fresh count oracle on the same table:

* ``engine``: every iteration asks DuckDB for the sum (:class:`service.mechanisms.dp_iht.EngineGradients`: one
  aggregation, one float per attribute code back; DuckDB groups the rows into distinct rows with counts once, in
  a temporary table, and each iteration aggregates that table), plus a row count;
* ``distinct_rows``: the table's distinct rows with their counts read once, then ``T`` numpy iterations on them
  (:func:`service.mechanisms.row_memory.weighted_design`), the path SQLite tables take.

Two tables of each size: ``adult`` (resampling keeps at most the ~45k distinct rows of the adult table, so the
distinct-rows path reads few) and ``uniform`` (every code drawn uniformly over adult's domain: about as many distinct
rows as rows, so beyond 100k rows the distinct-rows path is refused before any noise by its public cap,
``MARGINALIA_MAX_DISTINCT_ROWS``, while the engine path keeps them inside DuckDB, with no cap). Recorded: wall seconds
of each release (the best of ``--repeats``; a refusal is recorded with its reason), the scans and distinct rows read,
and the largest difference between the two models' coefficients (same seed, same noise: only float summation order
differs). Writes ``results/dp_iht_engine.json`` and
``.png`` and prints a table::

    .venv/bin/python -m benchmarks.dp_iht_engine --rows 1000000 --iterations 20

With ``--postgresql`` the same tables are loaded a second time, as ``data_<id>`` tables of a database on a throwaway
PostgreSQL server (service/tools/pgserver.py, started and stopped by the run), and three paths run there: ``engine``
(the first iteration groups the rows into a temporary table of distinct rows with counts, every iteration
aggregates it: :mod:`service.data.engines.sql_gradients`), ``scan`` (the plan before that: every iteration one
``GROUPING SETS`` scan of the whole table, which is still the plan of a database that refuses temporary tables)
and ``distinct_rows``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from benchmarks import harness
from benchmarks.load_memory import DOMAIN, write_table

PATHS = ("engine", "scan", "distinct_rows")
#: the paths measured on each engine (``scan`` is PostgreSQL's plan without the grouped table)
ENGINE_PATHS = {"duckdb": ("engine", "distinct_rows"), "postgresql": PATHS}
TARGET = "income>50K"
ORDINAL = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def uniform_table(folder: Path, rows: int, seed: int) -> Path:
    """A CSV of ``rows`` rows over adult's domain with every code drawn uniformly at random: about as many distinct
    rows as rows (the case the distinct-row cap refuses)."""
    path = folder / f"uniform-{rows}.csv"
    if not path.exists():
        rng = np.random.default_rng(harness.seed_sequence(seed, rows, 1))
        frame = pd.DataFrame({name: rng.integers(0, size, rows) for name, size in json_domain().items()})
        frame.to_csv(path, index=False)
    return path


def run_size(rows: int, folder: Path, args: argparse.Namespace, log: Callable[[str], None], postgresql: object = None
             ) -> list[dict[str, object]]:
    """Every path on both tables of ``rows`` rows: in DuckDB, and in PostgreSQL when ``postgresql`` (a server) is
    given."""
    database = folder / f"dp-iht-{rows}.db"  # a fresh service database (and Parquet folder) each run
    database.unlink(missing_ok=True)
    shutil.rmtree(folder / f"dp-iht-{rows}-tables", ignore_errors=True)
    tables = {"adult": write_table(folder, rows, args.seed), "uniform": uniform_table(folder, rows, args.seed)}
    engines = [("duckdb", harness.temporary_database(database))]
    if postgresql is not None:
        from db.migrate import open_database

        engines.append(("postgresql", open_database(harness.postgresql_database(postgresql, f"dp_iht_{rows}"))))
    records = []
    for name, engine in engines:
        records += [r for table, csv in tables.items() for r in run_table(engine, name, table, csv, rows, args, log)]
        engine.dispose()
    return records


def run_table(engine: Engine, where: str, table: str, csv: Path, rows: int, args: argparse.Namespace,
              log: Callable[[str], None]) -> list[dict[str, object]]:
    """Each path of ``where`` (:data:`ENGINE_PATHS`) on one table; a path refused before noise (the distinct-row
    cap) is recorded with its reason."""
    from service.data import datasets
    from service.data.oracle import TableCountOracle
    from service.mechanisms import registry
    from service.mechanisms.base import MechanismError
    from service.mechanisms.dp_iht import DPIHTRelease
    from service.privacy.noise import NoiseSource
    from service.regression.design import build_design

    categorical = tuple(a for a in json_domain() if a not in ORDINAL)
    start = time.perf_counter()
    datasets.load_coded_csv(engine, table, csv, harness.DATA / DOMAIN, categorical,
                            store="sql" if where == "postgresql" else "duckdb")
    log(f"{where}, {table}, {rows:,} rows: loaded in {time.perf_counter() - start:.1f} s")
    stored = datasets.get_dataset(engine, table)
    design = build_design(stored.domain, "logistic", TARGET, [a for a in stored.domain.names if a != TARGET])
    settings = registry.get("dp-iht").settings(design, {"sparsity": 10, "iterations": args.iterations})
    records, models = [], {}
    for path in ENGINE_PATHS[where]:
        best, refused = math.inf, None
        for _ in range(args.repeats):
            with TableCountOracle(engine, stored) as oracle:
                oracle.table.gradient_sums_in_one_scan = path != "distinct_rows"
                if path == "scan":
                    oracle.table._gradients.grouping = False  # noqa: SLF001 - the plan without the grouped table
                release, payload = DPIHTRelease(design, Fraction(1, 100), settings), None
                start = time.perf_counter()
                try:
                    payload = release(oracle, NoiseSource(args.seed)).payload
                except MechanismError as exc:
                    refused = str(exc)
                best = min(best, time.perf_counter() - start)
                scans, distinct = oracle.gradient_scans, oracle.distinct_rows_read
        if refused is None:
            models[path] = np.array([payload.intercept or 0.0, *payload.coef])
        log(f"{where}, {table}, {rows:,} rows, {path}: {best:.2f} s ({scans} scans, {distinct:,} distinct rows)"
            + (f"; refused: {refused}" if refused else ""))
        records.append({"engine": where, "table": table, "rows": rows, "path": path, "seconds": best,
                        "refused": refused, "iterations": args.iterations, "gradient_scans": scans,
                        "distinct_rows_read": distinct, "coefficients": int(design.n_features + 1)})
    others = [models[p] for p in models if p != "engine"]
    difference = (max(float(np.max(np.abs(models["engine"] - m))) for m in others) if "engine" in models and others
                  else None)
    for record in records:
        record["max_coefficient_difference"] = difference
    return records


def json_domain() -> dict[str, int]:
    return json.loads((harness.DATA / DOMAIN).read_text())


def plot(result: dict[str, object], path: Path) -> None:
    plt = harness.pyplot()
    fig, axis = plt.subplots(figsize=(7, 4))
    records = result["records"]
    groups = sorted({(r["engine"], r["table"], r["rows"]) for r in records})
    width = 0.8 / len(PATHS)
    for offset, name in enumerate(PATHS):
        mine = [(i, r) for i, g in enumerate(groups) for r in records
                if (r["engine"], r["table"], r["rows"]) == g and r["path"] == name]
        if not mine:
            continue
        axis.bar([i + width * offset for i, _ in mine], [0 if r["refused"] else r["seconds"] for _, r in mine],
                 width=width, label=name)
        for i, record in mine:
            if record["refused"]:
                axis.text(i + width * offset, 0, "refused", rotation=90, ha="center", va="bottom", fontsize=8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))],
                    [f"{e}, {t}\n{n:,} rows" for e, t, n in groups], fontsize=7)
    axis.set_ylabel("seconds per DP-IHT release")
    axis.set_title(f"DP-IHT in the data engine, T = {records[0]['iterations']}")
    harness.finish_axes(axis, 8)
    harness.save_figure(fig, path)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_table_options(parser, "dp_iht_engine", rows="1000000")
    parser.add_argument("--iterations", type=int, default=20, help="DP-IHT's T")
    parser.add_argument("--postgresql", action="store_true",
                        help="also run on data_<id> tables of a throwaway PostgreSQL server (engine, scan, "
                             "distinct rows)")
    args = parser.parse_args()
    if args.iterations < 1:
        raise harness.BenchError(f"--iterations must be at least 1, got {args.iterations}")
    return args


def _records(args: argparse.Namespace) -> list[dict[str, object]]:
    sizes, log = harness.table_sizes(args), harness.logger(args.quiet)
    with harness.work_folder(args.folder, "marginalia-dp-iht-engine-") as folder:
        if not args.postgresql:
            return [r for rows in sizes for r in run_size(rows, folder, args, log)]
        with harness.postgresql_server() as server:
            return [r for rows in sizes for r in run_size(rows, folder, args, log, server)]


def main() -> None:
    args = _arguments()
    out, png = harness.outputs(args)
    records = _records(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_json(out, {"records": records, "machine": harness.machine(),
                             "note": "shared machine (2 cores, other jobs running): compare the paths within one run"})
    plot({"records": records}, png)
    harness.summary_table("DP-IHT in the data engine: engine sums vs distinct rows",
                          ["engine", "table", "rows", "path", "seconds", "scans", "distinct rows", "max |coef diff|"],
                          [(r["engine"], r["table"], f"{r['rows']:,}", r["path"],
                            "refused" if r["refused"] else f"{r['seconds']:.2f}", r["gradient_scans"],
                            f"{r['distinct_rows_read']:,}", "-" if r["max_coefficient_difference"] is None
                            else f"{r['max_coefficient_difference']:.1e}") for r in records])
    harness.wrote(out, png)


if __name__ == "__main__":
    main()
