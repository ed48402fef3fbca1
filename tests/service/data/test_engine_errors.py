"""Finding 1 of issue 27: no engine's, driver's or library's message reaches a caller or a log line.

For every engine a table is broken after it was stored or attached (the normal case for an attached table: it
changes where it lives), with canaries planted where the engine would quote them: a string in a column the spec bins
as a number, a new file of a glob with another schema, a number too large for a double, a stored code outside its
domain, a string that is not UTF-8, a column whose type changed. The count and the distinct rows (what the
marginal releases and the regression fits read) are then refused with a message of ours that names the dataset,
and the column where the engine can know it, and holds no canary and no path; no log record (every logger, from
DEBUG) holds one either. Also here: the boundary's reasons chosen by type (never by text), the PostgreSQL guard that
makes every cast of a text succeed, and that every engine class is inside the boundary.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import math
import pkgutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import NoSuchTableError

import service.data.engines as engines_package
from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.data import datasets
from service.data.attach.tables import attach_parquet, attach_sql
from service.data.engines.base import EngineError
from service.data.engines.boundary import Reason, call_inside, compiled_refusals, engine_error
from service.data.engines.registry import ENGINES
from service.data.engines.store import data_folder
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from tests.conftest import new_postgres_database
from tests.support.binned import raw_frame, sql_table, write_spec

#: A private cell value, and a number planted as one (a code, the digits of a huge number): neither may be shown.
CANARY = "Jane Doe HIV+ canary-5f1d"
NUMBER = "31337"
SIZES = {"a": 3, "b": 4, "c": 2}
ON_POSTGRES = pytest.mark.postgres


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """The service database: SQLite (the engines under test are where the tables live; the SQL store's PostgreSQL
    case makes its own service database)."""
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of the session's throwaway PostgreSQL server."""
    return new_postgres_database(request.getfixturevalue("postgres_server"))


def assert_refused_without_canaries(engine: Engine, name: str, caplog: pytest.LogCaptureFixture, *,
                                    column: str | None, canaries: tuple[str, ...], reason: Reason | None = None,
                                    distinct: bool = True, one_by_one: bool = False) -> EngineError:
    """Counting every attribute of dataset ``name`` (as one covering marginal, or ``one_by_one``), and reading its
    distinct rows, is an :class:`EngineError` of ours: it names the dataset, and ``column`` when given (a refusal of
    a value), else says ``reason``; neither it, nor an exception it chains to, nor any log record holds a canary."""
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    stored = datasets.get_dataset(engine, name)
    attributes = list(stored.domain.names)
    reads = [lambda oracle: oracle.counts_many([(a,) for a in attributes], max_cells=1 if one_by_one else 1 << 18)]
    if distinct:
        reads.append(lambda oracle: oracle.distinct_rows(attributes))
    errors = []
    for read in reads:
        with pytest.raises(EngineError) as caught, TableCountOracle(engine, stored) as oracle:
            read(oracle)
        errors.append(caught.value)
    for error in errors:
        assert error.message.startswith(f"dataset {name!r}: "), error.message
        if column is not None:
            assert f"column {column!r}" in error.message and error.value_refusal, error.message
        if reason is not None:
            assert error.message == f"dataset {name!r}: {reason.value}", error.message
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
        chained = [error]
        while chained[-1].__context__ is not None:
            chained.append(chained[-1].__context__)
        for canary in canaries:
            assert not any(canary in str(e) for e in chained), chained  # no foreign exception rides along
            assert canary not in caplog.text, caplog.text
    return errors[0]


# DuckDB over a stored Parquet file (dataset load) ---------------------------------------------------------------
def _stored_table(engine: Engine, tmp_path: Path, store: str = "duckdb") -> datasets.StoredDataset:
    rng = np.random.default_rng(4)
    codes = np.stack([rng.integers(0, k, 200) for k in SIZES.values()], axis=1)
    csv, domain = tmp_path / "rows.csv", tmp_path / "domain.json"
    csv.write_text(",".join(SIZES) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in codes.tolist()))
    domain.write_text(json.dumps(SIZES))
    datasets.load_coded_csv(engine, "stored", csv, domain, store=store)
    return datasets.get_dataset(engine, "stored")


