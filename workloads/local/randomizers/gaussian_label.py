"""The Gaussian label randomizer of Label-LDP-IHT: exact discrete Gaussian noise on a public grid.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 2,
step 2: each participant reports ``tilde y = y + z``, ``z ~ N(0, sigma_1^2)``; the features are public. The value of
``sigma_1^2`` is cut off in our copy of the paper; Thm. 5 states the guarantee for ``0 < eps <= 1`` only, the range
of the classical Gaussian mechanism. Here (``docs/privacy.md`` 8.7 and 8.9):

1. the label is clipped to the public ``[-label_bound, label_bound]`` (in the local model a report must be close for
   *any two* labels: the sensitivity is the width ``2 label_bound``);
2. it is rounded, unbiasedly at random, to a public power-of-two grid ``g`` (at most ``2^-10`` of the smaller of the
   width and the noise scale), landing in the grid interval ``[L, U] = [floor(-B / g), ceil(B / g)]``
   (:mod:`workloads.local.randomizers.grid`);
3. discrete Gaussian noise ``N_Z(0, sigma_u^2)`` is added in grid units, with ``g sigma_u >= sigma = g (U - L) /
   sqrt(2 rho)`` and ``rho = cdp_rho(epsilon, delta)``: two rounded labels differ by at most ``U - L`` units, so the
   report is rho-zCDP (Canonne, Kamath & Steinke 2020: the discrete Gaussian's Renyi divergence is at most the
   continuous one's), hence (epsilon, delta)-LDP by their Cor. 13, for every epsilon > 0.

The report is ``g (K + N)``, an exact multiple of ``g``; it is unbiased for the clipped label.

numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import numpy as np

from workloads.local.calibration import GAUSSIAN_GRID_STEPS, grid_units, power_of_two_grid, zcdp_gaussian_sigma
from workloads.local.randomizers.grid import GridNoise, gaussian_grid_noise, grid_report
from workloads.local.randomizers.inputs import as_finite_vector
from workloads.local.rng import generator_or_device
from workloads.parameters import check_positive


def label_noise(label_bound: float, epsilon: float, delta: float) -> GridNoise:
    """The grid and discrete Gaussian noise of a label clipped to ``[-label_bound, label_bound]``."""
    bound = check_positive("label_bound", label_bound)
    first = zcdp_gaussian_sigma(epsilon, delta, 2.0 * bound)
    grid = power_of_two_grid(min(2.0 * bound, first), GAUSSIAN_GRID_STEPS)
    low, high = grid_units(-bound, bound, grid)
    return gaussian_grid_noise(zcdp_gaussian_sigma(epsilon, delta, (high - low) * grid), grid)


def label_noise_sigma(label_bound: float, epsilon: float, delta: float) -> float:
    """``sigma_1``: the scale parameter of a label's noise, ``g sigma_u`` (at least ``2 B / sqrt(2 rho)``)."""
    return label_noise(label_bound, epsilon, delta).scale


def randomize_labels(
    labels: object, label_bound: float, epsilon: float, delta: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``g (round(clip(y, -B, B)) + N_Z(0, sigma_u^2))`` for each label (one per participant); (eps, delta)-LDP."""
    bound = check_positive("label_bound", label_bound)
    noise = label_noise(bound, epsilon, delta)
    values = as_finite_vector("labels", labels)
    return grid_report(np.clip(values, -bound, bound), noise, generator_or_device(rng))
