"""stein-glm's defaults with a public table (variant public-gram): x y only through the pure-epsilon PrivUnit2
randomizer, X^T X and the whitening from the public rows, the norm bound a stated public quantile, an estimated
intercept; the charge is exactly the campaign's (epsilon, delta); variant=paper keeps Alg. 1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit, ndtr
from sqlalchemy import text

from estimators.local.glm.public_gram import public_whitening
from service.campaigns import campaigns, estimates, simulate
from service.campaigns.protocols.catalog import DEFAULT_NORM_QUANTILE
from service.errors import InvalidInput
from tests.support.campaign_data import FEATURES, gaussian_rows, load_public

OFFSET = np.array([10.0, 0.0, -3.0])
W_TRUE = np.array([1.0, -1.0, 0.5])


def _labels(x: np.ndarray, seed: int) -> np.ndarray:
    """Logistic labels with an intercept: a base rate near 0.2, far from the 1/2 of a model without one."""
    score = -1.6 + (x / np.array([1.0, 0.5, 2.0])) @ W_TRUE
    return (np.random.default_rng(seed).random(len(x)) < 1 / (1 + np.exp(-score))).astype(float)


@pytest.fixture
def public(engine, tmp_path: Path) -> np.ndarray:  # noqa: ANN001
    rows = gaussian_rows(4000, seed=2) + OFFSET
    load_public(engine, tmp_path, rows)
    return rows


def _spend(engine) -> tuple[float, float, int]:  # noqa: ANN001
    with engine.connect() as connection:
        row = connection.execute(text("SELECT MAX(epsilon), MAX(delta), COUNT(*) FROM participant_local_spend")).one()
    return float(row[0]), float(row[1]), int(row[2])


def test_the_default_reports_x_y_only_through_privunit_and_publishes_the_public_constants(engine, public) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", "pub", 2, 0, {"participants": 500})
    spec = info.spec
    assert (spec.variant, spec.randomizer, spec.delta, spec.gram) == ("public-gram", "privunit", 0.0, False)
    schema = info.to_json()["rounds"][0]["report_schema"]["fields"]
    assert [(f["name"], f["shape"]) for f in schema] == [("xy", [4])] and "exact_norm" in schema[0]  # no Gram
    state = campaigns.public_state(info)
    np.testing.assert_allclose(state["transform"]["center"], public.mean(axis=0))  # public mean and sd
    np.testing.assert_allclose(state["transform"]["scale"], public.std(axis=0))
    standardized = (public - public.mean(axis=0)) / public.std(axis=0)
    whitening = np.asarray(state["spec"]["whitening"]).reshape(3, 3)
    np.testing.assert_allclose(whitening, public_whitening(standardized), rtol=1e-9, atol=1e-12)
    norms = np.linalg.norm(standardized @ whitening.T, axis=1)
    assert state["spec"]["norm_quantile"] == DEFAULT_NORM_QUANTILE == 0.9
    assert state["spec"]["norm_bound"] == pytest.approx(np.quantile(norms, 0.9), rel=1e-9)
    stated = campaigns.create_campaign(engine, "q", "stein-glm", FEATURES, "y", "pub", 2, 0, {"norm_quantile": 0.75})
    assert stated.spec.norm_bound == pytest.approx(np.quantile(norms, 0.75), rel=1e-9)


def test_the_default_fit_estimates_its_intercept_and_is_calibrated(engine, public) -> None:  # noqa: ANN001
    x = gaussian_rows(20_000, seed=3) + OFFSET
    y = _labels(x - OFFSET, seed=4)
    campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", "pub", 8, 0, {"participants": 20_000})
    simulate.simulate(engine, "glm", x, y, seed=5)
    test = gaussian_rows(20_000, seed=6) + OFFSET
    base_rate = _labels(test - OFFSET, seed=7).mean()
    for model in ("logistic", "probit"):
        fit = estimates.fit_campaign(engine, "glm", model).to_json()
        assert fit["details"]["variant"] == "public-gram" and "link_constant" in fit["details"]
        coefficients = fit["coefficients"]
        score = test @ np.array([coefficients[f] for f in FEATURES]) + coefficients["(intercept)"]
        mean = expit(score) if model == "logistic" else ndtr(score)
        assert base_rate < 0.3 and float(np.mean(mean)) == pytest.approx(base_rate, abs=0.03)
    assert _spend(engine) == (8.0, 0.0, 20_000)  # each participant charged exactly epsilon, delta 0


def test_the_gaussian_option_charges_exactly_epsilon_and_delta(engine, public) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "g", "stein-glm", FEATURES, "y", "pub", 2, 1e-6,
                                     {"randomizer": "gaussian", "participants": 300})
    assert info.spec.randomizer == "gaussian" and info.spec.report_schema(0, info.round_state(0)).fields[0].grid
    simulate.simulate(engine, "g", gaussian_rows(300, seed=8) + OFFSET, np.ones(300), seed=9)
    epsilon, delta, participants = _spend(engine)
    assert (epsilon, participants) == (2.0, 300) and delta == pytest.approx(1e-6, rel=1e-12)


def test_variant_paper_keeps_alg_1_with_its_options(engine, public) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "p", "stein-glm", FEATURES, "y", "pub", 2, 1e-6,
                                     {"variant": "paper", "gram": True, "participants": 300})
    assert info.spec.variant == "paper" and info.spec.report_schema(0, info.round_state(0)).names == ("xx", "xy")
    simulate.simulate(engine, "p", gaussian_rows(300, seed=8) + OFFSET, np.ones(300), seed=9)
    fit = estimates.fit_campaign(engine, "p", "linear").to_json()
    assert fit["details"]["variant"] == "paper" and "estimates no intercept" in fit["notes"][0]


@pytest.mark.parametrize("delta, options, message", [
    (1e-6, {}, "protocol 'stein-glm': delta must be 0 with the privunit randomizer"),
    (1e-6, {"randomizer": "l2ball"}, "protocol 'stein-glm': delta must be 0 with the l2ball randomizer"),
    (0, {"randomizer": "gaussian"}, "protocol 'stein-glm': delta must be in (0, 1) with the gaussian randomizer"),
    (0, {"gram": False}, "option gram applies to variant=paper, not to variant=public-gram"),
    (1e-6, {"variant": "paper", "randomizer": "gaussian"}, "option randomizer applies to variant=public-gram"),
    (0, {"norm_quantile": 1.5}, "option norm_quantile must be in (0, 1]"),
    (0, {"norm_quantile": 0.5, "norm_bound": 2}, "norm_bound or option norm_quantile, not both"),
    (0, {"randomizer": "privacy"}, "option randomizer must be one of"),
])
def test_bad_default_options_are_refused_naming_the_option(engine, public, delta, options, message) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        campaigns.create_campaign(engine, "bad", "stein-glm", FEATURES, "y", "pub", 1, delta, options)
    assert campaigns.list_campaigns(engine) == []


def test_without_a_public_table_the_default_is_the_paper_variant(engine) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "bare", "stein-glm", FEATURES, "y", None, 1, 1e-6, {"norm_bound": 3})
    assert info.spec.variant == "paper"
    with pytest.raises(InvalidInput, match="variant=public-gram takes X\\^T X from a public table"):
        campaigns.create_campaign(engine, "bare2", "stein-glm", FEATURES, "y", None, 1, 0,
                                  {"variant": "public-gram"})