def _rewrite_stored(engine: Engine, stored: datasets.StoredDataset, c0: pa.Array) -> None:
    path = data_folder(engine) / stored.location.file
    table = pq.read_table(path)
    path.unlink()  # the service writes its files read-only
    pq.write_table(table.set_column(0, "c0", c0), path)


def test_a_stored_parquet_file_with_a_string_code_is_refused_without_the_string(engine, tmp_path: Path,  # noqa: ANN001
                                                                                caplog) -> None:  # noqa: ANN001
    """On f80d414: ``Conversion Error: Could not convert string 'Jane Doe HIV+ canary-5f1d' to INT32``."""
    stored = _stored_table(engine, tmp_path)
    _rewrite_stored(engine, stored, pa.array(["0", CANARY] + ["1"] * (stored.rows - 2)))
    assert_refused_without_canaries(engine, "stored", caplog, column=None, canaries=(CANARY, str(tmp_path)),
                                    reason=Reason.VALUE)


def test_a_stored_parquet_file_with_a_code_outside_its_domain_is_refused(engine, tmp_path: Path,  # noqa: ANN001
                                                                         caplog) -> None:  # noqa: ANN001
    """On f80d414: numpy's ``IndexError: index 31337 is out of bounds``, a 500 (and a negative code was counted in
    a real cell)."""
    stored = _stored_table(engine, tmp_path)
    _rewrite_stored(engine, stored, pa.array([int(NUMBER)] + [0] * (stored.rows - 1), pa.int16()))
    error = assert_refused_without_canaries(engine, "stored", caplog, column=None, canaries=(NUMBER,))
    assert error.value_refusal and "outside its domain" in error.message
    with TableCountOracle(engine, stored) as oracle, pytest.raises(EngineError, match=r"column 'a' holds a code"):
        oracle.distinct_rows(["a", "b"])  # the rows name their column


# DuckDB over attached Parquet files (a file, a glob) -------------------------------------------------------------
def _glob(engine: Engine, tmp_path: Path) -> Path:
    folder = tmp_path / "lake"
    folder.mkdir()
    frame = raw_frame(60, 2)
    for part in ("part-0", "part-1"):
        frame.to_parquet(folder / f"{part}.parquet", index=False)
    attach_parquet(engine, "lake", [str(folder / "*.parquet")], write_spec(tmp_path))
    return folder


def test_a_glob_file_with_a_string_in_a_number_column_is_outside_the_spec(engine, tmp_path: Path,  # noqa: ANN001
                                                                          caplog) -> None:  # noqa: ANN001
    """The audit's case: the schema is the first file's, so on f80d414 the second file's string was cast to it:
    ``Could not convert string 'Jane Doe HIV+ canary-5f1d' to DOUBLE``. Read by name, it is a value outside the
    spec, refused naming its column."""
    folder = _glob(engine, tmp_path)
    frame = raw_frame(60, 2).astype({"age": str})
    frame.loc[7, "age"] = CANARY
    frame.to_parquet(folder / "part-1.parquet", index=False)
    assert_refused_without_canaries(engine, "lake", caplog, column="age", canaries=(CANARY, str(tmp_path)))


def test_a_new_glob_file_with_another_schema_is_outside_the_spec(engine, tmp_path: Path, caplog) -> None:  # noqa: ANN001
    """A file without the spec's column ``age`` joins the glob: its rows read NULL there, refused as outside the
    spec. On f80d414 DuckDB's schema-mismatch error named both files, with their folder."""
    folder = _glob(engine, tmp_path)
    raw_frame(10, 3).drop(columns=["age"]).to_parquet(folder / f"part-{NUMBER}.parquet", index=False)
    assert_refused_without_canaries(engine, "lake", caplog, column="age", canaries=(NUMBER, str(tmp_path)))


def test_an_attached_file_with_a_string_that_is_not_utf8_is_refused_without_it(engine, tmp_path: Path,  # noqa: ANN001
                                                                               caplog) -> None:  # noqa: ANN001
    """DuckDB checks a Parquet string's encoding as it reads it, and on f80d414 quoted it: ``value "\\xFFJane Doe
    ..." is not valid UTF8``."""
    path = tmp_path / "people.parquet"
    frame = raw_frame(40, 4)
    frame.to_parquet(path, index=False)
    attach_parquet(engine, "people", [str(path)], write_spec(tmp_path))
    values = [w.encode() for w in frame["work"]]
    values[5] = b"\xff" + CANARY.encode()
    binary = pa.array(values, pa.binary())
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.set_column(table.schema.get_field_index("work"), "work",
                             pa.Array.from_buffers(pa.string(), len(binary), binary.buffers()))
    pq.write_table(table, path)
    assert_refused_without_canaries(engine, "people", caplog, column=None, canaries=(CANARY, str(tmp_path)),
                                    reason=Reason.FILES)


