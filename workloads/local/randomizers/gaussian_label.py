"""The Gaussian label randomizer of Label-LDP-IHT, with a calibration valid for every epsilon.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 2,
step 2: each participant reports ``tilde y = y + z``, ``z ~ N(0, sigma_1^2)``; the features are public. The value of
``sigma_1^2`` is cut off in our copy of the paper; Thm. 5 states the guarantee for ``0 < eps <= 1`` only, the range
of the classical Gaussian mechanism ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (Dwork & Roth 2014, Thm. A.1).
The experiments of Sec. 7 and ours use larger epsilon too, so the noise is calibrated with the exact condition
instead: the analytic Gaussian mechanism of Balle & Wang, "Improving the Gaussian mechanism for differential privacy:
analytical calibration and optimal denoising" (ICML 2018), Thm. 8, valid for every ``eps > 0``, computed by
:func:`workloads.local.calibration.analytic_gaussian_sigma` (the one calibration every participant-side randomizer
uses; never larger than the classical scale where that one applies).

**Neighbouring relation and sensitivity.** In the local model a participant's report must be (eps, delta)-close
for *any two* values of her label. Labels are clipped to the public interval ``[-label_bound, label_bound]``, so
``Delta = 2 label_bound``. Clipping is what makes any input private; a label inside the interval is unchanged.

numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import numpy as np

from workloads.local.calibration import analytic_gaussian_sigma
from workloads.local.randomizers.inputs import as_finite_vector
from workloads.local.rng import generator_or_device
from workloads.parameters import check_positive


def label_noise_sigma(label_bound: float, epsilon: float, delta: float) -> float:
    """``sigma_1`` for labels clipped to ``[-label_bound, label_bound]``: sensitivity ``2 label_bound``."""
    return analytic_gaussian_sigma(epsilon, delta, 2.0 * check_positive("label_bound", label_bound))


def randomize_labels(
    labels: object, label_bound: float, epsilon: float, delta: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``clip(y, -B, B) + N(0, sigma_1^2)`` for each label (one per participant); (eps, delta)-LDP for each."""
    bound = check_positive("label_bound", label_bound)
    sigma = label_noise_sigma(bound, epsilon, delta)
    values = as_finite_vector("labels", labels)
    rng = generator_or_device(rng)
    return np.clip(values, -bound, bound) + rng.normal(0.0, sigma, size=values.shape)
