"""Registering a table where it lives, without copying it: ``marginalia dataset attach NAME --parquet PATH|GLOB
--spec SPEC`` (counted by DuckDB), ``--sql URL --table T --spec SPEC`` (counted by that database), or ``--spark
TABLE --spec SPEC`` (a table of the Spark session, counted by Spark: :func:`attach_spark`).

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

import glob
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
from sqlalchemy import Engine, Inspector, inspect, make_url, select
from sqlalchemy.orm import Session

from db import tables
from db.engine import OPEN_ERRORS, DatabaseUnavailable, make_engine, safe_url, serialized_transaction, transaction
from db.models import Dataset
from service.data.attach import locations
from service.data.attach.locations import Claim
from service.data.datasets import DatasetInfo, check_name
from service.data.engines.base import DUCKDB, SPARK, SQL, EngineError, is_value_refusal
from service.data.engines.duckdb_table import DuckDBTable, literal, parquet_source
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
#: Whether the caller may be told a dataset's name (``POST /datasets/attach``: the key's scope covers it); the
#: command line is the operator's, who may be told every name.
MayName = Callable[[str], bool]
#: The refusal of a database that cannot be read: ours, never the driver's reason (which may name the host, the role
#: or the URL).
UNREACHABLE = ("the database cannot be reached or refused the connection (check the URL, that the server answers and "
               "that its role may read the table)")


def everyone(dataset: str) -> bool:  # noqa: ARG001
    """The operator's :data:`MayName`: every dataset's name may be told."""
    return True


def attach_parquet(engine: Engine, name: str, paths: list[str], spec_path: SpecSource, *,
                   privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register the Parquet files ``paths`` (files or globs) as dataset ``name``, coded by the spec at
    ``spec_path``, one row per value of the column ``privacy_unit`` when given (module docstring). A file a dataset
    already reads is refused, naming that dataset when ``may_name`` allows."""
    spec = _request(engine, name, spec_path, privacy_unit)
    if not paths:
        raise InvalidInput("give at least one --parquet PATH or GLOB", code="invalid_parameter")
    sources = [_resolve(p) for p in paths]
    claims = _file_claims(sources)
    locations.check_not_attached(engine, claims, may_name)
    _check_present(f"--parquet {', '.join(sources)}", "files", spec, _parquet_columns(sources), privacy_unit)
    rows = _checked_rows(DuckDBTable(sources, spec_columns(spec), name, privacy_unit=privacy_unit), "")
    location = _with_unit({"parquet": sources, "spec": spec_to_dict(spec)}, privacy_unit)
    return _register(engine, name, spec, rows, ", ".join(sources), DUCKDB, location, claims, may_name)


