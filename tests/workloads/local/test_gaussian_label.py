"""The Gaussian label randomizer of Label-LDP-IHT: discrete Gaussian noise on a public grid, calibrated through zCDP
at the rounded label's sensitivity ``g (U - L)``; its reports are clipped, on the grid, unbiased and of the stated
variance. The variance test allows 5 standard errors of a sample variance, ``sigma^2 sqrt(2 / N)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.conversions import cdp_rho
from workloads.local.calibration import analytic_gaussian_sigma, grid_units
from workloads.local.randomizers.gaussian_label import label_noise, label_noise_sigma, randomize_labels
from workloads.parameters import ParameterError


def test_label_noise_is_rho_zcdp_at_the_rounded_sensitivity() -> None:
    """rho = (U - L)^2 / (2 t c) in grid units is at most cdp_rho(eps, delta), and within 2^-9 of it (not over-noised);
    the zCDP route costs at most 13 % more noise than the analytic Gaussian here (delta = 1e-3)."""
    bound, eps, delta = 1.5, 1.0, 1e-3
    noise = label_noise(bound, eps, delta)
    low, high = grid_units(-bound, bound, noise.grid)
    assert noise.grid * low == -bound and noise.grid * high == bound  # 1.5 is on the power-of-two grid
    rho = (high - low) ** 2 / (2 * noise.t * noise.c)
    assert rho <= cdp_rho(eps, delta) and rho >= cdp_rho(eps, delta) * (1 - 2.0**-9)
    assert label_noise_sigma(bound, eps, delta) == noise.scale
    assert 1.0 < noise.scale / analytic_gaussian_sigma(eps, delta, 2 * bound) < 1.13


def test_randomized_labels_have_the_stated_variance_and_clip() -> None:
    rng = np.random.default_rng(2)
    n, bound, eps, delta = 200_000, 2.0, 1.0, 1e-3
    sigma = label_noise_sigma(bound, eps, delta)
    labels = rng.uniform(-bound, bound, size=n)
    reports = randomize_labels(labels, bound, eps, delta, rng)
    grid = label_noise(bound, eps, delta).grid
    assert np.array_equal(np.round(reports / grid) * grid, reports)  # every report on the grid
    noise = reports - labels
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
