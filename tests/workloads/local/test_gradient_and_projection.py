"""Participants' reports of LDP-IHT (clipped gradient) and DR-ERM (projected statistics), and the public projection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.local.randomizers.iht_gradient import (
    clipped_least_squares_gradient,
    default_residual_bound,
    ldp_iht_report,
    worst_case_residual_bound,
)
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.local.randomizers.random_projection_statistics import (
    projected_statistics,
    projected_statistics_bound,
    projected_statistics_report,
    random_projection,
    unpack_projected_statistics,
)
from workloads.parameters import ParameterError


def test_worst_case_residual_bound_never_clips_on_the_model_class() -> None:
    rng = np.random.default_rng(0)
    p, s, radius, label_bound = 30, 4, 1.0, 2.5
    bound = worst_case_residual_bound(s, radius, label_bound)
    worst = 0.0
    for _ in range(200):
        theta = np.zeros(p)
        support = rng.choice(p, s, replace=False)
        theta[support] = rng.normal(size=s)
        theta *= radius / np.linalg.norm(theta)
        x = rng.choice([-1.0, 1.0], size=(50, p))
        x[0] = np.sign(theta) + (theta == 0)  # the aligned row attains ||theta||_1
        y = rng.choice([-label_bound, label_bound], size=50)
        worst = max(worst, float(np.max(np.abs(x @ theta - y))))
        np.testing.assert_allclose(
            clipped_least_squares_gradient(theta, x, y, bound), x * (x @ theta - y)[:, np.newaxis]
        )
    assert worst <= bound


def test_default_residual_bound_is_min_of_the_label_bound_and_two_design_scales() -> None:
    # Sec. 7.1's design: p = 100, ||x|| = sqrt(p) (scale 1), R = 1, B_y = sqrt(10) + 0.05 -> c = 2 (not 6.37)
    assert default_residual_bound(math.sqrt(10) + 0.05, 1.0, 10.0, 100) == 2.0
    assert default_residual_bound(1.0, 1.0, 10.0, 100) == 1.0  # a label bound under 2 R binds: round 0 never clips
    assert default_residual_bound(9.0, 0.5, 2 * math.sqrt(30), 30) == pytest.approx(2.0)  # scale 2, R = 0.5
    with pytest.raises(ParameterError, match="label_bound"):
        default_residual_bound(0.0, 1.0, 10.0, 100)


def test_default_clip_bias_at_round_zero_is_within_the_derived_bound() -> None:
    """At theta = 0 clipping y at c = 2 on Sec. 7.1's design biases the mean gradient by at most
    sqrt(E (|y| - c)_+^2) in l2 (Cauchy-Schwarz with E x x^T = I): 0.058 here (0.11 for a unit Gaussian y)."""
    rng = np.random.default_rng(5)
    n, p, s = 40_000, 100, 10
    theta_star = np.zeros(p)
    theta_star[:s] = rng.uniform(0, 1, s)
    theta_star /= np.linalg.norm(theta_star)
    x = rng.choice([-1.0, 1.0], size=(n, p))
    y = x @ theta_star + rng.uniform(-0.05, 0.05, n)
    c = default_residual_bound(math.sqrt(s) + 0.05, 1.0, math.sqrt(p), p)
    bias = (clipped_least_squares_gradient(np.zeros(p), x, y, c) - (-x * y[:, np.newaxis])).mean(axis=0)
    cauchy_schwarz = math.sqrt(float(np.mean(np.clip(np.abs(y) - c, 0, None) ** 2)))
    sampling = math.sqrt(float(np.mean(np.abs(y) > c)) * p / n)  # the sample mean's own l2 error, about
    assert np.linalg.norm(bias) <= cauchy_schwarz + 3 * sampling
    assert cauchy_schwarz < 0.11  # the bias stays a small fraction of ||theta*|| = 1


def test_clipped_gradient_clips_the_residual() -> None:
    x = np.array([[1.0, -1.0], [2.0, 0.0]])
    gradient = clipped_least_squares_gradient([1.0, 0.0], x, [-5.0, 1.0], residual_bound=2.0)
    np.testing.assert_allclose(gradient, [[2.0, -2.0], [2.0, 0.0]])  # residuals 6 -> 2 and 1
    with pytest.raises(ParameterError, match="y must hold 2"):
        clipped_least_squares_gradient([1.0, 0.0], x, [1.0], 2.0)


def test_ldp_iht_reports_average_to_the_mean_gradient() -> None:
    rng = np.random.default_rng(1)
    n, p, eps = 100_000, 3, 1.0
    x = rng.choice([-1.0, 1.0], size=(n, p))
    theta = np.array([0.5, 0.0, -0.2])
    y = x @ np.array([0.3, 0.4, 0.0]) + rng.uniform(-0.05, 0.05, n)
    c = worst_case_residual_bound(2, 1.0, 1.0)
    reports = ldp_iht_report(theta, x, y, c, math.sqrt(p), eps, rng)
    expected = (x * (x @ theta - y)[:, np.newaxis]).mean(axis=0)
    radius = math.sqrt(p) * c
    standard_error = l2_ball_output_norm(p, radius, eps) / math.sqrt(p * n)
    assert np.max(np.abs(reports.mean(axis=0) - expected)) < 5 * standard_error


def test_projection_is_reproducible_and_pinned() -> None:
    phi = random_projection(3, 5, seed=0)
    np.testing.assert_array_equal(phi * math.sqrt(3), [[1, 1, 1, 1, 1], [-1, 1, -1, -1, 1], [-1, -1, -1, -1, -1]])
    np.testing.assert_array_equal(random_projection(40, 300, 12), random_projection(40, 300, 12))
    assert not np.array_equal(random_projection(40, 300, 12), random_projection(40, 300, 13))
    big = random_projection(50, 2000, 3)
    np.testing.assert_allclose(np.linalg.norm(big, axis=0), 1.0)  # columns of +-1/sqrt(m): unit norm exactly
    assert abs(big.mean()) < 5 / math.sqrt(big.size) / math.sqrt(50)  # signs balanced
    with pytest.raises(ParameterError, match="seed"):
        random_projection(3, 5, seed=-1)


def test_projected_statistics_bound_and_layout() -> None:
    rng = np.random.default_rng(2)
    m, p, radius, label_bound = 4, 50, 1.2, 0.8
    phi = random_projection(m, p, 5)
    x = rng.normal(size=(300, p)) * rng.uniform(0, 1, size=(300, 1))
    y = rng.normal(size=300) * 2
    stats = projected_statistics(x, y, phi, radius, label_bound)
    assert stats.shape == (300, m + m * (m + 1) // 2)
    assert np.max(np.linalg.norm(stats, axis=1)) <= projected_statistics_bound(radius, label_bound) * (1 + 1e-12)
    cross, gram = unpack_projected_statistics(stats.mean(axis=0), m)
    u = x @ phi.T
    u *= np.minimum(1.0, radius / np.linalg.norm(u, axis=1, keepdims=True))
    np.testing.assert_allclose(cross, (np.clip(y, -label_bound, label_bound)[:, None] * u).mean(axis=0))
    np.testing.assert_allclose(gram, u.T @ u / 300)


def test_projected_reports_are_unbiased() -> None:
    rng = np.random.default_rng(3)
    m, p, n, eps = 2, 10, 100_000, 1.0
    phi = random_projection(m, p, 9)
    x = rng.normal(size=(n, p)) / math.sqrt(p)
    y = np.clip(x @ np.linspace(-1, 1, p), -1, 1)
    reports = projected_statistics_report(x, y, phi, 1.5, 1.0, eps, rng)
    exact = projected_statistics(x, y, phi, 1.5, 1.0).mean(axis=0)
    width = reports.shape[1]
    standard_error = l2_ball_output_norm(width, projected_statistics_bound(1.5, 1.0), eps) / math.sqrt(width * n)
    assert np.max(np.abs(reports.mean(axis=0) - exact)) < 5 * standard_error
