"""Wall time and peak memory of ``dataset load`` on adult-shaped tables of 1M and 5M rows (issue 22).

The table is the coded adult training table (``adult/adult_train.csv``, 15 columns) resampled with replacement to
each size and written under ``--folder`` (default: a temporary folder under /tmp, removed afterwards; never the
repository). Each measurement runs in a fresh interpreter (:func:`harness.run_child`), so its peak resident memory
(``ru_maxrss``) is its own:

- ``load``: :func:`service.data.datasets.load_coded_csv` (what ``marginalia dataset load NAME --csv FILE --domain
  DOMAIN`` runs, less the progress bar) into the default engine (a Parquet file beside a new SQLite database, since
  issue 21; before, a table in that database), in chunks of ``datasets.CHUNK_ROWS`` rows;
- ``load-postgresql`` (with ``--postgresql``): the same into a new database of a throwaway PostgreSQL server
  (service/tools/pgserver.py, as ``benchmarks.counting`` starts it); the peak is the loading process's, not the
  server's;
- ``pandas``: ``pandas.read_csv`` of the same file into one frame, the reference of what holding the table costs;
- ``baseline``: the same interpreter with the same imports and nothing read, the floor under both.

    .venv/bin/python -m benchmarks.load_memory                      # 1M and 5M rows: about five minutes
    .venv/bin/python -m benchmarks.load_memory --sizes 20000000     # 20M rows: about 15 minutes, 1 GB under /tmp
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import harness

SOURCE = "adult/adult_train.csv"
DOMAIN = "adult/adult-domain.json"
MODES = ("baseline", "load", "pandas")


def write_table(folder: Path, rows: int, seed: int, block: int = 1_000_000) -> Path:
    """An adult-shaped CSV of ``rows`` rows under ``folder``: rows of the coded adult table drawn with replacement,
    written ``block`` rows at a time (the generator holds one block)."""
    import pandas as pd

    path = folder / f"adult-{rows}.csv"
    if path.exists():
        return path
    source = pd.read_csv(harness.DATA / SOURCE)
    rng = np.random.default_rng(harness.seed_sequence(seed, rows))
    partial = path.with_suffix(".part")
    with partial.open("w") as handle:
        for start in range(0, rows, block):
            picked = source.iloc[rng.integers(0, len(source), size=min(block, rows - start))]
            picked.to_csv(handle, index=False, header=start == 0, lineterminator="\n")
    partial.rename(path)  # a table cut short by an interrupted run is never reused
    return path


def child(config: dict[str, object]) -> dict[str, object]:
    """One measurement in this fresh process: its wall time and peak resident memory."""
    import pandas as pd

    from service.data import datasets

    csv = Path(str(config["csv"]))
    mode = config["mode"]
    start = time.perf_counter()
    rows = 0
    if mode in ("load", "load-postgresql"):
        if mode == "load":
            engine = harness.temporary_database(Path(str(config["database"])))
        else:
            from db.migrate import open_database

            engine = open_database(str(config["url"]))
        # "load": the default engine (DuckDB: a Parquet file beside the SQLite database); "load-postgresql": a
        # table in the PostgreSQL service database
        store = "duckdb" if mode == "load" else "sql"
        rows = datasets.load_coded_csv(engine, "adult", csv, harness.DATA / DOMAIN, store=store).rows
        engine.dispose()
    elif mode == "pandas":
        rows = len(pd.read_csv(csv))
    seconds = time.perf_counter() - start
    return {"mode": mode, "rows": rows, "seconds": seconds, "peak_rss_mb": peak_rss_mb(),
            "chunk_rows": datasets.CHUNK_ROWS}


def peak_rss_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` of /proc/self/status, which starts afresh at ``exec`` (Linux's
    ``ru_maxrss`` may keep the parent's high-water mark from before the fork); ``ru_maxrss`` elsewhere."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(sizes: tuple[int, ...], folder: Path, seed: int, log, server=None) -> dict[str, object]:  # noqa: ANN001
    """Every mode on every size; ``server`` (a running PostgreSQL) adds ``load-postgresql``."""
    records = []
    modes = MODES if server is None else (*MODES, "load-postgresql")
    for size in sizes:
        log(f"writing {size:,} rows under {folder}")
        csv = write_table(folder, size, seed)
        for mode in modes:
            database = folder / f"load-{size}.db"
            database.unlink(missing_ok=True)
            postgresql = server is not None and mode == "load-postgresql"
            url = harness.postgresql_database(server, f"load{size}") if postgresql else None
            record = harness.run_child("benchmarks.load_memory", {"csv": str(csv), "mode": mode,
                                                                  "database": str(database), "url": url})
            database.unlink(missing_ok=True)
            record.update(size=size, file_mb=csv.stat().st_size / 2**20)
            if mode != "baseline" and record["rows"] != size:
                raise RuntimeError(f"{mode} read {record['rows']} rows of {size}")
            records.append(record)
            log(f"{size:>11,} rows  {mode:8s} {record['seconds']:8.1f} s  peak RSS {record['peak_rss_mb']:8.0f} MB")
    return {"records": records, "machine": harness.machine(), "source": SOURCE}


def plot(result: dict[str, object], path: Path) -> None:
    plt = harness.pyplot()
    records = result["records"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for mode in dict.fromkeys(r["mode"] for r in records):
        rows = [r for r in records if r["mode"] == mode]
        axes[0].plot([r["size"] for r in rows], [r["peak_rss_mb"] for r in rows], "o-", label=mode)
        if mode != "baseline":
            axes[1].plot([r["size"] for r in rows], [r["seconds"] for r in rows], "o-", label=mode)
    axes[0].set_ylabel("peak resident memory (MB)")
    axes[1].set_ylabel("wall time (s)")
    for axis in axes:
        axis.set_xlabel("rows (adult-shaped, 15 columns)")
        axis.set_xscale("log")
        harness.finish_axes(axis, 8)
    axes[0].set_title("dataset load vs pandas.read_csv")
    harness.save_figure(fig, path)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,5000000", help="comma-separated row counts")
    parser.add_argument("--folder", type=Path, default=None, help="where the tables go (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--postgresql", action="store_true", help="also load into a throwaway PostgreSQL server")
    parser.add_argument("--quiet", action="store_true")
    harness.add_outputs(parser, "load_memory")
    args = parser.parse_args()
    sizes = harness.number_list(args.sizes, "--sizes", int)
    if not sizes or min(sizes) < 1:
        raise harness.BenchError(f"--sizes must be positive row counts, got {args.sizes!r}")
    out, png = harness.outputs(args)
    log = harness.logger(args.quiet)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(harness.postgresql_server()) if args.postgresql else None
        if args.folder is not None:
            args.folder.mkdir(parents=True, exist_ok=True)
            result = run(sizes, args.folder, args.seed, log, server)
        else:
            with harness.temporary_folder("marginalia-load-") as folder:
                result = run(sizes, folder, args.seed, log, server)
    out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_json(out, result)
    plot(result, png)
    harness.summary_table("dataset load vs pandas.read_csv", ["rows", "mode", "seconds", "peak RSS (MB)"],
                          [(f"{r['size']:,}", r["mode"], f"{r['seconds']:.1f}", f"{r['peak_rss_mb']:.0f}")
                           for r in result["records"]])
    harness.wrote(out, png)


if __name__ == "__main__":
    main()
