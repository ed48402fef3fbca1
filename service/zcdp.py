"""Zero-concentrated DP (zCDP) and (epsilon, delta)-DP: conversions, noise calibration, validation and
the accountant's budget rule.

Plain floats and exact rationals only (no numpy). Sources (see docs/privacy.md for the full text):

* Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower
  Bounds" (arXiv:1605.02065): zCDP (Def. 1.1), pure eps-DP implies eps^2/2-zCDP (Prop. 1.4), the
  Gaussian mechanism (Prop. 1.6), composition (Lemma 2.3), the standard conversion (Prop. 1.3).
* Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy"
  (arXiv:2004.00010, "CKS"): the conversion of a Renyi bound of order alpha to (eps, delta)-DP
  (Prop. 12 in arXiv v4) and its zCDP form (Cor. 13)::

      delta(rho, eps) = inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) * (1 - 1/alpha)^alpha

* The budget rule (``budget_holds``) is proved in docs/privacy.md, section "The accountant's rule". Once the
  anchor is fixed, an (eps, delta) charge is priced at the Renyi divergence of order alpha of eps-randomized
  response (``price_epsilon``): every eps-DP pair is a post-processing of randomized response (Kairouz, Oh &
  Viswanath 2015, Thm. 2.1), so by data processing (van Erven & Harremoes 2014, Thm. 9) its Renyi divergence is
  at most that of randomized response.

Every public function validates its privacy parameters and raises :class:`PrivacyParameterError`
(a ``ValueError``) naming the parameter and the bad value.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

__all__ = [
    "PrivacyParameterError",
    "ZcdpAnchor",
    "anchor_offset",
    "budget_holds",
    "cdp_delta",
    "cdp_eps",
    "cdp_rho",
    "epsilon_spent",
    "exact_number",
    "gaussian_sigma",
    "gaussian_sigma2_exact",
    "laplace_scale",
    "positive_exact",
    "laplace_scale_exact",
    "optimal_order",
    "price_epsilon",
    "randomized_response_divergence",
    "remaining_delta",
    "remaining_epsilon",
    "remaining_rho",
    "validate_delta",
    "validate_epsilon",
    "validate_rho",
    "zcdp_anchor",
]


class PrivacyParameterError(ValueError):
    """A privacy parameter (epsilon, delta, rho, a sensitivity, a budget sum) that cannot be used."""


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def exact_number(x: object, name: str) -> Fraction:
    """``x`` as an exact rational, or :class:`PrivacyParameterError`.

    Accepts int, float (its exact binary value), Decimal, Fraction, numpy real scalars and strings
    holding a decimal number (``"0.1"`` is exactly 1/10). Rejects bool, NaN, infinities, other types
    and strings that are not numbers.
    """
    if isinstance(x, bool) or type(x).__name__ in ("bool", "bool_"):
        raise PrivacyParameterError(f"{name} must be a number, got the boolean {x!r}")
    try:
        if isinstance(x, str):
            value = Fraction(x.strip())
        elif isinstance(x, Decimal):
            if not x.is_finite():
                raise PrivacyParameterError(f"{name} must be finite, got {x!r}")
            value = Fraction(x)
        elif isinstance(x, (Fraction, int)):
            value = Fraction(x)
        elif isinstance(x, numbers.Real):
            as_float = float(x)
            if not math.isfinite(as_float):
                raise PrivacyParameterError(f"{name} must be finite, got {x!r}")
            value = Fraction(as_float) if not isinstance(x, numbers.Integral) else Fraction(int(x))
        else:
            raise PrivacyParameterError(f"{name} must be a real number, got {x!r} of type {type(x).__name__}")
    except (ValueError, ZeroDivisionError, OverflowError) as exc:
        if isinstance(exc, PrivacyParameterError):
            raise
        raise PrivacyParameterError(f"{name} must be a finite number, got {x!r}") from None
    return value


def validate_epsilon(x: object, name: str = "epsilon") -> float:
    """Return ``x`` as a float after checking it is a finite number > 0."""
    value = exact_number(x, name)
    if value <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {x!r}")
    return float(value)


def validate_delta(x: object, name: str = "delta") -> float:
    """Return ``x`` as a float after checking it is a finite number with 0 <= x < 1."""
    value = exact_number(x, name)
    if value < 0 or value >= 1:
        raise PrivacyParameterError(f"{name} must satisfy 0 <= {name} < 1, got {x!r}")
    return float(value)


def validate_rho(x: object, name: str = "rho") -> float:
    """Return ``x`` as a float after checking it is a finite number > 0."""
    value = exact_number(x, name)
    if value <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {x!r}")
    return float(value)


def _nonnegative(x: object, name: str) -> float:
    value = exact_number(x, name)
    if value < 0:
        raise PrivacyParameterError(f"{name} must be >= 0, got {x!r}")
    return float(value)


def _nonnegative_exact(x: object, name: str) -> Fraction:
    value = exact_number(x, name)
    if value < 0:
        raise PrivacyParameterError(f"{name} must be >= 0, got {x!r}")
    return value


# --------------------------------------------------------------------------------------------------
# the CKS conversion
# --------------------------------------------------------------------------------------------------
_BISECTION_STEPS = 200


def _log_c(alpha: float) -> float:
    """log of c(alpha) = (1 - 1/alpha)^(alpha - 1) / alpha, the constant of CKS Prop. 12.

    (CKS write the bound as exp((alpha-1)(tau-eps)) / (alpha-1) * (1-1/alpha)^alpha; the two forms
    are equal because (1-1/alpha) / (alpha-1) = 1/alpha.)
    """
    return (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)


def _log_delta_at(alpha: float, rho: float, eps: float) -> float:
    """log of the CKS bound at one order alpha for a rho-zCDP mechanism (Renyi bound tau = alpha rho)."""
    return (alpha - 1.0) * (alpha * rho - eps) + _log_c(alpha)


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
    eps = _nonnegative(eps, "eps")

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
    rho = _nonnegative(rho, "rho")
    eps = _nonnegative(eps, "eps")
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
    rho = _nonnegative(rho, "rho")
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


# --------------------------------------------------------------------------------------------------
# noise calibration
# --------------------------------------------------------------------------------------------------
def positive_exact(x: object, name: str) -> Fraction:
    value = exact_number(x, name)
    if value <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {x!r}")
    return value


def gaussian_sigma(rho: float, l2_sensitivity: float) -> float:
    """sigma with rho = Delta_2^2 / (2 sigma^2): the Gaussian mechanism is rho-zCDP (Bun & Steinke 2016,
    Prop. 1.6); the same for the discrete Gaussian with sigma^2 (CKS 2020, Thm. 4 and its multivariate
    form for independent coordinates). Rounded up (by a few ulps) so that the noise is never too small."""
    rho = validate_rho(rho)
    delta2 = float(positive_exact(l2_sensitivity, "l2_sensitivity"))
    return math.nextafter(delta2 / math.sqrt(2.0 * rho) * (1.0 + 2.0**-50), math.inf)


def gaussian_sigma2_exact(rho: object, l2_sensitivity: object) -> Fraction:
    """sigma^2 = Delta_2^2 / (2 rho) as an exact rational, for the exact discrete Gaussian sampler."""
    rho_exact = positive_exact(rho, "rho")
    delta2 = positive_exact(l2_sensitivity, "l2_sensitivity")
    return delta2 * delta2 / (2 * rho_exact)


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale b = Delta_1 / epsilon (pure epsilon-DP; Dwork, McSherry, Nissim & Smith 2006),
    rounded up by one ulp."""
    epsilon = validate_epsilon(epsilon)
    delta1 = float(positive_exact(l1_sensitivity, "l1_sensitivity"))
    return math.nextafter(delta1 / epsilon, math.inf)


