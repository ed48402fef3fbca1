"""Tests of service.privacy.calibration: Gaussian, Laplace and exponential-mechanism calibrations and safe
rounding."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from service.privacy.calibration import (
    exponential_epsilon,
    exponential_rho,
    gaussian_rho,
    gaussian_sigma,
    gaussian_sigma2_exact,
    laplace_scale_exact,
)
from workloads.parameters import PrivacyParameterError


def test_gaussian_sigma_and_laplace_scale() -> None:
    sigma = gaussian_sigma(0.5, 2.0)
    assert sigma >= 2.0 and 2.0**2 / (2 * sigma**2) <= 0.5
    assert math.isclose(2.0**2 / (2 * sigma**2), 0.5, rel_tol=1e-12)
    assert gaussian_sigma2_exact(Fraction(1, 8), 3) == Fraction(9 * 4, 1)
    assert gaussian_sigma2_exact("0.1", "1") == Fraction(5)
    assert laplace_scale_exact(Decimal("0.1"), 2) == Fraction(20)
    with pytest.raises(PrivacyParameterError, match="l2_sensitivity"):
        gaussian_sigma(0.5, 0)
    with pytest.raises(PrivacyParameterError, match="l1_sensitivity"):
        laplace_scale_exact(1.0, -1)


def test_gaussian_rho_inverts_the_exact_variance() -> None:
    for rho in (Fraction(1, 7), Fraction(3), Fraction(10**-12)):
        assert gaussian_rho(gaussian_sigma2_exact(rho)) == rho
        assert gaussian_rho(gaussian_sigma2_exact(rho, 5), 5) == rho


def test_exponential_epsilon_is_exact_and_nearly_tight() -> None:
    for budget in (Fraction(30557, 10**6) / 7, Fraction(1, 3), Fraction(10**-9), Fraction(123456789, 1000)):
        epsilon = exponential_epsilon(budget)
        assert exponential_rho(epsilon) <= budget
        assert Fraction(float(epsilon)) == epsilon  # the sampler gets exactly this number
        # about 30 significant bits: the unused part of the budget is below 2^-28 of it
        assert budget - exponential_rho(epsilon) < budget * Fraction(1, 2**28)


def test_safe_rounding_never_goes_the_wrong_way() -> None:
    from service.privacy.calibration import float_down, float_up, sqrt_up

    for value in (Fraction(1, 3), Fraction(2, 7), Fraction(10**30 + 1, 10**12), Fraction(1, 2)):
        assert Fraction(float_down(value)) <= value <= Fraction(float_up(value))
        root = sqrt_up(value)
        assert Fraction(root) ** 2 >= value
        assert Fraction(math.nextafter(root, 0.0)) ** 2 < value * (1 + Fraction(1, 10**12))
    assert float_down(Fraction(1, 2)) == 0.5 == float_up(Fraction(1, 2))


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(1), Fraction(3)])
def test_discrete_laplace_variance_matches_the_samplers_draws(scale: Fraction) -> None:
    """The closed form against 200,000 seeded draws: the sample variance's standard error is about
    sqrt((m4 - v^2) / n), and m4 <= 25 v^2 for these laws, so 5 of them is 5 sqrt(24 / n) v ~ 0.055 v; and it
    differs from the continuous 2 b^2 by more than that at the smaller scales (the test can tell them apart)."""
    from service.privacy.calibration import discrete_laplace_variance
    from service.privacy.noise import NoiseSource

    draws = NoiseSource(7).discrete_laplace(scale, 200_000).astype(float)
    variance = discrete_laplace_variance(scale)
    assert abs(draws.var() - variance) <= 0.055 * variance
    if scale < 1:
        assert abs(draws.var() - 2 * float(scale) ** 2) > 0.055 * variance


def _excess_kurtosis(log_pmf, support: np.ndarray) -> float:  # noqa: ANN001
    weights = np.exp(log_pmf(support))
    weights /= weights.sum()
    second, fourth = float(weights @ support ** 2), float(weights @ support ** 4)
    return fourth / second ** 2 - 3.0


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(1), Fraction(7), Fraction(300)])
def test_the_discrete_laplace_excess_kurtosis_is_its_laws(scale: Fraction) -> None:
    """The closed form ``(1 + 4q + q^2) / (2q)`` against the sum over the support (exact to 1e-9); 3 in the limit."""
    from service.privacy.calibration import discrete_laplace_excess_kurtosis

    support = np.arange(-60 * int(scale + 1), 60 * int(scale + 1) + 1, dtype=float)
    expected = _excess_kurtosis(lambda x: -np.abs(x) / float(scale), support)
    assert discrete_laplace_excess_kurtosis(scale) == pytest.approx(expected, rel=1e-9)
    assert discrete_laplace_excess_kurtosis(10**6) == pytest.approx(3.0, abs=1e-6)


@pytest.mark.parametrize("sigma2", [Fraction(1, 5), Fraction(1, 2), Fraction(2), Fraction(150)])
def test_the_discrete_gaussian_excess_kurtosis_is_its_laws(sigma2: Fraction) -> None:
    from service.privacy.calibration import discrete_gaussian_excess_kurtosis

    support = np.arange(-2000, 2001, dtype=float)
    expected = _excess_kurtosis(lambda x: -x * x / (2 * float(sigma2)), support)
    assert discrete_gaussian_excess_kurtosis(sigma2) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("sigma2", [Fraction(3, 10), Fraction(1), Fraction(50), Fraction(10**6)])
def test_discrete_gaussian_variance_matches_the_samplers_draws(sigma2: Fraction) -> None:
    """As above for N_Z(0, sigma2) (kurtosis about 3, so the 5-standard-error band is 5 sqrt(2 / n) v ~ 0.016 v);
    below sigma2 = 1 the variance is visibly smaller than sigma2 and the sum must say so."""
    from service.privacy.calibration import discrete_gaussian_variance
    from service.privacy.noise import NoiseSource

    draws = NoiseSource(11).discrete_gaussian(sigma2, 200_000).astype(float)
    variance = discrete_gaussian_variance(sigma2)
    assert variance <= float(sigma2)
    assert abs(draws.var() - variance) <= 0.02 * variance
    if sigma2 < 1:
        assert float(sigma2) - variance > 0.05 * float(sigma2)
