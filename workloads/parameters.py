"""The one validation of parameters: privacy parameters (epsilon, delta, rho) and the numeric settings of estimators
and participant randomizers.

The standard library and numpy only, so the accountant, the estimators, the client and a participant's device share
it. Two families of checks:

* **exact** (:func:`exact_number`, :func:`validate_epsilon`, :func:`validate_delta`, :func:`validate_rho`, ...): what
  the accountant and the noise samplers take. They accept int, float (its exact binary value), Decimal, Fraction,
  numpy real scalars and decimal strings, and raise :class:`PrivacyParameterError`;
* **numeric** (:func:`check_positive`, :func:`check_non_negative`, :func:`check_probability`, :func:`check_count`,
  :func:`check_sparsity`, :func:`check_vector`, :func:`check_generator`): what numerical code (estimators,
  randomizers) takes: Python or numpy numbers only. Each raises the error class its caller names (``error=``), so an
  estimator reports an ``EstimatorError`` and a randomizer a :class:`ParameterError`, with the same wording.

Every error names the parameter and the bad value; bool is never a number; NaN and infinities are refused.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

import numpy as np

__all__ = [
    "MAX_COUNT",
    "ParameterError",
    "PrivacyParameterError",
    "check_count",
    "check_generator",
    "check_non_negative",
    "check_positive",
    "check_probability",
    "check_sparsity",
    "check_vector",
    "exact_number",
    "nonnegative",
    "nonnegative_exact",
    "positive_exact",
    "validate_delta",
    "validate_epsilon",
    "validate_rho",
]


class ParameterError(ValueError):
    """A parameter (a privacy parameter, a bound, a dimension, a generator) that cannot be used; the message names
    it."""


class PrivacyParameterError(ParameterError):
    """A privacy parameter (epsilon, delta, rho, a sensitivity, a budget sum) that cannot be used."""


# --------------------------------------------------------------------------------------------------
# exact: privacy parameters as rationals (the accountant, the exact samplers)
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


def positive_exact(x: object, name: str) -> Fraction:
    """``x`` as an exact rational > 0, or :class:`PrivacyParameterError`."""
    value = exact_number(x, name)
    if value <= 0:
        raise PrivacyParameterError(f"{name} must be > 0, got {x!r}")
    return value


def nonnegative_exact(x: object, name: str) -> Fraction:
    """``x`` as an exact rational >= 0, or :class:`PrivacyParameterError`."""
    value = exact_number(x, name)
    if value < 0:
        raise PrivacyParameterError(f"{name} must be >= 0, got {x!r}")
    return value


def nonnegative(x: object, name: str) -> float:
    """``x`` as a float after checking it is a finite number >= 0."""
    return float(nonnegative_exact(x, name))


def validate_epsilon(x: object, name: str = "epsilon") -> float:
    """Return ``x`` as a float after checking it is a finite number > 0."""
    return float(positive_exact(x, name))


def validate_delta(x: object, name: str = "delta") -> float:
    """Return ``x`` as a float after checking it is a finite number with 0 <= x < 1."""
    value = exact_number(x, name)
    if value < 0 or value >= 1:
        raise PrivacyParameterError(f"{name} must satisfy 0 <= {name} < 1, got {x!r}")
    return float(value)


def validate_rho(x: object, name: str = "rho") -> float:
    """Return ``x`` as a float after checking it is a finite number > 0."""
    return float(positive_exact(x, name))


# --------------------------------------------------------------------------------------------------
# numeric: the settings of numerical code (estimators, randomizers), Python or numpy numbers only
# --------------------------------------------------------------------------------------------------
def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float | np.floating | np.integer)


def check_positive(name: str, value: object, error: type[ValueError] = ParameterError) -> float:
    """A finite number > 0 (epsilon, rho, a norm bound, a sensitivity...), as a float."""
    if not _is_number(value) or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise error(f"{name} must be a positive finite number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_non_negative(name: str, value: object, error: type[ValueError] = ParameterError) -> float:
    """A finite number >= 0, as a float."""
    if not _is_number(value) or not math.isfinite(float(value)) or float(value) < 0:  # type: ignore[arg-type]
        raise error(f"{name} must be a non-negative finite number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_probability(name: str, value: object, error: type[ValueError] = ParameterError, *,
                      allow_zero: bool = False) -> float:
    """A number strictly between 0 and 1 (delta of an approximate-DP guarantee, a failure probability), or in
    [0, 1) with ``allow_zero``."""
    interval = "[0, 1)" if allow_zero else "(0, 1)"
    if not _is_number(value):
        raise error(f"{name} must be a number in {interval}, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if not 0.0 <= number < 1.0 or (number == 0.0 and not allow_zero):
        raise error(f"{name} must be a number in {interval}, got {value!r}")
    return number


#: The largest count (a dimension, a number of rounds or participants) any setting may name: 2^53, the largest
#: integer a float64 holds exactly. A larger "count" is a typo (``participants = 1e30``), would overflow the
#: database's 64-bit integer columns, and would stop being a count as soon as numerical code turned it into a float.
MAX_COUNT = 2**53


def check_count(name: str, value: object, minimum: int = 1, error: type[ValueError] = ParameterError) -> int:
    """An integer with ``minimum <= value <=`` :data:`MAX_COUNT` (a dimension, a degree, a number of rounds or
    participants)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value > MAX_COUNT:
        raise error(f"{name} must be at most 2^53 = {MAX_COUNT:,}, got {value!r}")
    return int(value)


def check_sparsity(sparsity: object, n_features: int, error: type[ValueError] = ParameterError) -> int:
    """``1 <= s <= p``: the number of non-zero coefficients a sparse estimator (hard thresholding) keeps."""
    s = check_count("sparsity", sparsity, error=error)
    if s > n_features:
        raise error(f"sparsity must be at most the number of features p={n_features}, got {sparsity!r}")
    return s


def check_vector(name: str, value: object, size: int, error: type[ValueError] = ParameterError) -> np.ndarray:
    """A finite float vector of exactly ``size`` entries (a parameter vector, a starting point)."""
    array = np.asarray(value, dtype=float)
    if array.shape != (size,):
        raise error(f"{name} must be a vector of {size} entries, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise error(f"{name} must be finite")
    return array


def check_generator(rng: object, error: type[ValueError] = ParameterError) -> np.random.Generator:
    """The caller's ``numpy.random.Generator`` (tests and simulations pass a seeded one)."""
    if not isinstance(rng, np.random.Generator):
        raise error(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng
