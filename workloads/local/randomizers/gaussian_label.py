"""The Gaussian label randomizer of Label-LDP-IHT, with a calibration valid for every epsilon.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 2,
step 2: each participant reports ``tilde y = y + z``, ``z ~ N(0, sigma_1^2)``; the features are public. The value of
``sigma_1^2`` is cut off in our copy of the paper; Thm. 5 states the guarantee for ``0 < eps <= 1`` only, the range
of the classical Gaussian mechanism ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps`` (Dwork & Roth 2014, Thm. A.1).
The experiments of Sec. 7 and ours use larger epsilon too, so we calibrate with the exact condition instead:

**Analytic Gaussian mechanism** (Balle & Wang, "Improving the Gaussian mechanism for differential privacy:
analytical calibration and optimal denoising", ICML 2018, Thm. 8): ``f(x) + N(0, sigma^2)`` with l2 sensitivity
``Delta`` is (eps, delta)-DP if and only if

    Phi(Delta / (2 sigma) - eps sigma / Delta) - e^eps Phi(-Delta / (2 sigma) - eps sigma / Delta) <= delta,

for every ``eps > 0``. With ``mu = Delta / sigma`` the left side, :func:`gaussian_delta`, increases with ``mu``;
:func:`analytic_gaussian_sigma` finds the largest feasible ``mu`` by bisection (keeping the feasible end, so the
returned ``sigma`` satisfies the condition) against ``delta (1 - 1e-9)``, a margin that absorbs the rounding of
``Phi`` (relative error near ``1e-15``), and rounds ``sigma`` up by one ulp. It is never larger than the
classical scale where that one applies.

**Neighbouring relation and sensitivity.** In the local model a participant's report must be (eps, delta)-close
for *any two* values of her label. Labels are clipped to the public interval ``[-label_bound, label_bound]``, so
``Delta = 2 label_bound``. Clipping is what makes any input private; a label inside the interval is unchanged.
``Phi`` uses ``math.erfc``: numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import math

import numpy as np

from workloads.local.randomizers.inputs import as_finite_vector
from workloads.local.rng import generator_or_device
from workloads.parameters import check_positive, check_probability

_BISECTION_STEPS = 200
_DELTA_MARGIN = 1.0 - 1e-9


def _log_normal_cdf(x: float) -> float:
    """``log Phi(x)``; ``-inf`` where ``Phi(x)`` underflows (below about ``-38``)."""
    value = 0.5 * math.erfc(-x / math.sqrt(2.0))
    return math.log(value) if value > 0.0 else -math.inf


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact delta of the Gaussian mechanism at ``epsilon`` (Balle & Wang 2018, Thm. 8)."""
    mu = check_positive("sensitivity", sensitivity) / check_positive("sigma", sigma)
    eps = check_positive("epsilon", epsilon)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    first = 0.5 * math.erfc(-a / math.sqrt(2.0))
    log_second = eps + _log_normal_cdf(b)
    second = math.exp(log_second) if log_second > -745.0 else 0.0
    return max(first - second, 0.0)


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest ``sigma`` (to bisection accuracy, on the safe side) with ``gaussian_delta <= delta``."""
    sens = check_positive("sensitivity", sensitivity)
    eps = check_positive("epsilon", epsilon)
    target = check_probability("delta", delta) * _DELTA_MARGIN

    def feasible(mu: float) -> bool:
        return gaussian_delta(sens / mu, sens, eps) <= target

    lo, hi = 0.0, 1.0
    while feasible(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e12:  # delta(mu) -> 1 as mu grows, so this only happens for nonsensical inputs
            raise ValueError(f"no finite noise scale found for epsilon={epsilon!r}, delta={delta!r}")
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if feasible(mid):
            lo = mid
        else:
            hi = mid
    if lo == 0.0:  # delta(mu) ~ Phi(-eps/mu) e^... > 0 for every mu > 0, so some tiny mu is always feasible
        raise ValueError(f"no noise scale found for epsilon={epsilon!r}, delta={delta!r}")
    return math.nextafter(sens / lo, math.inf)


def label_noise_sigma(label_bound: float, epsilon: float, delta: float) -> float:
    """``sigma_1`` for labels clipped to ``[-label_bound, label_bound]``: sensitivity ``2 label_bound``."""
    return analytic_gaussian_sigma(2.0 * check_positive("label_bound", label_bound), epsilon, delta)


def randomize_labels(
    labels: object, label_bound: float, epsilon: float, delta: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``clip(y, -B, B) + N(0, sigma_1^2)`` for each label (one per participant); (eps, delta)-LDP for each."""
    bound = check_positive("label_bound", label_bound)
    sigma = label_noise_sigma(bound, epsilon, delta)
    values = as_finite_vector("labels", labels)
    rng = generator_or_device(rng)
    return np.clip(values, -bound, bound) + rng.normal(0.0, sigma, size=values.shape)
