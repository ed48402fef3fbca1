"""The 2-round protocol without public data (Alg. 5): the moment estimate of the projection's spread, the round
transition, and the whole protocol end to end in both layouts (split budget, split groups)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from estimators.base import EstimatorError
from estimators.local.accuracy import squared_relative_error
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.synthetic import draw_labels, gaussian_rows
from estimators.local.glm.two_round import TwoRoundSteinGLM, clipped_second_moment, next_state, projection_std
from tests.support.two_round import first_round
from workloads.local.protocols import RoundState, TwoRoundSteinSpec

Z = 4.0


def test_clipped_second_moment_matches_monte_carlo() -> None:
    rng = np.random.default_rng(1)
    z = rng.standard_normal(2_000_000)
    for std, bound in [(1.0, 0.5), (0.3, 1.0), (2.0, 2.5)]:
        sample = np.square(np.clip(std * z, -bound, bound))
        assert abs(clipped_second_moment(std, bound) - sample.mean()) <= Z * sample.std() / math.sqrt(z.size)
    assert clipped_second_moment(0.0, 1.0) == 0.0


def test_projection_std_is_estimated_within_its_standard_error() -> None:
    """t ~ N(0, 0.8^2) clipped at 1.2 plus Laplace: the moment estimate of s is within 4 standard errors (delta
    method: sd(z^2) / sqrt(n) divided by dq/ds)."""
    rng = np.random.default_rng(2)
    spec = TwoRoundSteinSpec.split_budget(2, 10.0, 1.0, 4.0, 1e-6)
    coef = np.array([0.8, 0.0])
    state = spec.projection_state(coef, 1.2)
    n = 400_000
    x = rng.standard_normal((n, 2))  # <x, coef> ~ N(0, 0.64); ||x|| <= 10 always here
    reports = spec.randomize(1, state, {"x": x}, rng)
    aggregate = ReportAggregate.for_round(spec, 1, state).add(reports)
    estimate = projection_std(spec, state, aggregate)
    slope = (clipped_second_moment(0.8 + 1e-5, 1.2) - clipped_second_moment(0.8 - 1e-5, 1.2)) / 2e-5
    error = np.square(reports["projection"]).std() / math.sqrt(n) / slope
    assert abs(estimate - 0.8) <= Z * error


def run_protocol(spec: TwoRoundSteinSpec, x: np.ndarray, y: np.ndarray, second_x: np.ndarray,
                 rng: np.random.Generator) -> tuple[TwoRoundSteinGLM, RoundState]:
    """Round 0 from (x, y), the published state (through JSON, as a participant would receive it), round 1 from
    second_x, then the estimate."""
    first = ReportAggregate.for_round(spec, 0, spec.initial_state())
    for start in range(0, x.shape[0], 100_000):
        first.add(spec.randomize(0, spec.initial_state(), {"x": x[start:start + 100_000],
                                                           "y": y[start:start + 100_000]}, rng))
    published = RoundState.from_json(json.loads(json.dumps(next_state(spec, 0, [first]).to_json())))
    second = ReportAggregate.for_round(spec, 1, published).add(spec.randomize(1, published, {"x": second_x}, rng))
    return TwoRoundSteinGLM("logistic").fit(spec, published, first, second), published


@pytest.mark.parametrize("layout", ["split_budget", "split_groups"])
def test_two_round_protocol_end_to_end(layout: str) -> None:
    """x ~ N(0, I_2), logistic labels, w* = (1, 1)/sqrt(2), r = 3.5, epsilon 20 (10 per round in the split-budget
    layout), n = 400,000. To first order w_ols-hat = w_ols + e - E w_ols with e, E the noise of X^T y / n and
    X^T X / n (entries N(0, sigma_xy^2 / n) and N(0, sigma_xx^2 / n)), so its squared relative error is about
    V chi2_p / p with V = p (sigma_xy^2 / ||w_ols||^2 + sigma_xx^2) / n; chi2_2 / 2 exceeds 9.2 with probability
    1e-4. The constant is required
    within 15 % of c* = 1 / E[sigmoid'(<x, w*>)], so (by (a + b)^2 <= 2 a^2 + 2 b^2) the squared relative error of
    c w_ols-hat is at most 2 (9.2 V) + 2 (0.15)^2."""
    rng = np.random.default_rng(3)
    p, n, r = 2, 400_000, 3.5
    coef = np.full(p, 1 / math.sqrt(p))
    x = gaussian_rows(n, np.eye(p), rng)
    y = draw_labels(x @ coef, "logistic", rng)
    if layout == "split_budget":
        spec = TwoRoundSteinSpec.split_budget(p, r, 1.0, 20.0, 1e-6, participants=n)
        fit, state = run_protocol(spec, x, y, x, rng)
    else:
        spec = TwoRoundSteinSpec.split_groups(p, r, 1.0, 20.0, 1e-6, n // 2, n // 2)
        fit, state = run_protocol(spec, x[: n // 2], y[: n // 2], x[n // 2:], rng)
    c_star = 1 / stats.norm.expect(lambda t: 0.25 / np.cosh(t / 2) ** 2)
    assert fit.scale_ == pytest.approx(c_star, rel=0.15)
    w_ols_norm = np.linalg.norm(coef) / c_star
    variance = p * (spec.noise.xy**2 / w_ols_norm**2 + spec.noise.xx**2) / fit.ols_.n_reports_
    error = squared_relative_error(fit.coef_, coef)
    assert error <= 2 * 9.2 * variance + 2 * 0.15**2, (error, variance)
    assert state.number("bound") <= spec.norm_bound * np.linalg.norm(state.vector("coef", p))
    assert fit.model_.predict_proba(x[:3]).shape == (3, 2)


def test_round_transition_checks() -> None:
    rng = np.random.default_rng(4)
    spec, x, first = first_round(rng)
    with pytest.raises(EstimatorError, match="no round after round 1"):
        next_state(spec, 1, [first, first])
    state = next_state(spec, 0, [first])
    wrong = spec.projection_state(state.vector("coef", 2) * 2, state.number("bound"))
    second = ReportAggregate.for_round(spec, 1, wrong).add(spec.randomize(1, wrong, {"x": x}, rng))
    with pytest.raises(EstimatorError, match="published coef"):
        TwoRoundSteinGLM().fit(spec, wrong, first, second)
    saturated = ReportAggregate.for_round(spec, 1, state)
    bound = state.number("bound")
    noise = spec.projection_noise(state)  # 20 Laplace scales past the interval, on the grid (inside the 1e-9 tail)
    saturated.add({"projection": np.full(100, noise.grid * (np.ceil(bound / noise.grid) + 20 * noise.t))})
    with pytest.raises(EstimatorError, match="saturate"):
        projection_std(spec, state, saturated)
