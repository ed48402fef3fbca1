"""Tests of workloads.parameters: the one validation of privacy parameters and numeric settings, exact and numeric,
and that each family (the accountant, estimators, participant protocols) gets it with its own error class."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from estimators.base import EstimatorError, check_count, check_positive, check_probability, check_sparsity
from workloads import parameters
from workloads.local.protocols import ProtocolError, RoundSpec
from workloads.parameters import (
    ParameterError,
    PrivacyParameterError,
    exact_number,
    validate_delta,
    validate_epsilon,
    validate_rho,
)

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
    assert issubclass(PrivacyParameterError, ParameterError) and issubclass(ParameterError, ValueError)


# ---------------------------------------------------------------- numeric checks
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: parameters.check_positive("epsilon", 0), "epsilon"),
        (lambda: parameters.check_positive("epsilon", -1.0), "epsilon"),
        (lambda: parameters.check_positive("epsilon", float("nan")), "epsilon"),
        (lambda: parameters.check_positive("epsilon", float("inf")), "epsilon"),
        (lambda: parameters.check_positive("epsilon", True), "epsilon"),
        (lambda: parameters.check_positive("epsilon", "1"), "epsilon"),
        (lambda: parameters.check_non_negative("shift", -1e-9), "shift"),
        (lambda: parameters.check_non_negative("shift", float("inf")), "shift"),
        (lambda: parameters.check_probability("delta", 0.0), "delta"),
        (lambda: parameters.check_probability("delta", 1.0), "delta"),
        (lambda: parameters.check_probability("delta", float("nan")), "delta"),
        (lambda: parameters.check_probability("delta", -0.1, allow_zero=True), "delta"),
        (lambda: parameters.check_count("dimension", 0), "dimension"),
        (lambda: parameters.check_count("dimension", 2.0), "dimension"),
        (lambda: parameters.check_count("rounds", 1, minimum=2), "rounds"),
        (lambda: parameters.check_generator(42), "rng"),
        (lambda: parameters.check_sparsity(0, 5), "sparsity"),
        (lambda: parameters.check_sparsity(6, 5), "sparsity"),
        (lambda: parameters.check_vector("theta", [1.0, 2.0], 3), "theta"),
        (lambda: parameters.check_vector("theta", [1.0, float("nan")], 2), "theta"),
    ],
)
def test_numeric_checks_name_the_parameter(call, name: str) -> None:  # noqa: ANN001
    with pytest.raises(ParameterError, match=name):
        call()


def test_numeric_checks_accept_python_and_numpy_numbers() -> None:
    assert parameters.check_positive("x", np.float32(0.5)) == 0.5
    assert parameters.check_positive("x", np.int64(3)) == 3.0
    assert parameters.check_non_negative("x", 0) == 0.0
    assert parameters.check_probability("delta", 0.0, allow_zero=True) == 0.0
    assert parameters.check_probability("delta", np.float64(1e-6)) == 1e-6
    assert parameters.check_count("p", np.int32(4)) == 4
    assert parameters.check_sparsity(np.int64(5), 5) == 5
    np.testing.assert_array_equal(parameters.check_vector("theta", [1, 2], 2), [1.0, 2.0])
    rng = np.random.default_rng(0)
    assert parameters.check_generator(rng) is rng


def test_each_family_gets_its_own_error_with_the_same_words() -> None:
    """The estimators' checks are the same functions raising EstimatorError; a protocol's spec raises ProtocolError."""
    with pytest.raises(EstimatorError, match="epsilon must be a positive finite number, got 0"):
        check_positive("epsilon", 0)
    with pytest.raises(EstimatorError, match=r"delta must be a number in \(0, 1\)"):
        check_probability("delta", 1.0)
    with pytest.raises(EstimatorError, match="rounds must be an integer >= 1"):
        check_count("rounds", 0)
    with pytest.raises(EstimatorError, match="sparsity must be at most the number of features p=2"):
        check_sparsity(3, 2)
    with pytest.raises(ProtocolError, match="epsilon must be a positive finite number"):
        RoundSpec("all", epsilon=-1.0)


def test_a_count_is_at_most_2_to_the_53() -> None:
    """Issue 18: ``participants = 10**30`` passed every check and overflowed the database's integer columns."""
    assert parameters.check_count("participants", 2**53) == 2**53
    for value in (2**53 + 1, 10**30, np.uint64(2**64 - 1)):
        with pytest.raises(ParameterError, match=r"participants must be at most 2\^53"):
            parameters.check_count("participants", value)