def laplace_scale_exact(epsilon: object, l1_sensitivity: object) -> Fraction:
    """b = Delta_1 / epsilon as an exact rational, for the exact discrete Laplace sampler."""
    return positive_exact(l1_sensitivity, "l1_sensitivity") / positive_exact(epsilon, "epsilon")


# --------------------------------------------------------------------------------------------------
# the accountant's rule (a privacy filter; proof in docs/privacy.md)
# --------------------------------------------------------------------------------------------------
ALPHA_GRID = 10**9  # the anchor's order is a multiple of 1e-9
OFFSET_GRID = 10**12  # its offset is rounded UP to a multiple of 1e-12 (the ledger's epsilon unit)


@dataclass(frozen=True)
class ZcdpAnchor:
    """What the accountant fixes when it accepts the FIRST charge with rho > 0 on a budget.

    alpha:   the Renyi order used from then on (exact, a multiple of 1e-9);
    delta_z: the part of delta_B given to the zCDP charges (exact);
    offset:  t = ln(c(alpha) / delta_z) / (alpha - 1) rounded UP to a multiple of 1e-12, so that the zCDP
             charges cost alpha * R + t in epsilon (CKS Prop. 12 at the single order alpha).
    All three are exact rationals, so the rule is exact rational arithmetic; store them with that ledger row
    and the remaining budget is plain (integer) arithmetic in SQL.
    """

    alpha: Fraction
    delta_z: Fraction
    offset: Fraction

    def __post_init__(self) -> None:
        if not isinstance(self.alpha, Fraction) or self.alpha <= 1:
            raise PrivacyParameterError(f"alpha must be a Fraction > 1, got {self.alpha!r}")
        if not isinstance(self.delta_z, Fraction) or not 0 < self.delta_z < 1:
            raise PrivacyParameterError(f"delta_z must be a Fraction in (0, 1), got {self.delta_z!r}")
        if not isinstance(self.offset, Fraction) or self.offset < anchor_offset(self.alpha, self.delta_z):
            raise PrivacyParameterError(
                f"offset {self.offset!r} is below t(alpha, delta_z) = {anchor_offset(self.alpha, self.delta_z)!r}"
            )


