"""Noise calibration: the noise scale a mechanism needs for the privacy it is charged.

Plain floats and exact rationals only. Every float is rounded in the safe direction (noise never smaller than the
calibration requires), and the exact forms feed the exact discrete samplers of :mod:`service.privacy.noise`, so the
privacy a mechanism uses is exactly what the accountant charged. Sources:

* Gaussian mechanism: rho = Delta_2^2 / (2 sigma^2)-zCDP (Bun & Steinke 2016, "Concentrated Differential Privacy:
  Simplifications, Extensions, and Lower Bounds", Prop. 1.6); the same for the discrete Gaussian (Canonne, Kamath &
  Steinke 2020, "The Discrete Gaussian for Differential Privacy", Thm. 4).
* Laplace mechanism: scale Delta_1 / epsilon is epsilon-DP (Dwork, McSherry, Nissim & Smith 2006, "Calibrating
  Noise to Sensitivity in Private Data Analysis"); the discrete Laplace likewise (CKS 2020).
* Exponential mechanism: with parameter epsilon it is epsilon-bounded-range (Durfee & Rogers 2019, "Practical
  Differentially Private Top-k Selection with Pay-what-you-get Composition"), hence epsilon^2/8-zCDP (Cesar & Rogers
  2021, "Bounding, Concentrating, and Truncating: Unifying Privacy Loss Composition for Data Analytics", ALT).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from workloads.parameters import positive_exact, validate_rho

#: Significant bits of a selection epsilon (see :func:`exponential_epsilon`).
EPSILON_BITS = 30


def gaussian_sigma(rho: float, l2_sensitivity: float) -> float:
    """sigma with rho = Delta_2^2 / (2 sigma^2): the Gaussian mechanism is rho-zCDP (Bun & Steinke 2016,
    Prop. 1.6); the same for the discrete Gaussian with sigma^2 (CKS 2020, Thm. 4 and its multivariate
    form for independent coordinates). Rounded up (by a few ulps) so that the noise is never too small."""
    rho = validate_rho(rho)
    delta2 = float(positive_exact(l2_sensitivity, "l2_sensitivity"))
    return math.nextafter(delta2 / math.sqrt(2.0 * rho) * (1.0 + 2.0**-50), math.inf)


def gaussian_sigma2_exact(rho: object, l2_sensitivity: object = 1) -> Fraction:
    """sigma^2 = Delta_2^2 / (2 rho) as an exact rational, for the exact discrete Gaussian sampler."""
    rho_exact = positive_exact(rho, "rho")
    delta2 = positive_exact(l2_sensitivity, "l2_sensitivity")
    return delta2 * delta2 / (2 * rho_exact)


def laplace_scale_exact(epsilon: object, l1_sensitivity: object) -> Fraction:
    """b = Delta_1 / epsilon as an exact rational, for the exact discrete Laplace sampler."""
    return positive_exact(l1_sensitivity, "l1_sensitivity") / positive_exact(epsilon, "epsilon")


def discrete_laplace_variance(scale: object) -> float:
    """The variance ``2 q / (1 - q)^2``, ``q = exp(-1/scale)``, of the discrete Laplace law ``P(x) ~ exp(-|x|/scale)``
    on the integers (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Sec. 2.2): the
    standard errors of a direct Laplace release's answers. Below the continuous ``2 scale^2``."""
    q = math.exp(-1.0 / float(positive_exact(scale, "scale")))
    return 2.0 * q / (1.0 - q) ** 2


#: Above this sigma^2 the discrete Gaussian's variance is sigma^2 to double precision (the gap is of order
#: ``sigma^4 exp(-2 pi^2 sigma^2)``; CKS 2020, Cor. 9 bounds it by sigma^2 from above).
DISCRETE_GAUSSIAN_EXACT_BELOW = 100.0


def discrete_gaussian_variance(sigma2: object) -> float:
    """The variance of the discrete Gaussian ``N_Z(0, sigma2)`` (CKS 2020): summed over the support up to 60 sigma
    for small ``sigma2`` (the tail beyond is below ``exp(-1800)``), ``sigma2`` itself above
    :data:`DISCRETE_GAUSSIAN_EXACT_BELOW`. The standard errors of a direct Gaussian release's answers."""
    s2 = float(positive_exact(sigma2, "sigma2"))
    if s2 >= DISCRETE_GAUSSIAN_EXACT_BELOW:
        return s2
    support = np.arange(1, math.ceil(60.0 * math.sqrt(s2)) + 2, dtype=float)
    weights = np.exp(-support * support / (2.0 * s2))
    # never above sigma^2 (CKS 2020, Cor. 9), which rounding in the sum could otherwise cross
    return min(s2, float(2.0 * np.dot(support * support, weights) / (1.0 + 2.0 * weights.sum())))


