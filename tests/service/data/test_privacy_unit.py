"""``dataset attach --privacy-unit COLUMN`` (issue 21; docs/privacy.md 1.1): a table with several rows per unit is
counted as one row per unit, the row smallest in the order of the coded columns. Counts (``GROUPING SETS``,
distinct rows, the row count) equal those of the one-row-per-unit table computed independently with pandas; the
chosen row does not depend on the rows' physical order; a unit that is not a column, or a NULL unit, is one clear
error and stores nothing; a release on a unit-bounded table is charged exactly what it costs on a row table.
Parquet (DuckDB) and an attached SQL table (SQLite, and PostgreSQL when it runs); Spark: test_spark_privacy_unit.py.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from service.accounting import accountant
from service.cli import app
from service.data import datasets
from service.data.attach.tables import attach_parquet, attach_sql
from service.data.engines.base import EngineError
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from service.releases import engine as release_engine
from tests.support.binned import RAW_SQL_TYPES, SPEC, bincount, one_row_per_unit, sql_table, unit_frame, write_spec
from workloads.binning import apply_spec, parse_spec

runner = CliRunner()
MARGINALS = [("age",), ("work", "age"), ("income", "work"), ("age", "work", "income")]


def bounded(frame: pd.DataFrame) -> pd.DataFrame:
    """The codes of the row each ``person`` keeps, computed without SQL (each row coded by ``apply_spec``)."""
    spec = parse_spec(SPEC)
    names = [c.name for c in spec.columns]
    return one_row_per_unit(apply_spec(spec, frame[names].astype(str)), names, frame["person"].to_numpy())


def _parquet(tmp_path: Path, frame: pd.DataFrame, name: str = "t.parquet") -> str:
    path = tmp_path / name
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return str(path)


def _sql_table(engine: Engine, frame: pd.DataFrame, table: str = "visits") -> None:
    sql_table(engine, frame, table, {**RAW_SQL_TYPES, "person": "INTEGER"})


def _check_counts(engine: Engine, name: str, expected: pd.DataFrame) -> None:
    stored = datasets.get_dataset(engine, name)
    with TableCountOracle(engine, stored) as oracle:
        assert oracle.table.row_count() == len(expected)
        many = oracle.counts_many(MARGINALS, max_cells=1)  # one GROUPING SETS scan on DuckDB and PostgreSQL
        for attributes in MARGINALS:
            np.testing.assert_array_equal(many[attributes], bincount(expected, attributes))
        codes, counts = oracle.distinct_rows(("work", "income"), chunk_rows=2)
    unique, unique_counts = np.unique(expected[["work", "income"]].to_numpy(), axis=0, return_counts=True)
    np.testing.assert_array_equal(codes, unique)
    np.testing.assert_array_equal(counts, unique_counts)


def test_parquet_counts_are_those_of_one_row_per_unit(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    expected = bounded(frame)
    assert len(expected) < len(frame) / 3  # several rows per unit, so bounding changes the counts
    info = attach_parquet(engine, "visits", [_parquet(tmp_path, frame)], write_spec(tmp_path), privacy_unit="person")
    assert (info.rows, info.engine) == (frame["person"].nunique(), "duckdb")
    assert datasets.get_dataset(engine, "visits").location.privacy_unit == "person"
    _check_counts(engine, "visits", expected)


def test_the_kept_row_does_not_depend_on_the_physical_order(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    shuffled = frame.sample(frac=1.0, random_state=11).reset_index(drop=True)
    attach_parquet(engine, "first", [_parquet(tmp_path, frame, "a.parquet")], write_spec(tmp_path),
                   privacy_unit="person")
    halves = [_parquet(tmp_path, shuffled.iloc[:150], "b-2.parquet"), _parquet(tmp_path, shuffled.iloc[150:],
                                                                                "b-1.parquet")]
    attach_parquet(engine, "second", halves, write_spec(tmp_path), privacy_unit="person")
    expected = bounded(frame)
    for name in ("first", "second"):
        _check_counts(engine, name, expected)


def test_a_unit_column_name_is_quoted(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    odd = 'the "unit", id\''
    info = attach_parquet(engine, "odd", [_parquet(tmp_path, frame.rename(columns={"person": odd}))],
                          write_spec(tmp_path), privacy_unit=odd)
    assert info.rows == frame["person"].nunique()
    _check_counts(engine, "odd", bounded(frame))


def test_an_attached_sql_table_counts_one_row_per_unit(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    _sql_table(engine, frame.sample(frac=1.0, random_state=4))  # stored in another order than the frame
    info = attach_sql(engine, "visits", database_url, "visits", write_spec(tmp_path), privacy_unit="person")
    assert (info.rows, info.engine) == (frame["person"].nunique(), "sql")
    _check_counts(engine, "visits", bounded(frame))


def test_a_value_outside_the_spec_in_a_row_not_kept_is_still_refused(engine, database_url: str,  # noqa: ANN001
                                                                     tmp_path: Path) -> None:
    frame = unit_frame()
    frame.loc[0, ["age", "work", "income"]] = [1.0, "Private", "<=50K"]  # codes (0, 0, 0): the row its unit keeps
    twin = frame.loc[[0]].assign(age=100.0, income="unknown")  # same unit, not the row kept, yet refused
    frame = pd.concat([frame, twin], ignore_index=True)
    with pytest.raises(InvalidInput, match="column 'income'"):
        attach_parquet(engine, "p", [_parquet(tmp_path, frame)], write_spec(tmp_path), privacy_unit="person")
    _sql_table(engine, frame)
    with pytest.raises(InvalidInput, match=r"column 'income' holds a value"):
        attach_sql(engine, "s", database_url, "visits", write_spec(tmp_path), privacy_unit="person")
    assert datasets.list_datasets(engine) == []


def test_a_unit_that_is_not_a_column_is_one_error_listing_the_columns(engine, database_url: str,  # noqa: ANN001
                                                                       tmp_path: Path) -> None:
    frame = unit_frame()
    spec = write_spec(tmp_path)
    _sql_table(engine, frame)
    attempts = [lambda: attach_parquet(engine, "p", [_parquet(tmp_path, frame)], spec, privacy_unit="patient"),
                lambda: attach_sql(engine, "s", database_url, "visits", spec, privacy_unit="patient")]
    for attempt in attempts:
        with pytest.raises(InvalidInput) as caught:
            attempt()
        message = caught.value.message
        assert "the privacy unit 'patient' is not a column of the table" in message, message
        assert "['age', 'work', 'income', 'other', 'person']" in message and caught.value.code == "column_mismatch"
        assert "nothing was stored" in message
    assert datasets.list_datasets(engine) == []


def test_a_null_unit_is_refused_naming_the_column(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame().astype({"person": "Int64"})
    frame.loc[41, "person"] = pd.NA
    spec = write_spec(tmp_path)
    with pytest.raises(InvalidInput) as parquet:
        attach_parquet(engine, "p", [_parquet(tmp_path, frame)], spec, privacy_unit="person")
    _sql_table(engine, frame.astype(object).where(frame.notna(), None))
    with pytest.raises(InvalidInput) as sql:
        attach_sql(engine, "s", database_url, "visits", spec, privacy_unit="person")
    for caught in (parquet, sql):
        assert "column 'person' (the privacy unit) is NULL in some row" in caught.value.message
        assert caught.value.code == "invalid_value" and "Nothing was stored" in caught.value.message
    assert datasets.list_datasets(engine) == []


def test_a_null_unit_appearing_later_stops_the_count(engine, database_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    path = _parquet(tmp_path, frame)
    attach_parquet(engine, "p", [path], write_spec(tmp_path), privacy_unit="person")
    _sql_table(engine, frame)
    attach_sql(engine, "s", database_url, "visits", write_spec(tmp_path), privacy_unit="person")
    changed = frame.astype({"person": "Int64"})
    changed.loc[7, "person"] = pd.NA
    _parquet(tmp_path, changed)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO visits VALUES (30, 'Private', '<=50K', 0, NULL)"))
    for name in ("p", "s"):
        with pytest.raises(EngineError, match=r"column 'person' \(the privacy unit\) is NULL in some row"):
            TableCountOracle(engine, datasets.get_dataset(engine, name)).counts(("age", "work"))


def test_attach_with_a_unit_through_the_command_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    frame = unit_frame()
    path, spec = _parquet(tmp_path, frame), str(write_spec(tmp_path))
    result = runner.invoke(app, ["dataset", "attach", "visits", "--parquet", path, "--spec", spec,
                                 "--privacy-unit", "person"])
    assert result.exit_code == 0, result.output
    assert f"{frame['person'].nunique()} units of 'person'" in result.output
    shown = runner.invoke(app, ["dataset", "show", "visits", "--json"])
    shown_json = json.loads(shown.output)  # the unit is public: it says what every count is about
    assert shown_json["rows"] == frame["person"].nunique() and shown_json["privacy_unit"] == "person"
    human = runner.invoke(app, ["dataset", "show", "visits"])
    assert f"{frame['person'].nunique():,} units of 'person'" in human.output
    other = _parquet(tmp_path, frame, "other.parquet")  # t.parquet is attached: one location is one dataset
    wrong = runner.invoke(app, ["dataset", "attach", "x", "--parquet", other, "--spec", spec, "--privacy-unit", "id"])
    assert wrong.exit_code != 0 and "the privacy unit 'id' is not a column" in " ".join(wrong.output.split())
    assert [d.name for d in datasets.list_datasets(engine)] == ["visits"]


def test_a_release_on_a_unit_bounded_table_costs_what_it_costs_on_rows(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """docs/privacy.md 1.1: the selection is 1-stable, so every mechanism is charged its row-level cost."""
    path = _parquet(tmp_path, unit_frame())
    attach_parquet(engine, "units", [path], write_spec(tmp_path), privacy_unit="person")
    copy = _parquet(tmp_path, unit_frame(), "copy.parquet")  # one location is one dataset: the rows read a copy
    attach_parquet(engine, "rows", [copy], write_spec(tmp_path))
    spent = {}
    for name in ("units", "rows"):
        accountant.set_budget(engine, name, "10", "1e-3")
        laplace = release_engine.release_marginals(engine, name, "laplace", "all-2way", epsilon="1")
        gaussian = release_engine.release_marginals(engine, name, "gaussian", "all-2way", rho="0.1")
        status = accountant.budget_status(engine, name)
        spent[name] = (laplace.cost, gaussian.cost, status.epsilon_pure_spent, status.rho_spent, status.delta_spent)
    assert spent["units"] == spent["rows"]
    assert spent["units"][2:] == (Fraction(1), Fraction(1, 10), Fraction(0))


@pytest.mark.parametrize("unit", ["age", "work"])
def test_a_privacy_unit_that_is_a_column_of_the_spec_is_refused(engine, database_url: str, tmp_path: Path,  # noqa: ANN001
                                                                unit: str) -> None:
    """Issue 27, finding 7: the unit is never coded nor released, so a column the spec codes cannot be the unit; the
    refusal names the column, on every attach path (Parquet, SQL, Spark, the command line), before anything is
    read (Spark's session is not even started)."""
    from service.data.attach.tables import attach_spark

    frame = unit_frame()
    path, spec = _parquet(tmp_path, frame), write_spec(tmp_path)
    _sql_table(engine, frame)
    attempts = [lambda: attach_parquet(engine, "p", [path], spec, privacy_unit=unit),
                lambda: attach_sql(engine, "s", database_url, "visits", spec, privacy_unit=unit),
                lambda: attach_spark(engine, "k", f"parquet.`{path}`", spec, privacy_unit=unit)]
    for attempt in attempts:
        with pytest.raises(InvalidInput) as caught:
            attempt()
        assert caught.value.code == "invalid_parameter"
        assert caught.value.message.startswith(f"--privacy-unit {unit!r} is a column of the spec: a privacy unit is "
                                               "never coded nor released")
    result = runner.invoke(app, ["dataset", "attach", "c", "--parquet", path, "--spec", str(spec),
                                 "--privacy-unit", unit, "--json"])
    assert result.exit_code == 2 and json.loads(result.output)["error"] == "invalid_parameter", result.output
    assert datasets.list_datasets(engine) == []
