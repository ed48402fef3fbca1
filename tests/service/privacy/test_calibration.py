"""Tests of service.privacy.calibration: Gaussian, Laplace and exponential-mechanism calibrations and safe
rounding."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from service.privacy.calibration import (
    exponential_epsilon,
    exponential_rho,
    gaussian_rho,
    gaussian_sigma,
    gaussian_sigma2_exact,
    laplace_scale,
    laplace_scale_exact,
)
from workloads.parameters import PrivacyParameterError


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
