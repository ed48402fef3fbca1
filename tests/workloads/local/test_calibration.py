"""Calibration of the participants' noise: the analytic Gaussian mechanism, the Laplace scale and the sensitivities.

The exact Gaussian privacy profile is recomputed here with scipy (an implementation independent of the device's
``math.erfc`` one). Sensitivities are checked against a numerical maximisation over pairs of inputs (they must never
be exceeded) and against explicit pairs that attain them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from tests.support.worst_case import attaining_pair, statistic
from workloads.local.calibration import (
    analytic_gaussian_sigma,
    gaussian_mu,
    gaussian_privacy_profile,
    moment_sensitivity,
    sufficient_statistics_sensitivity,
)
from workloads.parameters import ParameterError


def exact_profile(mu: float, epsilon: float) -> float:
    """Balle & Wang 2018, Thm. 8, in log space with scipy."""
    first = stats.norm.cdf(mu / 2 - epsilon / mu)
    second = math.exp(epsilon + stats.norm.logcdf(-mu / 2 - epsilon / mu))
    return first - second


EPSILONS = [0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0]
DELTAS = [1e-3, 1e-6, 290_000**-1.1, 1e-10]


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_gaussian_sigma_is_the_smallest_valid_noise(epsilon: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    assert exact_profile(1.0 / sigma, epsilon) <= delta  # valid
    # and tight: 1e-6 less noise would break the guarantee
    assert exact_profile(1.0 / (sigma * (1 - 1e-6)), epsilon) > delta
    # scales linearly with the sensitivity, never below
    assert analytic_gaussian_sigma(epsilon, delta, 37.5) >= 37.5 * sigma * (1 - 1e-15)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 2.5, 8.0])
def test_device_profile_is_an_upper_bound_on_the_exact_one(epsilon: float, mu: float) -> None:
    ours = gaussian_privacy_profile(mu, epsilon)
    exact = exact_profile(mu, epsilon)  # scipy's value has its own rounding error (~1e-14 relative in tails)
    assert ours >= exact * (1 - 1e-12)
    assert ours <= exact + 1e-15 + 1e-9 * exact


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 0.99])
def test_analytic_sigma_agrees_with_an_independent_root_finder_and_beats_the_classical_scale(epsilon: float) -> None:
    """scipy's brentq on scipy's profile finds the same sigma; where the classical sigma = sqrt(2 ln(1.25/delta)) /
    epsilon of Dwork & Roth 2014, Thm. A.1 applies (epsilon < 1) the analytic one is smaller."""
    delta = 1e-5
    sigma = analytic_gaussian_sigma(epsilon, delta, 2.7)
    reference = optimize.brentq(lambda s: exact_profile(2.7 / s, epsilon) - delta, 1e-3, 1e4, xtol=1e-14)
    assert sigma == pytest.approx(reference, rel=1e-7)
    assert analytic_gaussian_sigma(epsilon, delta, 1.0) < math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def test_classical_gaussian_mechanism_fails_for_large_epsilon() -> None:
    """Why the randomizers do not use sigma = sqrt(2 ln(1.25/delta)) Delta / epsilon: past epsilon < 1 (where Dwork
    & Roth's Thm. A.1 holds) it is unproven, and at epsilon = 10, delta = 1e-6 its true delta is above 1e-6."""
    classical = math.sqrt(2 * math.log(1.25 / 1e-6)) / 10.0
    assert exact_profile(1.0 / classical, 10.0) > 1e-6
    assert analytic_gaussian_sigma(10.0, 1e-6, 1.0) > classical


def test_gaussian_mu_is_cached_and_monotone() -> None:
    assert gaussian_mu(1.0, 1e-6) < gaussian_mu(2.0, 1e-6) < gaussian_mu(2.0, 1e-3)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: analytic_gaussian_sigma(1.0, 0.0, 1.0), "delta"),
        (lambda: sufficient_statistics_sensitivity(3, -1.0, 1.0), "norm_bound"),
        (lambda: sufficient_statistics_sensitivity(3, 1.0, float("nan")), "label_bound"),
    ],
)
def test_bad_parameters_are_named(call, name: str) -> None:  # noqa: ANN001
    with pytest.raises(ParameterError, match=name):
        call()


