"""Tests of service.privacy.conversions: the CKS conversion between zCDP and (epsilon, delta)-DP, against brute
force, the standard bound and the exact Gaussian privacy profile."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from service.privacy.conversions import cdp_delta, cdp_eps, cdp_rho, optimal_order

RHOS = [1e-6, 1e-4, 1e-2, 0.3, 1.0, 10.0]
DELTAS = [1e-12, 1e-8, 1e-5, 1e-2, 0.3]
EPSILONS = [0.01, 0.1, 1.0, 3.0, 10.0]


def log_cks_bound(alpha: float, rho: float, eps: float) -> float:
    """log of CKS Cor. 13 at one order, exp((alpha-1)(alpha rho - eps)) / (alpha-1) * (1 - 1/alpha)^alpha, written
    term by term as in the paper (not through the module's helpers)."""
    return (alpha - 1) * (alpha * rho - eps) - math.log(alpha - 1) + alpha * math.log(1 - 1 / alpha)


# ---------------------------------------------------------------- conversion
def test_reference_value() -> None:
    # Reference: private-pgm's cdp_rho: rho for (1, 1e-5) is 0.030557.
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
