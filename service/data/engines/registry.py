"""Open the engine a dataset's row names (``datasets.engine`` and ``datasets.location``).

``location`` (JSON, never shown to analysts) is NULL for a ``data_<id>`` table of the service database, and
``{"url": URL, "table": T, "spec": SPEC}`` for a table attached in another SQL database (engine ``sql``); for engine
``duckdb`` it is either ``{"file": NAME}`` (a table the
service stored: ``NAME`` in the data folder, columns ``c0, c1, …`` already coded) or ``{"parquet": [PATH|GLOB, …],
"spec": SPEC}`` (a table attached where it lives, coded inside the engine by its public binning spec ``SPEC``); for
engine ``spark``, ``{"spark": TABLE, "spec": SPEC}`` (a table of the Spark session, coded inside Spark by ``SPEC``).

Each attached shape (``url``, ``parquet``, ``spark``) may also hold ``"privacy_unit": COLUMN`` (``dataset attach
--privacy-unit``): a column of the table, never coded or released, by which every scan keeps one row per unit
(:mod:`service.data.engines.units`; docs/privacy.md section 1.1). Absent, each row is its own unit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Engine

from service.data.engines.base import DUCKDB, SPARK, SQL, TableEngine

if TYPE_CHECKING:
    from service.data.datasets import StoredDataset


def open_table(engine: Engine, dataset: StoredDataset) -> TableEngine:
    """The :class:`~service.data.engines.base.TableEngine` of ``dataset``; ``engine`` is the service database."""
    sizes = dataset.domain.sizes()
    if dataset.engine == SQL and dataset.location and "url" in dataset.location:
        from service.data.engines.foreign_sql import open_foreign

        return open_foreign(dataset.location, dataset.name, sizes)
    if dataset.engine == SQL:
        from service.data.engines.sql import SqlTable

        return SqlTable(engine, dataset.data_table, dataset.sql_columns, sizes, dataset.name)
    if dataset.engine == DUCKDB:
        from service.data.engines.duckdb_table import DuckDBTable, quote

        location = dataset.location or {}
        if "file" in location:
            from service.data.engines.store import data_folder

            columns = {a: quote(c) for a, c in dataset.sql_columns.items()}
            return DuckDBTable([str(data_folder(engine) / location["file"])], columns, dataset.name)
        from service.data.engines.spec_sql import spec_columns
        from workloads.binning import parse_spec

        spec = parse_spec(location["spec"], source=f"the binning spec of {dataset.name!r}")
        return DuckDBTable(list(location["parquet"]), spec_columns(spec), dataset.name,
                           privacy_unit=location.get("privacy_unit"))
    if dataset.engine == SPARK:
        from service.data.engines.dialect import SPARK_SQL
        from service.data.engines.spark import SparkTable
        from service.data.engines.spec_sql import spec_columns
        from workloads.binning import parse_spec

        location = dataset.location or {}
        spec = parse_spec(location["spec"], source=f"the binning spec of {dataset.name!r}")
        return SparkTable(str(location["spark"]), spec_columns(spec, SPARK_SQL), dataset.name,
                          privacy_unit=location.get("privacy_unit"))
    raise ValueError(f"dataset {dataset.name!r} names an unknown engine {dataset.engine!r}")
