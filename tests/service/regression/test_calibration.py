"""Logistic DD-SSP's scores calibrated on rows of the release's model (service.regression.calibration, issue 30
point 4): labels that beat the majority where the surrogate's do not, the scores' order kept, nothing charged, the
same answer for every caller, and the fall-back when no positive slope fits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimators.central.metrics import auc
from service.accounting import accountant
from service.data import datasets
from service.regression import calibration
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine

pytestmark = pytest.mark.usefixtures("fresh_answer_caches")


@pytest.fixture
def rare(engine, tmp_path: Path):  # noqa: ANN001, ANN201
    """20,000 rows: ``x`` ordinal with 10 levels, ``y`` positive with probability 0.9 at x = 9 and 0.02 elsewhere
    (about 11 % positive), so a least-squares line of the labels stays below 0 everywhere."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 10, size=20_000)
    y = (rng.random(x.size) < np.where(x == 9, 0.9, 0.02)).astype(int)
    pd.DataFrame({"x": x, "y": y}).to_csv(tmp_path / "rare.csv", index=False)
    (tmp_path / "rare.json").write_text(json.dumps({"x": 10, "y": 2}))
    datasets.load_coded_csv(engine, "rare", tmp_path / "rare.csv", tmp_path / "rare.json", ("y",))
    accountant.set_budget(engine, "rare", "100", "1e-5")
    return x, y


def _fit(engine, release_id: int):  # noqa: ANN001, ANN202
    return fit_regression(engine, "rare", "logistic", "y", ["x"], method="dd-ssp", release_id=release_id,
                          allow_seeded=True, seed=3)


def test_calibrated_labels_beat_the_majority_the_surrogate_sits_on(engine, rare) -> None:  # noqa: ANN001
    x, y = rare
    release = release_engine.release_marginals(engine, "rare", "gaussian", [["x", "y"]], rho="2", seed=1).release_id
    spent = accountant.budget_status(engine, "rare")
    outcome = _fit(engine, release)
    found = outcome.details["calibration"]
    assert found["applied"] is True and found["slope"] > 0 and found["method"] == calibration.METHOD
    X, labels = outcome.design.encode(pd.DataFrame({"x": x, "y": y}))
    majority = max(np.mean(labels == 1), np.mean(labels == -1))
    model = outcome.model
    surrogate = type(model)()
    surrogate._store(model.surrogate_theta_, model.feature_names_, True)
    assert np.mean(surrogate.predict(X) == labels) == pytest.approx(majority)
    assert np.mean(model.predict(X) == labels) > majority + 0.05
    assert auc(labels, model.decision_function(X)) == pytest.approx(auc(labels, surrogate.decision_function(X)))
    assert accountant.budget_status(engine, "rare") == spent  # post-processing: nothing charged
    answers.clear_caches()
    assert _fit(engine, release).coefficients == outcome.coefficients  # one public stream: the same answer


def test_a_slope_that_is_not_positive_keeps_the_surrogate(engine, rare, monkeypatch) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "rare", "gaussian", [["x", "y"]], rho="2", seed=1).release_id
    monkeypatch.setattr(calibration, "platt_scaling", lambda scores, labels, intercept: (-0.5, 1.0))
    outcome = _fit(engine, release)
    assert outcome.details["calibration"]["applied"] is False
    assert "not positive" in outcome.details["calibration"]["reason"]
    assert not hasattr(outcome.model, "calibration_")
    assert "calibration" not in outcome.to_json()["error_basis"]
