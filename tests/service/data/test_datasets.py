"""Loading tables: coded and raw, SQL counting, and bad input that stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import inspect, select

from db import tables
from db.engine import transaction
from db.models import Dataset
from service.data import datasets
from service.data.oracle import TableCountOracle
from service.errors import Conflict, InvalidInput
from tests.support.paths import REPO


def _nothing_stored(engine) -> None:  # noqa: ANN001
    with transaction(engine) as session:
        assert session.execute(select(Dataset)).first() is None
    leftovers = [t for t in inspect(engine).get_table_names() if t.startswith("data_")]
    assert leftovers == []


def test_load_titanic_and_count_in_sql(engine, data_dir: Path) -> None:  # noqa: ANN001
    csv, domain = data_dir / "titanic/titanic.csv", data_dir / "titanic/titanic-domain.json"
    info = datasets.load_coded_csv(engine, "titanic", csv, domain, categorical=("Sex",))
    frame = pd.read_csv(csv)
    assert info.rows == len(frame)
    stored = datasets.get_dataset(engine, "titanic")
    assert stored.domain["Sex"].kind == "categorical"
    assert stored.domain["Fare"].kind == "ordinal"
    oracle = TableCountOracle(engine, stored)
    sizes = json.loads(domain.read_text())
    for attrs in [("Survived",), ("Pclass", "Sex"), ("Sex", "Pclass", "Survived")]:
        expected = np.zeros([sizes[a] for a in attrs], dtype=np.int64)
        np.add.at(expected, tuple(frame[a].to_numpy() for a in attrs), 1)
        np.testing.assert_array_equal(oracle.counts(attrs), expected)


def test_dataset_list_and_domain_roundtrip(engine, data_dir: Path) -> None:  # noqa: ANN001
    datasets.load_coded_csv(engine, "t", data_dir / "titanic/titanic.csv", data_dir / "titanic/titanic-domain.json")
    listed = datasets.list_datasets(engine)
    assert [d.name for d in listed] == ["t"]
    assert listed[0].domain.sizes() == json.loads((data_dir / "titanic/titanic-domain.json").read_text())


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def small_domain(tmp_path: Path) -> Path:
    return _write(tmp_path, "domain.json", json.dumps({"a": 3, "b": 2}))


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("a\n0\n1\n", "missing from the file: ['b']"),
        ("a,b,c\n0,1,1\n", "in the file but not in the domain: ['c']"),
        ("a,b\n0,1\n3,1\n2,0\n", "column 'a'"),
        ("a,b\n0,1\n1,x\n", "not an integer code"),
        ("a,b\n0,1\n1,0.5\n", "line 3"),
        ("a,b\n0,1\n-1,0\n", "a code in 0..2"),
        ("", "empty"),
        ("a,b\n", "no data rows"),
    ],
)
def test_bad_coded_csv_stores_nothing(engine, tmp_path: Path, small_domain: Path, content: str, fragment: str) -> None:  # noqa: ANN001
    csv = _write(tmp_path, "data.csv", content)
    with pytest.raises(InvalidInput) as info:
        datasets.load_coded_csv(engine, "bad", csv, small_domain)
    assert fragment in info.value.message
    _nothing_stored(engine)


def test_error_names_file_column_and_first_rows(engine, tmp_path: Path, small_domain: Path) -> None:  # noqa: ANN001
    rows = "\n".join(["0,1"] * 10 + ["7,1", "0,0", "9,1"])
    csv = _write(tmp_path, "data.csv", "a,b\n" + rows + "\n")
    with pytest.raises(InvalidInput) as info:
        datasets.load_coded_csv(engine, "bad", csv, small_domain)
    message = info.value.message
    assert str(csv) in message and "'a'" in message and "lines 12, 14" in message
    assert "'7'" not in message and "'9'" not in message  # the lines, never what they hold (docs/privacy.md 1.3)


def test_bad_row_in_a_late_chunk_stores_nothing(engine, tmp_path: Path, small_domain: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(datasets, "CHUNK_ROWS", 10)
    rows = ["0,1"] * 35 + ["5,0"]
    csv = _write(tmp_path, "data.csv", "a,b\n" + "\n".join(rows) + "\n")
    with pytest.raises(InvalidInput, match="line 37"):
        datasets.load_coded_csv(engine, "late", csv, small_domain)
    _nothing_stored(engine)


@pytest.mark.parametrize(
    ("domain_text", "fragment"),
    [("{not json", "not valid JSON"), ('{"a": 0, "b": 2}', "positive integer"), ("[1, 2]", "non-empty object")],
)
def test_malformed_domain(engine, tmp_path: Path, domain_text: str, fragment: str) -> None:  # noqa: ANN001
    csv = _write(tmp_path, "data.csv", "a,b\n0,1\n")
    domain = _write(tmp_path, "domain.json", domain_text)
    with pytest.raises(InvalidInput, match=fragment):
        datasets.load_coded_csv(engine, "bad", csv, domain)
    _nothing_stored(engine)


def test_duplicate_name_is_refused_and_first_load_kept(engine, tmp_path: Path, small_domain: Path) -> None:  # noqa: ANN001
    csv = _write(tmp_path, "data.csv", "a,b\n0,1\n2,0\n")
    datasets.load_coded_csv(engine, "once", csv, small_domain)
    with pytest.raises(Conflict, match="already exists"):
        datasets.load_coded_csv(engine, "once", csv, small_domain)
    assert [d.rows for d in datasets.list_datasets(engine)] == [2]


def test_unknown_categorical_column(engine, tmp_path: Path, small_domain: Path) -> None:  # noqa: ANN001
    csv = _write(tmp_path, "data.csv", "a,b\n0,1\n")
    with pytest.raises(InvalidInput, match="'zzz'"):
        datasets.load_coded_csv(engine, "x", csv, small_domain, categorical=("zzz",))


@pytest.mark.slow
def test_raw_adult_with_committed_spec(engine, data_dir: Path) -> None:  # noqa: ANN001
    raw = data_dir / "adult_uci_raw"
    info = datasets.load_raw_csv(engine, "adult-raw", [raw / "adult.data", raw / "adult.test"],
                                 REPO / "specs/adult-uci.yml")
    assert info.rows == 32561 + 16281
    stored = datasets.get_dataset(engine, "adult-raw")
    assert stored.domain["income"].size == 2 and stored.domain["income"].kind == "categorical"
    counts = TableCountOracle(engine, stored).counts(("income",))
    # adult.names: 23.93% of the 48,842 records have income >50K
    assert counts.sum() == 48842
    assert abs(counts[1] / counts.sum() - 0.2393) < 0.001


def test_raw_value_outside_spec_names_column_and_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    spec = _write(tmp_path, "spec.yml", "columns:\n  x: {kind: ordinal, edges: [0, 10, 20]}\n"
                                        "  y: {kind: categorical, values: [a, b]}\n")
    csv = _write(tmp_path, "raw.csv", "x,y\n5,a\n25,b\n")
    with pytest.raises(InvalidInput, match=r"column 'x'.*first on line 3$"):
        datasets.load_raw_csv(engine, "raw", [csv], spec)
    csv = _write(tmp_path, "raw2.csv", "x,y\n5,a\n20,c\n")
    with pytest.raises(InvalidInput, match=r"column 'y'.*first on line 3$"):
        datasets.load_raw_csv(engine, "raw", [csv], spec)
    _nothing_stored(engine)


def test_every_column_at_fault_is_named_with_its_lines_never_its_values(engine, tmp_path: Path,  # noqa: ANN001
                                                                       small_domain: Path) -> None:
    """Bad values in two columns: one error names both columns, each with its first lines and what the spec
    expects, so that one round of fixes is enough (issue 29: only the first column was reported); nothing stored."""
    spec = _write(tmp_path, "spec.yml", "columns:\n  x: {kind: ordinal, edges: [0, 10, 20]}\n"
                                        "  y: {kind: categorical, values: [a, b]}\n")
    csv = _write(tmp_path, "raw.csv", "x,y\n5,a\n77,b\n5,zz\n99,a\n")
    with pytest.raises(InvalidInput) as raw:
        datasets.load_raw_csv(engine, "raw", [csv], spec)
    assert raw.value.message.endswith("column 'x': a value cannot be coded (expected a number in [0, 20]), first on "
                                      "lines 3, 5; column 'y': a value cannot be coded (expected one of ['a', 'b']), "
                                      "first on line 4"), raw.value.message
    coded = _write(tmp_path, "coded.csv", "a,b\n0,1\n7,1\n1,x\n0,5\n")
    with pytest.raises(InvalidInput) as caught:
        datasets.load_coded_csv(engine, "coded", coded, small_domain)
    message = caught.value.message
    assert message.endswith("column 'a': a value is not a code in 0..2, first on line 3; column 'b': a value is not "
                            "an integer code, first on line 4; column 'b': a value is not a code in 0..1, first on "
                            "line 5. Nothing was stored."), message
    assert not any(value in message.split(":", 1)[1] for value in ("77", "99", "zz", "'x'", "7,"))
    _nothing_stored(engine)


@pytest.mark.parametrize(
    ("spec_text", "fragment"),
    [
        ("columns: [1, 2", "not valid"),
        ("columns:\n  x: {edges: [3, 1]}\n", "strictly increasing"),
        ("columns:\n  x: {kind: weird, values: [a]}\n", "kind must be"),
        ("format: {header: false}\ncolumns:\n  x: {values: [a]}\n", "format.names"),
    ],
)
def test_malformed_spec(engine, tmp_path: Path, spec_text: str, fragment: str) -> None:  # noqa: ANN001
    spec = _write(tmp_path, "spec.yml", spec_text)
    csv = _write(tmp_path, "raw.csv", "x\n1\n")
    with pytest.raises(InvalidInput, match=fragment):
        datasets.load_raw_csv(engine, "raw", [csv], spec)
    _nothing_stored(engine)


def test_sql_count_of_empty_cells_is_zero(engine, tmp_path: Path, small_domain: Path) -> None:  # noqa: ANN001
    csv = _write(tmp_path, "data.csv", "a,b\n0,1\n0,1\n")
    datasets.load_coded_csv(engine, "z", csv, small_domain, store="sql")
    stored = datasets.get_dataset(engine, "z")
    table = tables.data_table(stored.data_table, [3, 2])
    with engine.connect() as connection:
        counts = tables.count_marginal(connection, table, ["c0", "c1"], (3, 2))
    np.testing.assert_array_equal(counts, [[0, 2], [0, 0], [0, 0]])


@pytest.mark.parametrize("store", ["sql", "duckdb"])
def test_columns_in_another_order_than_the_domain_are_stored_by_name(engine, tmp_path: Path, small_domain: Path,
                                                                      store: str) -> None:  # noqa: ANN001
    """An all-integer chunk is checked in one comparison with the domain's sizes (issue 21, load speed): the file's
    columns are taken by name, in the domain's order, whatever their order in the file."""
    csv = _write(tmp_path, "data.csv", "b,a\n1,2\n0,2\n1,0\n")
    datasets.load_coded_csv(engine, "swapped", csv, small_domain, store=store)
    counts = TableCountOracle(engine, datasets.get_dataset(engine, "swapped")).counts(("a", "b"))
    np.testing.assert_array_equal(counts, [[0, 1], [0, 0], [1, 1]])
    bad = _write(tmp_path, "bad.csv", "b,a\n1,2\n2,0\n")  # b's 2 is outside its domain of 2 codes, a's is not
    with pytest.raises(InvalidInput, match=r"column 'b'.*first on line 3\. Nothing"):
        datasets.load_coded_csv(engine, "bad", bad, small_domain, store=store)
