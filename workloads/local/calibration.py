"""Noise calibration for the randomizers participants run: Laplace scale, analytic Gaussian, sensitivities.

``math`` and numpy only, so a participant's device computes the noise of its own report from the campaign's public
parameters and needs no server-side package (and need not trust a noise scale the server sends).

Sources (derivations in ``docs/privacy.md``, section 8.7):

* Laplace mechanism: Dwork, McSherry, Nissim & Smith 2006, "Calibrating noise to sensitivity in private data
  analysis": adding ``Lap(Delta_1 / epsilon)`` to a value whose possible inputs lie within l1 distance ``Delta_1`` of
  each other is epsilon-LDP.
* Analytic Gaussian mechanism: Balle & Wang 2018, "Improving the Gaussian mechanism for differential privacy:
  analytical calibration and optimal denoising" (ICML), Thm. 8: ``f(x) + N(0, sigma^2 I)`` with l2 sensitivity
  ``Delta`` is (epsilon, delta)-DP if and only if, with ``mu = Delta / sigma``,

      Phi(mu / 2 - epsilon / mu) - e^epsilon Phi(-mu / 2 - epsilon / mu) <= delta,

  valid for every epsilon > 0 (the classical ``sigma = sqrt(2 ln(1.25 / delta)) Delta / epsilon`` of Dwork & Roth
  2014, Thm. A.1, needs epsilon < 1). The left side is the exact privacy profile of the pair ``N(0, 1)``,
  ``N(mu, 1)`` (Dong, Roth & Su 2019 call it mu-GDP).

* Discrete noise on a public grid (``docs/privacy.md`` 8.7, "Floating point"): the statistic is rounded to a grid of
  power-of-two step ``g`` (:func:`power_of_two_grid`) and integer noise is added in grid units: discrete Laplace of
  integer scale ``t >= Delta_1 / (g epsilon)`` (:func:`discrete_laplace_units`; pure epsilon-DP, the geometric
  mechanism), discrete Gaussian of integer ``sigma^2 = t c`` in grid units with ``g^2 t c >= sigma^2`` for the
  continuous ``sigma = Delta_2 / sqrt(2 rho)`` (:func:`zcdp_gaussian_sigma`, :func:`discrete_gaussian_units`):
  ``rho``-zCDP (Canonne, Kamath & Steinke 2020, the discrete Gaussian's Renyi bound) with ``rho`` the largest for
  which their Cor. 13 gives (epsilon, delta)-DP (:func:`workloads.conversions.cdp_rho`). That route costs 5-18 % more
  noise than the analytic Gaussian the device used before (7.2 % at epsilon 1, delta 1e-6; 18 % at epsilon 0.1,
  delta 1e-3; ``docs/privacy.md`` 8.7).

Every result is rounded in the safe direction: a scale is never smaller than the exact calibration requires.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from workloads.conversions import cdp_rho
from workloads.parameters import ParameterError, check_count, check_positive, check_probability

#: Relative upward rounding applied to every noise scale (a few ulps of float64; covers the rounding of the
#: divisions that produce it).
_SCALE_ROUND_UP = 1.0 + 2.0**-50
#: The computed profile is raised by this many ulps of its two terms (plus the error of ``exp`` of a large exponent),
#: an upper bound on the floating-point error of ``math.erfc`` (a few ulps), ``log`` and the subtraction.
_PROFILE_ULPS = 64
_BISECTION_STEPS = 200


def round_up(scale: float) -> float:
    """``scale`` raised by a few ulps: what every calibration returns."""
    return math.nextafter(scale * _SCALE_ROUND_UP, math.inf)


# ------------------------------------------------------------------------------------------------ discrete noise
#: Grid steps per unit of the finer of (noise scale, per-entry sensitivity): the grid is at least this fine, so
#: rounding adds at most 2^-12 (Laplace) or 2^-10 (Gaussian) of either to the noise or to the sensitivity.
LAPLACE_GRID_STEPS = 12
GAUSSIAN_GRID_STEPS = 10
#: Largest |value / g| a grid report may have: integers up to 2^52 are exact in float64 (with a factor 2 to spare).
MAX_GRID_UNITS = 1 << 52


def power_of_two_grid(resolution: float, steps: int) -> float:
    """``2^(floor(log2(resolution)) - steps)``: the public grid step, a power of two at most ``resolution / 2^steps``.

    A power of two so that ``v / g`` and ``k g`` are exact in float64 (no rounding error can depend on the input)."""
    value = check_positive("resolution", resolution)
    exponent = math.frexp(value)[1] - 1  # value in [2^exponent, 2^(exponent + 1))
    return math.ldexp(1.0, exponent - int(steps))


def grid_units(low: float, high: float, grid: float) -> tuple[int, int]:
    """``(floor(low / g), ceil(high / g))``: the grid interval holding ``[low, high]``; the randomized rounding of a
    value in ``[low, high]`` stays in it. Refused when a unit would not be exact in float64."""
    lo = math.floor(float(low) / grid)
    hi = math.ceil(float(high) / grid)
    if max(abs(lo), abs(hi)) >= MAX_GRID_UNITS // 2:
        raise ParameterError(f"the interval [{low}, {high}] is too far from zero for a grid of step {grid}")
    return lo, hi


def discrete_laplace_units(l1_units: int, epsilon: float) -> int:
    """The integer scale ``t = ceil(Delta_1 / epsilon)`` (exactly, in rationals) of discrete Laplace noise that makes
    a statistic with integer l1 sensitivity ``Delta_1`` (grid units) epsilon-DP: the pmf ratio at a shift ``mu`` is
    ``exp((|x| - |x - mu|) / t) <= exp(||mu||_1 / t) <= exp(epsilon)``."""
    units = check_count("l1_units", l1_units)
    return math.ceil(Fraction(units) / Fraction(check_positive("epsilon", epsilon)))


@functools.lru_cache(maxsize=256)
def _cdp_rho(epsilon: float, delta: float) -> float:
    return cdp_rho(epsilon, delta)


def zcdp_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """``Delta / sqrt(2 rho)`` (rounded up) with ``rho = cdp_rho(epsilon, delta)``: Gaussian noise, continuous or
    discrete, of this scale parameter on a statistic of l2 sensitivity ``Delta`` is rho-zCDP, hence (epsilon, delta)-DP
    (Canonne, Kamath & Steinke 2020, Cor. 13)."""
    sensitivity = check_positive("l2_sensitivity", l2_sensitivity)
    rho = _cdp_rho(check_positive("epsilon", epsilon), check_probability("delta", delta))
    if rho <= 0.0:
        raise ParameterError(f"delta={delta} is too small to calibrate at epsilon={epsilon}")
    return round_up(sensitivity / math.sqrt(2.0 * rho))


def discrete_gaussian_units(sigma: float, grid: float) -> tuple[int, int]:
    """``(t, c)`` with ``t = floor(sigma / g) + 1`` and ``c = ceil((sigma / g)^2 / t)`` (exact rationals): the discrete
    Gaussian ``N_Z(0, t c)`` in grid units has scale parameter ``g sqrt(t c) >= sigma``; ``t`` divides ``t c`` so the
    sampler's integers stay small (:func:`workloads.local.exact_noise.discrete_gaussian` with ``t``)."""
    ratio = Fraction(check_positive("sigma", sigma)) / Fraction(check_positive("grid", grid))
    t = math.floor(ratio) + 1
    return t, math.ceil(ratio * ratio / t)