def anchor_offset(alpha: object, delta_z: object) -> Fraction:
    """t(alpha, delta_z) = (ln c(alpha) + ln(1/delta_z)) / (alpha - 1), with c(alpha) = (1-1/alpha)^(alpha-1)/alpha,
    rounded UP to a multiple of 1e-12 after a relative safety margin of 1e-12 for the floating-point logs.

    Why: CKS Prop. 12 says a Renyi bound tau at order alpha gives (eps, c(alpha) e^((alpha-1)(tau-eps)))-DP; with
    tau = alpha R that is <= delta_z exactly when alpha R + t <= eps.
    """
    a = exact_number(alpha, "alpha")
    if a <= 1:
        raise PrivacyParameterError(f"alpha must be > 1, got {alpha!r}")
    dz = exact_number(delta_z, "delta_z")
    if not 0 < dz < 1:
        raise PrivacyParameterError(f"delta_z must be in (0, 1), got {delta_z!r}")
    af = float(a)
    log_c = _log_c(af)
    log_inv = -math.log(float(dz))
    t = (log_c + log_inv) / (af - 1.0)
    slack = 1e-12 * (abs(log_c) + abs(log_inv)) / (af - 1.0) + 1e-15
    return Fraction(math.ceil(Fraction(t + slack) * OFFSET_GRID), OFFSET_GRID)


