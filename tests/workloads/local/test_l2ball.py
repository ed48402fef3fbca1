"""The l2-ball randomizer of Duchi, Jordan & Wainwright (2018): its constant, unbiasedness, law and privacy ratio.

Statistical tolerances: each report has ``E[Z Z^T] = B^2 I / d`` (the output is uniform on a hemisphere of radius
``B``, a set symmetric under ``z -> -z`` for ``z z^T``), so a coordinate of the mean of ``N`` reports has standard
error at most ``B / sqrt(d N)``; we allow 5 standard errors per coordinate (false alarm below 1e-5 per test).
Frequencies are binomial: 5 standard errors ``sqrt(p (1 - p) / N)``. Seeds are fixed, so each run is reproducible.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from workloads.local.randomizers.l2ball import (
    hemisphere_probability,
    l2_ball_output_density,
    l2_ball_output_norm,
    l2_ball_randomize,
    sphere_mean_abs_coordinate,
)
from workloads.parameters import ParameterError


def _coth(x: float) -> float:
    return 1.0 / math.tanh(x)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 7, 20, 60, 150])
def test_output_norm_equals_the_gamma_formula(d: int, epsilon: float) -> None:
    radius = 2.5
    direct = radius * (math.exp(epsilon) + 1) / (math.exp(epsilon) - 1) * math.sqrt(math.pi)
    direct *= math.gamma((d + 1) / 2) / math.gamma(d / 2)
    assert l2_ball_output_norm(d, radius, epsilon) == pytest.approx(direct, rel=1e-12)


def test_output_norm_known_values_and_large_dimensions() -> None:
    eps = 0.7
    assert l2_ball_output_norm(1, 1.0, eps) == pytest.approx(_coth(eps / 2))  # 1-d randomized response
    assert sphere_mean_abs_coordinate(2) == pytest.approx(2 / math.pi)
    assert sphere_mean_abs_coordinate(3) == pytest.approx(0.5)
    for d in (10**4, 10**6, 10**8):  # math.gamma overflows far below these; lgamma does not
        value = l2_ball_output_norm(d, 1.0, eps)
        asymptotic = _coth(eps / 2) * math.sqrt(math.pi * d / 2) * (1 - 1 / (4 * d))  # Gamma(x + 1/2) / Gamma(x)
        assert math.isfinite(value) and value == pytest.approx(asymptotic, rel=1e-6)


def test_every_report_has_the_stated_norm() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(size=(500, 9)) * rng.uniform(0, 2, size=(500, 1))  # some outside the ball: clipped
    reports = l2_ball_randomize(values, 1.3, 0.8, rng)
    assert reports.shape == values.shape
    np.testing.assert_allclose(np.linalg.norm(reports, axis=1), l2_ball_output_norm(9, 1.3, 0.8), rtol=1e-12)
    one = l2_ball_randomize(values[0], 1.3, 0.8, rng)
    assert one.shape == (9,)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
@pytest.mark.parametrize("d", [1, 2, 3, 10, 40])
def test_reports_are_unbiased(d: int, epsilon: float) -> None:
    rng = np.random.default_rng(1000 * d + int(10 * epsilon))
    radius = 2.0
    value = rng.normal(size=d)
    value *= 0.6 * radius / np.linalg.norm(value)
    n = 100_000
    reports = l2_ball_randomize(np.tile(value, (n, 1)), radius, epsilon, rng)
    standard_error = l2_ball_output_norm(d, radius, epsilon) / math.sqrt(d * n)
    assert np.max(np.abs(reports.mean(axis=0) - value)) < 5 * standard_error


def test_reports_are_unbiased_for_the_clipped_input_and_for_zero() -> None:
    rng = np.random.default_rng(7)
    d, radius, eps, n = 5, 1.0, 1.0, 100_000
    far = np.array([3.0, 4.0, 0.0, 0.0, 0.0])  # norm 5: clipped to norm 1
    standard_error = l2_ball_output_norm(d, radius, eps) / math.sqrt(d * n)
    for value, expected in ((far, far / 5.0), (np.zeros(d), np.zeros(d))):
        reports = l2_ball_randomize(np.tile(value, (n, 1)), radius, eps, rng)
        assert np.max(np.abs(reports.mean(axis=0) - expected)) < 5 * standard_error


@pytest.mark.parametrize("norm_fraction", [0.0, 0.3, 1.0])
def test_side_frequency_matches_the_density(norm_fraction: float) -> None:
    rng = np.random.default_rng(3)
    d, radius, eps, n = 6, 1.0, 1.2, 200_000
    u = np.eye(d)[2]
    value = norm_fraction * radius * u
    reports = l2_ball_randomize(np.tile(value, (n, 1)), radius, eps, rng)
    q, pi = 0.5 + norm_fraction / 2, hemisphere_probability(eps)
    expected = q * pi + (1 - q) * (1 - pi)
    observed = np.mean(reports @ u > 0)
    assert abs(observed - expected) < 5 * math.sqrt(expected * (1 - expected) / n)
    # the density integrates to one and predicts the same frequency
    density = l2_ball_output_density(np.vstack([u, -u]), value, radius, eps)
    assert density[0] / 2 == pytest.approx(expected) and (density[0] + density[1]) / 2 == pytest.approx(1.0)


def test_reports_are_uniform_within_their_hemisphere() -> None:
    # For U uniform on S^{d-1}, U_1^2 ~ Beta(1/2, (d-1)/2); restricted to a hemisphere the law of U_1^2 is the same.
    rng = np.random.default_rng(11)
    d, radius, eps, n = 5, 1.0, 1.0, 20_000
    u = np.ones(d) / math.sqrt(d)
    reports = l2_ball_randomize(np.tile(0.5 * u, (n, 1)), radius, eps, rng)
    cosine = reports @ u / l2_ball_output_norm(d, radius, eps)
    for side in (cosine[cosine > 0], -cosine[cosine < 0]):
        result = stats.kstest(side**2, stats.beta(0.5, (d - 1) / 2).cdf)
        assert result.pvalue > 1e-3


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
def test_likelihood_ratio_is_at_most_e_epsilon_and_attained(epsilon: float) -> None:
    rng = np.random.default_rng(5)
    d, radius = 4, 1.5
    directions = rng.normal(size=(4000, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    inputs = [np.zeros(d), radius * np.eye(d)[0], -radius * np.eye(d)[0], 3 * radius * np.eye(d)[1]]
    inputs += [v * rng.uniform(0, radius) / np.linalg.norm(v) for v in rng.normal(size=(12, d))]
    densities = np.array([l2_ball_output_density(directions, v, radius, epsilon) for v in inputs])
    worst = np.max(densities[:, np.newaxis, :] / densities[np.newaxis, :, :])
    assert worst <= math.exp(epsilon) * (1 + 1e-12)
    # opposite vectors of norm r attain the bound
    assert densities[1].max() / densities[2].min() == pytest.approx(math.exp(epsilon), rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"radius": 0.0}, "radius"),
        ({"values": [1.0, float("inf")]}, "values"),
        ({"values": np.zeros((2, 2, 2))}, "values"),
        ({"rng": 42}, "rng"),
    ],
)
def test_bad_parameters_fail_before_any_draw(kwargs: dict, name: str) -> None:
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    call = {"values": [0.1, 0.2], "radius": 1.0, "epsilon": 1.0, "rng": rng} | kwargs
    with pytest.raises(ParameterError, match=name):
        l2_ball_randomize(**call)
    assert rng.bit_generator.state == before