# the service database's SQL store (data_<id>) ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=ON_POSTGRES)])
def test_a_stored_sql_table_with_a_code_outside_its_domain_is_refused_naming_the_column(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, caplog, monkeypatch) -> None:  # noqa: ANN001
    """On f80d414 numpy refused the cell (``index 31337 is out of bounds for axis 0 with size 3``): a 500 whose log
    line held the code; the SQL engine translated no error at all."""
    url = f"sqlite:///{tmp_path / 'store.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    monkeypatch.setenv("MARGINALIA_DATA_DIR", str(tmp_path / "tables"))
    engine = make_engine(url)
    upgrade_to_head(engine)
    try:
        stored = _stored_table(engine, tmp_path, store="sql")
        with engine.begin() as connection:
            connection.execute(text(f"UPDATE {stored.data_table} SET c0 = {NUMBER} WHERE c0 = 1"))
        assert_refused_without_canaries(engine, "stored", caplog, column="a", canaries=(NUMBER,))
    finally:
        engine.dispose()


def test_a_stored_sqlite_table_with_a_text_is_refused_without_it(engine, tmp_path: Path, caplog) -> None:  # noqa: ANN001
    """SQLite's columns take any value: on f80d414 numpy's ``invalid literal for int() with base 10: 'Jane Doe
    ...'`` was the command line's message and the API's log line. (Inside a covering marginal's cell index SQLite
    reads the text as 0, so a marginal over several columns counts it in code 0: a wrong count of a tampered
    service table, but nothing shown; a marginal of the column itself, and the distinct rows, refuse it.)"""
    stored = _stored_table(engine, tmp_path, store="sql")
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {stored.data_table} SET c0 = :v WHERE c0 = 2"), {"v": CANARY})
    assert_refused_without_canaries(engine, "stored", caplog, column="a", canaries=(CANARY,), one_by_one=True)


# an attached SQLite table -----------------------------------------------------------------------------------------
def test_an_attached_sqlite_table_that_lost_a_column_is_an_engine_error(engine, tmp_path: Path,  # noqa: ANN001
                                                                        caplog) -> None:  # noqa: ANN001
    """SQLite never fails a cast (its ``typeof`` guard makes a text a value outside the spec: kept, and checked
    here), but a table that changed shape failed on f80d414 with sqlite3's own error, raw (a 500): the counting SQL
    runs on the DB-API cursor, and only SQLAlchemy's errors were caught."""
    url = f"sqlite:///{tmp_path / 'lake.db'}"
    lake = create_engine(url)
    frame = raw_frame(50, 5)
    sql_table(lake, frame, "people")
    attach_sql(engine, "people", url, "people", write_spec(tmp_path))
    with lake.begin() as connection:
        connection.execute(text("UPDATE people SET age = :v WHERE other = 1"), {"v": CANARY})
    assert_refused_without_canaries(engine, "people", caplog, column="age", canaries=(CANARY,))
    with lake.begin() as connection:
        connection.execute(text("ALTER TABLE people RENAME COLUMN work TO job"))
    error = assert_refused_without_canaries(engine, "people", caplog, column=None, canaries=(CANARY, str(tmp_path)))
    assert error.message == ("dataset 'people': its table no longer has the column(s) ['work'] of its spec: check the "
                             "table, or attach it again")
    with lake.begin() as connection:  # a table that changes between its opening and its scan
        connection.execute(text("ALTER TABLE people RENAME COLUMN job TO work"))
    with TableCountOracle(engine, datasets.get_dataset(engine, "people")) as oracle:
        with lake.begin() as connection:
            connection.execute(text("ALTER TABLE people DROP COLUMN age"))
        with pytest.raises(EngineError) as caught:
            oracle.counts(("age", "work"))
    assert caught.value.message == f"dataset 'people': {Reason.SCHEMA.value}" and CANARY not in caplog.text
    lake.dispose()


