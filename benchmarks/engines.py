"""Benchmark: the data engines on an Adult-shaped table (issue 21, "Targets").

For each size (default 1M and 5M rows; the table is the coded adult training table resampled with replacement,
written as CSV under ``--folder`` by :func:`benchmarks.load_memory.write_table`, never into the repository):

* ``load``: ``pandas.read_csv`` of the CSV (the reference) against :func:`service.data.datasets.load_coded_csv`
  into the default engine (DuckDB: a Parquet file beside a fresh SQLite service database); target: within 3x;
* ``count``: the 105 two-way marginals of the 15 columns, by numpy ``bincount`` on the codes in memory (the
  reference), by the count oracle on the DuckDB table (``TableCountOracle.counts_many``, a fresh oracle each round,
  so nothing is cached) and, for the sizes in ``--sqlite-rows``, by the same oracle on a SQLite-stored copy; every
  count is checked against numpy's in the first round; target: DuckDB within 1.5x of numpy; for the sizes in
  ``--grouping-rows``, the DuckDB engine's counting shapes (``GROUPING SETS`` over the covering groups, which the
  oracle runs; one ``GROUP BY`` per covering group; ``GROUPING SETS`` over the 105 pairs), the engine called directly;
* ``release``: a direct Laplace release of all 105 pairs (``release_marginals(..., "laplace", "all-2way")``, end
  to end: reserve, count, noise, store) on the DuckDB table, for the sizes in ``--release-rows``; target < 10 s;
* ``aim``: for the sizes in ``--aim-rows``, AIM all-2way at ``--aim-epsilon`` (1) and ``--aim-delta`` (1e-6) on
  the DuckDB table, as a steward releases it (``release_marginals(..., "aim", "all-2way", ...)``, AIM's own
  settings at their defaults unless ``--aim-options`` says otherwise, the same at every size), each in a fresh
  process (:func:`benchmarks.harness.run_child`): its wall time, the part of it spent in the count oracle
  (``TableCountOracle.counts_many``, timed around the call: the engine's scans plus summing cached counts; the rest
  is selection, noise and model fitting), and the process's peak resident memory (``VmHWM`` of
  ``/proc/self/status``, interpreter and imports included; ``ru_maxrss`` is recorded too but Linux carries the
  parent's peak into it across ``execve``, so at 20M rows it reports the parent's pandas frame), and where AIM's
  time goes: its rounds, the seconds inside the model fits (``mirror_descent.fit``, timed around the call: the
  rounds' warm-started fits and the final fit apart, with their iterations), so that a ratio between sizes can be
  split into round count and time per round; target: the largest size within 2x of the smallest.

Times are wall seconds, the best of ``--repeats`` rounds (for ``load``, both ``pandas.read_csv`` and the load, each
round of the load into a new dataset; ``release`` and ``aim`` run once). Writes ``results/engines.json`` and
``results/engines.png`` and prints a table::

    .venv/bin/python -m benchmarks.engines                                   # 1M and 5M rows: a few minutes
    .venv/bin/python -m benchmarks.engines --rows 20000000 --sqlite-rows ""  # 20M rows: 1.2 GB of CSV under /tmp
    .venv/bin/python -m benchmarks.engines --rows 1000000,20000000 --sqlite-rows 1000000 --release-rows 1000000 \
        --aim-rows 1000000,20000000 --folder /tmp/marginalia-aimscale --json benchmarks/results/engines_aim.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.load_memory import DOMAIN, write_table
from benchmarks.measure import own_peak_rss_mb, peak_rss_mb

VARIANTS = ("numpy", "duckdb", "sqlite", "duckdb-cover-sets", "duckdb-cover-each", "duckdb-pair-sets")
AIM_BUDGET = ("1000", "0.001")  # the dataset's (epsilon, delta) budget before the AIM runs: room for every run


def _seconds(run: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, value = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = run()
        best = min(best, time.perf_counter() - start)
    return best, value


def _bincounts(codes: np.ndarray, names: list[str], sizes: dict[str, int],
               pairs: list[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
    out = {}
    for a, b in pairs:
        i, j = names.index(a), names.index(b)
        index = codes[:, i].astype(np.intp) * sizes[b] + codes[:, j]
        out[(a, b)] = np.bincount(index, minlength=sizes[a] * sizes[b]).reshape(sizes[a], sizes[b])
    return out


def run_size(rows: int, folder: Path, args: argparse.Namespace, log: Callable[[str], None]) -> list[dict[str, object]]:
    from service.accounting import accountant
    from service.data import datasets
    from service.data.oracle import TableCountOracle
    from service.releases import engine as release_engine

    csv = write_table(folder, rows, args.seed)  # reused by a later run in the same --folder
    database = folder / f"engines-{rows}.db"
    for stale in folder.glob(f"{database.name}*"):  # a fresh service database and data folder on every run
        stale.unlink()
    shutil.rmtree(folder / f"{database.stem}-tables", ignore_errors=True)
    engine = harness.temporary_database(database)
    records: list[dict[str, object]] = []

    def record(task: str, variant: str, seconds: float, **extra: object) -> None:
        records.append({"rows": rows, "task": task, "variant": variant, "seconds": seconds, **extra})
        log(f"{rows:>11,} {task:<8} {variant:<8} {seconds:8.2f} s")

    try:
        seconds, frame = _seconds(lambda: pd.read_csv(csv), args.repeats)
        record("load", "pandas", seconds)
        copies = iter(["duck", *(f"duck-{i}" for i in range(1, args.repeats))])  # a load needs a new name
        seconds, _ = _seconds(lambda: datasets.load_coded_csv(engine, next(copies), csv, harness.DATA / DOMAIN),
                              args.repeats)
        record("load", "duckdb", seconds)
        names = list(frame.columns)
        codes = frame.to_numpy(dtype=np.int16)
        del frame
        stored = {"duckdb": datasets.get_dataset(engine, "duck")}
        sizes = stored["duckdb"].domain.sizes()
        pairs = list(itertools.combinations(names, 2))
        seconds, expected = _seconds(lambda: _bincounts(codes, names, sizes, pairs), args.repeats)
        record("count", "numpy", seconds, marginals=len(pairs))
        if rows in args.sqlite_rows:
            datasets.load_coded_csv(engine, "sql", csv, harness.DATA / DOMAIN, store="sql")
            stored["sqlite"] = datasets.get_dataset(engine, "sql")
        for variant, dataset in stored.items():
            def count(dataset: datasets.StoredDataset = dataset) -> dict[tuple[str, ...], np.ndarray]:
                with TableCountOracle(engine, dataset) as oracle:
                    return oracle.counts_many(pairs)
            seconds, counted = _seconds(count, args.repeats)
            wrong = [p for p in pairs if not np.array_equal(counted[p], expected[p])]
            if wrong:
                raise RuntimeError(f"{variant} counts differ from numpy's on {wrong[:3]}")
            record("count", variant, seconds, marginals=len(pairs))
        if rows in args.grouping_rows:
            _grouping_variants(engine, stored["duckdb"], pairs, expected, args.repeats, record)
        if rows in args.release_rows:
            accountant.set_budget(engine, "duck", "100", "0")
            seconds, outcome = _seconds(lambda: release_engine.release_marginals(
                engine, "duck", "laplace", "all-2way", epsilon="1", seed=args.seed), 1)
            record("release", "duckdb", seconds, mechanism="laplace", workload="all-2way",
                   release_id=outcome.release_id)
        if rows in args.aim_rows:
            accountant.set_budget(engine, "duck", *AIM_BUDGET)
            config = {"database": str(database), "dataset": "duck", "epsilon": args.aim_epsilon,
                      "delta": args.aim_delta, "options": args.aim_options, "seed": args.seed}
            measured = harness.run_child("benchmarks.engines", config)
            record("aim", "duckdb", measured.pop("seconds"), mechanism="aim", workload="all-2way", **measured)
            log(f"{'':>11} aim: counting {measured['counting_seconds']:.2f} s, peak {measured['peak_rss_mb']:.0f} MB,"
                f" {measured['rounds']} rounds, round fits {measured['round_fit_seconds']:.1f} s, final fit "
                f"{measured['final_fit_seconds']:.1f} s")
    finally:
        engine.dispose()
    return records


def _grouping_variants(engine: object, dataset: object, pairs: list[tuple[str, str]],
                       expected: dict[tuple[str, str], np.ndarray], repeats: int,
                       record: Callable[..., None]) -> None:
    """The DuckDB table's counting shapes side by side, the engine called directly (no oracle): ``GROUPING SETS``
    over the covering groups in one scan (what the oracle runs), one ``GROUP BY`` per covering group, and
    ``GROUPING SETS`` over the 105 pairs themselves (no cover); each checked against numpy."""
    from service.data.engines.registry import open_table
    from service.data.oracle import marginalize, plan_cover

    domain = dataset.domain
    groups = plan_cover(pairs, domain)
    table = open_table(engine, dataset)
    shapes = {
        "cover-sets": lambda: table.count_marginals([(g, domain.shape(g)) for g in groups]),
        "cover-each": lambda: [table.count_marginals([(g, domain.shape(g))])[0] for g in groups],
        "pair-sets": lambda: table.count_marginals([(p, domain.shape(p)) for p in pairs]),
    }
    best = dict.fromkeys(shapes, math.inf)
    try:
        for round_ in range(repeats):  # round robin, the order turned every round: a busy spell hits every shape
            for variant in (list(shapes) if round_ % 2 == 0 else list(shapes)[::-1]):
                seconds, counted = _seconds(shapes[variant], 1)
                best[variant] = min(best[variant], seconds)
                marginals = groups if variant.startswith("cover") else pairs
                for pair in pairs:
                    i = next(k for k, m in enumerate(marginals) if set(pair) <= set(m))
                    if not np.array_equal(marginalize(counted[i], marginals[i], pair), expected[pair]):
                        raise RuntimeError(f"duckdb {variant} counts differ from numpy's on {pair}")
    finally:
        table.close()
    for variant, seconds in best.items():
        record("count", f"duckdb-{variant}", seconds, marginals=len(groups if variant.startswith("cover") else pairs))


def aim_child(config: dict[str, object]) -> dict[str, object]:
    """One AIM release in this fresh process (:func:`benchmarks.harness.run_child`): wall seconds, seconds inside
    the count oracle, peak RSS, and the release's public details (rounds, fit iterations, model size)."""
    from db.migrate import open_database
    from estimators.graphical import mirror_descent
    from service.data.oracle import TableCountOracle
    from service.releases import engine as release_engine

    counting = {"seconds": 0.0, "calls": 0}
    counts_many = TableCountOracle.counts_many
    fits: list[tuple[float, int, int]] = []  # (seconds, iterations asked, iterations run) of each model fit
    fit = mirror_descent.fit

    def timed_fit(*args: object, **kwargs: object) -> object:  # AIM calls mirror_descent.fit through the module
        start = time.perf_counter()
        model = fit(*args, **kwargs)
        fits.append((time.perf_counter() - start, int(kwargs.get("iters", 0)), int(model.iterations)))
        return model

    def timed(self: TableCountOracle, *args: object, **kwargs: object) -> object:  # counts() calls counts_many once
        start = time.perf_counter()
        try:
            return counts_many(self, *args, **kwargs)
        finally:
            counting["seconds"] += time.perf_counter() - start
            counting["calls"] += 1

    TableCountOracle.counts_many = timed  # this process only: it exits after the release
    mirror_descent.fit = timed_fit
    engine = open_database(f"sqlite:///{config['database']}")
    try:
        start = time.perf_counter()
        outcome = release_engine.release_marginals(
            engine, str(config["dataset"]), "aim", "all-2way", epsilon=str(config["epsilon"]),
            delta=str(config["delta"]), seed=int(config["seed"]), options=dict(config["options"]))
        seconds = time.perf_counter() - start
    finally:
        engine.dispose()
    rounds, final = fits[:-1], fits[-1:]  # the initial fit and one per round, then the final fit
    return {"seconds": seconds, "counting_seconds": counting["seconds"], "oracle_calls": counting["calls"],
            "peak_rss_mb": own_peak_rss_mb(), "ru_maxrss_mb": peak_rss_mb(), "release_id": outcome.release_id,
            "round_fit_seconds": sum(f[0] for f in rounds), "round_fits": len(rounds),
            "round_fit_iterations": sum(f[2] for f in rounds), "final_fit_seconds": sum(f[0] for f in final),
            "final_fit_iterations": sum(f[2] for f in final),
            **{key: outcome.details.get(key) for key in ("rounds", "fit_iterations", "model_size_mb", "annealed")}}


