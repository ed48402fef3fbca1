"""``dataset attach --sql URL --table T`` (issue 21): a table of another SQL database registered where it lives,
coded by its public binning spec inside that database (SQLite and the throwaway PostgreSQL); counts equal numpy's
of the same rows coded by ``workloads.binning.apply_spec``; a value outside the spec is refused with its column
named; an unreachable database, a missing table or column is one clear error and stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from service.cli import app
from service.data import datasets
from service.data.attach.tables import attach_sql
from service.data.engines.base import EngineError
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from tests.support.binned import SPEC, expected_counts, raw_frame, sql_table, write_spec
from tests.support.catalogs import CATALOGS, sqlite_with_every_catalog_table

runner = CliRunner()


def _frame(rows: int = 200, seed: int = 3) -> pd.DataFrame:
    return raw_frame(rows, seed)


def _people(engine: Engine, frame: pd.DataFrame, table: str = "people") -> None:
    sql_table(engine, frame, table)


def test_an_attached_sql_table_counts_as_its_binned_rows(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    frame = _frame()
    _people(engine, frame)
    info = attach_sql(engine, "people", database_url, "people", write_spec(tmp_path))
    assert (info.rows, info.engine) == (200, "sql")
    stored = datasets.get_dataset(engine, "people")
    with TableCountOracle(engine, stored) as oracle:
        for attributes in [("age",), ("work", "age"), ("age", "work", "income")]:
            np.testing.assert_array_equal(oracle.counts(attributes), expected_counts(frame, attributes))
        codes, counts = oracle.distinct_rows(("work",))
    np.testing.assert_array_equal(codes[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(counts, expected_counts(frame, ("work",)))
    with engine.begin() as connection:  # the table changes where it lives: the next count refuses, naming the column
        connection.execute(text("INSERT INTO people VALUES (150, 'Private', '<=50K', 0)"))
    with pytest.raises(EngineError, match=r"column 'age' holds a value the binning spec cannot code"):
        TableCountOracle(engine, stored).counts(("age", "work"))
    shown = runner.invoke(app, ["dataset", "show", "people", "--json"])
    assert json.loads(shown.output)["engine"] == "sql" and database_url not in shown.output


@pytest.mark.parametrize(("column", "value"), [("age", None), ("age", -1), ("work", "Federal"), ("income", None)])
def test_a_value_outside_the_spec_is_refused_naming_its_column(engine, database_url: str, tmp_path: Path,  # noqa: ANN001
                                                               column: str, value: object) -> None:
    frame = _frame()
    frame.loc[17, column] = value
    _people(engine, frame)
    with pytest.raises(InvalidInput) as caught:
        attach_sql(engine, "people", database_url, "people", write_spec(tmp_path))
    assert f"column '{column}' holds a value" in caught.value.message and caught.value.code == "invalid_value"
    assert datasets.list_datasets(engine) == []


def test_bad_input_is_one_clear_error_and_stores_nothing(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    _people(engine, _frame())
    cases = [
        (database_url, "nobody", SPEC, "missing_table", "no such table"),
        (database_url, "people", {"columns": {**SPEC["columns"], "hours": {"edges": [0, 99]}}}, "column_mismatch",
         "['hours'] are not in the table"),
        ("postgresql+psycopg://someone@127.0.0.1:9/nothing", "people", SPEC, "unreachable_database",
         "cannot be reached"),
        (f"sqlite:///{tmp_path / 'missing.db'}", "people", SPEC, "unreachable_database", "no such database file"),
    ]
    for url, table, spec, code, fragment in cases:
        with pytest.raises(InvalidInput) as caught:
            attach_sql(engine, "people", url, table, write_spec(tmp_path, spec))
        assert caught.value.code == code and fragment in caught.value.message, caught.value.message
    assert datasets.list_datasets(engine) == [] and not (tmp_path / "missing.db").exists()


def test_attach_through_the_command_line(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    _people(engine, _frame())
    result = runner.invoke(app, ["dataset", "attach", "people", "--sql", database_url, "--table", "people",
                                 "--spec", str(write_spec(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rows"] == 200
    both = runner.invoke(app, ["dataset", "attach", "x", "--sql", database_url, "--parquet", "a.parquet",
                               "--spec", str(write_spec(tmp_path))])
    assert both.exit_code != 0 and "give either --parquet" in both.output


def test_a_catalog_table_is_never_attached(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    """Issue 27, finding 9: only a table or view the database lists as its own (SQLAlchemy's inspector, the URL role's
    schema) is attached, whatever the dialect: SQLite's ``sqlite_master`` and kin, PostgreSQL's ``pg_catalog`` and
    ``information_schema`` are ``missing_table``, through Python and the command line. A view (and on PostgreSQL a
    materialized view) is attached."""
    url = database_url
    if database_url.startswith("sqlite"):  # a database of its own, with every catalog table SQLite has
        url = f"sqlite:///{sqlite_with_every_catalog_table(tmp_path / 'foreign.db')}"
    for table, columns in CATALOGS["sqlite" if url.startswith("sqlite") else "postgresql"]:
        with pytest.raises(InvalidInput) as caught:
            attach_sql(engine, "catalog", url, table, write_spec(tmp_path, {"columns": columns}))
        assert caught.value.code == "missing_table", (table, caught.value.message)
        assert "never its catalog" in caught.value.message
    result = runner.invoke(app, ["dataset", "attach", "catalog", "--sql", url, "--table", "sqlite_master",
                                 "--spec", str(write_spec(tmp_path, {"columns": CATALOGS["sqlite"][0][1]})), "--json"])
    assert result.exit_code == 2 and json.loads(result.output)["error"] == "missing_table", result.output
    assert datasets.list_datasets(engine) == []
    _people(engine, _frame())
    with engine.begin() as connection:
        connection.execute(text("CREATE VIEW adults AS SELECT * FROM people WHERE age >= 18"))
    info = attach_sql(engine, "adults", database_url, "adults", write_spec(tmp_path))
    assert info.rows == int((_frame()["age"] >= 18).sum())
    if not database_url.startswith("sqlite"):  # PostgreSQL's materialized views are the database's own too
        with engine.begin() as connection:
            connection.execute(text("CREATE MATERIALIZED VIEW minors AS SELECT * FROM people WHERE age < 18"))
        assert attach_sql(engine, "minors", database_url, "minors", write_spec(tmp_path)).rows == len(_frame()) - \
            info.rows


def test_an_unreachable_database_is_refused_in_our_words(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """The driver's own message (``connection refused``, the host, the role) never reaches the caller."""
    url = "postgresql+psycopg://reader@127.0.0.1:9/warehouse"
    with pytest.raises(InvalidInput) as caught:
        attach_sql(engine, "people", url, "people", write_spec(tmp_path))
    assert caught.value.code == "unreachable_database"
    assert caught.value.message == ("--sql postgresql+psycopg://reader@127.0.0.1:9/warehouse --table people: the "
                                    "database cannot be reached or refused the connection (check the URL, that the "
                                    "server answers and that its role may read the table); nothing was stored")


def test_redact_hides_the_port_and_role_as_it_hides_host_and_password() -> None:
    """Issue 31, point 11: a source's errors showed its port and role to stewards. Hidden as whole words only: a
    role named ``postgres`` leaves the word PostgreSQL alone, a port leaves other numbers alone."""
    from service.data.attach.sources import Source
    from service.data.attach.through_source import HIDDEN, redact
    from service.errors import InvalidInput

    source = Source("wh", "sql", url="postgresql+psycopg://postgres:s3cret@db.internal:5999/sales")
    error = redact(InvalidInput("PostgreSQL at db.internal:5999 (port 5999) refused role postgres after 5999 rows; "
                                "postgres_ro is another role"), source)
    assert error.message == (f"PostgreSQL at {HIDDEN}:{HIDDEN} (port {HIDDEN}) refused role {HIDDEN} after 5999 rows; "
                             "postgres_ro is another role")
