"""Participant inputs as arrays, checked: the rows and labels a randomizer is given, and their clipping.

A participant's device runs the randomizers, so bad input must fail here, before any noise is drawn, with a
:class:`~workloads.parameters.ParameterError` that names it (scalar parameters are checked by
:mod:`workloads.parameters`). numpy and the standard library only.
"""

from __future__ import annotations

import numpy as np

from workloads.parameters import ParameterError


def as_finite_rows(name: str, values: object, width: int | None = None) -> tuple[np.ndarray, bool]:
    """``values`` as a 2-d float array of rows (one row per participant) and whether the input was one row.

    A 1-d input is one participant's vector; a 2-d input holds one participant per row (a simulator's batch).
    """
    array = np.asarray(values, dtype=float)
    single = array.ndim == 1
    if single:
        array = array[np.newaxis, :]
    if array.ndim != 2 or array.shape[1] == 0:
        raise ParameterError(f"{name} must be a non-empty vector or a 2-d array of rows, got shape {array.shape}")
    if width is not None and array.shape[1] != width:
        raise ParameterError(f"{name} must have {width} entries per row, got {array.shape[1]}")
    if not np.all(np.isfinite(array)):
        raise ParameterError(f"{name} must be finite")
    return array, single


def as_finite_vector(name: str, values: object) -> np.ndarray:
    """A 1-d float array of finite numbers (labels, loss values of many participants)."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1 or array.size == 0:
        raise ParameterError(f"{name} must be a number or a non-empty 1-d array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ParameterError(f"{name} must be finite")
    return array


def clip_rows_to_ball(rows: np.ndarray, radius: float) -> np.ndarray:
    """Each row scaled down to l2 norm at most ``radius`` (rows inside the ball are unchanged)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scale = np.ones_like(norms)
    longer = norms > radius
    scale[longer] = radius / norms[longer]
    return rows * scale
