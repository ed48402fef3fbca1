"""Stein-lemma GLMs from local reports: the private OLS is the OLS of the reported statistics, every link recovers
w* (Lemma 5 / Thm. 21 hold exactly for Gaussian features), the error with privacy noise falls like 1/sqrt(n), one
aggregate answers many links (Remark 16), and a link without a constant is a clear error."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import integrate, stats

from estimators.base import EstimatorError
from estimators.local.accuracy import squared_relative_error
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.link_models import LinkClassifier, LinkRegressor
from estimators.local.glm.links import LINKS
from estimators.local.glm.scale import IndexSample, NoRootError
from estimators.local.glm.stein import (
    PrivateOLS,
    SteinGLM,
    fit_glms,
    gaussian_norm_bound,
    known_covariance_norm_bound,
    upper_triangle_to_matrix,
)
from estimators.local.glm.synthetic import draw_labels, gaussian_rows, make_problem
from workloads.local.protocols import ReportSchema, SteinGlmSpec
from workloads.local.randomizers.sufficient_statistics import clip_features, sufficient_statistics

Z = 4.0


def exact_aggregate(spec: SteinGlmSpec, x: np.ndarray, y: np.ndarray) -> ReportAggregate:
    """An aggregate of the participants' exact (noise-free) statistics: checks the server's arithmetic alone. Exact
    statistics are not on the reports' grid (no honest report is noise-free), so the schema's grid is dropped."""
    schema = spec.report_schema(0, spec.initial_state())
    gridless = ReportSchema(tuple(dataclasses.replace(f, grid=None) for f in schema.fields))
    return ReportAggregate(gridless, spec.protocol, 0).add(sufficient_statistics(x, y, spec.gram))


def noisy_aggregate(spec: SteinGlmSpec, x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> ReportAggregate:
    state = spec.initial_state()
    return ReportAggregate.for_round(spec, 0, state).add(spec.randomize(0, state, {"x": x, "y": y}, rng))


def test_private_ols_is_the_ols_of_the_reported_statistics() -> None:
    rng = np.random.default_rng(1)
    x, public = rng.normal(size=(3000, 4)), rng.normal(size=(2000, 4)) * 0.5
    y = np.clip(x @ np.array([0.3, -0.2, 0.1, 0.0]) + rng.normal(0, 0.1, 3000), -1, 1)
    spec = SteinGlmSpec(4, 100.0, 1.0, 1.0, 1e-6)
    aggregate = exact_aggregate(spec, x, y)
    private = PrivateOLS("private").fit(aggregate, spec)
    np.testing.assert_allclose(private.coef_, np.linalg.lstsq(x, y, rcond=None)[0], rtol=1e-10, atol=1e-12)
    pooled = PrivateOLS("pooled").fit(aggregate, spec, public)
    covariance = (x.T @ x + public.T @ public) / 5000
    np.testing.assert_allclose(pooled.coef_, np.linalg.solve(covariance, x.T @ y / 3000), rtol=1e-10)
    only_public = PrivateOLS("public").fit(aggregate, spec, public)
    np.testing.assert_allclose(only_public.coef_, np.linalg.solve(public.T @ public / 2000, x.T @ y / 3000),
                               rtol=1e-10)
    assert pooled.n_reports_ == 3000 and pooled.n_public_ == 2000 and pooled.intercept_ == 0.0


def test_public_rows_are_clipped_like_the_participants() -> None:
    spec = SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6)
    rng = np.random.default_rng(2)
    x = clip_features(rng.normal(size=(500, 2)), 1.0)
    aggregate = exact_aggregate(spec, x, np.clip(x[:, 0], -1, 1))
    public = np.array([[30.0, 40.0], [0.1, 0.0]])
    ols = PrivateOLS("public").fit(aggregate, spec, public)
    clipped = np.array([[0.6, 0.8], [0.1, 0.0]]) * np.array([[1 - 2.0**-50], [1.0]])
    np.testing.assert_allclose(ols.covariance_, clipped.T @ clipped / 2, rtol=1e-12)


def true_constant(name: str, std: float) -> float:
    """c* = 1 / E[slope(T)], T ~ N(0, std^2): for Gaussian x, w_ols = E[slope(<x, w*>)] w* (Stein's lemma)."""
    mean, _ = integrate.quad(lambda z: float(LINKS[name].slope(np.array([std * z]))[0]) * stats.norm.pdf(z), -12, 12)
    return 1.0 / mean


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LINKS))
def test_every_link_recovers_w_star_from_exact_statistics(name: str) -> None:
    """Without privacy noise the estimate is consistent for every link. Over 6 independent problems the mean of the
    estimated constant is within 4 standard errors (their spread / sqrt(6)) of c* = 1 / E[slope(<x, w*>)], the
    projection of the estimate on w* has mean 1 within 4 standard errors, and the direction is w*'s. A wrong slope or
    derivative in a link would bias c by far more than the sampling error."""
    rng = np.random.default_rng(3)
    p, n = 4, 100_000
    coef = np.full(p, 0.5)  # ||w*|| = 1, so <x, w*> ~ N(0, 1)
    constants, projections, cosines = [], [], []
    for _ in range(6):
        x, public = gaussian_rows(n, np.eye(p), rng), gaussian_rows(n, np.eye(p), rng)
        y = draw_labels(x @ coef, name, rng, noise_bound=0.001)
        spec = SteinGlmSpec(p, 100.0, max(1.0, float(np.abs(y).max())), 1.0, 1e-6)
        fit = SteinGLM(name).fit(PrivateOLS("public").fit(exact_aggregate(spec, x, y), spec, public), public)
        constants.append(fit.scale_)
        projections.append(float(fit.coef_ @ coef))
        cosines.append(float(fit.coef_ @ coef / np.linalg.norm(fit.coef_)))

    def within(values: list[float], target: float) -> bool:
        return abs(np.mean(values) - target) <= Z * np.std(values, ddof=1) / math.sqrt(len(values)) + 1e-9

    assert within(constants, true_constant(name, 1.0)), (constants, true_constant(name, 1.0))
    assert within(projections, 1.0), projections
    assert min(cosines) > 0.99


