"""Registering a table where it lives, without copying it: ``marginalia dataset attach NAME --parquet PATH|GLOB
--spec SPEC`` (counted by DuckDB), ``--sql URL --table T --spec SPEC`` (counted by that database), or ``--spark
TABLE --spec SPEC`` (a table of the Spark session, counted by Spark: :func:`attach_spark`).

:func:`attach` runs the steps below for any registered engine; the engine's own part (step 2, and how its table's
columns and rows are read) is its record's ``attach`` (:class:`~service.data.engines.record.Attaching`:
:mod:`~service.data.engines.duckdb_engine`, :mod:`~service.data.engines.sql_engine`,
:mod:`~service.data.engines.spark_engine`).

The dataset's row records the Parquet files (absolute paths or globs) and its public binning spec; the rows stay
where they are and are coded inside DuckDB on every scan (:mod:`service.data.engines.spec_sql`: a value outside
the spec is refused, naming its column, never dropped). Attaching checks everything once, before anything is
stored, in this order, so that nothing about the rows is read before the request is known to be one that may read
them:

1. the request itself, without reading anything: the name (its format, and that no dataset holds it), the spec,
   and the privacy unit (not a column of the spec: the unit is never coded nor released);
2. where the table is: the files exist (any error of the file system is ``missing_file``, naming the path), the SQL
   table is one of its database's own tables or views (never a catalog table such as ``sqlite_master``), the Spark
   session is reachable;
3. no dataset already reads it (:mod:`service.data.attach.locations`: one location is one dataset);
4. the table has every column the spec names, and the unit's (its schema only);
5. one scan, checking that every value of every row fits the spec (and, with a unit, that none is NULL), which
   also counts the rows;
6. the dataset is stored, the name and the location checked again in the same serialized transaction.

Any failure is one clear error and stores nothing. Every message is ours: it names the parameter, the file or the
column, never a value, and never carries DuckDB's or a driver's own text.

With ``--privacy-unit COLUMN`` (a column of the table, not coded, never released) every scan keeps one row per
unit (:mod:`service.data.engines.units`; docs/privacy.md section 1.1): the column must exist (else one error
listing the table's columns) and no row's unit may be NULL (refused, naming the column); the dataset's ``rows``
is then its number of units.

The files must stay readable by every process of the service and must not change while a release reads them; a
file that later disappears or gains a value outside the spec makes a release fail before any noise is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db import tables
from db.engine import serialized_transaction, transaction
from db.models import Dataset
from service.data.attach import locations
from service.data.credentials import SourceConnection
from service.data.datasets import DatasetInfo, check_name
from service.data.engines.base import DUCKDB, SPARK, SQL, EngineError, TableEngine, is_value_refusal
from service.data.engines.claims import Claim
from service.data.engines.record import spec_to_dict
from service.data.engines.registry import ENGINES
from service.data.engines.sql_engine import SqlTarget
from service.errors import Conflict, InvalidInput
from workloads.binning import BinningError, BinningSpec, load_spec, parse_spec

__all__ = ["MayName", "SpecSource", "attach", "attach_parquet", "attach_spark", "attach_sql", "everyone",
           "spec_to_dict"]

#: A binning spec as the attach functions take it: a YAML/JSON file, its parsed content (the JSON of
#: ``POST /datasets/attach``'s ``bins``), or a parsed :class:`~workloads.binning.BinningSpec`.
SpecSource = Path | Mapping[str, object] | BinningSpec
#: Whether the caller may be told a dataset's name (``POST /datasets/attach``: the key's scope covers it); the
#: command line is the operator's, who may be told every name.
MayName = Callable[[str], bool]


def everyone(dataset: str) -> bool:  # noqa: ARG001
    """The operator's :data:`MayName`: every dataset's name may be told."""
    return True


def attach(engine: Engine, engine_name: str, name: str, target: object, spec_path: SpecSource, *,
           privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register ``target`` (what the engine ``engine_name`` reads: its record's ``attach``) as dataset ``name``, coded
    by the spec at ``spec_path``, one row per value of the column ``privacy_unit`` when given: the steps of the module
    docstring, in order. A table a dataset already reads is refused, naming that dataset when ``may_name`` allows."""
    record = ENGINES.get(engine_name)
    if record.attach is None:
        raise InvalidInput(f"tables cannot be attached to the {engine_name} engine", code="invalid_parameter")
    spec = _request(engine, name, spec_path, privacy_unit)
    found = record.attach(target, spec, privacy_unit, name)
    claims = found.claims
    locations.check_not_attached(engine, claims, may_name)
    try:
        _check_present(found.where, found.what, spec, found.columns(), privacy_unit)
    except InvalidInput:
        found.close()
        raise
    rows = _checked_rows(found.table(), found.prefix, unreadable=found.unreadable)
    location = found.location.to_json()
    assert location is not None  # noqa: S101 - an attached location is never the NULL of a data_<id> table
    return _register(engine, name, spec, rows, found.source, record.name, location, claims, may_name)