# an attached PostgreSQL table -------------------------------------------------------------------------------------
#: The raw table's columns in PostgreSQL, ``age`` as text (a steward's table of strings that hold numbers).
TEXT_AGE = {"age": "TEXT", "work": "VARCHAR(40)", "income": "VARCHAR(40)", "other": "INTEGER"}


def _postgres_people(engine: Engine, postgres_url: str, tmp_path: Path, types: dict[str, str]) -> Engine:
    lake = create_engine(postgres_url)
    sql_table(lake, raw_frame(80, 6), "people", types)
    attach_sql(engine, "people", postgres_url, "people", write_spec(tmp_path))
    return lake


@ON_POSTGRES
@pytest.mark.parametrize(("types", "change", "value"), [
    (TEXT_AGE, "UPDATE people SET age = :v WHERE other = 1", CANARY),  # the audit's case
    (TEXT_AGE, "UPDATE people SET age = :v WHERE other = 1", f"3.{NUMBER}e400"),  # above double's range
    (TEXT_AGE, "UPDATE people SET age = :v WHERE other = 1", "1" + NUMBER * 300),  # a thousand digits and more
    ({**TEXT_AGE, "age": "NUMERIC"}, "UPDATE people SET age = CAST(:v AS NUMERIC) WHERE other = 1",
     f"{NUMBER}e400"),  # a NUMERIC no double holds
    ({**TEXT_AGE, "age": "NUMERIC"}, "UPDATE people SET age = CAST(:v AS NUMERIC) WHERE other = 1", "NaN"),
    ({**TEXT_AGE, "age": "DOUBLE PRECISION"}, "UPDATE people SET age = CAST(:v AS DOUBLE PRECISION) WHERE other = 1",
     "NaN"),
    ({**TEXT_AGE, "age": "REAL"}, "UPDATE people SET age = CAST(:v AS REAL) WHERE other = 1", "-Infinity"),
    ({**TEXT_AGE, "age": "DOUBLE PRECISION"}, "ALTER TABLE people ALTER COLUMN age TYPE BOOLEAN USING age > 50",
     None),  # the column's type changed: a boolean is not a number the spec bins
    ({**TEXT_AGE, "age": "DOUBLE PRECISION"}, "ALTER TABLE people ALTER COLUMN age TYPE DATE USING DATE '2020-01-01'",
     None),
])
def test_an_attached_postgres_value_the_spec_cannot_read_is_outside_the_spec(
        engine, postgres_url: str, tmp_path: Path, caplog, types: dict[str, str], change: str,  # noqa: ANN001
        value: str | None) -> None:
    """On f80d414 PostgreSQL's cast quoted the value (``invalid input syntax for type double precision: "Jane Doe
    ..."``, ``"3.31337e400" is out of range for type double precision``), in a 500 for a count (psycopg's error,
    raw) and in the ``engine_error`` message of the distinct rows; a boolean or date column was ``cannot cast
    type``. Now the guard before the cast makes each a value outside the spec, refused naming its column."""
    lake = _postgres_people(engine, postgres_url, tmp_path, types)
    with lake.begin() as connection:
        connection.execute(text(change), {} if value is None else {"v": value})
    lake.dispose()
    assert_refused_without_canaries(engine, "people", caplog, column="age", canaries=(CANARY, NUMBER))


#: Texts the PostgreSQL guard reads as numbers (as DuckDB's TRY_CAST does), with the code each gets in the bins
#: ``[0, 18, 40, 65, 120]`` (tests.support.binned.SPEC), and texts it refuses (None).
TEXTS = [(" 12 ", 0), ("+.5e1", 0), ("1E+01", 0), ("1e-400", 0), ("18", 1), ("64.9999", 2), ("120", 3),
         ("\t7.\n", 0), ("1.2e1", 0), ("-0", 0), ("NaN", None), ("Infinity", None), ("120.5", None), ("-1", None),
         ("1e1000", None), ("0x1F", None), ("1_000", None), ("\u0663", None), ("twelve", None), ("", None),
         ("1e", None), (".", None), ("1" + "0" * 1000, None)]


