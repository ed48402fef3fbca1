"""The accountant's rule: a privacy filter over (epsilon, delta) and zCDP charges, in exact rational arithmetic.

The rule (``budget_holds``) is proved in docs/privacy.md, section "The accountant's rule". Before the first zCDP
charge it is basic composition. The first zCDP charge fixes an anchor (a Renyi order alpha, the part delta_z of the
budget's delta held by zCDP charges, and an offset t), after which the zCDP charges cost alpha R + t in epsilon by
the conversion of a Renyi bound at one order (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for
Differential Privacy", Prop. 12; :mod:`service.privacy.conversions`), and an (eps, delta) charge is priced at the
Renyi divergence of order alpha of eps-randomized response (``price_epsilon``): every eps-DP pair is a
post-processing of randomized response (Kairouz, Oh & Viswanath 2015, "The Composition Theorem for Differential
Privacy", Thm. 2.1), so by data processing (van Erven & Harremoes 2014, "Renyi Divergence and Kullback-Leibler
Divergence", Thm. 9) its Renyi divergence is at most that of randomized response. zCDP composes additively, also
adaptively (Bun & Steinke 2016, Lemma 2.3).

Every public function validates its arguments and raises :class:`~workloads.parameters.PrivacyParameterError`
naming the parameter and the bad value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

from service.privacy.calibration import float_up
from service.privacy.conversions import cdp_rho, log_cks_constant, optimal_order
from workloads.parameters import (
    PrivacyParameterError,
    exact_number,
    nonnegative_exact,
    positive_exact,
    validate_delta,
)

__all__ = [
    "ZcdpAnchor",
    "anchor_offset",
    "budget_holds",
    "composed_epsilon",
    "epsilon_spent",
    "price_epsilon",
    "randomized_response_divergence",
    "remaining_delta",
    "remaining_epsilon",
    "remaining_rho",
    "zcdp_anchor",
]


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
    log_c = log_cks_constant(af)
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
    e_before = nonnegative_exact(eps_before, "eps_before")
    d_before = nonnegative_exact(delta_before, "delta_before")
    reserve = nonnegative_exact(delta_reserve, "delta_reserve")
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
    # t >= 0 (docs/privacy.md 6.3): valid, as any offset above t(alpha, delta_z) is, and the epsilon spent then never
    # drops when the anchor is fixed (t < 0 for a delta_z above c(alpha), a budget's delta near 1)
    return ZcdpAnchor(alpha=alpha, delta_z=delta_z, offset=max(Fraction(0), anchor_offset(alpha, delta_z)))


def _sums(e: object, d: object, r: object) -> tuple[Fraction, Fraction, Fraction]:
    return nonnegative_exact(e, "E"), nonnegative_exact(d, "D"), nonnegative_exact(r, "R")


def _ledger(
    E: object, D: object, R: object, priced: object, anchor: ZcdpAnchor | None
) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(E, D, R, C) validated; C, the sum of the prices of the (eps, delta) charges, defaults to E (every charge at
    its epsilon: what charges made before the anchor cost, and always a valid, conservative price). R > 0 needs the
    anchor."""
    e, d, r = _sums(E, D, R)
    c = e if priced is None else nonnegative_exact(priced, "C")
    if anchor is None and r != 0:
        raise _need_anchor()
    return e, d, r, c


def _delta_held(d: Fraction, delta_B: object, anchor: ZcdpAnchor) -> bool:
    """Whether the (eps, delta) charges' D intrudes on the delta_z the zCDP charges hold."""
    return d > exact_number(delta_B, "delta_B") - anchor.delta_z


def _need_anchor() -> PrivacyParameterError:
    return PrivacyParameterError("R > 0 needs the anchor (a ZcdpAnchor) fixed at the first rho charge")


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

    Evaluated as the same quantity with every exponent <= 0, taking e^(alpha eps) out of the numerator and e^eps
    out of the denominator:

        D = eps + ( ln(1 + e^(-(2 alpha - 1) eps)) - ln(1 + e^(-eps)) ) / (alpha - 1),

    so no intermediate overflows, whatever eps (up to the largest budget) and alpha: the direct form's
    e^(alpha eps) exceeds the decimal exponent range once alpha eps passes about 2.3e6 (issue 27, finding 6).
    """
    eps = nonnegative_exact(epsilon, "epsilon")
    a = exact_number(alpha, "alpha")
    if a <= 1:
        raise PrivacyParameterError(f"alpha must be > 1, got {alpha!r}")
    if eps == 0:
        return Decimal(0)
    with localcontext() as context:
        context.prec = PRICE_DIGITS
        e = Decimal(eps.numerator) / Decimal(eps.denominator)
        order = Decimal(a.numerator) / Decimal(a.denominator)
        tails = (1 + (-(2 * order - 1) * e).exp()).ln() - (1 + (-e).exp()).ln()
        return e + tails / (order - 1)


def price_epsilon(epsilon: object, alpha: object) -> Fraction:
    """What an (eps, delta) charge made after the anchor costs in the rule: c = min(eps, D_alpha(RR_eps)) rounded UP
    to the ledger's 1e-12 grid (after a margin of 1e-40 for the decimal arithmetic). docs/privacy.md 6.3: every
    eps-DP pair is a post-processing of eps-randomized response (Kairouz, Oh & Viswanath 2015, Thm. 2.1), hence its
    Renyi divergence of order alpha is at most D_alpha(RR_eps) (data processing, van Erven & Harremoes 2014,
    Thm. 9); the same holds for the eps-DP part of an (eps, delta)-DP mechanism."""
    eps = nonnegative_exact(epsilon, "epsilon")
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
def composed_epsilon(
    E: object, D: object, R: object, delta_B: object, anchor: ZcdpAnchor | None = None, *, priced: object = None
) -> Fraction:
    """The epsilon the ledger has spent at the budget's delta_B, exactly (see ``budget_holds``):

    * no anchor (no zCDP charge yet): E;
    * anchored, R > 0: C + alpha R + t;
    * anchored, R = 0 (the first zCDP release was refunded): the smaller of E and C + t.

    Exact, so the ledger's figure rounded up to its grid is never above a budget the rule found it fits (a float
    rounded up is, by up to an ulp: 7e-12 at epsilon 3e4, several ledger units).
    """
    e, _d, r, c = _ledger(E, D, R, priced, anchor)
    validate_delta(delta_B, "delta_B")
    if anchor is None:
        return e
    anchored = c + anchor.alpha * r + anchor.offset
    return min(e, anchored) if r == 0 else anchored


def epsilon_spent(
    E: object, D: object, R: object, delta_B: object, anchor: ZcdpAnchor | None = None, *, priced: object = None
) -> float:
    """:func:`composed_epsilon` as the smallest float at or above it."""
    return float_up(composed_epsilon(E, D, R, delta_B, anchor, priced=priced))


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
    an adaptive analyst can exceed delta_B under it (docs/privacy.md and tests/service/privacy/test_filter.py).
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
    d = nonnegative_exact(D, "D")
    delta_b = exact_number(delta_B, "delta_B")
    held = anchor.delta_z if anchor is not None else Fraction(0)
    return max(Fraction(0), delta_b - held - d)


def _on_grid_down(x: Fraction) -> Fraction:
    return Fraction(math.floor(x * OFFSET_GRID), OFFSET_GRID)
