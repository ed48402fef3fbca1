"""Inputs of one participant that attain the l2 diameter of the sufficient-statistics report (shared by tests)."""

from __future__ import annotations

import math

import numpy as np


def statistic(x: np.ndarray, y: float) -> np.ndarray:
    """``(upper triangle of x x^T, x y)`` of one row."""
    rows, cols = np.triu_indices(x.size)
    return np.concatenate([x[rows] * x[cols], x * y])


def attaining_pair(dimension: int, r: float, b: float) -> tuple[np.ndarray, float, np.ndarray, float]:
    """The maximiser of the derivation in ``docs/privacy.md`` 8.7 (``p >= 2``): norms ``r``, inner product
    ``s = min(B^2 / 2, r^2)``, labels ``B`` and ``-B``, rotated so that ``x x^T - x' x'^T`` is diagonal."""
    s = min(b * b / 2, r * r)
    half = math.acos(s / (r * r)) / 2  # half the angle between x and x'
    # x = r (cos h, sin h), x' = r (cos h, -sin h): D is off-diagonal; a 45 degree rotation makes it diagonal
    pair = np.array([[math.cos(half), math.sin(half)], [math.cos(half), -math.sin(half)]]) * r
    rotation = np.array([[1, -1], [1, 1]]) / math.sqrt(2)
    x, x_prime = (rotation @ pair.T).T
    pad = np.zeros(dimension - 2)
    return np.concatenate([x, pad]), b, np.concatenate([x_prime, pad]), -b