@ON_POSTGRES
def test_the_postgres_guard_reads_what_is_a_number_and_refuses_the_rest(engine, postgres_url: str,  # noqa: ANN001
                                                                        tmp_path: Path) -> None:
    """Every text either passes the guard, casts and is counted in its bin, or is refused as outside the spec: no
    cast fails (a one-row text table, its value changed after attach)."""
    lake = create_engine(postgres_url)
    sql_table(lake, pd.DataFrame({"x": ["1"]}), "one", {"x": "TEXT"})
    attach_sql(engine, "one", postgres_url, "one",
               write_spec(tmp_path, {"columns": {"x": {"kind": "ordinal", "edges": [0, 18, 40, 65, 120]}}}))
    stored = datasets.get_dataset(engine, "one")
    for value, code in TEXTS:
        with lake.begin() as connection:
            connection.execute(text("UPDATE one SET x = :v"), {"v": value})
        with TableCountOracle(engine, stored) as oracle:
            if code is None:
                with pytest.raises(EngineError, match="column 'x' holds a value the binning spec cannot code"):
                    oracle.counts(("x",))
            else:
                np.testing.assert_array_equal(oracle.counts(("x",)), np.eye(4, dtype=np.int64)[code],
                                              err_msg=repr(value))
    lake.dispose()


@ON_POSTGRES
def test_a_postgres_text_infinity_is_counted_where_an_edge_is_infinite(engine, postgres_url: str,  # noqa: ANN001
                                                                       tmp_path: Path) -> None:
    """``inf``/``Infinity`` (any case, signed) is an infinity, as DuckDB's and Spark's ``TRY_CAST`` read it: in the
    last (first) bin when the spec's outer edge is +inf (-inf), else outside the spec."""
    lake = create_engine(postgres_url)
    frame = pd.DataFrame({"x": ["1", "-1", "Infinity", "-INF", "inf"]})
    sql_table(lake, frame, "t", {"x": "TEXT"})
    spec = write_spec(tmp_path, {"columns": {"x": {"kind": "ordinal", "edges": [-math.inf, 0, math.inf]}}})
    attach_sql(engine, "t", postgres_url, "t", spec)
    with TableCountOracle(engine, datasets.get_dataset(engine, "t")) as oracle:
        np.testing.assert_array_equal(oracle.counts(("x",)), [2, 3])
    sql_table(lake, frame, "t2", {"x": "TEXT"})  # a copy: one location is one dataset
    with pytest.raises(InvalidInput, match="column 'x' holds a value the binning spec cannot code"):
        attach_sql(engine, "u", postgres_url, "t2", write_spec(tmp_path, {"columns": {"x": {"edges": [-5, 0, 5]}}}))
    lake.dispose()


# Spark in local mode ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_spark_table_whose_cast_fails_is_refused_without_the_value(engine, tmp_path: Path, caplog, capfd,  # noqa: ANN001
                                                                     monkeypatch) -> None:  # noqa: ANN001
    """A Spark view that casts a string column (ANSI mode) meets a string that is not a number: on f80d414 Spark's
    ``[CAST_INVALID_INPUT] The value 'Jane Doe ...' of the type "STRING" cannot be cast`` was the ``engine_error``
    message, and pyspark's query-context logger printed it to stderr. Now the error class chooses our reason, and
    pyspark's loggers are quiet."""
    from service.data.attach.tables import attach_spark
    from service.data.engines.spark import SPARK_REMOTE_VARIABLE, spark_session

    monkeypatch.delenv(SPARK_REMOTE_VARIABLE, raising=False)
    spark = spark_session()
    frame = raw_frame(60, 7).astype({"age": str})
    view = f"people_{NUMBER}"

    def publish(rows: pd.DataFrame) -> None:
        spark.createDataFrame(rows).createOrReplaceTempView(f"{view}_raw")
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT CAST(age AS DOUBLE) AS age, work, income "
                  f"FROM {view}_raw")

    publish(frame)
    try:
        attach_spark(engine, "people", view, write_spec(tmp_path))
        frame.loc[9, "age"] = CANARY
        publish(frame)
        capfd.readouterr()
        error = assert_refused_without_canaries(engine, "people", caplog, column=None, canaries=(CANARY,),
                                                reason=Reason.VALUE, distinct=True)
        assert CANARY not in capfd.readouterr().err
        assert error.value_refusal and error.columns == ()  # the data stopped it; Spark does not say which column
    finally:
        spark.catalog.dropTempView(view)
        spark.catalog.dropTempView(f"{view}_raw")