def zcdp_anchor(
    eps_budget: object, delta_budget: object, eps_before: object, delta_before: object, delta_reserve: object = 0
) -> ZcdpAnchor:
    """The anchor for the first rho charge, from the ledger sums BEFORE that release.

    delta_z = delta_B - D_before - delta_reserve (delta_reserve: what the steward keeps for later charges
    with delta > 0, e.g. objective perturbation; default 0), and alpha = the CKS-optimal order (on the 1e-9 grid)
    for spending all that is left, eps_B - E_before, on zCDP charges, i.e. for rho = cdp_rho(eps_B - E_before,
    delta_z). With only rho charges after this point the rule is then as tight as the CKS conversion; later
    (eps, delta) charges cost linearly. Raises :class:`PrivacyParameterError` when no epsilon or delta is left
    for a zCDP charge. (Any alpha > 1 would be valid: the choice only affects how much fits.)
    """
    eps_b = positive_exact(eps_budget, "eps_budget")
    delta_b = exact_number(delta_budget, "delta_budget")
    validate_delta(delta_b, "delta_budget")
    e_before = _nonnegative_exact(eps_before, "eps_before")
    d_before = _nonnegative_exact(delta_before, "delta_before")
    reserve = _nonnegative_exact(delta_reserve, "delta_reserve")
    delta_z = delta_b - d_before - reserve
    if delta_z <= 0:
        raise PrivacyParameterError(
            f"no delta left for zCDP charges: delta_budget - delta_before - delta_reserve = {float(delta_z)!r}"
        )
    eps_left = eps_b - e_before
    if eps_left <= 0:
        raise PrivacyParameterError(f"no epsilon left for zCDP charges: eps_budget - eps_before = {float(eps_left)!r}")
    rho_full = cdp_rho(float(eps_left), float(delta_z))
    if rho_full <= 0.0:
        raise PrivacyParameterError(f"the epsilon left ({float(eps_left)!r}) admits no zCDP charge")
    alpha = Fraction(round(optimal_order(rho_full, float(eps_left)) * ALPHA_GRID), ALPHA_GRID)
    alpha = max(alpha, Fraction(ALPHA_GRID + 1, ALPHA_GRID))
    return ZcdpAnchor(alpha=alpha, delta_z=delta_z, offset=anchor_offset(alpha, delta_z))


def _sums(e: object, d: object, r: object) -> tuple[Fraction, Fraction, Fraction]:
    return _nonnegative_exact(e, "E"), _nonnegative_exact(d, "D"), _nonnegative_exact(r, "R")


def _ledger(
    E: object, D: object, R: object, priced: object, anchor: ZcdpAnchor | None
) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(E, D, R, C) validated; C, the sum of the prices of the (eps, delta) charges, defaults to E (every charge at
    its epsilon: what charges made before the anchor cost, and always a valid, conservative price). R > 0 needs the
    anchor."""
    e, d, r = _sums(E, D, R)
    c = e if priced is None else _nonnegative_exact(priced, "C")
    if anchor is None and r != 0:
        raise _need_anchor()
    return e, d, r, c


def _delta_held(d: Fraction, delta_B: object, anchor: ZcdpAnchor) -> bool:
    """Whether the (eps, delta) charges' D intrudes on the delta_z the zCDP charges hold."""
    return d > exact_number(delta_B, "delta_B") - anchor.delta_z


def _need_anchor() -> PrivacyParameterError:
    return PrivacyParameterError("R > 0 needs the anchor (a ZcdpAnchor) fixed at the first rho charge")


def _float_up(x: Fraction) -> float:
    as_float = float(x)
    return math.nextafter(as_float, math.inf) if Fraction(as_float) < x else as_float


# --------------------------------------------------------------------------------------------------
# pricing (eps, delta) charges made after the anchor
# --------------------------------------------------------------------------------------------------
PRICE_DIGITS = 60  # decimal digits of the arithmetic that prices a charge (each exp/ln is correctly rounded)


def randomized_response_divergence(epsilon: object, alpha: object) -> Decimal:
    """D_alpha(RR_eps(0) || RR_eps(1)), the Renyi divergence of order alpha between the two output laws of
    eps-randomized response (Bernoulli(e^eps / (1 + e^eps)) against Bernoulli(1 / (1 + e^eps))):

        D = ln( (e^(alpha eps) + e^(-(alpha - 1) eps)) / (1 + e^eps) ) / (alpha - 1),

    from sum_y P(y)^alpha Q(y)^(1 - alpha) = (e^(alpha eps) + e^((1 - alpha) eps)) / (1 + e^eps). Computed in
    ``PRICE_DIGITS``-digit decimal arithmetic, so the value is exact to far below the ledger's 1e-12 grid. It is
    at most eps (D_alpha <= D_infinity = eps) and about alpha eps^2 / 2 for small eps.
    """
    eps = _nonnegative_exact(epsilon, "epsilon")
    a = exact_number(alpha, "alpha")
    if a <= 1:
        raise PrivacyParameterError(f"alpha must be > 1, got {alpha!r}")
    if eps == 0:
        return Decimal(0)
    with localcontext() as context:
        context.prec = PRICE_DIGITS
        e = Decimal(eps.numerator) / Decimal(eps.denominator)
        order = Decimal(a.numerator) / Decimal(a.denominator)
        numerator = (order * e).exp() + (-(order - 1) * e).exp()
        return (numerator / (1 + e.exp())).ln() / (order - 1)


