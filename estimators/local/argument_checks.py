"""Argument checks shared by the sparse-regression estimators (local IHT, Lasso, Bernstein, DR-ERM; central DP-IHT).

Each raises :class:`estimators.base.EstimatorError` naming the parameter, so a bad setting fails before any report is
collected or any noise is drawn.
"""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError


def check_count(name: str, value: object, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (rounds, iterations, a dimension, a degree)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise EstimatorError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_sparsity(sparsity: object, n_features: int) -> int:
    """``1 <= s <= p``: the number of non-zero coefficients hard thresholding keeps."""
    s = check_count("sparsity", sparsity)
    if s > n_features:
        raise EstimatorError(f"sparsity must be at most the number of features p={n_features}, got {sparsity!r}")
    return s


def check_vector(name: str, value: object, size: int) -> np.ndarray:
    """A finite float vector of exactly ``size`` entries."""
    array = np.asarray(value, dtype=float)
    if array.shape != (size,):
        raise EstimatorError(f"{name} must be a vector of {size} entries, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise EstimatorError(f"{name} must be finite")
    return array


def check_generator(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise EstimatorError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def feature_names_for(names: object, p: int) -> tuple[str, ...]:
    """``names`` as a tuple of ``p`` strings, or ``x0 .. x{p-1}`` when ``None``."""
    if names is None:
        return tuple(f"x{j}" for j in range(p))
    if isinstance(names, str):
        raise EstimatorError("feature_names must be a sequence of names, not one string")
    out = tuple(str(name) for name in names)  # type: ignore[union-attr]
    if len(out) != p:
        raise EstimatorError(f"feature_names must have {p} names, got {len(out)}")
    return out
