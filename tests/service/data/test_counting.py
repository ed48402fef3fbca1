"""Counting marginals in SQL (db.tables.count_marginal(s)) on SQLite and PostgreSQL, and through the count oracle
(service.data.oracle.TableCountOracle.counts_many) on every data engine (a SQL table, a DuckDB Parquet table):
every count must equal a numpy bincount of the same rows."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from db import tables
from service.data import datasets
from service.data.oracle import TableCountOracle, marginalize, plan_cover
from workloads.domain import Domain, DomainError

SIZES = {"a": 3, "b": 5, "c": 7, "d": 2, "e": 11}
ROWS = 1500


def _codes(seed: int = 7, rows: int = ROWS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # skewed columns, so that some cells are empty and counts differ from cell to cell
    return np.stack([np.minimum(rng.geometric(0.35, rows) - 1, k - 1) for k in SIZES.values()], axis=1)


def _bincount(codes: np.ndarray, attributes: Sequence[str]) -> np.ndarray:
    names = list(SIZES)
    shape = tuple(SIZES[a] for a in attributes)
    if not attributes:
        return np.array(len(codes), dtype=np.int64)
    index = np.ravel_multi_index([codes[:, names.index(a)] for a in attributes], shape)
    return np.bincount(index, minlength=math.prod(shape)).reshape(shape)


STORES = ["sql", "duckdb"]


def _load(engine: Engine, tmp_path: Path, codes: np.ndarray, name: str = "toy",
          store: str = "sql") -> datasets.StoredDataset:
    csv = tmp_path / "rows.csv"
    lines = [",".join(SIZES)] + [",".join(map(str, row)) for row in codes.tolist()]
    csv.write_text("\n".join(lines) + "\n")
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps(SIZES))
    datasets.load_coded_csv(engine, name, csv, domain, store=store)
    stored = datasets.get_dataset(engine, name)
    assert stored.engine == store
    return stored


def _table(stored: datasets.StoredDataset):  # noqa: ANN202
    return tables.data_table(stored.data_table, list(SIZES.values()))


def _spec(stored: datasets.StoredDataset, attributes: Sequence[str]) -> tuple[list[str], tuple[int, ...]]:
    return [stored.sql_columns[a] for a in attributes], tuple(SIZES[a] for a in attributes)


MARGINALS = [("a",), ("b", "a"), ("a", "c", "e"), ("e", "d"), (), ("c", "b", "e", "a"), ("b", "a")]


def test_count_marginal_equals_bincount(engine, tmp_path: Path) -> None:  # noqa: ANN001
    codes = _codes()
    stored = _load(engine, tmp_path, codes)
    with engine.connect() as connection:
        for attributes in MARGINALS:
            counts = tables.count_marginal(connection, _table(stored), *_spec(stored, attributes))
            assert counts.dtype == np.int64
            np.testing.assert_array_equal(counts, _bincount(codes, attributes))


@pytest.mark.parametrize("one_scan", [None, False])
def test_count_marginals_equals_bincount(engine, tmp_path: Path, one_scan: bool | None) -> None:  # noqa: ANN001
    codes = _codes(seed=11)
    stored = _load(engine, tmp_path, codes)
    with engine.connect() as connection:
        counted = tables.count_marginals(
            connection, _table(stored), [_spec(stored, m) for m in MARGINALS], one_scan=one_scan
        )
    assert len(counted) == len(MARGINALS)
    for attributes, counts in zip(MARGINALS, counted, strict=True):
        np.testing.assert_array_equal(counts, _bincount(codes, attributes))


def test_one_scan_only_on_postgresql(engine, tmp_path: Path) -> None:  # noqa: ANN001
    stored = _load(engine, tmp_path, _codes())
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            counted = tables.count_marginals(connection, _table(stored), [_spec(stored, ("a",))], one_scan=True)
            np.testing.assert_array_equal(counted[0], _bincount(_codes(), ("a",)))
        else:
            with pytest.raises(ValueError, match="GROUPING SETS"):
                tables.count_marginals(connection, _table(stored), [_spec(stored, ("a",))], one_scan=True)


def test_counts_of_an_empty_table_are_zero(engine) -> None:  # noqa: ANN001
    with engine.begin() as connection:
        table = tables.create_data_table(connection, "data_empty", [3, 4])
    with engine.connect() as connection:
        for one_scan in (False, None):
            counted = tables.count_marginals(
                connection, table, [(["c0", "c1"], (3, 4)), ([], ()), (["c1"], (4,))], one_scan=one_scan
            )
            assert [c.shape for c in counted] == [(3, 4), (), (4,)]
            assert all(int(c.sum()) == 0 for c in counted)


def test_cell_index_matches_ravel_multi_index_beyond_32_bits(engine) -> None:  # noqa: ANN001
    # 40000 x 60000 x 3 cells: the index passes 2^31, which PostgreSQL's 32-bit INTEGER arithmetic would overflow.
    shape = (40_000, 60_000, 3)
    rows = np.array([[0, 0, 0], [1, 2, 1], [39_999, 59_999, 2], [20_000, 7, 0]])
    with engine.begin() as connection:
        table = tables.create_data_table(connection, "data_wide", list(shape))
        tables.insert_rows(connection, table, rows)
    expression = tables.cell_index_sql(["c0", "c1", "c2"], shape)
    with engine.connect() as connection:
        got = [r[0] for r in connection.exec_driver_sql(f"SELECT {expression} FROM data_wide ORDER BY c0, c1").all()]
    order = np.lexsort((rows[:, 1], rows[:, 0]))
    assert got == np.ravel_multi_index(rows[order].T, shape).tolist()
    assert max(got) > tables.INT32_MAX


@pytest.mark.parametrize(
    ("columns", "shape", "fragment"),
    [(["c0", "zz"], (3, 4), "not columns"), (["c0", "c0"], (3, 3), "repeat"), (["c0"], (3, 4), "one size"),
     (["c0"], (0,), "positive integer")],
)
def test_bad_marginal_is_a_value_error(engine, columns: list[str], shape: tuple[int, ...], fragment: str) -> None:  # noqa: ANN001
    table = tables.data_table("data_x", [3, 4])
    with engine.connect() as connection, pytest.raises(ValueError, match=fragment):
        tables.count_marginal(connection, table, columns, shape)


@pytest.mark.parametrize("store", STORES)
def test_oracle_counts_many_equals_bincount(engine, tmp_path: Path, store: str) -> None:  # noqa: ANN001
    codes = _codes(seed=3)
    stored = _load(engine, tmp_path, codes, store=store)
    oracle = TableCountOracle(engine, stored)
    names = list(SIZES)
    requests = [*itertools.combinations(names, 2), ("e", "a", "c"), ("d",), ("b", "a")]
    answers = oracle.counts_many(requests, max_cells=200)
    assert set(answers) == set(requests)
    for attributes in requests:
        np.testing.assert_array_equal(answers[attributes], _bincount(codes, attributes))
    assert oracle.queries == len(plan_cover(requests, stored.domain, 200)) < len(requests)
    # sub-marginals of counted groups come from the cache, summed, without SQL
    np.testing.assert_array_equal(oracle.counts(("c", "a")), _bincount(codes, ("c", "a")))
    answers["d"] = np.zeros(1)  # callers get copies; the cache is untouched
    np.testing.assert_array_equal(oracle.counts(("d",)), _bincount(codes, ("d",)))
    assert oracle.queries == len(plan_cover(requests, stored.domain, 200))


@pytest.mark.parametrize("store", STORES)
def test_oracle_counts_one_at_a_time(engine, tmp_path: Path, store: str) -> None:  # noqa: ANN001
    codes = _codes(seed=5)
    oracle = TableCountOracle(engine, _load(engine, tmp_path, codes, store=store))
    for attributes in MARGINALS:
        np.testing.assert_array_equal(oracle.counts(attributes), _bincount(codes, attributes))
    # a, ba, ace, ed and cbea are counted; () is summed from a counted one, the second ba is cached
    assert oracle.queries == 5
    with pytest.raises(DomainError, match="unknown attribute"):
        oracle.counts(("a", "nope"))
    with pytest.raises(ValueError, match="repeat"):
        oracle.counts_many([("a", "a")])


# planning (no database) --------------------------------------------------------------------------
def _domain() -> Domain:
    return Domain.from_json(json.dumps(SIZES))


@pytest.mark.parametrize("max_cells", [1, 30, 200, 10_000])
def test_plan_cover_covers_every_request_within_the_cap(max_cells: int) -> None:
    domain = _domain()
    requests = [*itertools.combinations(SIZES, 2), *itertools.combinations(SIZES, 3), ("e",)]
    groups = plan_cover(requests, domain, max_cells)
    assert all(any(set(r) <= set(g) for g in groups) for r in requests)
    requested = {frozenset(r) for r in requests}
    assert all(domain.cells(g) <= max_cells or frozenset(g) in requested for g in groups)
    assert all(list(g) == [a for a in SIZES if a in g] for g in groups)  # domain order
    if max_cells == 1:
        assert {frozenset(g) for g in groups} == {r for r in requested if not any(r < s for s in requested)}
    if max_cells == 10_000:  # 3*5*7*2*11 = 2310 cells: one group counts everything
        assert groups == [tuple(SIZES)]


def test_plan_cover_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="max_cells"):
        plan_cover([("a",)], _domain(), 0)
    with pytest.raises(DomainError, match="unknown attribute"):
        plan_cover([("a", "zz")], _domain())
    with pytest.raises(ValueError, match="string"):
        plan_cover(["ab"], _domain())


def test_marginalize_equals_direct_count() -> None:
    codes = _codes(seed=9)
    group = ("a", "b", "c", "e")
    full = _bincount(codes, group)
    for attributes in [("e", "a"), ("b",), ("c", "b", "a"), (), group]:
        np.testing.assert_array_equal(marginalize(full, group, attributes), _bincount(codes, attributes))
    with pytest.raises(ValueError, match="not in the counted group"):
        marginalize(full, group, ("d",))


@pytest.mark.parametrize("store", STORES)
def test_oracle_counts_in_batches_of_bounded_cells(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                   store: str) -> None:
    from service.data import oracle as oracle_module

    codes = _codes(seed=13)
    stored = _load(engine, tmp_path, codes, store=store)
    monkeypatch.setattr(oracle_module, "BATCH_CELLS", 120)  # every batch holds one or two groups of <= 110 cells
    oracle = TableCountOracle(engine, stored)
    requests = list(itertools.combinations(SIZES, 2))
    groups = plan_cover(requests, stored.domain, 110)
    assert len(oracle_module._batches(groups, stored.domain)) > 1
    answers = oracle.counts_many(requests, max_cells=110)
    for attributes in requests:
        np.testing.assert_array_equal(answers[attributes], _bincount(codes, attributes))
    assert oracle.queries == len(groups)
