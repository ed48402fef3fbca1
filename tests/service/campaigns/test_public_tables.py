"""Public tables: numeric and coded columns, paging, and every bad input refused with nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.campaigns import public_tables
from service.errors import Conflict, InvalidInput, NotFound


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_numeric_columns_are_taken_as_they_are_and_paged(engine, tmp_path: Path) -> None:  # noqa: ANN001
    lines = "\n".join(f"{i},{i / 4},{-i * 1e6}" for i in range(30))
    info = public_tables.load_public_csv(engine, "p", _csv(tmp_path, "x,y,z\n" + lines + "\n"))
    assert info.rows == 30 and info.column_names == ["x", "y", "z"]
    assert [c.kind for c in info.columns] == ["numeric"] * 3
    assert [t.name for t in public_tables.list_public_tables(engine)] == ["p"]
    shown, rows = public_tables.public_rows(engine, "p", offset=28, limit=5)
    assert shown.name == "p" and rows.tolist() == [[28.0, 7.0, -28e6], [29.0, 7.25, -29e6]]
    page = public_tables.rows_json(shown, rows, 28)
    assert page["total"] == 30 and page["complete"] and page["columns"] == ["x", "y", "z"]
    assert public_tables.public_matrix(engine, info, ["z", "x"])[:2].tolist() == [[0.0, 0.0], [-1e6, 1.0]]


def test_coded_columns_with_a_domain_or_bins(engine, tmp_path: Path) -> None:  # noqa: ANN001
    domain = _csv(tmp_path, json.dumps({"sex": 2}), "domain.json")
    bins = _csv(tmp_path, "columns:\n  age: {kind: ordinal, edges: [0, 30, 60, 120]}\n", "bins.yaml")
    path = _csv(tmp_path, "age,sex,income\n25,0,1.5\n61,1,2.5\n30,1,0\n")
    info = public_tables.load_public_csv(engine, "coded", path, domain_path=domain, bins_path=bins)
    kinds = {c.name: (c.kind, c.size) for c in info.columns}
    assert kinds == {"age": ("coded", 3), "sex": ("coded", 2), "income": ("numeric", None)}
    _, rows = public_tables.public_rows(engine, "coded")
    assert rows.tolist() == [[0, 0, 1.5], [2, 1, 2.5], [1, 1, 0.0]]
    assert public_tables.rows_json(info, rows, 0)["rows"][1] == [2, 1, 2.5]


@pytest.mark.parametrize("text, options, fragment", [
    ("x,y\n1,2\n3,abc\n", {}, r"line 3: column 'y' holds 'abc', not a finite number"),
    ("x,y\n1,2\n3,\n", {}, r"line 3: column 'y' holds '', not a finite number"),
    ("x,y\n1,inf\n", {}, "line 2: column 'y'"),
    ("x,x\n1,2\n", {}, r"names column\(s\) \['x'\] more than once"),
    ("x\n", {}, "at least one row"),
    ("x,s\n1,2\n", {"domain": {"s": 2}}, "line 2: column 's' holds '2', not a code 0..1"),
    ("x,s\n1,0.5\n", {"domain": {"s": 2}}, "line 2: column 's' holds '0.5'"),
    ("x\n1\n", {"domain": {"s": 2}}, "names column 's', which"),
    ("x\n1\n", {"domain": {"x": 0}}, "positive integer size"),
])
def test_bad_tables_are_refused_naming_column_and_line(engine, tmp_path: Path, text: str, options: dict,  # noqa: ANN001
                                                      fragment: str) -> None:
    domain = _csv(tmp_path, json.dumps(options["domain"]), "d.json") if "domain" in options else None
    with pytest.raises(InvalidInput, match=fragment):
        public_tables.load_public_csv(engine, "bad", _csv(tmp_path, text), domain_path=domain)
    assert public_tables.list_public_tables(engine) == []


def test_names_pages_and_unknown_tables(engine, tmp_path: Path) -> None:  # noqa: ANN001
    path = _csv(tmp_path, "x\n1\n")
    public_tables.load_public_csv(engine, "p", path)
    with pytest.raises(Conflict, match="exists already"):
        public_tables.load_public_csv(engine, "p", path)
    with pytest.raises(InvalidInput, match="public table name must be"):
        public_tables.load_public_csv(engine, " p", path)
    with pytest.raises(NotFound, match="no public table named 'q'"):
        public_tables.get_public_table(engine, "q")
    with pytest.raises(InvalidInput, match="limit must be at most"):
        public_tables.public_rows(engine, "p", limit=public_tables.MAX_PAGE_ROWS + 1)
    with pytest.raises(InvalidInput, match="offset must be a non-negative integer"):
        public_tables.public_rows(engine, "p", offset=-1)
    with pytest.raises(InvalidInput, match="has no column 'y'"):
        public_tables.public_matrix(engine, public_tables.get_public_table(engine, "p"), ["x", "y"])
    assert np.array_equal(public_tables.public_rows(engine, "p")[1], [[1.0]])
