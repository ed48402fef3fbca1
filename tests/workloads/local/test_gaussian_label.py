"""The Gaussian label randomizer of Label-LDP-IHT: its noise is the participants' one analytic Gaussian calibration
(tested in ``test_calibration.py``) at sensitivity ``2 B``, its reports are clipped, unbiased and of the stated
variance. The variance test allows 5 standard errors of a sample variance, ``sigma^2 sqrt(2 / N)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.local.calibration import analytic_gaussian_sigma
from workloads.local.randomizers.gaussian_label import label_noise_sigma, randomize_labels
from workloads.parameters import ParameterError


def test_label_noise_uses_sensitivity_twice_the_bound() -> None:
    assert label_noise_sigma(1.5, 1.0, 1e-3) == analytic_gaussian_sigma(1.0, 1e-3, 3.0)


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
