"""Registering a table where it lives, without copying it: ``marginalia dataset attach NAME --parquet PATH|GLOB
--spec SPEC`` (DuckDB), or ``--spark TABLE --spec SPEC`` (a table of the Spark session, :func:`attach_spark`).

The dataset's row records the Parquet files (absolute paths or globs) and its public binning spec; the rows stay
where they are and are coded inside DuckDB on every scan (:mod:`service.data.engines.spec_sql`: a value outside
the spec is refused, naming its column, never dropped). Attaching checks everything once, before anything is
stored: the files exist and are Parquet, they have every column the spec names, and every value of every row fits
the spec (one scan, which also counts the rows). Any failure is one clear error and stores nothing.

A Spark table is checked the same way, by Spark: the session is reachable, the table exists, it has every column
the spec names, and every value fits the spec (one scan).

The files must stay readable by every process of the service and must not change while a release reads them; a
file that later disappears or gains a value outside the spec makes a release fail before any noise is drawn.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import duckdb
from sqlalchemy import Engine, select

from db import tables
from db.engine import serialized_transaction
from db.models import Dataset
from service.data.datasets import DatasetInfo, check_name
from service.data.engines.base import DUCKDB, SPARK, EngineError
from service.data.engines.duckdb_table import DuckDBTable, parquet_source
from service.data.engines.spec_sql import spec_columns
from service.errors import Conflict, InvalidInput
from workloads.binning import BinningError, BinningSpec, load_spec

GLOB_CHARACTERS = set("*?[")


def attach_parquet(engine: Engine, name: str, paths: list[str], spec_path: Path) -> DatasetInfo:
    """Register the Parquet files ``paths`` (files or globs) as dataset ``name``, coded by the spec at
    ``spec_path`` (module docstring)."""
    check_name(name)
    spec = _load_spec(spec_path)
    if not paths:
        raise InvalidInput("give at least one --parquet PATH or GLOB", code="invalid_parameter")
    sources = [_resolve(p) for p in paths]
    _check_columns(sources, spec)
    table = DuckDBTable(sources, spec_columns(spec), name)
    try:
        rows = table.check()
    except EngineError as exc:
        raise InvalidInput(f"{exc.message}. Nothing was stored.", code="invalid_value") from None
    finally:
        table.close()
    if rows == 0:
        raise InvalidInput(f"the Parquet files of {name!r} have no rows; nothing was stored", code="empty_file")
    return _register(engine, name, spec, rows, ", ".join(sources), DUCKDB, {"parquet": sources})


def attach_spark(engine: Engine, name: str, table: str, spec_path: Path) -> DatasetInfo:
    """Register the table ``table`` of the Spark session (:func:`service.data.engines.spark.spark_session`: a name
    in its catalog, ``db.table``, or a path Spark reads, ``parquet.`/data/adult```) as dataset ``name``, coded
    inside Spark by the spec at ``spec_path`` (module docstring)."""
    check_name(name)
    spec = _load_spec(spec_path)
    if not isinstance(table, str) or not table.strip():
        raise InvalidInput("--spark needs a table name or a path Spark reads", code="invalid_parameter")
    from service.data.engines.dialect import SPARK_SQL
    from service.data.engines.spark import SparkTable

    try:
        spark_table = SparkTable(table, spec_columns(spec, SPARK_SQL), name, show_table=True)
    except EngineError as exc:
        raise InvalidInput(f"--spark {table}: {exc.message}. Nothing was stored.", code="engine_error") from None
    try:
        missing = [c.name for c in spec.columns if c.name not in spark_table.columns]
        if missing:
            raise InvalidInput(f"--spark {table}: the spec's column(s) {missing} are not in the table, which has "
                               f"{spark_table.columns}; nothing was stored", code="column_mismatch")
        rows = spark_table.check()
    except EngineError as exc:
        raise InvalidInput(f"--spark {table}: {exc.message}. Nothing was stored.", code="invalid_value") from None
    finally:
        spark_table.close()
    if rows == 0:
        raise InvalidInput(f"--spark {table}: the table has no rows; nothing was stored", code="empty_file")
    return _register(engine, name, spec, rows, f"spark:{table}", SPARK, {"spark": table})


def _load_spec(spec_path: Path) -> BinningSpec:
    try:
        return load_spec(spec_path)
    except BinningError as exc:
        raise InvalidInput(str(exc), code="invalid_spec") from None


def _register(engine: Engine, name: str, spec: BinningSpec, rows: int, source: str, engine_name: str,
              where: dict[str, object]) -> DatasetInfo:
    """Store dataset ``name`` (``rows`` rows counted by ``engine_name``, found at ``where``, coded by ``spec``)."""
    location = {**where, "spec": spec_to_dict(spec)}
    columns = [{"name": c.name, "size": c.size, "kind": c.kind, "sql": sql, "labels": list(c.labels)}
               for c, sql in zip(spec.columns, tables.sql_column_names(len(spec.columns)), strict=True)]
    with serialized_transaction(engine) as session:
        if session.execute(select(Dataset.id).where(Dataset.name == name)).first() is not None:
            raise Conflict(f"a dataset named {name!r} already exists; choose another name", code="duplicate_dataset")
        dataset = Dataset(name=name, domain_json=json.dumps({"columns": columns}), data_table="pending",
                          row_count=rows, source=source, engine=engine_name, location=json.dumps(location))
        session.add(dataset)
        session.flush()
        dataset.data_table = tables.data_table_name(dataset.id)
    labels = {c.name: list(c.labels) for c in spec.columns}
    return DatasetInfo(name=name, rows=rows, domain=spec.domain(), source=source, labels=labels, engine=engine_name)


def spec_to_dict(spec: BinningSpec) -> dict[str, object]:
    """``spec`` as the mapping :func:`workloads.binning.parse_spec` reads back (what a dataset's location keeps)."""
    columns: dict[str, object] = {}
    for c in spec.columns:
        entry: dict[str, object] = {"kind": c.kind}
        if c.edges:
            entry["edges"] = list(c.edges)
        else:
            entry["values"] = list(c.values)
            if c.strip_suffix:
                entry["strip_suffix"] = c.strip_suffix
        columns[c.name] = entry
    return {"format": {"strip": spec.strip}, "columns": columns}


def _resolve(path: str) -> str:
    """``path`` made absolute; a file that does not exist, or a glob that matches no file, is refused."""
    absolute = str(Path(path).expanduser().absolute())
    if GLOB_CHARACTERS & set(path):
        if not glob.glob(absolute):
            raise InvalidInput(f"--parquet {path}: no file matches this pattern; nothing was stored",
                               code="missing_file")
    elif not Path(absolute).is_file():
        raise InvalidInput(f"--parquet {path}: no such file; nothing was stored", code="missing_file")
    return absolute


def _check_columns(sources: list[str], spec: BinningSpec) -> None:
    """The files are Parquet and have every column the spec names (extra columns are ignored)."""
    connection = duckdb.connect(":memory:")
    try:
        described = connection.execute(f"DESCRIBE SELECT * FROM {parquet_source(sources)}").fetchall()
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0]
        raise InvalidInput(f"--parquet {', '.join(sources)}: not readable as Parquet ({reason}); nothing was stored",
                           code="invalid_file") from None
    finally:
        connection.close()
    present = [row[0] for row in described]
    missing = [c.name for c in spec.columns if c.name not in present]
    if missing:
        raise InvalidInput(f"--parquet {', '.join(sources)}: the spec's column(s) {missing} are not in the files, "
                           f"which have {present}; nothing was stored", code="column_mismatch")