def attach_parquet(engine: Engine, name: str, paths: list[str], spec_path: SpecSource, *,
                   privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register the Parquet files ``paths`` (files or globs) as dataset ``name``, coded by the spec at
    ``spec_path``, one row per value of the column ``privacy_unit`` when given (module docstring;
    :mod:`service.data.engines.duckdb_engine`)."""
    return attach(engine, DUCKDB, name, list(paths), spec_path, privacy_unit=privacy_unit, may_name=may_name)


def attach_sql(engine: Engine, name: str, url: str, table_name: str, spec_path: SpecSource, *,
               privacy_unit: str | None = None, may_name: MayName = everyone,
               through: tuple[int, SourceConnection] | None = None) -> DatasetInfo:
    """Register table ``table_name`` of the database at ``url`` (a SQLAlchemy URL without a password) as dataset
    ``name``, coded by the spec at ``spec_path`` inside that database (:mod:`service.data.engines.foreign_sql`), one
    row per value of the column ``privacy_unit`` when given. ``through``: the id and connection of the ``sql``
    attach source the table is read through (its URL is ``url``; the dataset then connects through the source, with
    its credentials: :mod:`service.data.credentials`). The database must be reachable, the table must be one of its
    own tables or views (:mod:`service.data.engines.sql_engine`) with every column the spec names (and the unit
    column), no dataset may read it already, and every value must fit the spec."""
    target = SqlTarget(url, table_name) if through is None else SqlTarget(url, table_name, *through)
    return attach(engine, SQL, name, target, spec_path, privacy_unit=privacy_unit, may_name=may_name)


def attach_spark(engine: Engine, name: str, table: str, spec_path: SpecSource, *,
                 privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register the table ``table`` of the Spark session (:func:`service.data.engines.spark.spark_session`: a name
    in its catalog, ``db.table``, or a path Spark reads, ``parquet.`/data/adult```) as dataset ``name``, coded
    inside Spark by the spec at ``spec_path``, one row per value of the column ``privacy_unit`` when given (module
    docstring; :mod:`service.data.engines.spark_engine`)."""
    return attach(engine, SPARK, name, table, spec_path, privacy_unit=privacy_unit, may_name=may_name)

def _request(engine: Engine, name: str, spec_path: SpecSource, unit: str | None) -> BinningSpec:
    """Step 1 of the module docstring, before anything is read: the name is well formed and free, the spec parses,
    and the privacy unit is a column name that is not one of the spec's (a unit is never coded nor released, so it
    cannot also be an attribute). Returns the spec."""
    check_name(name)
    with transaction(engine) as session:
        _refuse_taken(session, name)
    spec = _spec(spec_path)
    if unit is None:
        return spec
    if not isinstance(unit, str) or not unit:
        raise InvalidInput("--privacy-unit needs a column name", code="invalid_parameter")
    if unit in {c.name for c in spec.columns}:
        raise InvalidInput(f"--privacy-unit {unit!r} is a column of the spec: a privacy unit is never coded nor "
                           "released, so it cannot also be one of the dataset's columns; name a column that only "
                           f"identifies the person (an id), or take {unit!r} out of the spec; nothing was stored",
                           code="invalid_parameter")
    return spec


def _refuse_taken(session: Session, name: str) -> None:
    if session.execute(select(Dataset.id).where(Dataset.name == name)).first() is not None:
        raise Conflict(f"a dataset named {name!r} already exists; choose another name", code="duplicate_dataset")


def _checked_rows(table: TableEngine, prefix: str, *, unreadable: str = "engine_error") -> int:
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
    if unit is not None and unit not in present:
        raise InvalidInput(f"{where}: the privacy unit {unit!r} is not a column of the table, which has {present}; "
                           "nothing was stored", code="column_mismatch")


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
              location: dict[str, object], claims: Mapping[Claim, str], may_name: MayName) -> DatasetInfo:
    """Store the dataset row of an attached table (its rows stay where they live); a table without rows is
    refused. The name and the location (``claims``) are checked again under :func:`locations.lock_datasets`, in
    the transaction that stores the row, so a concurrent attach of either cannot slip in since the first check."""
    if rows == 0:
        raise InvalidInput(f"{source}: the table has no rows; nothing was stored", code="empty_file")
    columns = [{"name": c.name, "size": c.size, "kind": c.kind, "sql": sql, "labels": list(c.labels)}
               for c, sql in zip(spec.columns, tables.sql_column_names(len(spec.columns)), strict=True)]
    with serialized_transaction(engine) as session:
        locations.lock_datasets(session)
        _refuse_taken(session, name)
        locations.refuse_attached(session, claims, may_name)
        dataset = Dataset(name=name, domain_json=json.dumps({"columns": columns}), data_table="pending",
                          row_count=rows, source=source, engine=engine_name, location=json.dumps(location))
        session.add(dataset)
        session.flush()
        dataset.data_table = tables.data_table_name(dataset.id)
    labels = {c.name: list(c.labels) for c in spec.columns}
    return DatasetInfo(name=name, rows=rows, domain=spec.domain(), source=source, labels=labels, engine=engine_name)