@pytest.mark.slow
def test_error_with_privacy_noise_falls_like_one_over_n() -> None:
    """Squared relative error of the logistic model over 30 problems at n, 4n and 16n with real reports
    (x ~ N(0, I_3), x y only, X^T X from public rows, Alg. 1's norm bound). Once the noise on the OLS is below its
    signal the error is about p sigma^2 / (n ||E[x y]||^2), so the log-log slope is near -1; epsilon = 32 puts
    n = 16,000 already there (at epsilon = 16 the relative error at 16,000 is above 1 and the slope steeper). A
    squared error of a 3-dimensional Gaussian error vector has relative spread at most sqrt(2) (chi-square, one
    degree of freedom, the worst case), so a mean of 30 has a relative standard error of at most 0.26 and the slope
    over a factor 16 a standard error of at most 0.26 sqrt(2) / log(16) = 0.13; we accept -1 +- 0.5."""
    rng = np.random.default_rng(4)
    p, epsilon = 3, 32.0
    coef = np.full(p, 1 / math.sqrt(p))
    means = []
    sizes = [16_000, 64_000, 256_000]
    for n in sizes:
        errors = []
        for _ in range(30):
            x, public = gaussian_rows(n, np.eye(p), rng), gaussian_rows(n, np.eye(p), rng)
            y = draw_labels(x @ coef, "logistic", rng)
            spec = SteinGlmSpec(p, gaussian_norm_bound(public, n), 1.0, epsilon, 1e-6, gram=False)
            ols = PrivateOLS("public").fit(noisy_aggregate(spec, x, y, rng), spec, public)
            errors.append(squared_relative_error(SteinGLM("logistic").fit(ols, public).coef_, coef))
        means.append(np.mean(errors))
    slope = np.polyfit(np.log(sizes), np.log(means), 1)[0]
    assert -1.5 <= slope <= -0.5, (means, slope)


def test_one_aggregate_answers_many_links() -> None:
    """Remark 16: fit_glms reads only the OLS and the public rows; each model is c_link * w_ols with c_link the root
    of its own scale equation over the public rows, and the link that made the labels recovers w*."""
    rng = np.random.default_rng(5)
    p, n = 3, 200_000
    problem = make_problem("gaussian-diagonal", "probit", n, n, p, rng)
    spec = SteinGlmSpec(p, gaussian_norm_bound(problem.public_rows, n), 1.0, 50.0, 1e-6, gram=False)
    ols = PrivateOLS("public").fit(noisy_aggregate(spec, problem.features, problem.labels, rng), spec,
                                   problem.public_rows)
    links = ["logistic", "probit", "poisson", "boosting", "cubic", "sigmoid", "logistic-loss"]
    models = fit_glms(ols, links, problem.public_rows)
    assert list(models) == links
    t = problem.public_rows @ ols.coef_
    for name, model in models.items():
        np.testing.assert_allclose(model.coef_, model.scale_ * ols.coef_, rtol=1e-15)
        c = model.scale_
        assert c * np.mean(LINKS[name].slope(c * t)) == pytest.approx(1.0, abs=1e-10)
        assert isinstance(model, LinkClassifier if LINKS[name].binary else LinkRegressor)
    assert squared_relative_error(models["probit"].coef_, problem.coef) < 0.05
    assert models["logistic-loss"].scale_ < 0 < models["logistic"].scale_


