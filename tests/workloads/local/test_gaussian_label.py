"""The Gaussian label randomizer of Label-LDP-IHT and its analytic calibration (Balle & Wang 2018, Thm. 8).

The exact privacy profile is recomputed here with scipy's normal CDF (an implementation independent of the module's
``math.erfc`` one), and the calibration is checked both ways: the returned sigma meets delta, and 1e-6 less noise does
not. The variance test allows 5 standard errors of a sample variance, ``sigma^2 sqrt(2 / N)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from workloads.local.randomizers.gaussian_label import (
    analytic_gaussian_sigma,
    gaussian_delta,
    label_noise_sigma,
    randomize_labels,
)
from workloads.parameters import ParameterError


def exact_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    mu = sensitivity / sigma
    return stats.norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * stats.norm.cdf(-mu / 2 - epsilon / mu)


@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 2.0, 8.0])
def test_analytic_sigma_meets_delta_and_is_tight(epsilon: float, delta: float) -> None:
    sensitivity = 2.7
    sigma = analytic_gaussian_sigma(sensitivity, epsilon, delta)
    assert exact_delta(sigma, sensitivity, epsilon) <= delta * (1 + 1e-12)
    assert exact_delta(sigma * (1 - 1e-6), sensitivity, epsilon) > delta
    # an independent root finder on scipy's profile agrees
    reference = optimize.brentq(lambda s: exact_delta(s, sensitivity, epsilon) - delta, 1e-3, 1e4, xtol=1e-14)
    assert sigma == pytest.approx(reference, rel=1e-7)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.99])
def test_analytic_sigma_is_below_the_classical_scale_where_that_applies(epsilon: float) -> None:
    classical = math.sqrt(2 * math.log(1.25 / 1e-5)) / epsilon  # Dwork & Roth 2014, Thm. A.1 (epsilon < 1)
    assert analytic_gaussian_sigma(1.0, epsilon, 1e-5) < classical


def test_gaussian_delta_matches_scipy() -> None:
    for sigma, eps in ((0.5, 0.3), (3.0, 1.0), (10.0, 4.0)):
        assert gaussian_delta(sigma, 1.0, eps) == pytest.approx(exact_delta(sigma, 1.0, eps), rel=1e-9, abs=1e-300)


def test_label_noise_uses_sensitivity_twice_the_bound() -> None:
    assert label_noise_sigma(1.5, 1.0, 1e-3) == analytic_gaussian_sigma(3.0, 1.0, 1e-3)


def test_randomized_labels_have_the_stated_variance_and_clip() -> None:
    rng = np.random.default_rng(2)
    n, bound, eps, delta = 200_000, 2.0, 1.0, 1e-3
    sigma = label_noise_sigma(bound, eps, delta)
    labels = rng.uniform(-bound, bound, size=n)
    noise = randomize_labels(labels, bound, eps, delta, rng) - labels
    assert abs(noise.mean()) < 5 * sigma / math.sqrt(n)
    assert abs(noise.var() / sigma**2 - 1) < 5 * math.sqrt(2 / n)
    far = randomize_labels(np.full(n, 10 * bound), bound, eps, delta, rng)  # clipped to +bound before the noise
    assert abs(far.mean() - bound) < 5 * sigma / math.sqrt(n)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"epsilon": 0}, "epsilon"),
        ({"label_bound": -1.0}, "label_bound"),
        ({"labels": [1.0, float("nan")]}, "labels"),
    ],
)
def test_bad_parameters_fail_before_any_draw(kwargs: dict, name: str) -> None:
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    call = {"labels": [0.1, 0.2], "label_bound": 1.0, "epsilon": 1.0, "delta": 1e-3, "rng": rng} | kwargs
    with pytest.raises(ParameterError, match=name):
        randomize_labels(**call)
    assert rng.bit_generator.state == before