# the boundary itself ----------------------------------------------------------------------------------------------
def _duckdb_error(sql: str) -> duckdb.Error:
    try:
        duckdb.connect().execute(sql)
    except duckdb.Error as exc:
        return exc
    raise AssertionError(sql)


def _sqlite_error(sql: str) -> sqlite3.Error:
    try:
        sqlite3.connect(":memory:").execute(sql)
    except sqlite3.Error as exc:
        return exc
    raise AssertionError(sql)


class _RpcError(Exception):
    """A gRPC error as Spark Connect's transport raises it: a status ``code()`` and ``details()``."""

    def __init__(self, code: str) -> None:
        super().__init__(f"{code}: failed to connect to all addresses; last error: 10.0.0.7:15002 {CANARY}")
        self._code = code

    def code(self) -> object:
        return type("StatusCode", (), {"name": self._code})()

    def details(self) -> str:
        return str(self)


class _SparkError(Exception):
    """A pyspark error: an error class, a SQLSTATE and message parameters."""

    def __init__(self, condition: str, state: str, parameters: dict[str, str]) -> None:
        super().__init__(f"[{condition}] {parameters} SQLSTATE: {state}")
        self.condition, self.state, self.parameters = condition, state, parameters

    def getCondition(self) -> str:  # noqa: N802 - pyspark's name
        return self.condition

    def getSqlState(self) -> str:  # noqa: N802
        return self.state

    def getMessageParameters(self) -> dict[str, str]:  # noqa: N802
        return self.parameters


class _JavaException:
    """A Java exception as py4j shows it: an error class (or none) and a cause."""

    def __init__(self, condition: str | None, cause: _JavaException | None = None) -> None:
        self.condition, self.cause = condition, cause

    def getCondition(self) -> str | None:  # noqa: N802 - Spark's name
        return self.condition

    def getCause(self) -> _JavaException | None:  # noqa: N802 - Java's name
        return self.cause


class _Py4JJavaError(Exception):
    """What local-mode pyspark raises for a failed task: no error class of its own; inside, a Java ``SparkException``
    without one ("job aborted") whose cause has it."""

    def __init__(self, condition: str) -> None:
        super().__init__(f"An error occurred while calling o42.collectToPython.\n: {CANARY}")
        self.java_exception = _JavaException(None, _JavaException(condition, _JavaException(None)))


