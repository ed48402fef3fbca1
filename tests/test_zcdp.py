"""Tests of service.zcdp: the CKS conversion, calibration, validation and the accountant's rule."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import fftconvolve
from scipy.special import logsumexp
from scipy.stats import norm

from service.zcdp import (
    PrivacyParameterError,
    ZcdpAnchor,
    anchor_offset,
    budget_holds,
    cdp_delta,
    cdp_eps,
    cdp_rho,
    epsilon_spent,
    exact_number,
    gaussian_sigma,
    gaussian_sigma2_exact,
    laplace_scale,
    laplace_scale_exact,
    optimal_order,
    price_epsilon,
    randomized_response_divergence,
    remaining_epsilon,
    remaining_rho,
    validate_delta,
    validate_epsilon,
    validate_rho,
    zcdp_anchor,
)

REPO = Path(__file__).resolve().parents[1]
RHOS = [1e-6, 1e-4, 1e-2, 0.3, 1.0, 10.0]
DELTAS = [1e-12, 1e-8, 1e-5, 1e-2, 0.3]
EPSILONS = [0.01, 0.1, 1.0, 3.0, 10.0]


def log_cks_bound(alpha: float, rho: float, eps: float) -> float:
    """log of CKS Cor. 13 at one order, exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha, written
    term by term as in the paper (not through the module's helpers)."""
    return (alpha - 1) * (alpha * rho - eps) - math.log(alpha - 1) + alpha * math.log(1 - 1 / alpha)


# ---------------------------------------------------------------- conversion
def test_reference_value() -> None:
    # Reference from shared/notes.md (private-pgm's cdp_rho): rho for (1, 1e-5) is 0.030557.
    assert f"{cdp_rho(1, 1e-5):.5g}" == "0.030557"


@pytest.mark.parametrize("rho", [1e-4, 1e-2, 0.5, 5.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 8.0])
def test_cdp_delta_is_the_infimum_over_alpha(rho: float, eps: float) -> None:
    # an independent brute-force minimisation on a dense logarithmic grid of orders
    alphas = 1.0 + np.logspace(-8, 7, 30001)
    log_grid_min = min(min(log_cks_bound(a, rho, eps) for a in alphas), 0.0)
    # the paper's formula at the module's order is a valid bound (>= the infimum by construction); it must be
    # at least as good as the best grid order
    log_at_optimum = log_cks_bound(optimal_order(rho, eps), rho, eps)
    assert min(log_at_optimum, 0.0) <= log_grid_min + 1e-9 * abs(log_grid_min)
    value = cdp_delta(rho, eps)
    if log_grid_min < -700:
        assert value == 0.0  # underflow, consistently
    else:
        assert math.isclose(math.log(value), min(log_at_optimum, 0.0), rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("rho", [1e-4, 1e-2, 0.5, 5.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
def test_optimal_order_solves_the_derivative(rho: float, eps: float) -> None:
    alpha = optimal_order(rho, eps)
    # the derivative of log delta(alpha), by central differences on the paper's formula
    h = 1e-6 * (alpha - 1)
    slope = (log_cks_bound(alpha + h, rho, eps) - log_cks_bound(alpha - h, rho, eps)) / (2 * h)
    scale = abs(log_cks_bound(alpha, rho, eps)) / (alpha - 1) + 1.0
    assert abs(slope) < 1e-4 * scale


def test_cdp_delta_edge_cases() -> None:
    assert cdp_delta(0, 0.5) == 0.0
    assert cdp_delta(0.1, 0.0) <= 1.0
    assert cdp_eps(0, 1e-5) == 0.0
    assert cdp_eps(0, 0) == 0.0


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_cdp_eps_conservative_tight_and_not_worse_than_standard(rho: float, delta: float) -> None:
    eps = cdp_eps(rho, delta)
    assert cdp_delta(rho, eps) <= delta  # conservative
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun & Steinke Prop. 1.3
    if eps > 0:
        assert cdp_delta(rho, eps * (1 - 1e-6)) > delta  # and not wastefully large


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_cdp_rho_round_trip(eps: float, delta: float) -> None:
    rho = cdp_rho(eps, delta)
    assert rho > 0
    assert cdp_eps(rho, delta) <= eps
    assert cdp_delta(rho, eps) <= delta
    assert cdp_delta(rho * (1 + 1e-6), eps) > delta


def test_monotonicity() -> None:
    for eps in EPSILONS:
        deltas = [cdp_delta(rho, eps) for rho in RHOS]
        assert all(a <= b for a, b in zip(deltas, deltas[1:], strict=False))
    for rho in RHOS:
        deltas = [cdp_delta(rho, eps) for eps in EPSILONS]
        assert all(a >= b for a, b in zip(deltas, deltas[1:], strict=False))
        epss = [cdp_eps(rho, delta) for delta in DELTAS]
        assert all(a >= b for a, b in zip(epss, epss[1:], strict=False))
    for delta in DELTAS:
        epss = [cdp_eps(rho, delta) for rho in RHOS]
        assert all(a <= b for a, b in zip(epss, epss[1:], strict=False))
        rhos = [cdp_rho(eps, delta) for eps in EPSILONS]
        assert all(a < b for a, b in zip(rhos, rhos[1:], strict=False))
    for eps in EPSILONS:
        rhos = [cdp_rho(eps, delta) for delta in DELTAS]
        assert all(a < b for a, b in zip(rhos, rhos[1:], strict=False))


@pytest.mark.parametrize("rho", [1e-3, 0.05, 0.5, 2.0])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_conversion_bounds_the_exact_gaussian_delta(rho: float, eps: float) -> None:
    # The Gaussian mechanism with rho = mu^2/2 has exact delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
    # (Balle & Wang 2018); any rho-zCDP conversion must be an upper bound, and CKS is within a small factor.
    mu = math.sqrt(2 * rho)
    exact = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    bound = cdp_delta(rho, eps)
    assert exact <= bound
    standard = math.exp(-((eps - rho) ** 2) / (4 * rho)) if eps > rho else 1.0
    assert bound <= standard


# ---------------------------------------------------------------- calibration
def test_gaussian_sigma_and_laplace_scale() -> None:
    sigma = gaussian_sigma(0.5, 2.0)
    assert sigma >= 2.0 and 2.0**2 / (2 * sigma**2) <= 0.5
    assert math.isclose(2.0**2 / (2 * sigma**2), 0.5, rel_tol=1e-12)
    assert gaussian_sigma2_exact(Fraction(1, 8), 3) == Fraction(9 * 4, 1)
    assert gaussian_sigma2_exact("0.1", "1") == Fraction(5)
    b = laplace_scale(0.5, 3)
    assert b >= 6.0 and math.isclose(b, 6.0, rel_tol=1e-12)
    assert laplace_scale_exact(Decimal("0.1"), 2) == Fraction(20)
    with pytest.raises(PrivacyParameterError, match="l2_sensitivity"):
        gaussian_sigma(0.5, 0)
    with pytest.raises(PrivacyParameterError, match="l1_sensitivity"):
        laplace_scale(1.0, -1)


# ---------------------------------------------------------------- validation
BAD_COMMON = [float("nan"), float("inf"), -float("inf"), True, False, "abc", "", None, "nan", "inf", [1.0], 1j,
              Decimal("NaN"), Decimal("Infinity"), np.True_]


@pytest.mark.parametrize("bad", BAD_COMMON + [0, 0.0, -1, -1e-9, "-0.5", Decimal("-1")])
def test_validate_epsilon_and_rho_reject(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon") as info:
        validate_epsilon(bad)
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)
    with pytest.raises(PrivacyParameterError, match="rho"):
        validate_rho(bad)


@pytest.mark.parametrize("bad", BAD_COMMON + [-1e-9, 1, 1.0, 1.5, "1", Decimal("1.0"), Fraction(3, 2)])
def test_validate_delta_rejects(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="delta"):
        validate_delta(bad)


@pytest.mark.parametrize(
    "good, value", [(1, 1.0), (0.5, 0.5), (Decimal("0.25"), 0.25), (Fraction(1, 4), 0.25), ("0.25", 0.25),
                    (" 1e-1 ", 0.1), (np.float64(0.5), 0.5), (np.int64(2), 2.0)]
)
def test_validators_accept_numbers(good: object, value: float) -> None:
    assert validate_epsilon(good) == value
    assert validate_rho(good) == value
    if value < 1:
        assert validate_delta(good) == value
    assert validate_delta(0) == 0.0


def test_custom_name_in_message_and_exact_strings() -> None:
    with pytest.raises(PrivacyParameterError, match="eps_budget must be > 0, got -2"):
        validate_epsilon(-2, name="eps_budget")
    assert exact_number("0.1", "x") == Fraction(1, 10)
    assert exact_number(0.1, "x") == Fraction(0.1)  # the float's exact binary value
    assert issubclass(PrivacyParameterError, ValueError)


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
