"""The public-moment GLM estimator: the moment equation recovers ``w`` exactly from a noiseless ``T`` for every link and
label kind, an unattainable ``T`` is an error, and the delta-method standard errors match the spread of repeated
simulations (participants and public rows drawn afresh each time)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.moment import (
    MOMENT_LINKS,
    PublicDesign,
    PublicMomentGLM,
    attainable_moment,
    expected_covariance,
    label_affine,
    moment_target,
    solve_moment_equation,
)
from workloads.local.protocols import RoundState
from workloads.local.protocols.glm import GlmSpec, public_feature_map

SCALES = np.array([1.0, 2.0, 0.5])
SHIFT = np.array([0.0, 1.0, -1.0])
TRUE_W = np.array([-0.4, 0.6, -0.2, 0.9])


def _rows(count: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((count, 3)) * SCALES + SHIFT


@pytest.mark.parametrize("link", sorted(MOMENT_LINKS))
@pytest.mark.parametrize(("labels", "bound"), [("binary", 1.0), ("bounded", 3.0)])
@pytest.mark.parametrize("whiten", [False, True])
def test_noiseless_moments_give_back_w_exactly(link: str, labels: str, bound: float, whiten: bool) -> None:
    rows = _rows(2000, np.random.default_rng(0))
    design = PublicDesign.build(rows, *public_feature_map(rows, whiten))
    chosen = MOMENT_LINKS[link]
    c1, c0 = label_affine(labels, bound)
    # T = E[s(y) z] under the model, with the expectation over the public rows
    target = c1 * design.moments(chosen, TRUE_W) + c0 * design.mean_direction
    w = solve_moment_equation(design, link, moment_target(design, target, labels, bound))
    np.testing.assert_allclose(w, TRUE_W, atol=1e-7)


def test_binary_labels_add_half_the_mean_direction() -> None:
    """``b = T + zbar / 2`` for ``s(y) = y - 1/2``: the constant ``c = 1/2`` of the issue."""
    rows = _rows(50, np.random.default_rng(1))
    design = PublicDesign.build(rows, *public_feature_map(rows))
    target = np.array([0.1, -0.2, 0.05, 0.0])
    np.testing.assert_allclose(moment_target(design, target, "binary"), target + design.mean_direction / 2)
    np.testing.assert_allclose(moment_target(design, target, "bounded", 4.0), 4.0 * target)


def test_an_unattainable_moment_has_no_solution() -> None:
    """A logistic ``b`` must be a mean of ``z_j mu_j`` with ``mu_j`` in (0, 1): ``b = 2 zbar`` is not."""
    rows = _rows(300, np.random.default_rng(2))
    design = PublicDesign.build(rows, *public_feature_map(rows))
    with pytest.raises(EstimatorError, match="the logistic moment equation has no solution"):
        solve_moment_equation(design, "logistic", 2.0 * design.mean_direction)
    with pytest.raises(EstimatorError, match="unknown link 'cubic'"):
        solve_moment_equation(design, "cubic", design.mean_direction)


def _simulated_fit(spec_of, n: int, m: int, rng: np.random.Generator) -> PublicMomentGLM:  # noqa: ANN001
    public = _rows(m, rng)
    spec = spec_of(public)
    x = _rows(n, rng)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(TRUE_W[0] + x @ TRUE_W[1:])))).astype(float)
    aggregate = ReportAggregate.for_round(spec, 0, RoundState(0)).add(
        spec.randomize(0, RoundState(0), {"x": x, "y": y}, rng))
    return PublicMomentGLM("logistic").fit(aggregate, spec, public)


def _glm_spec(randomizer: str, delta: float):  # noqa: ANN202
    def build(public: np.ndarray) -> GlmSpec:
        center, matrix = public_feature_map(public)
        return GlmSpec(3, 2.0, delta, tuple(center), tuple(map(tuple, matrix)), randomizer=randomizer)
    return build


@pytest.mark.parametrize(("randomizer", "delta", "n"), [("l2ball", 0.0, 20_000),
                                                        pytest.param("gaussian", 1e-6, 20_000,
                                                                     marks=pytest.mark.slow)])
def test_standard_errors_match_the_spread_of_repeated_fits(randomizer: str, delta: float, n: int) -> None:
    rng = np.random.default_rng(11)
    fits = [_simulated_fit(_glm_spec(randomizer, delta), n, 4000, rng) for _ in range(100)]
    estimates = np.array([f.w_ for f in fits])
    stated = np.mean([f.standard_errors_ for f in fits], axis=0)
    spread = estimates.std(axis=0, ddof=1)
    # 100 trials: the sample standard deviation is within about 1 +- 0.07 of the truth per coefficient
    np.testing.assert_array_less(stated / spread, 1.3)
    np.testing.assert_array_less(spread / stated, 1.3)
    assert np.all(np.abs(estimates.mean(axis=0) - TRUE_W) < 4 * stated / np.sqrt(len(fits)) + 0.02)
    # the planner's prediction before any report (at the true w; the fits' own are at their noisy w_hat) too
    planned = np.sqrt(np.diag(expected_covariance(_rows(4000, rng), "logistic", TRUE_W, n, 2.0,
                                                  randomizer, delta=delta)))
    np.testing.assert_array_less(planned / spread, 1.3)
    np.testing.assert_array_less(spread / planned, 1.3)


def test_expected_covariance_shrinks_as_one_over_n_and_names_bad_input() -> None:
    rows = _rows(1000, np.random.default_rng(3))
    small, large = (expected_covariance(rows, "logistic", TRUE_W, n, 1.0) for n in (10_000, 40_000))
    # the participants' part scales as 1/n; the public rows' part (1/m) does not: between 1/4 and 1
    ratio = np.diag(large) / np.diag(small)
    assert np.all((ratio > 0.25) & (ratio < 0.5))
    with pytest.raises(EstimatorError, match="n must be a positive integer"):
        expected_covariance(rows, "logistic", TRUE_W, 0, 1.0)
    with pytest.raises(EstimatorError, match="w must hold the intercept and 3 coefficients"):
        expected_covariance(rows, "logistic", TRUE_W[1:], 10, 1.0)


def test_an_unattainable_moment_is_projected_onto_the_attainable_set() -> None:
    """``b`` outside the zonotope moves onto it (its means kept 1e-3 inside (0, 1)) and then has a solution; an
    attainable ``b`` is left as it is."""
    rows = _rows(300, np.random.default_rng(2))
    design = PublicDesign.build(rows, *public_feature_map(rows))
    inside = design.moments(MOMENT_LINKS["logistic"], TRUE_W)
    assert attainable_moment(design, "logistic", inside) == (pytest.approx(inside), 0.0)
    outside = 2.0 * design.mean_direction
    projected, moved = attainable_moment(design, "logistic", outside)
    assert moved == pytest.approx(np.linalg.norm(projected - outside)) and moved > 0
    # no point of the set is nearer: the full-1 corner (every mean at 1 - 1e-3) is in it and farther
    assert moved <= np.linalg.norm((1 - 1e-3) * design.mean_direction - outside) + 1e-12
    w = solve_moment_equation(design, "logistic", projected)
    np.testing.assert_allclose(design.moments(MOMENT_LINKS["logistic"], w), projected, atol=1e-6)
    assert attainable_moment(design, "linear", outside) == (pytest.approx(outside), 0.0)


def test_a_singular_jacobian_is_a_clear_error_not_a_crash() -> None:
    """Every linear predictor far in the logistic link's tail: g' vanishes on every public row, J is singular, and the
    standard errors (and a plan) are refused with an EstimatorError (a 422 through the API), not a LinAlgError (a
    500)."""
    rows = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(EstimatorError, match="Jacobian is singular"):
        expected_covariance(rows, "logistic", [1e4, 0.0, 0.0], 1000, 1.0)