# ----------------------------------------------------------------------------------------------- sensitivities
@pytest.mark.parametrize("dimension", [2, 3, 5])
@pytest.mark.parametrize(("r", "b"), [(1.0, 1.0), (3.0, 1.0), (0.3, 1.0), (1.0, 0.2), (25.0, 1.0)])
def test_sufficient_statistics_sensitivity_is_attained(dimension: int, r: float, b: float) -> None:
    x, y, x_prime, y_prime = attaining_pair(dimension, r, b)
    assert np.linalg.norm(x) <= r * (1 + 1e-12) and np.linalg.norm(x_prime) <= r * (1 + 1e-12)
    distance = np.linalg.norm(statistic(x, y) - statistic(x_prime, y_prime))
    assert distance == pytest.approx(sufficient_statistics_sensitivity(dimension, r, b), rel=1e-9)


def _maximise_distance(dimension: int, r: float, b: float, seed: int) -> float:
    """Numerical sup of the distance over pairs of inputs: a vectorised random search (norms and labels drawn over
    their whole ranges, boundary included), then L-BFGS from the five best pairs (x = r tanh(|u|) u/|u|,
    y = b tanh(v))."""
    rng = np.random.default_rng(seed)
    count = 100_000
    rows, cols = np.triu_indices(dimension)

    def random_inputs() -> tuple[np.ndarray, np.ndarray]:
        direction = rng.normal(size=(count, dimension))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        length = r * np.where(rng.random(count) < 0.5, 1.0, rng.random(count))
        label = b * np.where(rng.random(count) < 0.5, rng.choice([-1.0, 1.0], count), rng.uniform(-1, 1, count))
        return direction * length[:, None], label

    def statistics(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.concatenate([x[:, rows] * x[:, cols], x * y[:, None]], axis=1)

    (x, y), (x_prime, y_prime) = random_inputs(), random_inputs()
    distances = np.linalg.norm(statistics(x, y) - statistics(x_prime, y_prime), axis=1)

    def point(z: np.ndarray) -> tuple[np.ndarray, float]:
        u, v = z[:dimension], z[dimension]
        length = np.linalg.norm(u) + 1e-300
        return r * math.tanh(length) * u / length, b * math.tanh(v)

    def negative(z: np.ndarray) -> float:
        first, label = point(z[: dimension + 1])
        second, label_prime = point(z[dimension + 1:])
        return -float(np.linalg.norm(statistic(first, label) - statistic(second, label_prime)))

    def unconstrained(point_x: np.ndarray, point_y: float) -> np.ndarray:
        length = np.linalg.norm(point_x)
        scale = math.atanh(min(length / r, 1 - 1e-9)) / length if length > 0 else 0.0
        return np.concatenate([point_x * scale, [math.atanh(float(np.clip(point_y / b, -1 + 1e-9, 1 - 1e-9)))]])

    best = float(distances.max())
    for index in np.argsort(distances)[-5:]:
        start = np.concatenate([unconstrained(x[index], y[index]), unconstrained(x_prime[index], y_prime[index])])
        result = optimize.minimize(negative, start, method="L-BFGS-B")
        best = max(best, -result.fun)
    return best


@pytest.mark.parametrize("dimension", [1, 2, 3])
@pytest.mark.parametrize(("r", "b"), [(1.0, 1.0), (2.0, 0.5), (0.3, 1.0), (1.0, 0.1)])
def test_sufficient_statistics_sensitivity_is_never_exceeded(dimension: int, r: float, b: float) -> None:
    found = _maximise_distance(dimension, r, b, seed=dimension)
    bound = sufficient_statistics_sensitivity(dimension, r, b)
    assert found <= bound * (1 + 1e-12)
    assert found >= bound * (1 - 1e-3)  # the search finds the maximum, so the bound is tight


def test_one_dimensional_sensitivity_matches_a_grid() -> None:
    for r, b in [(1.0, 0.1), (1.0, 0.6), (2.0, 1.0), (1.0, 3.0)]:
        grid = np.linspace(-r, r, 2001)
        x, x_prime = np.meshgrid(grid, grid)
        distance = np.sqrt((x**2 - x_prime**2) ** 2 + (b * (np.abs(x) + np.abs(x_prime))) ** 2)
        assert distance.max() <= sufficient_statistics_sensitivity(1, r, b) * (1 + 1e-12)
        assert distance.max() >= sufficient_statistics_sensitivity(1, r, b) * (1 - 1e-4)


def test_moment_sensitivity_is_the_diameter_of_x_y() -> None:
    r, b = 2.5, 0.8
    x = np.array([r, 0.0, 0.0])
    assert np.linalg.norm(x * b - x * -b) == pytest.approx(moment_sensitivity(r, b), rel=1e-12)
    assert moment_sensitivity(r, b) >= 2 * r * b
    assert moment_sensitivity(r, b) < sufficient_statistics_sensitivity(3, r, b)
