"""Argument checks shared by the sparse-regression randomizers (l2 ball, Gaussian label, Bernstein, projection).

A participant's device runs these randomizers, so a bad public parameter must fail here, before any noise is
drawn, with an error that names the parameter. numpy and the standard library only.
"""

from __future__ import annotations

import math

import numpy as np


class RandomizerError(ValueError):
    """Bad input to a participant-side randomizer; the message names the parameter."""


def check_positive(name: str, value: object) -> float:
    """A finite number > 0 (epsilon, a norm bound, a label bound, ...)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise RandomizerError(f"{name} must be a positive finite number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise RandomizerError(f"{name} must be a positive finite number, got {value!r}")
    return number


def check_delta(value: object, name: str = "delta") -> float:
    """delta of an approximate-DP guarantee: a number strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise RandomizerError(f"{name} must be a number in (0, 1), got {value!r}")
    number = float(value)
    if not 0.0 < number < 1.0:
        raise RandomizerError(f"{name} must be a number in (0, 1), got {value!r}")
    return number


def check_count(name: str, value: object, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (a dimension, a degree, a number of participants)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise RandomizerError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_generator(rng: object) -> np.random.Generator:
    """The caller's ``numpy.random.Generator``; tests pass a seeded one, production a freshly seeded one."""
    if not isinstance(rng, np.random.Generator):
        raise RandomizerError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def as_finite_rows(name: str, values: object, width: int | None = None) -> tuple[np.ndarray, bool]:
    """``values`` as a 2-d float array of rows (one row per participant) and whether the input was one row.

    A 1-d input is one participant's vector; a 2-d input holds one participant per row (a simulator's batch).
    """
    array = np.asarray(values, dtype=float)
    single = array.ndim == 1
    if single:
        array = array[np.newaxis, :]
    if array.ndim != 2 or array.shape[1] == 0:
        raise RandomizerError(f"{name} must be a non-empty vector or a 2-d array of rows, got shape {array.shape}")
    if width is not None and array.shape[1] != width:
        raise RandomizerError(f"{name} must have {width} entries per row, got {array.shape[1]}")
    if not np.all(np.isfinite(array)):
        raise RandomizerError(f"{name} must be finite")
    return array, single


def as_finite_vector(name: str, values: object) -> np.ndarray:
    """A 1-d float array of finite numbers (labels, loss values of many participants)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1 or array.size == 0:
        raise RandomizerError(f"{name} must be a number or a non-empty 1-d array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise RandomizerError(f"{name} must be finite")
    return array


def clip_rows_to_ball(rows: np.ndarray, radius: float) -> np.ndarray:
    """Each row scaled down to l2 norm at most ``radius`` (rows inside the ball are unchanged)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scale = np.minimum(1.0, radius / np.maximum(norms, np.finfo(float).tiny))
    return rows * scale