# --------------------------------------------------------------------------------------------------------- Gaussian
def standard_normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_privacy_profile(mu: float, epsilon: float) -> float:
    """An upper bound (a few ulps above) on the exact delta(epsilon) of the Gaussian mechanism, ``mu = Delta/sigma``.

    ``Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)`` (Balle & Wang 2018, Thm. 8). The second term is computed as
    ``exp(eps + log Phi(.))``, so ``e^eps`` never overflows; where ``Phi(.)`` underflows to 0 the term is dropped,
    which only raises the bound.
    """
    mu = float(mu)
    epsilon = float(epsilon)
    if mu <= 0.0:
        return 0.0
    first = standard_normal_cdf(mu / 2.0 - epsilon / mu)
    tail = standard_normal_cdf(-mu / 2.0 - epsilon / mu)
    exponent = epsilon + math.log(tail) if tail > 0.0 else -math.inf
    second = math.exp(exponent) if tail > 0.0 else 0.0
    # exp(a) with a rounded to an ulp of |a| has relative error |a| 2^-52: the margin grows with the exponent
    margin = 2.0**-52 * (_PROFILE_ULPS * first + (_PROFILE_ULPS + (abs(exponent) if tail > 0.0 else 0.0)) * second)
    return min(1.0, max(first - second + margin, 0.0))


