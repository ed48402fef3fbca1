"""Registering a table where it lives, without copying it: ``marginalia dataset attach NAME --parquet PATH|GLOB
--spec SPEC`` (counted by DuckDB), ``--sql URL --table T --spec SPEC`` (counted by that database), or ``--spark
TABLE --spec SPEC`` (a table of the Spark session, counted by Spark: :func:`attach_spark`).

The dataset's row records the Parquet files (absolute paths or globs) and its public binning spec; the rows stay
where they are and are coded inside DuckDB on every scan (:mod:`service.data.engines.spec_sql`: a value outside
the spec is refused, naming its column, never dropped). Attaching checks everything once, before anything is
stored: the files exist and are Parquet, they have every column the spec names, and every value of every row fits
the spec (one scan, which also counts the rows). Any failure is one clear error and stores nothing.

A Spark table is checked the same way, by Spark: the session is reachable, the table exists, it has every column
the spec names, and every value fits the spec (one scan, which also counts the rows).

With ``--privacy-unit COLUMN`` (a column of the table, not coded, never released) every scan keeps one row per
unit (:mod:`service.data.engines.units`; docs/privacy.md section 1.1): the column must exist (else one error
listing the table's columns) and no row's unit may be NULL (refused, naming the column); the dataset's ``rows``
is then its number of units.

The files must stay readable by every process of the service and must not change while a release reads them; a
file that later disappears or gains a value outside the spec makes a release fail before any noise is drawn.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
from sqlalchemy import Engine, inspect, make_url, select
from sqlalchemy.exc import NoSuchTableError

from db import tables
from db.engine import OPEN_ERRORS, DatabaseUnavailable, make_engine, safe_url, serialized_transaction, unavailable
from db.models import Dataset
from service.data.datasets import DatasetInfo, check_name
from service.data.engines.base import DUCKDB, SPARK, SQL, EngineError, is_value_refusal
from service.data.engines.duckdb_table import DuckDBTable, parquet_source
from service.data.engines.foreign_sql import ForeignSqlTable, open_foreign
from service.data.engines.spec_sql import spec_columns
from service.errors import Conflict, InvalidInput
from workloads.binning import BinningError, BinningSpec, load_spec, parse_spec

if TYPE_CHECKING:
    from service.data.engines.spark import SparkTable

GLOB_CHARACTERS = set("*?[")
#: A binning spec as the attach functions take it: a YAML/JSON file, its parsed content (the JSON of
#: ``POST /datasets/attach``'s ``bins``), or a parsed :class:`~workloads.binning.BinningSpec`.
SpecSource = Path | Mapping[str, object] | BinningSpec


def attach_parquet(engine: Engine, name: str, paths: list[str], spec_path: SpecSource, *,
                   privacy_unit: str | None = None) -> DatasetInfo:
    """Register the Parquet files ``paths`` (files or globs) as dataset ``name``, coded by the spec at
    ``spec_path``, one row per value of the column ``privacy_unit`` when given (module docstring)."""
    check_name(name)
    spec = _spec(spec_path)
    if not paths:
        raise InvalidInput("give at least one --parquet PATH or GLOB", code="invalid_parameter")
    sources = [_resolve(p) for p in paths]
    _check_present(f"--parquet {', '.join(sources)}", "files", spec, _parquet_columns(sources), privacy_unit)
    rows = _checked_rows(DuckDBTable(sources, spec_columns(spec), name, privacy_unit=privacy_unit), "")
    location = _with_unit({"parquet": sources, "spec": spec_to_dict(spec)}, privacy_unit)
    return _register(engine, name, spec, rows, ", ".join(sources), DUCKDB, location)


def attach_sql(engine: Engine, name: str, url: str, table_name: str, spec_path: SpecSource, *,
               privacy_unit: str | None = None) -> DatasetInfo:
    """Register table ``table_name`` of the database at ``url`` (any SQLAlchemy URL) as dataset ``name``, coded by
    the spec at ``spec_path`` inside that database (:mod:`service.data.engines.foreign_sql`), one row per value of
    the column ``privacy_unit`` when given. The database must be reachable, the table must exist with every column
    the spec names (and the unit column), and every value must fit the spec."""
    check_name(name)
    spec = _spec(spec_path)
    where = f"--sql {safe_url(url)} --table {table_name}"
    sqlite_file = url.startswith("sqlite") and make_url(url).database not in (None, "", ":memory:")
    if sqlite_file and not Path(str(make_url(url).database)).is_file():  # opening it would create an empty one
        raise InvalidInput(f"{where}: no such database file; nothing was stored", code="unreachable_database")
    try:
        foreign = make_engine(url)
    except DatabaseUnavailable as exc:
        raise InvalidInput(f"{where}: {exc}; nothing was stored", code="unreachable_database") from None
    try:
        try:
            present = [c["name"] for c in inspect(foreign).get_columns(table_name)]
        except NoSuchTableError:
            raise InvalidInput(f"{where}: no such table; nothing was stored", code="missing_table") from None
        except OPEN_ERRORS as exc:
            raise InvalidInput(f"{where}: the database cannot be reached ({unavailable(url, exc)}); nothing was "
                               "stored", code="unreachable_database") from None
        _check_present(where, "table", spec, present, privacy_unit)
    finally:
        foreign.dispose()
    location = _with_unit({"url": url, "table": table_name, "spec": spec_to_dict(spec)}, privacy_unit)
    try:
        table = open_foreign(location, name, spec.domain().sizes())
    except EngineError as exc:
        raise InvalidInput(f"{where}: {exc.message}; nothing was stored", code="unreachable_database") from None
    rows = _checked_rows(table, f"{where}: ", unreadable="unreachable_database")
    return _register(engine, name, spec, rows, f"{safe_url(url)} table {table_name}", SQL, location)


def attach_spark(engine: Engine, name: str, table: str, spec_path: SpecSource, *,
                 privacy_unit: str | None = None) -> DatasetInfo:
    """Register the table ``table`` of the Spark session (:func:`service.data.engines.spark.spark_session`: a name
    in its catalog, ``db.table``, or a path Spark reads, ``parquet.`/data/adult```) as dataset ``name``, coded
    inside Spark by the spec at ``spec_path``, one row per value of the column ``privacy_unit`` when given (module
    docstring)."""
    check_name(name)
    spec = _spec(spec_path)
    if not isinstance(table, str) or not table.strip():
        raise InvalidInput("--spark needs a table name or a path Spark reads", code="invalid_parameter")
    from service.data.engines.dialect import SPARK_SQL
    from service.data.engines.spark import SparkTable

    try:
        spark_table = SparkTable(table, spec_columns(spec, SPARK_SQL), name, privacy_unit=privacy_unit)
    except EngineError as exc:
        raise InvalidInput(f"--spark {table}: {exc.message}. Nothing was stored.", code="engine_error") from None
    try:
        _check_present(f"--spark {table}", "table", spec, spark_table.columns, privacy_unit)
    except InvalidInput:
        spark_table.close()
        raise
    rows = _checked_rows(spark_table, f"--spark {table}: ")
    location = _with_unit({"spark": table, "spec": spec_to_dict(spec)}, privacy_unit)
    return _register(engine, name, spec, rows, f"spark:{table}", SPARK, location)


def _checked_rows(table: DuckDBTable | ForeignSqlTable | SparkTable, prefix: str, *,
                  unreadable: str = "engine_error") -> int:
    """``table.check()``: its row count after one scan checking every value, then ``table`` closed. A scan the
    data stopped (a value outside the spec, a NULL unit) is ``invalid_value``; one the engine could not finish is
    ``unreadable``; the message is the engine's, after ``prefix``."""
    try:
        return table.check()
    except EngineError as exc:
        code = "invalid_value" if is_value_refusal(exc) else unreadable
        raise InvalidInput(f"{prefix}{exc.message}. Nothing was stored.", code=code) from None
    finally:
        table.close()


