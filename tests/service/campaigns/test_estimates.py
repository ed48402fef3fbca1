"""Estimates from stored aggregates: the estimators' own answers, on the features' own scale, free; Remark 16 (one
collection, many links), Alg. 5, LDP-AVG; and clear errors when a model cannot be answered."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.stein import PrivateOLS, SteinGLM
from service.campaigns import campaigns, estimates, simulate
from service.errors import Conflict, InvalidInput
from tests.support.campaign_data import FEATURES, gaussian_rows, load_public, logistic_labels

OFFSET = np.array([10.0, 0.0, -3.0])


def _aggregate(engine, campaign: str, round_index: int = 0) -> ReportAggregate:  # noqa: ANN001
    with engine.connect() as connection:
        raw = connection.execute(text("SELECT r.aggregate_json FROM campaign_rounds r JOIN campaigns c ON c.id = "
                                      "r.campaign_id WHERE c.name = :c AND r.round_index = :i"),
                                 {"c": campaign, "i": round_index}).scalar_one()
    return ReportAggregate.from_json(json.loads(raw))


@pytest.fixture
def collected(engine, tmp_path: Path) -> str:  # noqa: ANN001
    """A stein-glm campaign standardized with a public table (features offset from 0), 20,000 simulated reports."""
    load_public(engine, tmp_path, gaussian_rows(5000, seed=2) + OFFSET)
    x = gaussian_rows(20_000, seed=3)
    y = logistic_labels(x, np.array([1.0, -1.0, 0.5]))
    campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", "pub", 8, 1e-6,
                              {"participants": 20_000, "gram": False, "variant": "paper"})
    simulate.simulate(engine, "glm", x + OFFSET, y, seed=4)
    return "glm"


def test_remark_16_every_link_from_one_collection_is_the_estimators_answer_on_raw_scale(engine, collected) -> None:  # noqa: ANN001
    info = campaigns.get_campaign(engine, collected)
    center, scale = np.array(info.transform.center), np.array(info.transform.scale)
    public = (gaussian_rows(5000, seed=2) + OFFSET - center) / scale
    ols = PrivateOLS(covariance="public").fit(_aggregate(engine, collected), info.spec, public)
    before = _aggregate(engine, collected).to_json()
    for model in ("linear", "logistic", "probit", "poisson", "cubic", "sigmoid", "boosting"):
        fit = estimates.fit_campaign(engine, collected, model)
        answer = fit.to_json()
        assert answer["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0} and answer["campaign"] == "glm"
        assert list(answer["coefficients"]) == [*FEATURES, "(intercept)"] and answer["reports"] == 20_000
        w = ols.coef_ if model == "linear" else SteinGLM(model).fit(ols, public).coef_
        raw = np.array([answer["coefficients"][f] for f in FEATURES])
        np.testing.assert_allclose(raw, w / scale, rtol=1e-10)
        # the score on raw features equals the model's score on the transformed features the devices sent
        x = gaussian_rows(7, seed=9) + OFFSET
        np.testing.assert_allclose(x @ raw + answer["coefficients"]["(intercept)"], ((x - center) / scale) @ w,
                                   rtol=1e-9, atol=1e-12)
        assert fit.kind == ("classifier" if model in ("logistic", "probit") else "regressor")
    assert _aggregate(engine, collected).to_json() == before  # fitting changed nothing stored


def test_unanswerable_models_are_clear_errors(engine, collected) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match="model must be one of") as refused:
        estimates.fit_campaign(engine, collected, "mean")
    assert refused.value.code == "unknown_model"
    campaigns.create_campaign(engine, "bare", "stein-glm", FEATURES, "y", None, 8, 1e-6, {"norm_bound": 3})
    with pytest.raises(Conflict, match="has no reports yet"):
        estimates.fit_campaign(engine, "bare", "linear")
    simulate.simulate(engine, "bare", gaussian_rows(200), np.ones(200), seed=1)
    assert set(estimates.fit_campaign(engine, "bare", "linear").coefficients) == {*FEATURES, "(intercept)"}
    with pytest.raises(InvalidInput, match="model 'logistic' needs a public table") as refused:
        estimates.fit_campaign(engine, "bare", "logistic")
    assert refused.value.code == "needs_public_table"


def test_a_link_without_a_root_is_an_error_naming_the_link(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """Labels independent of the features at a small n: w_ols is noise, and the logistic constant does not exist."""
    load_public(engine, tmp_path, gaussian_rows(2000, seed=5))
    campaigns.create_campaign(engine, "noise", "stein-glm", FEATURES, "y", "pub", 1, 1e-6,
                              {"participants": 100, "standardize": False, "variant": "paper"})
    simulate.simulate(engine, "noise", gaussian_rows(100, seed=6), np.random.default_rng(7).integers(0, 2, 100),
                      seed=8)
    expected = "link 'logistic' has no constant on the data of campaign 'noise'"
    with pytest.raises(InvalidInput, match=expected) as refused:
        estimates.fit_campaign(engine, "noise", "logistic")
    assert refused.value.code == "no_root"


def test_ldp_average_is_unbiased_on_the_values_own_scale(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", "age", None, None, 2, 0, {"lower": 0, "upper": 100})
    ages = np.random.default_rng(0).uniform(20, 60, size=20_000)
    simulate.simulate(engine, "avg", ages[:, None], seed=1)
    fit = estimates.fit_campaign(engine, "avg", "mean").to_json()
    # noise: Lap(b) with b = 100 / 2 = 50 on the values' own scale, so the mean's standard error is sqrt(2) b / sqrt(n)
    assert abs(fit["details"]["noise_std_error"] - np.sqrt(2) * 50 / np.sqrt(20_000)) < 1e-9
    assert abs(fit["coefficients"]["age"] - ages.mean()) < 4 * fit["details"]["std_error"]


def test_alg5_fits_after_both_rounds_without_public_rows(engine) -> None:  # noqa: ANN001
    from estimators.local.glm.two_round import TwoRoundSteinGLM

    campaigns.create_campaign(engine, "alg5", "stein-glm-2round", FEATURES, "y", None, 8, 1e-6,
                              {"norm_bound": 4, "participants": 6000})
    x = gaussian_rows(6000, seed=3)
    y = logistic_labels(x, np.array([1.0, -1.0, 0.5]))
    with pytest.raises(Conflict, match="needs round 1's projections"):
        simulate_round_zero_only(engine, x, y)
        estimates.fit_campaign(engine, "alg5", "logistic")
    simulate.simulate(engine, "alg5", x, y, seed=5)  # round 0 is done for these rows; this run plays new people
    info = campaigns.get_campaign(engine, "alg5")
    assert [r.status for r in info.rounds] == ["closed", "closed"] and info.status == "closed"
    expected = TwoRoundSteinGLM("logistic").fit(info.spec, info.round_state(1), _aggregate(engine, "alg5", 0),
                                                _aggregate(engine, "alg5", 1))
    fit = estimates.fit_campaign(engine, "alg5", "logistic")
    np.testing.assert_allclose([fit.coefficients[f] for f in FEATURES], expected.coef_, rtol=1e-10)
    assert fit.coefficients["(intercept)"] == 0.0 and fit.details["rounds_used"] == 2


def simulate_round_zero_only(engine, x: np.ndarray, y: np.ndarray) -> None:  # noqa: ANN001
    """Round 0's reports through the real path, round 1 left without any."""
    from service.campaigns.submission import Submitter, submit_reports
    from service.client.device import make_report

    state = campaigns.public_state(campaigns.get_campaign(engine, "alg5"))
    index, fields = make_report(state, x, y, np.random.default_rng(1))
    submit_reports(engine, "alg5", index, fields, Submitter.simulator("first"), [str(i) for i in range(len(x))])
