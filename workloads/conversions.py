"""Converting zero-concentrated DP (zCDP) to (epsilon, delta)-DP and back: the tight conversion of Canonne, Kamath
& Steinke.

Plain floats only (no numpy): the accountant (through :mod:`service.privacy.conversions`, which re-exports
these) and a participant's device (the discrete Gaussian's calibration, :mod:`workloads.local.calibration`) share
it. Sources (docs/privacy.md has the full text):

* Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower Bounds"
  (arXiv:1605.02065): zCDP (Def. 1.1) and the standard conversion rho + 2 sqrt(rho ln(1/delta)) (Prop. 1.3).
* Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy" (arXiv:2004.00010, "CKS"): the
  conversion of a Renyi bound of order alpha to (eps, delta)-DP (Prop. 12 in arXiv v4) and its zCDP form
  (Cor. 13)::

      delta(rho, eps) = inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha

Every public function validates its arguments and raises
:class:`~workloads.parameters.PrivacyParameterError` naming the parameter and the bad value.
"""

from __future__ import annotations

import math

from workloads.parameters import PrivacyParameterError, nonnegative, validate_delta, validate_epsilon, validate_rho

__all__ = ["cdp_delta", "cdp_eps", "cdp_rho", "log_cks_constant", "optimal_order"]

_BISECTION_STEPS = 200


def log_cks_constant(alpha: float) -> float:
    """log of c(alpha) = (1 - 1/alpha)^(alpha - 1) / alpha, the constant of CKS Prop. 12.

    (CKS write the bound as exp((alpha-1)(tau-eps)) / (alpha-1) * (1-1/alpha)^alpha; the two forms
    are equal because (1-1/alpha) / (alpha-1) = 1/alpha.)
    """
    return (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)


def _log_delta_at(alpha: float, rho: float, eps: float) -> float:
    """log of the CKS bound at one order alpha for a rho-zCDP mechanism (Renyi bound tau = alpha rho)."""
    return (alpha - 1.0) * (alpha * rho - eps) + log_cks_constant(alpha)


def optimal_order(rho: float, eps: float) -> float:
    """The order alpha > 1 minimising the CKS bound (Cor. 13) for ``rho``-zCDP at ``eps``.

    Derivation (ours, double-checked numerically in the tests): with
    f(alpha) = (alpha-1)(alpha rho - eps) - log(alpha-1) + alpha log(1 - 1/alpha) = log delta(alpha),
    f'(alpha) = 2 alpha rho - rho - eps + log(1 - 1/alpha)  (the two 1/(alpha-1) terms cancel) and
    f''(alpha) = 2 rho + 1/(alpha(alpha-1)) > 0, so f is convex with f' -> -inf as alpha -> 1 and
    f' -> +inf as alpha -> inf: the minimiser is the unique root of f', found by bisection.
    An upper bracket: at alpha_hi = 1 + (eps + rho + 1)/(2 rho), 2 alpha rho - rho - eps = 1 + 2 rho and
    log(1 - 1/alpha) >= -1/(alpha - 1) > -2 rho, so f'(alpha_hi) > 0.
    Any alpha > 1 gives a valid bound, so an inexact root only makes delta (slightly) larger.
    """
    rho = validate_rho(rho)
    eps = nonnegative(eps, "eps")

    def slope(alpha: float) -> float:
        return 2.0 * alpha * rho - rho - eps + math.log1p(-1.0 / alpha)

    lo, hi = 1.0, 1.0 + (eps + rho + 1.0) / (2.0 * rho)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if slope(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return hi


def _log_cdp_delta(rho: float, eps: float) -> float:
    if rho == 0.0:
        return -math.inf
    return min(0.0, _log_delta_at(optimal_order(rho, eps), rho, eps))


def cdp_delta(rho: float, eps: float) -> float:
    """delta such that rho-zCDP implies (eps, delta)-DP: the tight conversion of CKS 2020, Cor. 13.

    ``rho >= 0`` and ``eps >= 0``; ``cdp_delta(0, eps) = 0``. The result is at most 1.
    """
    rho = nonnegative(rho, "rho")
    eps = nonnegative(eps, "eps")
    return math.exp(_log_cdp_delta(rho, eps))


def cdp_eps(rho: float, delta: float) -> float:
    """The smallest eps (up to bisection resolution) with ``cdp_delta(rho, eps) <= delta``.

    Conservative: the returned eps itself satisfies ``cdp_delta(rho, eps) <= delta``, compared as the very
    floats ``cdp_delta`` returns (the bisection keeps its upper end feasible). Never worse than the standard
    bound rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke 2016, Prop. 1.3), which is the starting upper end:
    CKS's bound at the order alpha = (eps + rho)/(2 rho) is the standard one times
    (1/alpha)(1 - 1/alpha)^(alpha-1) < 1.
    ``cdp_eps(0, delta) = 0``.
    """
    rho = nonnegative(rho, "rho")
    if rho == 0.0:
        validate_delta(delta)
        return 0.0
    delta = validate_delta(delta)
    if delta == 0.0:
        raise PrivacyParameterError("delta must be > 0 to convert rho > 0 to (eps, delta)-DP, got 0")
    lo, hi = 0.0, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if math.exp(_log_cdp_delta(rho, 0.0)) <= delta:
        return 0.0
    while math.exp(_log_cdp_delta(rho, hi)) > delta:  # only float rounding can make the standard bound fail
        hi = math.nextafter(hi * (1.0 + 1e-12), math.inf)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if math.exp(_log_cdp_delta(rho, mid)) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def cdp_rho(eps: float, delta: float) -> float:
    """The largest rho (up to bisection resolution) with ``cdp_eps(rho, delta) <= eps``.

    Conservative: the result satisfies both ``cdp_delta(rho, eps) <= delta`` and
    ``cdp_eps(rho, delta) <= eps``. Reference value: ``cdp_rho(1, 1e-5) = 0.030557`` (5 digits).
    """
    eps = validate_epsilon(eps)
    delta = validate_delta(delta)
    if delta == 0.0:
        raise PrivacyParameterError("delta must be > 0: no rho > 0 gives (eps, 0)-DP")
    lo, hi = 0.0, eps + 1.0
    while math.exp(_log_cdp_delta(hi, eps)) <= delta:  # delta(rho, eps) -> 1 as rho -> inf
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:  # pragma: no cover - only for delta within rounding of 1
            break
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if math.exp(_log_cdp_delta(mid, eps)) <= delta:
            lo = mid
        else:
            hi = mid
    # guard against the inner bisections disagreeing by an ulp: step down until the round trip holds
    while lo > 0.0 and cdp_eps(lo, delta) > eps:
        lo = lo * (1.0 - 1e-12)
    return lo