def _check_present(where: str, what: str, spec: BinningSpec, present: list[str], unit: str | None) -> None:
    """The table (``what``: its files, or itself), whose columns are ``present``, has every column the spec names
    (extra columns are ignored) and, when given, the privacy unit's."""
    missing = [c.name for c in spec.columns if c.name not in present]
    if missing:
        has = "have" if what == "files" else "has"
        raise InvalidInput(f"{where}: the spec's column(s) {missing} are not in the {what}, which {has} {present}; "
                           "nothing was stored", code="column_mismatch")
    if unit is None:
        return
    if not isinstance(unit, str) or not unit:
        raise InvalidInput("--privacy-unit needs a column name", code="invalid_parameter")
    if unit not in present:
        raise InvalidInput(f"{where}: the privacy unit {unit!r} is not a column of the table, which has {present}; "
                           "nothing was stored", code="column_mismatch")


def _with_unit(location: dict[str, object], unit: str | None) -> dict[str, object]:
    """``location`` with its privacy unit, when there is one (:mod:`service.data.engines.registry`)."""
    return location if unit is None else {**location, "privacy_unit": unit}


def _spec(spec_path: SpecSource) -> BinningSpec:
    """The spec of an attach: read from a file, parsed from its JSON content (named ``bins`` in errors), or given."""
    if isinstance(spec_path, BinningSpec):
        return spec_path
    try:
        if isinstance(spec_path, Mapping):
            return parse_spec(dict(spec_path), source="bins")
        return load_spec(spec_path)
    except BinningError as exc:
        raise InvalidInput(str(exc), code="invalid_spec") from None


def _register(engine: Engine, name: str, spec: BinningSpec, rows: int, source: str, engine_name: str,
              location: dict[str, object]) -> DatasetInfo:
    """Store the dataset row of an attached table (its rows stay where they live); a table without rows is
    refused."""
    if rows == 0:
        raise InvalidInput(f"{source}: the table has no rows; nothing was stored", code="empty_file")
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


def _parquet_columns(sources: list[str]) -> list[str]:
    """The columns of the Parquet files ``sources``; files that are not Parquet are refused."""
    connection = duckdb.connect(":memory:")
    try:
        described = connection.execute(f"DESCRIBE SELECT * FROM {parquet_source(sources)}").fetchall()
    except duckdb.Error as exc:
        reason = str(exc).strip().splitlines()[0]
        raise InvalidInput(f"--parquet {', '.join(sources)}: not readable as Parquet ({reason}); nothing was stored",
                           code="invalid_file") from None
    finally:
        connection.close()
    return [row[0] for row in described]
