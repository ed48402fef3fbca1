"""The engine contract (issue 28): the same properties, run over every registered data engine
(:data:`service.data.engines.registry.ENGINES`), on a table attached where it lives.

For each engine's variants (:data:`VARIANTS`: DuckDB on Parquet, SQL on SQLite and on PostgreSQL, Spark local mode):

* the counts (several marginals in one call, and the row count) equal numpy's ``bincount`` of the same rows coded by
  ``workloads.binning.apply_spec``;
* the distinct rows stream in ascending code order with their counts, as ``numpy.unique`` gives them;
* DP-IHT's clipped gradient sums equal the in-memory ones (``ArrayGradients``), linear and logistic, clipping
  active and inactive, without reading a row out of the engine;
* a value outside the spec is refused (``invalid_value``, naming its column) without the value in the message, and
  nothing is stored;
* with ``--privacy-unit`` each unit is one row (the row smallest in code order, docs/privacy.md 1.1): the row count
  is the number of units, and the counts, distinct rows and gradient sums are those of the one-row-per-unit table
  computed without SQL.

An engine registered without a variant here fails :func:`test_every_registered_engine_has_a_variant` and the
parametrized cases, naming the engine and what to add (docs/engines.md, "Adding an engine").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from service.data import datasets
from service.data.attach.tables import attach_parquet, attach_spark, attach_sql
from service.data.engines.base import DUCKDB, SPARK, SQL
from service.data.engines.registry import ENGINES
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from tests.support.binned import (
    RAW_SQL_TYPES,
    bincount,
    coded_frame,
    one_row_per_unit,
    sql_table,
    unit_frame,
    write_spec,
)
from tests.support.gradient_sums import assert_sums_as_numpy, designs

MARGINALS = [("age",), ("work", "age"), ("income", "work"), ("age", "work", "income")]
#: A number outside the spec's last edge (120), planted in one row: the refusal must name ``age``, never this.
OUTSIDE = 987654.25


@dataclass(frozen=True)
class Variant:
    """One way of holding the contract's table in an engine: ``put(service, database_url, folder, frame, name,
    unit)`` attaches ``frame`` (raw rows, with a ``person`` column) as dataset ``name``, one row per ``person`` when
    ``unit``; ``backends`` are the service databases it runs on; ``one_scan`` is the engine's
    ``gradient_sums_in_one_scan`` there."""

    name: str
    put: Callable[[Engine, str, Path, pd.DataFrame, str, bool], None]
    backends: tuple[str, ...] = ("sqlite",)
    one_scan: Callable[[Engine], bool] = lambda service: True  # noqa: ARG005
    slow: bool = False


def _parquet_file(folder: Path, frame: pd.DataFrame, name: str) -> Path:
    path = folder / f"{name}.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=64)
    return path


def _on_parquet(service: Engine, url: str, folder: Path, frame: pd.DataFrame, name: str, unit: bool) -> None:  # noqa: ARG001
    attach_parquet(service, name, [str(_parquet_file(folder, frame, name))], write_spec(folder),
                   privacy_unit="person" if unit else None)


def _on_sql(service: Engine, url: str, folder: Path, frame: pd.DataFrame, name: str, unit: bool) -> None:
    """A table of the test's own database (SQLite or PostgreSQL, as the service's), attached as another database."""
    sql_table(service, frame, name, {**RAW_SQL_TYPES, "person": "INTEGER"})
    attach_sql(service, name, url, name, write_spec(folder), privacy_unit="person" if unit else None)


def _on_spark(service: Engine, url: str, folder: Path, frame: pd.DataFrame, name: str, unit: bool) -> None:  # noqa: ARG001
    attach_spark(service, name, f"parquet.`{_parquet_file(folder, frame, name)}`", write_spec(folder),
                 privacy_unit="person" if unit else None)


#: registered engine -> its variants of the contract (an engine missing here fails every test of this module).
VARIANTS: dict[str, tuple[Variant, ...]] = {
    DUCKDB: (Variant("duckdb parquet", _on_parquet),),
    SQL: (Variant("sql attached", _on_sql, backends=("sqlite", "postgresql"),
                  one_scan=lambda service: service.dialect.name == "postgresql"),),
    SPARK: (Variant("spark local", _on_spark, slow=True),),
}


def _cases() -> list[object]:
    """One case per registered engine, variant and service backend; an engine without a variant is a case that
    fails, naming it."""
    cases = []
    for engine_name in ENGINES:
        for variant in VARIANTS.get(engine_name, (None,)):
            for backend in (variant.backends if variant else ("sqlite",)):
                marks = [pytest.mark.postgres] if backend == "postgresql" else []
                marks += [pytest.mark.slow] if variant is not None and variant.slow else []
                label = f"{engine_name}-{variant.name if variant else 'MISSING'}-{backend}".replace(" ", "_")
                cases.append(pytest.param((engine_name, variant, backend), id=label, marks=marks))
    return cases


def _missing(engine_name: str) -> str:
    return (f"engine {engine_name!r} is registered (service/data/engines/registry.py) but has no variant of the "
            "engine contract: add one to VARIANTS in tests/service/data/test_engine_contract.py (how a table is "
            "attached to it, with and without a privacy unit; docs/engines.md, 'Adding an engine')")


@pytest.fixture
def case(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Variant]:
    engine_name, variant, backend = request.param
    if variant is None:
        pytest.fail(_missing(engine_name))
    if engine_name == SPARK:  # local mode: the process's own session, whatever the environment says
        from service.data.engines.spark import SPARK_REMOTE_VARIABLE

        monkeypatch.delenv(SPARK_REMOTE_VARIABLE, raising=False)
    return engine_name, variant


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The service database of the case's backend (tests/conftest.py's ``database_url``, one backend per case)."""
    _, _, backend = request.node.callspec.params["case"]
    if backend == "sqlite":
        monkeypatch.delenv("MARGINALIA_DATA_DIR", raising=False)
        return f"sqlite:///{tmp_path / 'test.db'}"
    from tests.conftest import new_postgres_database

    monkeypatch.setenv("MARGINALIA_DATA_DIR", str(tmp_path / "tables"))
    return new_postgres_database(request.getfixturevalue("postgres_server"))