def discrete_laplace_excess_kurtosis(scale: object) -> float:
    """The excess kurtosis ``(1 + 4q + q^2) / (2q)``, ``q = exp(-1/scale)``, of the discrete Laplace law (3, the
    continuous Laplace's, as the scale grows): with ``mu_2 = 2q / (1-q)^2`` and ``mu_4 = 2q (1 + 11q + 11q^2 + q^3) /
    ((1+q) (1-q)^4)`` (from ``sum_k k^4 q^k = q (1 + 11q + 11q^2 + q^3) / (1-q)^5``; our derivation),
    ``mu_4 / mu_2^2 - 3`` simplifies to it. What the closed-form accuracy of a Laplace release reads
    (:mod:`estimators.residual.accuracy`)."""
    q = math.exp(-1.0 / float(positive_exact(scale, "scale")))
    return (1.0 + 4.0 * q + q * q) / (2.0 * q)


def discrete_gaussian_excess_kurtosis(sigma2: object) -> float:
    """The excess kurtosis of the discrete Gaussian ``N_Z(0, sigma2)``, summed over its support as
    :func:`discrete_gaussian_variance` is; 0 above :data:`DISCRETE_GAUSSIAN_EXACT_BELOW` (it is of order
    ``exp(-2 pi^2 sigma^2)``, like the gap between its variance and sigma^2)."""
    s2 = float(positive_exact(sigma2, "sigma2"))
    if s2 >= DISCRETE_GAUSSIAN_EXACT_BELOW:
        return 0.0
    support = np.arange(1, math.ceil(60.0 * math.sqrt(s2)) + 2, dtype=float)
    weights = np.exp(-support * support / (2.0 * s2))
    total = 1.0 + 2.0 * weights.sum()
    second = 2.0 * float(np.dot(support ** 2, weights)) / total
    fourth = 2.0 * float(np.dot(support ** 4, weights)) / total
    return float(fourth / second / second - 3.0)  # not over second**2, which underflows for the smallest sigma2


def gaussian_rho(sigma2: Fraction, l2_sensitivity: object = 1) -> Fraction:
    """The zCDP cost Delta_2^2 / (2 sigma^2) of discrete Gaussian noise of parameter ``sigma2`` (CKS 2020, Thm. 4),
    exactly: the inverse of :func:`gaussian_sigma2_exact`."""
    delta2 = positive_exact(l2_sensitivity, "l2_sensitivity")
    return delta2 * delta2 / (2 * Fraction(sigma2))


def exponential_rho(epsilon: Fraction) -> Fraction:
    """The zCDP cost epsilon^2 / 8 of one exponential-mechanism selection with parameter epsilon (bounded range;
    Cesar & Rogers 2021)."""
    return epsilon * epsilon / 8


def exponential_epsilon(budget: Fraction, bits: int = EPSILON_BITS) -> Fraction:
    """The largest dyadic epsilon = m / 2^k with about ``bits`` significant bits such that
    epsilon^2 / 8 <= ``budget``: m = isqrt(floor(8 budget 4^k)) gives m^2 <= 8 budget 4^k. The
    float of the result is exact, so the sampler uses precisely the epsilon that is charged."""
    if budget <= 0:
        return Fraction(0)
    target = 8 * Fraction(budget)
    k = bits - (target.numerator.bit_length() - target.denominator.bit_length()) // 2
    m = math.isqrt(math.floor(target * Fraction(4) ** k))
    epsilon = Fraction(m) / Fraction(2) ** k
    assert exponential_rho(epsilon) <= budget and Fraction(float(epsilon)) == epsilon
    return epsilon


# rounding a privacy parameter or a noise scale in the safe direction --------------------------------
def float_down(value: Fraction) -> float:
    """The largest float <= ``value``: a privacy parameter rounded so that noise computed from it is never too
    small."""
    as_float = float(value)
    return math.nextafter(as_float, 0.0) if Fraction(as_float) > value else as_float


def float_up(value: Fraction) -> float:
    """The smallest float >= ``value``."""
    as_float = float(value)
    return math.nextafter(as_float, math.inf) if Fraction(as_float) < value else as_float


def sqrt_up(value: Fraction) -> float:
    """A float >= sqrt(value) (within a few ulps)."""
    root = math.sqrt(float_up(value))
    while Fraction(root) * Fraction(root) < value:
        root = math.nextafter(root, math.inf)
    return root