def summarize(records: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per size: DuckDB counting over numpy, SQLite over numpy, load over pandas, release seconds."""
    out = []
    for rows in sorted({r["rows"] for r in records}):
        seconds = {(r["task"], r["variant"]): r["seconds"] for r in records if r["rows"] == rows}
        row: dict[str, object] = {"rows": rows}
        if ("count", "numpy") in seconds:
            for variant in ("duckdb", "sqlite"):
                if ("count", variant) in seconds:
                    row[f"count_{variant}_over_numpy"] = seconds[("count", variant)] / seconds[("count", "numpy")]
        if ("load", "pandas") in seconds:
            row["load_over_pandas"] = seconds[("load", "duckdb")] / seconds[("load", "pandas")]
        if ("release", "duckdb") in seconds:
            row["release_seconds"] = seconds[("release", "duckdb")]
        if ("aim", "duckdb") in seconds:
            row["aim_seconds"] = seconds[("aim", "duckdb")]
        out.append(row)
    aims = sorted((r for r in records if r["task"] == "aim"), key=lambda r: r["rows"])
    if len(aims) > 1:
        small, large = aims[0], aims[-1]
        row = {"aim_largest_over_smallest": large["seconds"] / small["seconds"], "rows": [small["rows"], large["rows"]]}
        if all("final_fit_seconds" in r for r in (small, large)):  # the ratio as round count x time per round
            per_round = [(r["seconds"] - r["final_fit_seconds"]) / r["rounds"] for r in (small, large)]
            row.update(rounds_ratio=large["rounds"] / small["rounds"], seconds_per_round=per_round,
                       per_round_ratio=per_round[1] / per_round[0],
                       final_fit_ratio=large["final_fit_seconds"] / small["final_fit_seconds"])
        out.append(row)
    return out


def plot(result: dict[str, object], path: Path) -> None:
    plt = harness.pyplot()
    records = result["records"]
    tasks = ["count", "load", "release"] + (["aim"] if any(r["task"] == "aim" for r in records) else [])
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.4 * len(tasks), 4))
    for axis, task in zip(axes, tasks, strict=True):
        variants = {"count": VARIANTS, "load": ("pandas", "duckdb")}.get(task, ("duckdb",))
        for variant in variants:
            points = sorted((r["rows"], r["seconds"]) for r in records if r["task"] == task and r["variant"] == variant)
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", label=variant)
        axis.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds",
                 title={"count": "105 two-way marginals", "load": "load the CSV",
                        "release": "Laplace all-2way release", "aim": "AIM all-2way, epsilon 1"}[task])
        if task == "aim":
            points = sorted((r["rows"], r["counting_seconds"]) for r in records if r["task"] == "aim")
            axis.plot(*zip(*points, strict=True), marker="s", linestyle="--", label="of which counting")
        harness.finish_axes(axis, 8)
    harness.save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,5000000", help="comma-separated row counts")
    parser.add_argument("--sqlite-rows", default="1000000", help="the sizes also counted on a SQLite-stored copy")
    parser.add_argument("--release-rows", default=None, help="the sizes released end to end (default: the largest)")
    parser.add_argument("--grouping-rows", default="", help="the sizes at which DuckDB's counting shapes are "
                        "compared: GROUPING SETS over the covering groups, one GROUP BY per group, GROUPING SETS "
                        "over the pairs (default: none)")
    parser.add_argument("--aim-rows", default="", help="the sizes released by AIM all-2way (default: none)")
    parser.add_argument("--aim-epsilon", type=float, default=1.0)
    parser.add_argument("--aim-delta", type=float, default=1e-6)
    parser.add_argument("--aim-options", default="{}", help="AIM's options as JSON (default: its own settings)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds of load and counting (the best is kept)")
    parser.add_argument("--folder", type=Path, default=None, help="where the tables go (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    harness.add_outputs(parser, "engines")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(aim_child(json.loads(args.child))))
        return
    sizes = harness.number_list(args.rows, "--rows", int)
    if not sizes or min(sizes) < 1:
        raise harness.BenchError(f"--rows must be positive row counts, got {args.rows!r}")
    args.sqlite_rows = harness.number_list(args.sqlite_rows, "--sqlite-rows", int) or ()
    args.release_rows = harness.number_list(args.release_rows, "--release-rows", int) or (max(sizes),)
    args.aim_rows = harness.number_list(args.aim_rows, "--aim-rows", int) or ()
    args.grouping_rows = harness.number_list(args.grouping_rows, "--grouping-rows", int) or ()
    try:
        options = json.loads(args.aim_options)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise harness.BenchError(f"--aim-options must be a JSON object, got {args.aim_options!r}")
    args.aim_options = options
    if args.repeats < 1:
        raise harness.BenchError(f"--repeats must be at least 1, got {args.repeats}")
    out, png = harness.outputs(args)
    log = harness.logger(args.quiet)

    with harness.work_folder(args.folder, "marginalia-engines-") as folder:
        records = [r for rows in sizes for r in run_size(rows, folder, args, log)]
    result = {"records": records, "summary": summarize(records), "machine": harness.machine(),
              "note": "shared machine (2 cores, other jobs running): compare variants within one run"}
    out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_json(out, result)
    plot(result, png)
    harness.summary_table("data engines", ["rows", "task", "variant", "seconds"],
                          [(f"{r['rows']:,}", r["task"], r["variant"], f"{r['seconds']:.2f}") for r in records])
    harness.wrote(out, png)


if __name__ == "__main__":
    main()
