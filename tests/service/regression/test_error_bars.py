"""Coefficient standard errors and 95 % intervals of the regressions answered from marginal releases (issue 29):
DD-SSP (closed form from a residual release's noise scales; the parametric bootstrap of an MST or AIM release) and
AIM-Synth (the bootstrap), through the service, the HTTP route (the roles that may fit, and those refused), the CLI
and the client; and a statistical check of the closed form against redrawn noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.stats import norm
from typer.testing import CliRunner

from estimators.central.linear import DDSSPLinearRegression
from estimators.central.sufficient_stats import gram_from_marginals
from estimators.residual.basis import project
from estimators.residual.reconstruct import NoisyResiduals
from service.access import auth
from service.api import create_app
from service.cli import app
from service.client import Client
from service.regression import answering, error_bars
from service.regression.fit import fit as fit_regression
from service.regression.uncertainty import CONFIDENCE_LEVEL, CoefficientErrors, take_errors
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget

LINEAR = ("linear", "Fare", ["Pclass", "Sex", "Age"])
LOGISTIC = ("logistic", "Sex", ["Pclass", "Fare", "Survived"])
PAIRS = [["Fare", "Pclass"], ["Fare", "Sex"], ["Fare", "Age"], ["Pclass", "Sex"], ["Pclass", "Age"], ["Sex", "Age"],
         ["Sex", "Survived"], ["Pclass", "Survived"], ["Fare", "Survived"]]


pytestmark = pytest.mark.usefixtures("fresh_answer_caches")


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")

def _fit(engine, release_id: int, question, method: str = "dd-ssp"):  # noqa: ANN001, ANN202
    task, target, features = question
    return fit_regression(engine, "titanic", task, target, features, method=method, release_id=release_id,
                          allow_seeded=True, seed=7)


def _check_shape(body: dict[str, object]) -> None:
    errors, intervals = body["standard_errors"], body["confidence_intervals"]
    assert set(errors) == set(body["coefficients"]) == set(intervals)
    z = norm.ppf(0.5 + CONFIDENCE_LEVEL / 2)
    for name, value in body["coefficients"].items():
        assert errors[name] > 0
        assert intervals[name] == pytest.approx([value - z * errors[name], value + z * errors[name]])
    noise, sampling = body["error_components"]["noise"], body["error_components"]["sampling"]
    for name, se in errors.items():
        assert se == pytest.approx(np.hypot(noise[name], sampling[name]))
    assert body["confidence_level"] == CONFIDENCE_LEVEL


@pytest.mark.parametrize("question", [LINEAR, LOGISTIC], ids=["linear", "logistic"])
def test_dd_ssp_from_a_residual_release_has_closed_form_error_bars(engine, titanic, question) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", PAIRS, rho="0.5", seed=1).release_id
    body = _fit(engine, release, question).to_json()
    calibrated = question[0] == "logistic"  # service.regression.calibration: the errors times its slope
    assert body["error_basis"] == error_bars.CLOSED_FORM_BASIS + (
        ", times the calibration's slope (held fixed)" if calibrated else "")
    assert body["details"].get("calibration", {}).get("applied", False) is calibrated
    _check_shape(body)


@pytest.mark.parametrize("method", ["dd-ssp", "aim-synth"])
def test_a_fit_from_an_aim_release_has_bootstrap_error_bars(engine, titanic, small_bootstrap, method: str) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "aim", PAIRS[:1] + PAIRS[3:4] + PAIRS[1:2], rho="0.5",
                                               seed=1).release_id
    body = _fit(engine, release, ("linear", "Fare", ["Pclass", "Sex"]), method).to_json()
    assert body["error_basis"].startswith("parametric bootstrap, 4 replicates")
    assert set(body["standard_errors"]) == set(body["coefficients"])
    assert all(se >= 0 for se in body["standard_errors"].values())
    assert any(se > 0 for se in body["error_components"]["noise"].values())
    assert "coefficient_errors" not in body["details"]  # handed over, never shown as a detail


def test_an_answer_without_error_bars_says_so() -> None:
    details, errors = take_errors({"ridge": 1.0})
    assert details == {"ridge": 1.0} and errors.standard_errors is None
    assert errors.to_json({"x": 1.0}) == {"standard_errors": None, "confidence_intervals": None,
                                          "confidence_level": CONFIDENCE_LEVEL, "error_basis": "none",
                                          "error_components": None}
    named = CoefficientErrors.from_variances(["x"], {"noise": np.array([9.0]), "sampling": np.array([16.0])}, "b")
    assert named.standard_errors == {"x": 5.0} and named.components == {"noise": {"x": 3.0}, "sampling": {"x": 4.0}}


@pytest.mark.slow
def test_the_closed_form_noise_error_matches_dd_ssp_over_redrawn_noise(engine, titanic) -> None:  # noqa: ANN001
    """The delta method's noise standard error of each DD-SSP coefficient is within 15 % of the spread of DD-SSP's
    coefficients refitted on 400 redraws of the release's residual noise at its scales."""
    release = release_engine.release_marginals(engine, "titanic", "gaussian", PAIRS, rho="2", seed=3).release_id
    outcome = _fit(engine, release, LINEAR)
    stats, ridge, _ = answering.dd_ssp_statistics(engine, answers.get_release(engine, release), outcome.design)
    _, payload = answers.release_payload(engine, release)
    residuals = payload.residuals
    domain = residuals.domain
    rng = np.random.default_rng(0)
    thetas = []
    for _ in range(400):
        noisy = {c: np.asarray(v) + (project(rng.normal(scale=np.sqrt(residuals.scales[c]), size=np.shape(v)))
                                     if c else rng.normal(scale=np.sqrt(residuals.scales[c])))
                 for c, v in residuals.values.items()}
        redrawn = NoisyResiduals(domain, noisy, residuals.scales)

        def read(attributes: tuple[str, ...], redrawn: NoisyResiduals = redrawn) -> np.ndarray:
            ordered = tuple(a for a in domain.names if a in attributes)
            return np.transpose(redrawn.marginal(ordered), [ordered.index(a) for a in attributes])

        again = gram_from_marginals(outcome.design, read, total=float(redrawn.marginal(())))
        thetas.append(error_bars.theta_of(DDSSPLinearRegression(ridge=ridge).fit(again), outcome.design))
    empirical = np.std(np.stack(thetas), axis=0, ddof=1)
    closed = np.array(list(outcome.to_json()["error_components"]["noise"].values()))
    assert np.allclose(closed, empirical, rtol=0.15), (closed, empirical)


