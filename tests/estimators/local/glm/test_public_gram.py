"""The public-gram Stein GLM with an intercept: Stein's lemma with an offset (``solve_scale_and_offset``) recovers a
logistic model with an intercept, the fit is calibrated in the large, and variant=paper keeps Alg. 1's estimates."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.links import LINKS
from estimators.local.glm.public_gram import (
    InterceptSteinGLM,
    PublicGramOLS,
    public_whitening,
    quantile_norm_bound,
)
from estimators.local.glm.scale import IndexSample, NoRootError, solve_scale_and_offset
from estimators.local.glm.stein import PrivateOLS, SteinGLM
from workloads.local.protocols import RoundState, SteinGlmSpec
from workloads.local.protocols.stein_glm import augmented_moment

STATE = RoundState(0, {})
W_TRUE = np.array([0.8, -0.5, 0.4])
B_TRUE = -1.5


def _population(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).normal(size=(n, 3))
    y = (np.random.default_rng(seed + 1).random(n) < 1 / (1 + np.exp(-(B_TRUE + x @ W_TRUE)))).astype(float)
    return x, y


def _exact_fit(public: np.ndarray, x: np.ndarray, y: np.ndarray, quantile: float) -> PublicGramOLS:
    """The OLS from the devices' exact vectors (no noise): the estimator's population answer."""
    whitening = public_whitening(public)
    spec = SteinGlmSpec(3, quantile_norm_bound(public, quantile, whitening), 0.5, 1.0, 0.0, variant="public-gram",
                        randomizer="l2ball", label_center=0.5, whitening=tuple(whitening.ravel()))
    aggregate = ReportAggregate.for_round(spec, 0, STATE)
    vectors = augmented_moment(x @ whitening.T, y, spec.norm_bound, 0.5, 0.5)
    aggregate.count, aggregate.sums["xy"] = len(vectors), vectors.sum(axis=0)
    return PublicGramOLS().fit(aggregate, spec, public)


def test_stein_with_an_offset_recovers_the_slope_and_the_intercept_of_a_gaussian_logistic_model() -> None:
    public, _ = _population(50_000, 0)
    x, y = _population(200_000, 2)
    ols = _exact_fit(public, x, y, 1.0)  # no clipping: Stein's lemma exactly
    glm = InterceptSteinGLM("logistic").fit(ols, public)
    np.testing.assert_allclose(glm.coef_, W_TRUE, rtol=0.06)
    assert glm.intercept_ == pytest.approx(B_TRUE, abs=0.06)


def test_the_offset_equations_hold_at_the_solution_for_every_increasing_link() -> None:
    t = np.random.default_rng(3).normal(size=4000) * 0.15  # an OLS index: w_ols = w* E[slope] is short
    index = IndexSample(t, np.full(t.size, 1 / t.size), 30.0)
    for name, mean_label in (("logistic", 0.2), ("probit", 0.7), ("poisson", 2.5)):
        link = LINKS[name]
        c, b = solve_scale_and_offset(link, index, mean_label)
        assert c * np.mean(link.slope(b + c * t)) == pytest.approx(1.0, rel=1e-9)
        assert np.mean(link.mean(b + c * t)) == pytest.approx(mean_label, rel=1e-9)
    with pytest.raises(NoRootError, match="no intercept makes the mean prediction"):
        solve_scale_and_offset("poisson", index, -1.0)


def test_the_intercept_calibrates_the_mean_prediction_to_the_base_rate() -> None:
    public, _ = _population(20_000, 4)
    x, y = _population(60_000, 6)
    rng = np.random.default_rng(8)
    whitening = public_whitening(public)
    spec = SteinGlmSpec(3, quantile_norm_bound(public, 0.9, whitening), 0.5, 4.0, 0.0, variant="public-gram",
                        randomizer="l2ball", label_center=0.5, whitening=tuple(whitening.ravel()))
    aggregate = ReportAggregate.for_round(spec, 0, STATE).add(spec.randomize(0, STATE, {"x": x, "y": y}, rng=rng))
    glm = InterceptSteinGLM("logistic").fit(PublicGramOLS().fit(aggregate, spec, public), public)
    test, labels = _population(20_000, 10)
    predicted = glm.model_.predict_proba(test)[:, 1].mean()
    assert labels.mean() < 0.3  # far from the 1/2 a model without an intercept predicts on centred features
    assert predicted == pytest.approx(labels.mean(), abs=0.02)


def test_the_norm_bound_is_the_stated_public_quantile_of_the_whitened_norms() -> None:
    public = np.random.default_rng(5).normal(size=(1000, 3)) @ np.array([[1.0, 0.3, 0.0], [0.0, 1.0, 0.5],
                                                                          [0.0, 0.0, 2.0]])
    whitening = public_whitening(public)
    np.testing.assert_allclose(np.cov((public @ whitening.T).T, bias=True), np.eye(3), atol=1e-9)
    norms = np.linalg.norm(public @ whitening.T, axis=1)
    for quantile in (0.5, 0.9, 1.0):
        assert quantile_norm_bound(public, quantile, whitening) == pytest.approx(np.quantile(norms, quantile))


def test_variant_paper_reproduces_the_estimates_of_main_for_a_fixed_seed() -> None:
    """Alg. 1 as before: the numbers below were printed by main @ 3d3727b (before the variants) for these seeds."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(4000, 3)) * np.array([1.0, 0.5, 2.0])
    y = (rng.random(4000) < 1 / (1 + np.exp(-x @ np.array([1.0, -1.0, 0.5])))).astype(float)
    public = np.random.default_rng(12).normal(size=(2000, 3)) * np.array([1.0, 0.5, 2.0])
    spec = SteinGlmSpec(3, 6.0, 1.0, 200.0, 1e-5, variant="paper")
    reports = spec.randomize(0, STATE, {"x": x, "y": y}, rng=np.random.default_rng(13))
    np.testing.assert_array_equal(reports["xy"][0], [0.72314453125, 1.26611328125, 3.04345703125])
    np.testing.assert_array_equal(reports["xx"][0], [-4.34375, 1.73828125, -1.65234375, -4.32421875, 3.06640625,
                                                     4.5078125])
    ols = PrivateOLS(covariance="pooled").fit(ReportAggregate.for_round(spec, 0, STATE).add(reports), spec, public)
    glm = SteinGLM("logistic").fit(ols, public)
    np.testing.assert_allclose(ols.coef_, [0.16410551982470684, -0.2079167755950632, 0.08089927005834886],
                               rtol=1e-12)
    np.testing.assert_allclose(glm.coef_, [0.8754195933784334, -1.1091303896566562, 0.43155651421561414],
                               rtol=1e-12)
    assert glm.scale_ == pytest.approx(5.334492065309768, rel=1e-12)