def price_epsilon(epsilon: object, alpha: object) -> Fraction:
    """What an (eps, delta) charge made after the anchor costs in the rule: c = min(eps, D_alpha(RR_eps)) rounded UP
    to the ledger's 1e-12 grid (after a margin of 1e-40 for the decimal arithmetic). docs/privacy.md 6.3: every
    eps-DP pair is a post-processing of eps-randomized response (Kairouz, Oh & Viswanath 2015, Thm. 2.1), hence its
    Renyi divergence of order alpha is at most D_alpha(RR_eps) (data processing, van Erven & Harremoes 2014,
    Thm. 9); the same holds for the eps-DP part of an (eps, delta)-DP mechanism."""
    eps = _nonnegative_exact(epsilon, "epsilon")
    divergence = randomized_response_divergence(eps, alpha)
    with localcontext() as context:
        context.prec = PRICE_DIGITS
        units = math.ceil((divergence + Decimal("1e-40")) * OFFSET_GRID)
    return min(eps, Fraction(units, OFFSET_GRID))


def _largest_priced_epsilon(room: Fraction, alpha: Fraction) -> Fraction:
    """The largest eps on the 1e-12 grid whose price is at most ``room`` (0 when none is).

    price is nondecreasing in eps, and price(eps) >= eps - ln 2 / (alpha - 1) (because (alpha - 1) D >= alpha eps -
    ln(1 + e^eps) >= (alpha - 1) eps - ln 2), so the answer lies below room + 1 / (alpha - 1)."""
    if room <= 0:
        return Fraction(0)
    lo, hi = 0, math.ceil((room + 1 / (alpha - 1)) * OFFSET_GRID) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if price_epsilon(Fraction(mid, OFFSET_GRID), alpha) <= room:
            lo = mid
        else:
            hi = mid
    return Fraction(lo, OFFSET_GRID)


# --------------------------------------------------------------------------------------------------
# the rule
# --------------------------------------------------------------------------------------------------
def epsilon_spent(
    E: object, D: object, R: object, delta_B: object, anchor: ZcdpAnchor | None = None, *, priced: object = None
) -> float:
    """The epsilon the ledger has spent at the budget's delta_B, as a float rounded up (see ``budget_holds``):

    * no anchor (no zCDP charge yet): E;
    * anchored, R > 0: C + alpha R + t;
    * anchored, R = 0 (the first zCDP release was refunded): the smaller of E and C + t.
    """
    e, _d, r, c = _ledger(E, D, R, priced, anchor)
    validate_delta(delta_B, "delta_B")
    if anchor is None:
        return _float_up(e)
    anchored = c + anchor.alpha * r + anchor.offset
    return _float_up(min(e, anchored) if r == 0 else anchored)