# the HTTP route, the client and the CLI ----------------------------------------------------------------------------
def test_the_fit_route_answers_error_bars_to_the_roles_that_may_fit(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", PAIRS, rho="0.5").release_id
    keys = {role: auth.create_key(engine, role, f"test {role}")[1]
            for role in ("steward", "analyst", "auditor", "participant", "gateway")}
    http = TestClient(create_app(engine), raise_server_exceptions=False)
    body = {"target": "Fare", "features": ["Pclass", "Sex", "Age"], "release": release}
    for role in ("steward", "analyst"):
        answer = http.post("/datasets/titanic/fit/linear", json=body,
                           headers={"Authorization": f"Bearer {keys[role]}"})
        assert answer.status_code == 200, answer.text
        _check_shape(answer.json())
        assert answer.json()["error_basis"] == error_bars.CLOSED_FORM_BASIS
    for role in ("auditor", "participant", "gateway"):
        refused = http.post("/datasets/titanic/fit/linear", json=body,
                            headers={"Authorization": f"Bearer {keys[role]}"})
        assert refused.status_code == 403 and "standard_errors" not in refused.text
    fitted = Client("http://testserver", keys["analyst"], http=TestClient(create_app(engine))).fit_linear(
        "titanic", "Fare", ["Pclass", "Sex", "Age"], release=release)
    expected = _fit(engine, release, LINEAR).to_json()
    assert fitted.error_basis_ == expected["error_basis"]
    assert fitted.standard_errors_ == pytest.approx(expected["standard_errors"])
    assert set(fitted.confidence_intervals_) == set(expected["coefficients"])


def test_the_cli_prints_the_error_bars(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", PAIRS, rho="0.5").release_id
    runner = CliRunner()
    command = ["fit", "linear", "titanic", "--target", "Fare", "--features", "Pclass,Sex,Age", "--release",
               str(release)]
    human = runner.invoke(app, command)
    assert human.exit_code == 0, human.output
    words = " ".join(human.output.split())
    assert "std. error" in words and "95 % interval" in words and "delta method" in words
    body = json.loads(runner.invoke(app, [*command, "--json"]).output)
    _check_shape(body)