@pytest.mark.parametrize(("error", "reason"), [
    (_duckdb_error(f"SELECT CAST('{CANARY}' AS INTEGER)"), Reason.VALUE),
    (_duckdb_error(f"SELECT * FROM read_parquet('/nowhere/{CANARY}.parquet')"), Reason.FILES),
    (_duckdb_error(f"SELECT \"{CANARY}\" FROM range(1)"), Reason.SCHEMA),
    (_sqlite_error(f"SELECT * FROM \"{CANARY}\""), Reason.SCHEMA),
    (NoSuchTableError(CANARY), Reason.SCHEMA),
    (FileNotFoundError(2, "No such file", f"/srv/{CANARY}"), Reason.FILES),
    (PermissionError(13, "Permission denied", f"/srv/{CANARY}"), Reason.DENIED),
    (ValueError(f"invalid literal for int() with base 10: '{CANARY}'"), Reason.ENGINE),  # a bug, most likely
    (MemoryError(CANARY), Reason.RESOURCES),
    (_RpcError("UNAVAILABLE"), Reason.UNREACHABLE),
    (_RpcError("UNAUTHENTICATED"), Reason.DENIED),
    (_SparkError("CAST_INVALID_INPUT", "22018", {"expression": f"'{CANARY}'"}), Reason.VALUE),
    (_SparkError("TABLE_OR_VIEW_NOT_FOUND", "42P01", {"relationName": CANARY}), Reason.SCHEMA),
    # a file of another column type, a task's failure: local mode leaves it a Py4JJavaError around the Java exception
    (_Py4JJavaError("FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH"), Reason.SCHEMA),
    (_Py4JJavaError("FAILED_READ_FILE.NO_HINT"), Reason.FILES),
    (_SparkError("SOMETHING_NEW", "22003", {"value": CANARY}), Reason.RANGE),  # a class we do not list: its state
    (_SparkError("USER_RAISED_EXCEPTION", "P0001", {"errorMessage": CANARY}), Reason.ENGINE),  # not our refusal
    (KeyError(CANARY), Reason.ENGINE),
])
def test_the_reason_is_chosen_by_type_and_the_message_is_ours(error: BaseException, reason: Reason,
                                                              caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    translated_error = engine_error(error, "t", compiled_refusals(["age"]))
    assert isinstance(translated_error, EngineError)
    assert translated_error.value_refusal == (reason is Reason.VALUE)  # the data stopped the scan: 409, not 503
    # the table's own state (a value, a file, a column) is a 409 its steward resolves; the engine's, a 503
    expected = ((409, "value_refused") if reason is Reason.VALUE else (409, "table_changed")
                if reason in (Reason.FILES, Reason.SCHEMA) else (503, "engine_error"))
    assert (translated_error.status, translated_error.code) == expected
    assert translated_error.message.startswith(f"dataset 't': {reason.value.split('{')[0]}")
    assert CANARY not in translated_error.message and CANARY not in caplog.text
    assert type(error).__name__ in caplog.text  # the operator's log line names what was raised


def test_our_refusal_is_recognised_and_reported_from_our_copy() -> None:
    """DuckDB's ``error()`` and Spark's ``raise_error()`` carry our sentence: the answer is our own refusal naming
    the column, marked ``value_refusal`` (an attribute, not a phrase to search for)."""
    refusals = compiled_refusals(["age", "work"], "person")
    sentence = next(iter(refusals))
    raised = _duckdb_error(f"SELECT error('{sentence.replace(chr(39), chr(39) * 2)}')")
    error = engine_error(raised, "t", refusals)
    assert isinstance(error, EngineError) and error.value_refusal and error.columns == ("age",)
    assert error.message == ("dataset 't': column 'age' holds a value the binning spec cannot code; values outside "
                             "the spec are refused, never dropped: widen the spec to count them")
    unit = [s for s, (kind, _) in refusals.items() if kind == "unit"][0]
    spark = engine_error(_SparkError("USER_RAISED_EXCEPTION", "P0001", {"errorMessage": unit}), "t", refusals)
    assert isinstance(spark, EngineError) and spark.value_refusal and spark.columns == ("person",)
    assert "(the privacy unit) is NULL" in spark.message


def test_our_own_exceptions_pass_the_boundary_unchanged_and_foreign_ones_leave_no_context() -> None:
    ours = InvalidInput("attributes must be columns of 't'")
    def raises(error: Exception) -> None:
        raise error

    with pytest.raises(InvalidInput) as caught:
        call_inside("t", raises, ours)
    assert caught.value is ours
    with pytest.raises(EngineError) as caught:
        call_inside("t", raises, RuntimeError(CANARY))
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_a_stream_is_read_inside_the_boundary_and_closed_with_its_reader() -> None:
    closed = []

    def rows() -> Iterator[int]:
        try:
            yield 1
            yield 2
            raise ValueError(CANARY)
        finally:
            closed.append(True)

    from service.data.engines.boundary import _stream

    stream = _stream(lambda self: rows())
    holder = type("Engine", (), {"label": "t"})()
    with pytest.raises(EngineError) as caught:
        list(stream(holder))
    assert CANARY not in caught.value.message and closed == [True]
    partial = stream(holder)
    assert next(partial) == 1
    partial.close()  # the oracle stops reading early (a cap): the engine's generator is closed too
    assert closed == [True, True]


def test_every_engine_class_is_inside_the_boundary() -> None:
    """Each :class:`~service.data.engines.base.TableEngine` of the engines package (its constructor and public
    methods) goes through the boundary; a new engine without it fails here."""
    found = {}
    for module in pkgutil.iter_modules(engines_package.__path__):
        try:
            loaded = importlib.import_module(f"{engines_package.__name__}.{module.name}")
        except ImportError:  # an optional engine's library is missing
            continue
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if cls.__module__ == loaded.__name__ and getattr(cls, "name", None) in ENGINES and hasattr(
                    cls, "count_marginals"):
                found[cls.__qualname__] = getattr(cls, "engine_boundary", False)
    assert found == {"DuckDBTable": True, "ForeignSqlTable": True, "SparkTable": True, "SqlTable": True}
