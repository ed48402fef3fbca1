"""Row-reading mechanisms (objective perturbation; DP-IHT on an engine that cannot sum its clipped gradients in one
scan, SQLite) read the table as distinct rows with counts, and refuse before any noise, refunded, when their memory
estimate from public quantities exceeds the budget (issue 22)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from service.accounting import accountant
from service.data import datasets
from service.data.oracle import TableCountOracle
from service.mechanisms import row_memory
from service.mechanisms.base import MechanismError
from service.mechanisms.objpert import ObjPertRelease
from service.privacy.noise import NoiseSource
from service.regression.design import build_design
from service.regression.fit import fit as fit_regression

CATEGORICAL = ("Sex", "Embarked", "Cabin", "Pclass", "Survived")
FEATURES = ["Pclass", "SibSp", "Embarked", "Fare"]
FITS = {
    "objpert": {"method": "objpert"},
    "dp-iht": {"method": "dp-iht", "options": {"sparsity": 2, "iterations": 5}},
}


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    folder = data_dir / "titanic"
    datasets.load_coded_csv(engine, "titanic", folder / "titanic.csv", folder / "titanic-domain.json", CATEGORICAL)
    accountant.set_budget(engine, "titanic", "10", "1e-3")
    return engine


def test_distinct_rows_are_the_groups_with_their_counts(titanic, data_dir: Path) -> None:  # noqa: ANN001
    oracle = TableCountOracle(titanic, datasets.get_dataset(titanic, "titanic"))
    codes, counts = oracle.distinct_rows(["Pclass", "Sex"], chunk_rows=2)
    frame = pd.read_csv(data_dir / "titanic" / "titanic.csv")
    expected = frame.groupby(["Pclass", "Sex"]).size()
    assert sorted(zip(map(tuple, codes.tolist()), counts.tolist(), strict=True)) == sorted(expected.items())
    assert oracle.rows_read == len(frame) and oracle.distinct_rows_read == len(expected)
    with pytest.raises(ValueError, match="max_rows=5"):
        oracle.distinct_rows(["Pclass", "Sex"], max_rows=5, chunk_rows=2)
    with pytest.raises(ValueError, match="unknown"):
        oracle.distinct_rows(["Pclass", "nope"])


def test_objpert_reads_the_distinct_rows_only(tmp_path: Path, data_dir: Path) -> None:
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    engine = make_engine(f"sqlite:///{tmp_path / 'rows.db'}")
    upgrade_to_head(engine)
    folder = data_dir / "titanic"
    datasets.load_coded_csv(engine, "titanic", folder / "titanic.csv", folder / "titanic-domain.json", CATEGORICAL)
    stored = datasets.get_dataset(engine, "titanic")
    design = build_design(stored.domain, "logistic", "Sex", FEATURES)
    oracle = TableCountOracle(engine, stored)
    ObjPertRelease(design, 1, "1e-5")(oracle, NoiseSource(1))
    frame = pd.read_csv(folder / "titanic.csv")
    assert oracle.rows_read == len(frame)
    assert oracle.distinct_rows_read == len(frame.drop_duplicates([*FEATURES, "Sex"])) < len(frame)


@pytest.mark.parametrize("method", sorted(FITS))
def test_a_release_over_its_memory_budget_is_refused_before_noise_and_refunded(titanic, monkeypatch, method,  # noqa: ANN001
                                                                               data_dir: Path) -> None:
    """The estimate uses only public quantities (domain sizes, the design, the cap); with a 1 MB budget it exceeds
    the budget, so the release stops before its first draw: ``failed_before_noise``, the charge refunded. DP-IHT
    reads distinct rows only on a SQLite table (elsewhere the engine sums: tests/service/data/test_gradient_sums.py)."""
    name = "titanic"
    if method == "dp-iht":
        if titanic.dialect.name != "sqlite":
            pytest.skip("DP-IHT reads no distinct rows on PostgreSQL: the engine sums its gradients in one scan")
        name = "titanic_sql"
        folder = data_dir / "titanic"
        datasets.load_coded_csv(titanic, name, folder / "titanic.csv", folder / "titanic-domain.json", CATEGORICAL,
                                store="sql")
        accountant.set_budget(titanic, name, "10", "1e-3")
    monkeypatch.setenv(row_memory.MEMORY_BUDGET_ENV, "1")
    with pytest.raises(MechanismError, match="refused before any noise.*memory estimate"):
        fit_regression(titanic, name, "logistic", "Sex", FEATURES, epsilon="1", delta="1e-5", **FITS[method])
    rows = accountant.ledger_rows(titanic, name)
    assert [r["entry"] for r in rows] == ["budget", "charge", "refund"]
    assert rows[-1]["release_status"] == "failed_before_noise"
    status = accountant.budget_status(titanic, name)
    assert status.epsilon_spent == 0 and status.rho_spent == 0


def test_more_distinct_rows_than_the_public_cap_is_refused_before_noise(titanic, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv(row_memory.MAX_DISTINCT_ROWS_ENV, "10")
    with pytest.raises(MechanismError, match="more than 10 distinct rows"):
        fit_regression(titanic, "titanic", "logistic", "Sex", FEATURES, epsilon="1", delta="1e-5", method="objpert")
    rows = accountant.ledger_rows(titanic, "titanic")
    assert [r["entry"] for r in rows] == ["budget", "charge", "refund"]
    assert rows[-1]["release_status"] == "failed_before_noise"


def test_the_estimate_is_public_and_grows_with_the_distinct_row_bound(titanic, monkeypatch) -> None:  # noqa: ANN001
    stored = datasets.get_dataset(titanic, "titanic")
    design = build_design(stored.domain, "logistic", "Sex", FEATURES)
    attributes = (*FEATURES, "Sex")
    assert row_memory.distinct_row_bound(stored.domain, attributes) == min(
        int(np.prod(stored.domain.shape(attributes))), row_memory.DEFAULT_MAX_DISTINCT_ROWS)
    small = row_memory.estimate_bytes(design, stored.domain, certified=True)
    assert row_memory.estimate_bytes(design, stored.domain, certified=False) < small
    monkeypatch.setenv(row_memory.MAX_DISTINCT_ROWS_ENV, "3")
    assert row_memory.estimate_bytes(design, stored.domain, certified=True) == (
        row_memory.BASE_BYTES + 3 * row_memory.bytes_per_distinct_row(design, certified=True))
    monkeypatch.setenv(row_memory.MEMORY_BUDGET_ENV, "zero")
    with pytest.raises(MechanismError, match=row_memory.MEMORY_BUDGET_ENV):
        row_memory.memory_budget_bytes()
