"""Tests of service.privacy.filter: the accountant's rule (anchor, pricing, budget_holds, what remains)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy.signal import fftconvolve
from scipy.special import logsumexp
from scipy.stats import norm

from service.privacy.conversions import cdp_eps, cdp_rho
from service.privacy.filter import (
    ZcdpAnchor,
    anchor_offset,
    budget_holds,
    epsilon_spent,
    price_epsilon,
    randomized_response_divergence,
    remaining_epsilon,
    remaining_rho,
    zcdp_anchor,
)
from tests.support.paths import REPO
from workloads.parameters import PrivacyParameterError

RHOS = [1e-6, 1e-4, 1e-2, 0.3, 1.0, 10.0]
DELTAS = [1e-12, 1e-8, 1e-5, 1e-2, 0.3]
EPSILONS = [0.01, 0.1, 1.0, 3.0, 10.0]


def log_cks_bound(alpha: float, rho: float, eps: float) -> float:
    """log of CKS Cor. 13 at one order, exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha, written
    term by term as in the paper (not through the module's helpers)."""
    return (alpha - 1) * (alpha * rho - eps) - math.log(alpha - 1) + alpha * math.log(1 - 1 / alpha)


# ---------------------------------------------------------------- the accountant's rule
def test_ten_pure_charges_of_a_tenth_are_exactly_at_the_budget() -> None:
    for tenth in (Fraction(1, 10), Decimal("0.1")):
        E = sum([tenth] * 10, start=type(tenth)(0))
        assert E == 1
        assert budget_holds(E, 0, 0, 1, 1e-5)
        assert epsilon_spent(E, 0, 0, 1e-5) == 1.0
        assert not budget_holds(E + tenth, 0, 0, 1, 1e-5)
    assert budget_holds(Decimal("0.5"), Decimal("1e-5"), 0, 1, Decimal("1e-5"))  # R = 0: D <= delta_B
    assert not budget_holds(Decimal("0.5"), Decimal("1.1e-5"), 0, 1, Decimal("1e-5"))


def test_all_zcdp_budget_is_as_tight_as_the_cks_conversion() -> None:
    anchor = zcdp_anchor(1, 1e-5, 0, 0)
    rho_full = cdp_rho(1, 1e-5)
    assert budget_holds(0, 0, rho_full * (1 - 1e-9), 1, 1e-5, anchor)
    assert not budget_holds(0, 0, rho_full * (1 + 1e-6), 1, 1e-5, anchor)
    assert math.isclose(remaining_rho(0, 0, 0, 1, 1e-5), rho_full, rel_tol=1e-8)
    assert remaining_rho(0, 0, 0, 1, 1e-5) <= rho_full
    spent = epsilon_spent(0, 0, rho_full, 1e-5, anchor)
    assert spent >= 1.0 and math.isclose(spent, 1.0, rel_tol=1e-9)


def test_anchor_after_pure_spending_is_tight_for_the_rest() -> None:
    anchor = zcdp_anchor(1, 1e-5, Decimal("0.5"), 0)
    rho_rest = cdp_rho(0.5, 1e-5)
    assert budget_holds(Decimal("0.5"), 0, rho_rest * (1 - 1e-9), 1, 1e-5, anchor)
    assert not budget_holds(Decimal("0.5"), 0, rho_rest * (1 + 1e-6), 1, 1e-5, anchor)
    assert math.isclose(remaining_rho(Decimal("0.5"), 0, 0, 1, 1e-5), rho_rest, rel_tol=1e-8)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_phase_one_spending_is_never_below_the_nonadaptive_bound(fraction: float) -> None:
    # The safe rule charges alpha R + t, the tangent of R -> cdp_eps(R, delta_z) at the anchor's R:
    # it is never below the non-adaptive conversion, and equals it at the tangent point.
    anchor = zcdp_anchor(2, 1e-6, 0, 0, delta_reserve=Fraction(1, 10**7))
    delta_z = float(anchor.delta_z)
    assert math.isclose(delta_z, 9e-7, rel_tol=1e-12)
    rho_full = cdp_rho(2, delta_z)
    for r in np.linspace(1e-6, 1.0, 40) * rho_full * (1 + fraction):
        assert epsilon_spent(0, 0, r, 1e-6, anchor) >= cdp_eps(r, delta_z)


def test_delta_reserve_and_delta_rules() -> None:
    anchor = zcdp_anchor(1, Fraction(2, 10**5), Fraction(1, 2), Fraction(1, 10**6), delta_reserve=Fraction(4, 10**6))
    assert anchor.delta_z == Fraction(15, 10**6)
    rho = remaining_rho(Fraction(1, 2), Fraction(1, 10**6), 0, 1, Fraction(2, 10**5), delta_reserve=Fraction(4, 10**6))
    assert math.isclose(rho, cdp_rho(0.5, 1.5e-5), rel_tol=1e-8)
    # later (eps, delta) charges may use exactly the reserve, no more
    assert budget_holds(Fraction(1, 2), Fraction(5, 10**6), rho / 2, 1, Fraction(2, 10**5), anchor)
    assert not budget_holds(Fraction(1, 2), Fraction(5, 10**6) + Fraction(1, 10**12), rho / 2, 1,
                            Fraction(2, 10**5), anchor)
    with pytest.raises(PrivacyParameterError, match="no delta left"):
        zcdp_anchor(1, 1e-5, 0, 1e-5)
    with pytest.raises(PrivacyParameterError, match="no delta left"):
        zcdp_anchor(1, 0, 0, 0)
    with pytest.raises(PrivacyParameterError, match="no epsilon left"):
        zcdp_anchor(1, 1e-5, 1, 0)
    assert remaining_rho(1, 0, 0, 1, 1e-5) == 0.0
    assert remaining_rho(0, 0, 0, 1, 0) == 0.0  # a pure-DP budget takes no zCDP charge


@pytest.mark.parametrize("alpha", [Fraction(11, 10), Fraction(3), Fraction(17808709524, 10**9), Fraction(5000)])
@pytest.mark.parametrize("delta_z", [Fraction(1, 10**12), Fraction(1, 10**5), Fraction(1, 10)])
def test_anchor_offset_is_the_single_order_cks_bound(alpha: Fraction, delta_z: Fraction) -> None:
    # spending exactly alpha R + t = eps must give the paper's single-order delta <= delta_z, and barely so
    t = anchor_offset(alpha, delta_z)
    a = float(alpha)
    for eps in (float(t) + 0.01, float(t) + 1.0, float(t) + 10.0):
        rho = (eps - float(t)) / a
        assert log_cks_bound(a, rho, eps) <= math.log(float(delta_z))
        assert log_cks_bound(a, rho * (1 + 1e-6) + 1e-9, eps) > math.log(float(delta_z))


def test_anchor_validation() -> None:
    good = zcdp_anchor(1, 1e-5, 0, 0)
    with pytest.raises(PrivacyParameterError, match="offset"):
        ZcdpAnchor(alpha=good.alpha, delta_z=good.delta_z, offset=good.offset - Fraction(1, 10**6))
    with pytest.raises(PrivacyParameterError, match="alpha"):
        ZcdpAnchor(alpha=Fraction(1), delta_z=good.delta_z, offset=good.offset)
    with pytest.raises(PrivacyParameterError, match="delta_z"):
        ZcdpAnchor(alpha=good.alpha, delta_z=Fraction(0), offset=good.offset)
    assert good.alpha.denominator <= 10**9 and (good.offset * 10**12).denominator == 1


def test_rule_needs_an_anchor_and_valid_sums() -> None:
    with pytest.raises(PrivacyParameterError, match="anchor"):
        budget_holds(0, 0, 0.01, 1, 1e-5)
    with pytest.raises(PrivacyParameterError, match="anchor"):
        epsilon_spent(0, 0, 0.01, 1e-5)
    with pytest.raises(PrivacyParameterError, match="E must be >= 0"):
        budget_holds(-1, 0, 0, 1, 1e-5)
    with pytest.raises(PrivacyParameterError, match="R"):
        budget_holds(0, 0, float("nan"), 1, 1e-5)
    with pytest.raises(PrivacyParameterError, match="delta_B"):
        budget_holds(0, 0, 0, 1, 1)
    assert isinstance(zcdp_anchor(1, 1e-5, 0, 0), ZcdpAnchor)


# ---------------------------------------------------------------- the rule against an adaptive analyst
def _worst_adaptive_delta(eps_b: float, delta_b: float, steps: int, pure_eps_allowed, points: int = 20001) -> float:
    """Exact (up to a fine grid) delta at eps_b of the best adaptive analyst in this family: it releases `steps`
    Gaussian counts of rho_full/steps each, and after each it may stop, or spend everything the rule still allows
    on one randomized response (pure eps = pure_eps_allowed(R)); it sees the privacy loss so far (it knows the
    neighbouring pair, as the worst case of DP allows). Backward induction on the loss: V(l) = best
    E[(1 - e^{eps_b - L_final})_+ | loss so far l], the hockey-stick divergence at eps_b (checked against a
    Monte Carlo simulation of the real mechanisms when this test was written)."""
    rho_step = cdp_rho(eps_b, delta_b) / steps
    grid = np.linspace(-10.0, eps_b + 12.0, points)
    h = grid[1] - grid[0]
    s = math.sqrt(2 * rho_step)  # the loss of one Gaussian count with rho_step is N(rho_step, 2 rho_step)
    offsets = np.arange(-int(10 * s / h) - 1, int(10 * s / h) + 2)
    kernel = norm.pdf(offsets * h, rho_step, s)
    kernel /= kernel.sum()
    stop = np.maximum(0.0, 1.0 - np.exp(eps_b - grid))
    value = stop
    for k in range(steps - 1, -1, -1):
        padded = np.pad(value, (len(offsets), len(offsets)), mode="edge")
        cont = fftconvolve(padded, kernel[::-1], mode="same")[len(offsets) : -len(offsets)]
        value = np.maximum(cont, stop)
        if k > 0:
            e2 = pure_eps_allowed(k * rho_step)
            if e2 > 0:
                p = math.exp(e2) / (1 + math.exp(e2))
                up, down = np.exp(eps_b - grid - e2), np.exp(eps_b - grid + e2)
                rr = p * np.maximum(0, 1 - up) + (1 - p) * np.maximum(0, 1 - down)
                value = np.maximum(value, rr)
    return float(np.interp(0.0, grid, value))


def _allowed_after_rho(anchor: ZcdpAnchor, eps_b: float, delta_b: float):  # noqa: ANN202
    """The largest pure epsilon the accountant's rule allows after rho r (priced at D_alpha of randomized response)."""
    return lambda r: float(remaining_epsilon(0, 0, Fraction(r), eps_b, delta_b, anchor))


def test_design_rule_fails_as_a_filter_and_the_safe_rule_does_not() -> None:
    eps_b, delta_b, steps = 1.0, 1e-5, 30
    anchor = zcdp_anchor(eps_b, delta_b, 0, 0)
    naive = _worst_adaptive_delta(eps_b, delta_b, steps, lambda r: eps_b - cdp_eps(r, delta_b))
    safe = _worst_adaptive_delta(eps_b, delta_b, steps, _allowed_after_rho(anchor, eps_b, delta_b))
    assert naive > 1.2 * delta_b  # E + cdp_eps(R, delta_B - D) <= eps_B is violated by an adaptive analyst
    assert safe <= delta_b


@pytest.mark.parametrize(("steps", "row"), [(30, 0), (100, 1)])
def test_the_counterexample_table_in_the_docs_is_the_converged_value(steps: int, row: int) -> None:
    """Issue 11, finding 5: docs/privacy.md 6.2 quotes the adversary's delta computed on a grid fine enough to have
    converged (80,001 points; 20,001 and 320,001 points agree to 3 digits), and the safe rule's delta (6.3)."""
    text = (REPO / "docs" / "privacy.md").read_text()
    rows = re.findall(r"^\| (\d+) \| ([0-9.]+e-5) \| ([0-9.]+e-6) \|", text, flags=re.MULTILINE)
    assert [int(r[0]) for r in rows] == [30, 100]
    anchor = zcdp_anchor(1.0, 1e-5, 0, 0)
    naive = _worst_adaptive_delta(1.0, 1e-5, steps, lambda r: 1.0 - cdp_eps(r, 1e-5), points=80001)
    safe = _worst_adaptive_delta(1.0, 1e-5, steps, _allowed_after_rho(anchor, 1.0, 1e-5), points=80001)
    assert rows[row][1] == f"{naive:.3e}".replace("e-05", "e-5")
    assert rows[row][2] == f"{safe:.2e}".replace("e-06", "e-6")
    assert safe <= 1e-5


# ---------------------------------------------------------------- pricing (eps, delta) charges after the anchor
def _renyi(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_alpha(p || q) of two discrete laws, in log space (no overflow at large alpha)."""
    return float(logsumexp(alpha * np.log(p) + (1 - alpha) * np.log(q)) / (alpha - 1))


@pytest.mark.parametrize("alpha", [Fraction(11, 10), Fraction(3), Fraction(17808709524, 10**9), Fraction(400)])
@pytest.mark.parametrize("eps", [Fraction(1, 10**6), Fraction(1, 100), Fraction(3, 10), Fraction(2), Fraction(20)])
def test_price_is_the_renyi_divergence_of_randomized_response(alpha: Fraction, eps: Fraction) -> None:
    a, e = float(alpha), float(eps)
    p = math.exp(e) / (1 + math.exp(e))
    by_hand = _renyi(np.array([p, 1 - p]), np.array([1 - p, p]), a)  # the two output laws of randomized response
    divergence = randomized_response_divergence(eps, alpha)
    assert float(divergence) == pytest.approx(by_hand, rel=1e-9, abs=1e-15)
    price = price_epsilon(eps, alpha)
    assert price <= eps and (price * 10**12).denominator == 1  # never above eps, on the ledger's grid
    assert Fraction(divergence) <= price <= Fraction(divergence) + Fraction(1, 10**12)  # rounded up, by one unit


@pytest.mark.parametrize("alpha", [1.5, 4.0, 17.8087, 100.0])
@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 3.0])
def test_every_pure_dp_pair_is_within_the_price(alpha: float, eps: float) -> None:
    """The claim behind the price: every eps-DP pair has D_alpha at most that of randomized response (Kairouz, Oh &
    Viswanath 2015 + data processing). Checked on the Laplace mechanism (closed form, Mironov 2017, Prop. 6) and on
    random discrete pairs whose likelihood ratio lies in [e^-eps, e^eps]."""
    price = float(price_epsilon(Fraction(eps), Fraction(alpha)))
    laplace = math.log(alpha / (2 * alpha - 1) * math.exp((alpha - 1) * eps)
                       + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * eps)) / (alpha - 1)
    assert laplace <= price
    rng = np.random.default_rng(int(alpha * 1000 + eps * 10))
    for _ in range(300):
        q = rng.dirichlet(np.ones(rng.integers(2, 8)))
        p = q * np.exp(eps * rng.choice([-1.0, 1.0], q.size) * rng.uniform(0.5, 1.0, q.size))
        p /= p.sum()
        if np.max(np.abs(np.log(p / q))) <= eps:
            assert _renyi(p, q, alpha) <= price + 1e-12


def test_the_issue_numbers_for_pricing_after_the_anchor() -> None:
    """Budget (1, 1e-5): with half the rho spent, the pure epsilon still allowed goes from 0.272 (priced at eps) to
    0.305 (priced at D_alpha(RR_eps)); right after the anchor, Laplace releases of 0.01 go from 54 to 614."""
    anchor = zcdp_anchor(1, Fraction(1, 10**5), 0, 0)
    half = Fraction(cdp_rho(1.0, 1e-5)) / 2
    left = 1 - anchor.alpha * half - anchor.offset
    assert round(float(left), 3) == 0.272
    assert round(float(remaining_epsilon(0, 0, half, 1, Fraction(1, 10**5), anchor)), 3) == 0.305
    tiny = Fraction(1, 10**12)
    linear = math.floor((1 - anchor.alpha * tiny - anchor.offset) / Fraction(1, 100))
    price = price_epsilon(Fraction(1, 100), anchor.alpha)
    count = 0
    while budget_holds(Fraction(count + 1, 100), 0, tiny, 1, Fraction(1, 10**5), anchor, priced=(count + 1) * price):
        count += 1
    assert (linear, count) == (54, 614)
    # the rule after the anchor with R = 0 (the first zCDP release refunded): basic composition still counts
    assert budget_holds(Fraction(99, 100), 0, 0, 1, Fraction(1, 10**5), anchor, priced=Fraction(99, 100))
    assert not budget_holds(Fraction(1, 2), Fraction(1, 10**9), 0, 1, Fraction(1, 10**5), anchor)  # delta_z is held
