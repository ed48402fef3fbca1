"""Benchmark: counting on the Spark engine in local mode (issue 21, "Targets": correct to the count, cost per row
flat, log-log slope <= 1.1 from 5M to 20M rows).

For each size (default 1M and 5M rows) the coded adult training table is resampled with replacement
(:func:`benchmarks.load_memory.write_table`, a CSV under ``--folder``, never in the repository) and converted to one
Parquet file beside it. The 105 two-way marginals of its 15 columns are counted by numpy ``bincount`` on the codes
in memory (the reference) and by the count oracle over a :class:`service.data.engines.spark.SparkTable` on the
Parquet file (``parquet.`PATH```; the columns are already coded, so no binning spec runs: this measures Spark's
counting, the covering groups and one ``GROUPING SETS`` scan per batch). Every Spark count is checked against
numpy's; a fresh oracle each round (nothing cached); the best of ``--repeats``. The Spark session (local[2]) is
started once, before the first measurement, and not timed. Reports seconds, nanoseconds per row and the log-log
slope of Spark's seconds between consecutive sizes; writes ``results/spark_engine.json`` and ``.png``::

    .venv/bin/python -m benchmarks.spark_engine --rows 1000000,5000000,20000000 --folder /tmp/marginalia-spark
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.engines import _bincounts, _seconds
from benchmarks.load_memory import DOMAIN, write_table


def _parquet(csv: Path) -> Path:
    """``csv`` converted to Parquet beside it (streamed in blocks), unless already there."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    path = csv.with_suffix(".parquet")
    if path.exists():
        return path
    partial = path.with_suffix(".part")
    reader = pcsv.open_csv(csv)
    with pq.ParquetWriter(partial, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
    partial.rename(path)
    return path


def run_size(rows: int, folder: Path, args: argparse.Namespace, log) -> list[dict[str, object]]:  # noqa: ANN001
    import pyarrow.parquet as pq

    from service.data.datasets import StoredDataset
    from service.data.engines.dialect import SPARK_SQL
    from service.data.engines.spark import SparkTable
    from service.data.oracle import TableCountOracle
    from workloads.domain import Domain

    path = _parquet(write_table(folder, rows, args.seed))
    table = pq.read_table(path)
    names = list(table.column_names)
    codes = np.stack([table.column(n).to_numpy().astype(np.int16) for n in names], axis=1)
    del table
    domain = Domain.from_json((harness.DATA / DOMAIN).read_text())
    sizes = domain.sizes()
    pairs = list(itertools.combinations(names, 2))
    dataset = StoredDataset(id=0, name=f"adult-{rows}", rows=rows, domain=domain, data_table="-",
                            sql_columns={n: n for n in names}, engine="spark")
    records = []

    def spark_counts() -> dict[tuple[str, ...], np.ndarray]:
        columns = {n: SPARK_SQL.quote(n) for n in names}
        with TableCountOracle(None, dataset, table=SparkTable(f"parquet.`{path}`", columns, dataset.name)) as oracle:
            return oracle.counts_many(pairs)

    for variant, count in (("numpy", lambda: _bincounts(codes, names, sizes, pairs)), ("spark", spark_counts)):
        best, counted = _seconds(count, args.repeats)
        if variant == "numpy":
            expected = counted
        else:
            wrong = [p for p in pairs if not np.array_equal(counted[p], expected[p])]
            if wrong:
                raise RuntimeError(f"Spark's counts differ from numpy's on {wrong[:3]}")
        records.append({"rows": rows, "variant": variant, "seconds": best, "ns_per_row": best / rows * 1e9,
                        "marginals": len(pairs), "exact": True})
        log(f"{rows:>11,} {variant:<6} {best:8.2f} s  {best / rows * 1e9:7.1f} ns/row")
    return records


def slopes(records: list[dict[str, object]], variant: str = "spark") -> list[dict[str, object]]:
    """The log-log slope of ``variant``'s seconds between consecutive sizes (1: cost per row flat)."""
    points = sorted((r["rows"], r["seconds"]) for r in records if r["variant"] == variant)
    return [{"from_rows": a, "to_rows": b, "slope": math.log(tb / ta) / math.log(b / a)}
            for (a, ta), (b, tb) in itertools.pairwise(points)]


def plot(result: dict[str, object], path: Path) -> None:
    plt = harness.pyplot()
    fig, axis = plt.subplots(figsize=(6, 4))
    for variant in ("numpy", "spark"):
        points = sorted((r["rows"], r["seconds"]) for r in result["records"] if r["variant"] == variant)
        axis.plot(*zip(*points, strict=True), marker="o", label="Spark local[2]" if variant == "spark" else variant)
    axis.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds", title="105 two-way marginals")
    harness.finish_axes(axis, 8)
    harness.save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_table_options(parser, "spark_engine", rows="1000000,5000000")
    args = parser.parse_args()
    sizes = harness.table_sizes(args)
    out, png = harness.outputs(args)
    log = harness.logger(args.quiet)
    from service.data.engines.spark import spark_session

    spark_session()  # started once, not timed

    with harness.work_folder(args.folder, "marginalia-spark-") as folder:
        records = [r for rows in sizes for r in run_size(rows, folder, args, log)]
    result = {"records": records, "slopes": slopes(records), "machine": harness.machine(),
              "note": "shared machine (2 cores, other jobs running): compare variants within one run"}
    out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_json(out, result)
    plot(result, png)
    harness.summary_table("Spark local mode: 105 two-way marginals", ["rows", "variant", "seconds", "ns/row"],
                          [(f"{r['rows']:,}", r["variant"], f"{r['seconds']:.2f}", f"{r['ns_per_row']:.1f}")
                           for r in records])
    harness.wrote(out, png)


if __name__ == "__main__":
    main()
