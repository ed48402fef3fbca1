"""Coordinate sampling: one uniformly drawn coordinate of a bounded vector, through the one-dimensional randomizer.

Sources: the one-dimensional mechanism of J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures
for locally private estimation", JASA 113(521), 2018 (:mod:`workloads.local.randomizers.duchi_label`), applied to one
coordinate drawn uniformly and scaled by the dimension, as in the "Harmony" protocol of T. T. Nguyen, X. Xiao,
Y. Yang, S. C. Hui, H. Shin, J. Shin, "Collecting and analyzing data from smart device users with local differential
privacy" (arXiv:1606.05053, 2016: sample one dimension, randomize it with Duchi et al.'s two-point mechanism,
scale by the dimension ``d``). Given ``v`` in ``R^p`` with every entry clipped to ``[-b, b]``:

1. ``J`` uniform on ``{0, .., p - 1}`` (``rng.integers``: exactly uniform), independent of ``v``;
2. ``S = +-1`` from the one-dimensional mechanism on ``v_J`` with bound ``b``: ``P(S = +1) = 1/2 + v_J tanh(eps'/2) /
   (2 b)``, drawn with exact coins (:func:`~workloads.local.randomizers.duchi_label.duchi_label_signs`);
3. the report is the pair ``(J, p C S)``, ``C = b coth(eps'/2)``.

**Unbiased.** ``E[p C S | J = j] = p v_j``, so the vector ``Z = p C S e_J`` has ``E[Z] = sum_j (1/p) p v_j e_j = v``.
**Variance.** ``Z Z^T = p^2 C^2 e_J e_J^T``, so ``E[Z Z^T] = p C^2 I`` and ``Cov(Z) = p C^2 I - v v^T``: per coordinate
``p C^2 - v_j^2``, in total ``E||Z - v||^2 = p^2 C^2 - ||v||^2`` (:func:`coordinate_report_variance`).
**Privacy.** ``P(J = j, S = s | v) = (1/p) P(s | v_j)``; for two inputs the factor ``1/p`` cancels and the ratio of
``P(s | v_j)`` is at most ``e^eps' <= e^eps`` (docs/privacy.md §8.9 (b')): pure eps-LDP, for every ``v`` (entries
beyond ``b`` are clipped first). The output's support, ``{0..p-1} x {-pC, +pC}``, is the same for every input.

numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import numpy as np

from workloads.local.randomizers.duchi_label import duchi_label_magnitude, duchi_label_signs
from workloads.local.randomizers.inputs import as_finite_rows
from workloads.local.rng import generator_or_device
from workloads.parameters import check_count, check_positive


def coordinate_report_magnitude(dimension: int, bound: float, epsilon: float) -> float:
    """``p C = p b coth(eps'/2)``: the absolute value of every report's value."""
    return check_count("dimension", dimension) * duchi_label_magnitude(bound, epsilon)


def coordinate_report_variance(values: object, bound: float, epsilon: float) -> float:
    """``E||Z - v||^2 = p^2 C^2 - ||v||^2`` for one vector ``v`` (entries clipped to ``[-b, b]``)."""
    rows, _ = as_finite_rows("values", values)
    clipped = np.clip(rows[0], -bound, bound)
    return coordinate_report_magnitude(rows.shape[1], bound, epsilon) ** 2 - float(clipped @ clipped)


def coordinate_randomize(values: object, bound: float, epsilon: float,
                         rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(J, p C S)`` per row of ``values`` (one participant per row; a vector is one participant): the sampled
    coordinate as an int64 array and the report's value (module docstring). Unbiased for the clipped rows once
    expanded to ``p C S e_J``; eps-LDP."""
    b = check_positive("bound", bound)
    rows, single = as_finite_rows("values", values)
    generator = generator_or_device(rng)
    m, p = rows.shape
    coordinates = generator.integers(0, p, size=m)
    sampled = np.clip(rows[np.arange(m), coordinates], -b, b)
    signs = duchi_label_signs(sampled, b, epsilon, generator)
    reported = signs * coordinate_report_magnitude(p, b, epsilon)
    return (coordinates[0], reported[0]) if single else (coordinates, reported)


def expand_coordinate_reports(coordinates: object, values: object, dimension: int) -> np.ndarray:
    """The dense vectors ``value e_coordinate``, one row per report (what the server sums)."""
    p = check_count("dimension", dimension)
    index = np.asarray(coordinates).astype(np.int64).reshape(-1)
    dense = np.zeros((index.size, p))
    dense[np.arange(index.size), index] = np.asarray(values, dtype=float).reshape(-1)
    return dense