def attach_sql(engine: Engine, name: str, url: str, table_name: str, spec_path: SpecSource, *,
               privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register table ``table_name`` of the database at ``url`` (any SQLAlchemy URL) as dataset ``name``, coded by
    the spec at ``spec_path`` inside that database (:mod:`service.data.engines.foreign_sql`), one row per value of
    the column ``privacy_unit`` when given. The database must be reachable, the table must be one of its own tables
    or views (:func:`_user_table`) with every column the spec names (and the unit column), no dataset may read it
    already, and every value must fit the spec."""
    spec = _request(engine, name, spec_path, privacy_unit)
    where = f"--sql {safe_url(url)} --table {table_name}"
    sqlite_file = url.startswith("sqlite") and make_url(url).database not in (None, "", ":memory:")
    if sqlite_file and not Path(str(make_url(url).database)).is_file():  # opening it would create an empty one
        raise InvalidInput(f"{where}: no such database file; nothing was stored", code="unreachable_database")
    try:
        foreign = make_engine(url)
    except DatabaseUnavailable:
        raise InvalidInput(f"{where}: not a database URL this service can open (a SQLAlchemy URL whose driver is "
                           "installed); nothing was stored", code="unreachable_database") from None
    try:
        inspector = inspect(foreign)
        table_name = _user_table(inspector, table_name, where)
        schema = inspector.default_schema_name
        present = [c["name"] for c in inspector.get_columns(table_name)]
    except OPEN_ERRORS:
        raise InvalidInput(f"{where}: {UNREACHABLE}; nothing was stored", code="unreachable_database") from None
    finally:
        foreign.dispose()
    claims = {locations.sql_claim(url, table_name, schema): where}
    locations.check_not_attached(engine, claims, may_name)
    _check_present(where, "table", spec, present, privacy_unit)
    location = _with_unit({"url": url, "table": table_name, "schema": schema, "spec": spec_to_dict(spec)},
                          privacy_unit)
    try:
        table = open_foreign(location, name, spec.domain().sizes())
    except EngineError as exc:
        raise InvalidInput(f"{where}: {exc.message}; nothing was stored", code="unreachable_database") from None
    rows = _checked_rows(table, f"{where}: ", unreadable="unreachable_database")
    return _register(engine, name, spec, rows, f"{safe_url(url)} table {table_name}", SQL, location, claims,
                     may_name)


def _user_table(inspector: Inspector, table: str, where: str) -> str:
    """``table`` as the database lists it among its own tables, views and materialized views (the URL role's default
    schema), or ``missing_table``: the catalog (``sqlite_master``, ``sqlite_sequence``, ``sqlite_stat1``,
    ``pg_catalog``'s and ``information_schema``'s tables) is never listed, whatever the dialect. SQLite's names are
    case-insensitive, so there the listed spelling is taken."""
    listed = [*inspector.get_table_names(), *inspector.get_view_names()]
    try:
        listed += inspector.get_materialized_view_names()
    except NotImplementedError:  # a dialect without materialized views (SQLite)
        pass
    if table in listed:
        return table
    if inspector.dialect.name == "sqlite":
        for name in listed:
            if name.casefold() == table.casefold():
                return name
    raise InvalidInput(f"{where}: no such table (only the database's own tables and views can be attached, never its "
                       "catalog: sqlite_master, pg_catalog, information_schema); nothing was stored",
                       code="missing_table")


def attach_spark(engine: Engine, name: str, table: str, spec_path: SpecSource, *,
                 privacy_unit: str | None = None, may_name: MayName = everyone) -> DatasetInfo:
    """Register the table ``table`` of the Spark session (:func:`service.data.engines.spark.spark_session`: a name
    in its catalog, ``db.table``, or a path Spark reads, ``parquet.`/data/adult```) as dataset ``name``, coded
    inside Spark by the spec at ``spec_path``, one row per value of the column ``privacy_unit`` when given (module
    docstring)."""
    spec = _request(engine, name, spec_path, privacy_unit)
    if not isinstance(table, str) or not table.strip():
        raise InvalidInput("--spark needs a table name or a path Spark reads", code="invalid_parameter")
    claims = dict.fromkeys(locations.spark_claims(table), f"--spark {table}")
    locations.check_not_attached(engine, claims, may_name)
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
    return _register(engine, name, spec, rows, f"spark:{table}", SPARK, location, claims, may_name)


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


def _file_claims(sources: list[str]) -> dict[Claim, str]:
    """The files ``sources`` read, by real path, each named ``--parquet PATH``; a file two of them name (two globs
    that overlap, a symlink beside its target) is refused, since DuckDB would read it twice: its rows would count
    twice in every marginal."""
    claims: dict[Claim, str] = {}
    for source in sources:
        for claim in sorted(locations.file_claims([source]), key=lambda c: c.key):
            if claim in claims:
                raise InvalidInput(f"--parquet {claim.key}: this file is named twice (by {claims[claim]} and by "
                                   f"{source}); DuckDB would read its rows twice; nothing was stored",
                                   code="invalid_parameter")
            claims[claim] = source
    return {claim: f"--parquet {claim.key}" for claim in claims}


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
    if unit is not None and unit not in present:
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
    """``path`` made absolute; a file that does not exist, or a glob that matches no file, is refused, and so is a
    path the file system refuses to look at (too long a name, a symlink loop, no permission: any ``OSError``)."""
    try:
        absolute = str(Path(path).expanduser().absolute())
        if GLOB_CHARACTERS & set(path):
            if not glob.glob(absolute):
                raise InvalidInput(f"--parquet {path}: no file matches this pattern; nothing was stored",
                                   code="missing_file")
        elif not Path(absolute).is_file():
            raise InvalidInput(f"--parquet {path}: no such file; nothing was stored", code="missing_file")
    except OSError:
        raise InvalidInput(f"--parquet {path}: this path cannot be read (too long a name, a symlink loop, or no "
                           "permission); nothing was stored", code="missing_file") from None
    return absolute


def _parquet_columns(sources: list[str]) -> list[str]:
    """The columns of the Parquet files ``sources`` (every file's footer is read, no row); a file that is not
    Parquet is refused, naming the first source DuckDB cannot read (never with DuckDB's own message, which may quote
    what it read)."""
    connection = duckdb.connect(":memory:")
    listed = ", ".join(literal(s) for s in sources)
    try:
        connection.execute(f"SELECT COUNT(*) FROM parquet_file_metadata([{listed}])").fetchall()
        return [row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {parquet_source(sources)}").fetchall()]
    except duckdb.Error:
        for source in sources:
            try:
                connection.execute(f"SELECT COUNT(*) FROM parquet_file_metadata({literal(source)})").fetchall()
            except duckdb.Error:
                raise InvalidInput(f"--parquet {source}: not readable as Parquet (not a Parquet file, damaged, or "
                                   "not readable by this service); nothing was stored", code="invalid_file") from None
        raise InvalidInput(f"--parquet {', '.join(sources)}: not readable as one Parquet table; nothing was stored",
                           code="invalid_file") from None
    finally:
        connection.close()