def budget_holds(
    E: object,
    D: object,
    R: object,
    eps_B: object,
    delta_B: object,
    anchor: ZcdpAnchor | None = None,
    *,
    priced: object = None,
) -> bool:
    """Whether the ledger sums -- including the charge under consideration -- fit the budget.

    E, D: sums of the (eps, delta) charges; R: sum of the rho charges; ``priced`` = C: sum of the prices of the
    (eps, delta) charges (``price_epsilon`` for charges made after the anchor, eps itself before; default C = E).
    Everything is compared EXACTLY as rationals (pass Fractions or Decimals: ten charges of Decimal("0.1") are
    exactly at a budget of 1).

    * No anchor (no zCDP charge yet; R must be 0):  E <= eps_B and D <= delta_B   (basic composition filter).
    * Anchored (alpha, delta_z, t), fixed at the first rho charge and in force from then on:
      D <= delta_B - delta_z, and C + alpha R + t <= eps_B (or, while R = 0, E <= eps_B).

    This is a valid privacy filter even when every charge's type and size are chosen after seeing earlier
    releases (proof: docs/privacy.md, Theorem B). The design's rule E + cdp_eps(R, delta_B - D) <= eps_B is not:
    an adaptive analyst can exceed delta_B under it (docs/privacy.md and tests/test_zcdp.py).
    """
    e, d, r, c = _ledger(E, D, R, priced, anchor)
    eps_b = positive_exact(eps_B, "eps_B")
    delta_b = exact_number(delta_B, "delta_B")
    validate_delta(delta_b, "delta_B")
    if anchor is None:
        return e <= eps_b and d <= delta_b
    if _delta_held(d, delta_b, anchor):
        return False
    if r == 0 and e <= eps_b:
        return True
    return c + anchor.alpha * r + anchor.offset <= eps_b


def remaining_rho(
    E: object,
    D: object,
    R: object,
    eps_B: object,
    delta_B: object,
    anchor: ZcdpAnchor | None = None,
    delta_reserve: object = 0,
    *,
    priced: object = None,
) -> Fraction:
    """The largest further rho charge that ``budget_holds`` accepts, exactly (0 when none fits).

    Before the first rho charge (anchor None) it is computed through the anchor that charge would fix, i.e.
    about cdp_rho(eps_B - E, delta_B - D - delta_reserve).
    """
    e, d, r, c = _ledger(E, D, R, priced, anchor)
    eps_b = positive_exact(eps_B, "eps_B")
    if anchor is None:
        try:
            anchor = zcdp_anchor(eps_b, delta_B, e, d, delta_reserve)
        except PrivacyParameterError:
            return Fraction(0)
        c = e
    if _delta_held(d, delta_B, anchor):
        return Fraction(0)
    return max(Fraction(0), (eps_b - c - anchor.offset) / anchor.alpha - r)


def remaining_epsilon(
    E: object,
    D: object,
    R: object,
    eps_B: object,
    delta_B: object,
    anchor: ZcdpAnchor | None = None,
    *,
    priced: object = None,
) -> Fraction:
    """The largest epsilon of one further (eps, delta) charge that ``budget_holds`` accepts (its delta must fit
    ``remaining_delta`` too), on the ledger's 1e-12 grid. Before the anchor: eps_B - E. After: the largest eps whose
    price fits eps_B - C - alpha R - t (or eps_B - E while R = 0, whichever is larger)."""
    e, d, r, c = _ledger(E, D, R, priced, anchor)
    eps_b = positive_exact(eps_B, "eps_B")
    if anchor is None:
        return _on_grid_down(max(Fraction(0), eps_b - e))
    if _delta_held(d, delta_B, anchor):
        return Fraction(0)
    best = _largest_priced_epsilon(eps_b - c - anchor.alpha * r - anchor.offset, anchor.alpha)
    if r == 0:
        best = max(best, _on_grid_down(max(Fraction(0), eps_b - e)))
    return best


def remaining_delta(D: object, delta_B: object, anchor: ZcdpAnchor | None = None) -> Fraction:
    """The delta that (eps, delta) charges can still spend: delta_B - D before the anchor, delta_B - delta_z - D
    after it (the zCDP charges hold delta_z). Before the anchor, spending it leaves less for a first zCDP charge
    (``zcdp_anchor`` gives the zCDP charges delta_B - D - delta_reserve)."""
    d = _nonnegative_exact(D, "D")
    delta_b = exact_number(delta_B, "delta_B")
    held = anchor.delta_z if anchor is not None else Fraction(0)
    return max(Fraction(0), delta_b - held - d)


def _on_grid_down(x: Fraction) -> Fraction:
    return Fraction(math.floor(x * OFFSET_GRID), OFFSET_GRID)