def test_no_constant_is_a_clear_error() -> None:
    """A noise-dominated OLS (tiny n, small epsilon, X^T X from the noisy reports) spreads <x, w_ols> so widely that
    the logistic equation has no root: NoRootError names the link; the Poisson model still has an answer. (Whether
    a noisy OLS has a root is a property of the draw: with the device's grid noise and the projected private moments
    of issue 18, 2 of 96 draws tried (seeds 1-24, n 300 and 2,000, epsilon 0.5 and 1) have none; this is one.)"""
    rng = np.random.default_rng(3)
    problem = make_problem("gaussian-diagonal", "logistic", 300, 2_000, 5, rng)
    spec = SteinGlmSpec(5, gaussian_norm_bound(problem.public_rows, 2_000), 1.0, 1.0, 1e-6)
    ols = PrivateOLS("private").fit(noisy_aggregate(spec, problem.features, problem.labels, rng), spec)
    with pytest.raises(NoRootError, match="'logistic'"):
        SteinGLM("logistic").fit(ols, problem.public_rows)
    assert np.all(np.isfinite(SteinGLM("poisson").fit(ols, problem.public_rows).coef_))


def test_coefficients_are_on_the_participants_scale() -> None:
    """Features held in other units (x 10) give coefficients / 10: nothing is rescaled internally."""
    rng = np.random.default_rng(7)
    x, public = rng.normal(size=(20_000, 3)), rng.normal(size=(20_000, 3))
    y = draw_labels(x @ np.array([0.5, -0.5, 0.2]), "logistic", rng)
    fits = []
    for factor in (1.0, 10.0):
        spec = SteinGlmSpec(3, 100.0 * factor, 1.0, 1.0, 1e-6)
        ols = PrivateOLS("pooled").fit(exact_aggregate(spec, factor * x, y), spec, factor * public)
        fits.append(SteinGLM("logistic").fit(ols, factor * public))
    np.testing.assert_allclose(fits[1].coef_ * 10.0, fits[0].coef_, rtol=1e-9)
    assert fits[0].model_.predict_proba(x[:5]) == pytest.approx(fits[1].model_.predict_proba(10 * x[:5]))


def test_bad_inputs_are_named() -> None:
    spec = SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6)
    empty = ReportAggregate.for_round(spec, 0, spec.initial_state())
    with pytest.raises(EstimatorError, match="no reports"):
        PrivateOLS("private").fit(empty, spec)
    aggregate = exact_aggregate(spec, np.eye(2) * 0.5, np.array([0.5, -0.5]))
    with pytest.raises(EstimatorError, match="covariance must be one of"):
        PrivateOLS("mixed").fit(aggregate, spec)
    with pytest.raises(EstimatorError, match="needs public_rows"):
        PrivateOLS("pooled").fit(aggregate, spec)
    with pytest.raises(EstimatorError, match=r"\(m, 2\)"):
        PrivateOLS("public").fit(aggregate, spec, np.zeros((3, 5)))
    no_gram = SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6, gram=False)
    with pytest.raises(EstimatorError, match="covariance must be 'public'"):
        PrivateOLS("private").fit(exact_aggregate(no_gram, np.eye(2) * 0.5, np.array([0.5, -0.5])), no_gram)
    with pytest.raises(EstimatorError, match="fitted PrivateOLS"):
        SteinGLM().fit(PrivateOLS(), np.zeros((2, 2)))
    with pytest.raises(EstimatorError, match="unknown link 'tobit'"):
        SteinGLM("tobit").fit(PrivateOLS("private").fit(aggregate, spec), IndexSample.gaussian(0.1))
    with pytest.raises(EstimatorError, match="feature_names"):
        PrivateOLS("private", feature_names=["a"]).fit(aggregate, spec)


def test_norm_bounds_and_triangles() -> None:
    rng = np.random.default_rng(8)
    rows = rng.normal(size=(10_000, 4)) * np.array([1.0, 2.0, 0.5, 1.0])
    spectral = np.linalg.eigvalsh(rows.T @ rows / 10_000)[-1]
    assert gaussian_norm_bound(rows, 1000, 0.1) == pytest.approx(math.sqrt(5 * spectral * 4 * math.log(1000 / 0.1)))
    assert known_covariance_norm_bound(10, 1.0, 1000) == pytest.approx(math.sqrt(10 * 10 * math.log(1000)))
    matrix = upper_triangle_to_matrix([1, 2, 3, 4, 5, 6], 3)
    assert matrix.tolist() == [[1, 2, 3], [2, 4, 5], [3, 5, 6]]