@functools.lru_cache(maxsize=256)
def gaussian_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu = Delta / sigma`` (to bisection precision, always on the feasible side) whose Gaussian
    mechanism is (epsilon, delta)-DP by the exact profile of Balle & Wang 2018, Thm. 8."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    low, high = 0.0, 1.0
    while gaussian_privacy_profile(high, epsilon) <= delta:
        low, high = high, 2.0 * high
        if high > 1e12:  # the profile -> 1 as mu grows, so this only guards against a broken bound
            raise ParameterError(f"cannot calibrate the Gaussian mechanism at epsilon={epsilon}, delta={delta}")
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if gaussian_privacy_profile(middle, epsilon) <= delta:
            low = middle
        else:
            high = middle
    if low <= 0.0:
        raise ParameterError(f"delta={delta} is too small to calibrate at epsilon={epsilon}")
    return low


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest noise standard deviation (rounded up) that makes ``f(x) + N(0, sigma^2 I)`` (epsilon, delta)-DP when
    ``||f(x) - f(x')||_2 <= l2_sensitivity`` for all inputs: ``sigma = Delta / mu`` with :func:`gaussian_mu`."""
    sensitivity = check_positive("l2_sensitivity", l2_sensitivity)
    return round_up(sensitivity / gaussian_mu(check_positive("epsilon", epsilon), check_probability("delta", delta)))


# ---------------------------------------------------------------------------------------------------- sensitivities
def sufficient_statistics_sensitivity(dimension: int, norm_bound: float, label_bound: float) -> float:
    """The l2 diameter of ``{(upper triangle of x x^T, x y) : ||x||_2 <= r, |y| <= B}`` (local DP: any two inputs).

    Derivation (ours; ``docs/privacy.md`` 8.7). Write ``a = ||x||``, ``b = ||x'||``, ``s = |<x, x'>|`` and
    ``D = x x^T - x' x'^T``. The upper triangle (diagonal included) of ``D`` has squared norm
    ``(||D||_F^2 + ||diag D||^2) / 2 <= ||D||_F^2 = a^4 + b^4 - 2 s^2``, with equality when ``D`` is diagonal, which
    a common rotation of ``x`` and ``x'`` achieves for ``p >= 2``. The label part is at most
    ``B^2 (a^2 + b^2 + 2 s)`` (``y = B``, ``y' = -B`` against the sign of ``<x, x'>``), and is rotation invariant.
    For fixed ``s`` both parts grow with ``a`` and ``b`` (and ``s <= ab`` stays feasible), so ``a = b = r`` and the
    squared diameter is ``max_{0 <= s <= r^2} 2 r^4 + 2 B^2 r^2 - 2 s^2 + 2 B^2 s``:

    * ``B^2 <= 2 r^2``: ``s = B^2 / 2`` and ``Delta = sqrt(2) (r^2 + B^2 / 2)``;
    * ``B^2 > 2 r^2``: ``s = r^2`` and ``Delta = 2 B r``.

    For ``p = 1`` (no rotation) ``Delta^2 = max_{0 <= b <= r} (r^2 - b^2)^2 + B^2 (r + b)^2``, whose maximum is at
    ``b = r`` or at the smaller root of ``2 b (r - b) = B^2``. Both are attained, so these are exact diameters; an
    l1 bound ``||x||_1 <= r`` implies ``||x||_2 <= r`` and the same value is a valid (possibly loose) bound.
    """
    p = check_count("dimension", dimension)
    r = check_positive("norm_bound", norm_bound)
    label = check_positive("label_bound", label_bound)
    if p == 1:
        squared = 4.0 * label**2 * r**2
        if label**2 < r**2 / 2.0:
            b = (r - math.sqrt(r**2 - 2.0 * label**2)) / 2.0
            squared = max(squared, (r**2 - b**2) ** 2 + label**2 * (r + b) ** 2)
        return round_up(math.sqrt(squared))
    if label**2 <= 2.0 * r**2:
        return round_up(math.sqrt(2.0) * (r**2 + label**2 / 2.0))
    return round_up(2.0 * label * r)


def moment_sensitivity(norm_bound: float, label_bound: float) -> float:
    """The l2 diameter ``2 r B`` of ``{x y : ||x||_2 <= r, |y| <= B}`` (``x = r e``, ``y = B`` against ``y' = -B``)."""
    return round_up(2.0 * check_positive("norm_bound", norm_bound) * check_positive("label_bound", label_bound))
