"""Coefficient error bars of the regressions answered from a Gram or a model release (issue 29, section 3): AdaSSP's
closed form (the delta method over the Gram release's noise scales, checked against Monte Carlo and against redrawn
noise), through the service, the HTTP route and the client (ObjPert's and DP-IHT's: test_error_bars_objpert.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.stats import norm

from estimators.central.adassp import symmetric_noise_form_covariance
from estimators.central.linear import AdaSSPLinearRegression
from estimators.central.sufficient_stats import GramStatistics
from service.access import auth
from service.api import create_app
from service.client import Client
from service.mechanisms import gram
from service.regression import error_bars
from service.regression.fit import fit as fit_regression
from service.regression.uncertainty import CONFIDENCE_LEVEL
from service.releases import answers
from tests.support.datasets import titanic_with_budget

FEATURES = ["Pclass", "Sex", "SibSp", "Parch"]

pytestmark = pytest.mark.usefixtures("fresh_answer_caches")


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")


def _adassp(engine, epsilon: float = 1.0, seed: int | None = 3):  # noqa: ANN001, ANN202
    return fit_regression(engine, "titanic", "linear", "Fare", FEATURES, method="adassp", epsilon=epsilon,
                          delta=1e-5, seed=seed, allow_seeded=True, reuse=False)


def test_the_symmetric_noise_form_covariance_matches_monte_carlo() -> None:
    """``Cov(E[:-1, :] v)`` for a mirrored upper triangle of i.i.d. normals, against 200,000 draws."""
    rng = np.random.default_rng(0)
    q, sigma, draws = 4, 1.5, 200_000
    v = np.array([0.7, -1.2, 0.4, 1.0])
    rows, cols = np.triu_indices(q)
    E = np.zeros((draws, q, q))
    upper = rng.normal(scale=sigma, size=(draws, rows.size))
    E[:, rows, cols] = upper
    E[:, cols, rows] = upper
    u = E[:, :-1, :] @ v
    assert np.allclose(np.cov(u, rowvar=False), symmetric_noise_form_covariance(v, sigma), atol=0.03 * sigma ** 2)


def test_adassp_answers_closed_form_error_bars(engine, titanic) -> None:  # noqa: ANN001
    body = _adassp(engine).to_json()
    assert body["error_basis"] == error_bars.ADASSP_BASIS
    errors, intervals = body["standard_errors"], body["confidence_intervals"]
    assert set(errors) == set(body["coefficients"]) == set(intervals)
    z = norm.ppf(0.5 + CONFIDENCE_LEVEL / 2)
    noise, sampling = body["error_components"]["noise"], body["error_components"]["sampling"]
    for name, value in body["coefficients"].items():
        assert errors[name] > 0 and errors[name] == pytest.approx(np.hypot(noise[name], sampling[name]))
        assert intervals[name] == pytest.approx([value - z * errors[name], value + z * errors[name]])
    assert "coefficient_errors" not in body["details"]


def test_the_adassp_noise_error_matches_the_spread_over_redrawn_noise(engine, titanic) -> None:  # noqa: ANN001
    """The delta method's noise standard error is within 15 % of the spread of AdaSSP refitted on 2,000 redraws of the
    Gram release's noise (every upper-triangle entry at ``sigma_gram``, ``lambda_min`` at ``sigma_lambda``) around
    the released statistics, the ridge rule applied to each redraw. At epsilon 2 on titanic (891 rows) it is 3-7 %
    low; at epsilon 0.5, where the noise (sigma 43) is the size of X^T X's small eigenvalues, the first-order form is
    about 25 % low (docs/mechanisms.md, "Error bars on answers")."""
    outcome = _adassp(engine, epsilon=2.0)
    release = answers.get_release(engine, outcome.release_id)
    payload = release.decoded_payload()
    stats = gram.sub_statistics(payload, outcome.design)
    scales = gram.adassp_scales(release.details, stats.dimension, float(release.params["confidence_delta"]),
                                float(release.params["failure_prob"]))
    rng = np.random.default_rng(1)
    q = stats.zz.shape[0]
    rows, cols = np.triu_indices(q)
    thetas = []
    for _ in range(2000):
        noise = np.zeros((q, q))
        noise[rows, cols] = rng.normal(scale=scales.sigma_xtx, size=rows.size)
        noise[cols, rows] = noise[rows, cols]
        redrawn = GramStatistics.for_design(outcome.design, stats.zz + noise, stats.n)
        lam = payload.lambda_min_noisy + rng.normal(scale=scales.sigma_lambda_min)
        thetas.append(error_bars.theta_of(AdaSSPLinearRegression().fit(redrawn, lam, scales), outcome.design))
    empirical = np.std(np.stack(thetas), axis=0, ddof=1)
    closed = np.array(list(outcome.to_json()["error_components"]["noise"].values()))
    assert np.allclose(closed, empirical, rtol=0.15), (closed, empirical)


def test_the_fit_route_and_the_client_answer_adassp_error_bars(engine, titanic) -> None:  # noqa: ANN001
    release = _adassp(engine, seed=None).release_id  # the service answers unseeded releases only
    key = auth.create_key(engine, "analyst", "test analyst")[1]
    http = TestClient(create_app(engine), raise_server_exceptions=False)
    answer = http.post("/datasets/titanic/fit/linear", headers={"Authorization": f"Bearer {key}"},
                       json={"target": "Fare", "features": FEATURES, "method": "adassp", "release": release})
    assert answer.status_code == 200, answer.text
    assert answer.json()["error_basis"] == error_bars.ADASSP_BASIS
    fitted = Client("http://testserver", key, http=TestClient(create_app(engine))).fit_linear(
        "titanic", "Fare", FEATURES, method="adassp", release=release)
    assert fitted.error_basis_ == error_bars.ADASSP_BASIS
    assert fitted.standard_errors_ == pytest.approx(answer.json()["standard_errors"])