def _check(service: Engine, engine_name: str, variant: Variant, name: str, expected: pd.DataFrame) -> None:
    """Counts, distinct rows and gradient sums of dataset ``name`` equal those of the coded rows ``expected``."""
    stored = datasets.get_dataset(service, name)
    assert stored.engine == engine_name
    with TableCountOracle(service, stored) as oracle:
        assert oracle.table.name == engine_name
        assert oracle.table.gradient_sums_in_one_scan is variant.one_scan(service)
        assert oracle.table.row_count() == len(expected)
        many = oracle.counts_many(MARGINALS, max_cells=1)
        for attributes in MARGINALS:
            np.testing.assert_array_equal(many[attributes], bincount(expected, attributes))
        for design in designs(stored.domain, ["age", "work"], "income", {}, None):
            assert_sums_as_numpy(oracle, design, expected)
        rows, counts = oracle.distinct_rows(("work", "income"), chunk_rows=2)
    unique, unique_counts = np.unique(expected[["work", "income"]].to_numpy(), axis=0, return_counts=True)
    np.testing.assert_array_equal(rows, unique)  # ascending code order, streamed in chunks of 2
    np.testing.assert_array_equal(counts, unique_counts)


def test_every_registered_engine_has_a_variant() -> None:
    missing = [name for name in ENGINES if name not in VARIANTS]
    assert not missing, "\n".join(_missing(name) for name in missing)
    assert set(VARIANTS) <= set(ENGINES), f"variants of engines no longer registered: {set(VARIANTS) - set(ENGINES)}"


@pytest.mark.parametrize("case", _cases(), indirect=True)
def test_counts_distinct_rows_and_gradient_sums_equal_numpy(case: tuple[str, Variant], engine: Engine,
                                                            database_url: str, tmp_path: Path) -> None:
    engine_name, variant = case
    frame = unit_frame()
    variant.put(engine, database_url, tmp_path, frame, "rows", False)
    _check(engine, engine_name, variant, "rows", coded_frame(frame))


@pytest.mark.parametrize("case", _cases(), indirect=True)
def test_one_row_per_privacy_unit(case: tuple[str, Variant], engine: Engine, database_url: str,
                                  tmp_path: Path) -> None:
    engine_name, variant = case
    frame = unit_frame()
    kept = one_row_per_unit(coded_frame(frame).to_numpy(), list(coded_frame(frame).columns), frame["person"].to_numpy())
    assert len(kept) == frame["person"].nunique() < len(frame) / 3  # several rows per unit: bounding matters
    variant.put(engine, database_url, tmp_path, frame, "units", True)
    assert datasets.get_dataset(engine, "units").privacy_unit == "person"
    _check(engine, engine_name, variant, "units", kept)


@pytest.mark.parametrize("case", _cases(), indirect=True)
def test_a_value_outside_the_spec_is_refused_without_the_value(case: tuple[str, Variant], engine: Engine,
                                                                database_url: str, tmp_path: Path) -> None:
    _, variant = case
    frame = unit_frame()
    frame.loc[17, "age"] = OUTSIDE
    for unit in (False, True):
        with pytest.raises(InvalidInput) as caught:
            variant.put(engine, database_url, tmp_path, frame, f"outside{int(unit)}", unit)
        error = caught.value
        assert error.code == "invalid_value" and "column 'age'" in error.message, error.message
        assert "987654" not in error.message and "987,654" not in error.message
        assert datasets.list_datasets(engine) == []
