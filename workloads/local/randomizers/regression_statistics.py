"""One participant's least-squares sufficient statistics with an intercept, as one vector, and its randomizers.

Sufficient-statistics perturbation (SSP) in the local model: with ``x~ = (1, x)`` (the constant for the intercept),
ordinary least squares needs only ``mean x~ x~^T`` and ``mean x~ y``. Each participant sends ONE randomized vector of
her own statistics; the server averages, rebuilds the two and solves (``estimators.local.linear_ssp``). The design
is the local form of Sheffet (2017) and of AdaSSP (Wang 2018), and the baseline Wang, Gaboardi & Xu (NeurIPS 2018)
set the Bernstein mechanism against; issue 20 measured it 10-100x more accurate than Bernstein for ``p <= 2``.

**The vector** (:func:`regression_statistics`). ``x`` is first scaled into the public ball ``||x||_2 <= r`` and
``y`` clipped to ``[-B, B]`` (pre-processing with public bounds, the same for every participant). Then

    s = [x, svec(x x^T), y, x y],   svec(M) = (M_ii on the diagonal, sqrt(2) M_ij for i < j),

in that order (``svec`` in ``numpy.triu_indices`` order). It is ``vech(x~ x~^T)`` without its constant entry ``1``
(public: it would spend norm on nothing) followed by ``x~ y``, with the off-diagonal entries of ``x x^T`` weighted by
``sqrt(2)`` so that ``||svec(M)||_2 = ||M||_F`` (each off-diagonal entry appears twice in ``M``: its noise is then
``1/sqrt(2)`` of an unweighted ``vech``'s, for the same norm bound). Length ``D = p + p (p + 1) / 2 + 1 + p``
(:func:`statistics_length`).

**Its norm bound** (:func:`statistics_radius`, our derivation): ``||svec(x x^T)||^2 = ||x x^T||_F^2 = ||x||^4``, so

    ||s||^2 = ||x||^2 + ||x||^4 + y^2 + y^2 ||x||^2 = (1 + ||x||^2)(||x||^2 + y^2) <= (1 + r^2)(r^2 + B^2),

attained at ``||x|| = r``, ``|y| = B``: ``R_s = sqrt((1 + r^2)(r^2 + B^2))`` is the exact radius of the set of
possible ``s``, and the l2 diameter of that set is ``2 R_s`` (``s`` and the ``s`` of ``(-x, -y)`` differ by
``2 (x, 0, y, 0)``, not ``2 s``; the bound ``2 R_s`` is used as stated, not tightened).

**Randomizers** (:data:`STATISTICS_RANDOMIZERS`, a small table so another joins as a row):

* ``"l2ball"`` (default): Duchi, Jordan & Wainwright's l2-ball randomizer with radius ``R_s``
  (:mod:`workloads.local.randomizers.l2ball`): pure ``epsilon``-LDP, every report of norm
  ``l2_ball_output_norm(D, R_s, eps)``, unbiased.
* ``"gaussian"``: every entry rounded to a public power-of-two grid ``g`` and discrete Gaussian noise added in grid
  units (:mod:`workloads.local.randomizers.grid`), ``g sigma_u >= sigma = Delta' / sqrt(2 rho)``,
  ``rho = cdp_rho(eps, delta)``, ``Delta' = 2 R_s + 2 g sqrt(D)`` (rounding moves each entry by less than ``g``):
  rho-zCDP, hence ``(epsilon, delta)``-LDP (Canonne, Kamath & Steinke 2020, Cor. 13), as the Stein reports.

numpy and the standard library only (participants run it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from workloads.local.calibration import GAUSSIAN_GRID_STEPS, power_of_two_grid, round_up, zcdp_gaussian_sigma
from workloads.local.randomizers.grid import GridNoise, gaussian_grid_noise, grid_report
from workloads.local.randomizers.inputs import as_finite_rows, as_finite_vector, clip_rows_to_ball
from workloads.local.randomizers.l2ball import l2_ball_randomize
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive


def statistics_length(dimension: int) -> int:
    """``D = p + p (p + 1) / 2 + 1 + p``: the entries of ``[x, svec(x x^T), y, x y]``."""
    p = check_count("dimension", dimension)
    return 2 * p + 1 + p * (p + 1) // 2


def statistics_radius(norm_bound: float, label_bound: float) -> float:
    """``R_s = sqrt((1 + r^2)(r^2 + B^2))``: the largest ``||s||`` (module docstring), rounded up."""
    r2 = check_positive("norm_bound", norm_bound) ** 2
    return round_up(math.sqrt((1.0 + r2) * (r2 + check_positive("label_bound", label_bound) ** 2)))


def _svec_weights(dimension: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    rows, cols = np.triu_indices(dimension)
    return (rows, cols), np.where(rows == cols, 1.0, math.sqrt(2.0))


def regression_statistics(x: object, y: object, norm_bound: float, label_bound: float) -> np.ndarray:
    """``s = [x, svec(x x^T), y, x y]`` per row (``x`` scaled into ``||x|| <= r``, ``y`` clipped to ``[-B, B]``);
    a single row for a 1-d ``x``."""
    r = check_positive("norm_bound", norm_bound)
    b = check_positive("label_bound", label_bound)
    rows, single = as_finite_rows("x", x)
    labels = as_finite_vector("y", y)
    if labels.size != rows.shape[0]:
        raise ParameterError(f"y must hold {rows.shape[0]} label(s), one per row of x, got {labels.size}")
    features = clip_rows_to_ball(rows, r) * (1.0 - 2.0**-50)  # a hair inside: rounding never leaves the ball
    labels = np.clip(labels, -b, b)
    (upper_rows, upper_cols), weights = _svec_weights(features.shape[1])
    outer = features[:, upper_rows] * features[:, upper_cols] * weights
    out = np.hstack([features, outer, labels[:, np.newaxis], features * labels[:, np.newaxis]])
    return out[0] if single else out


def unpack_statistics(vector: object, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """``(G, m)`` from a (mean) statistics vector: ``G`` the symmetric ``(p+1) x (p+1)`` matrix estimating
    ``mean x~ x~^T`` (``G_00 = 1`` exactly), ``m`` the ``p + 1`` vector estimating ``mean x~ y``."""
    p = check_count("dimension", dimension)
    values = as_finite_vector("vector", vector)
    if values.size != statistics_length(p):
        raise ParameterError(f"vector must have {statistics_length(p)} entries for p={p}, got {values.size}")
    (upper_rows, upper_cols), weights = _svec_weights(p)
    block = np.zeros((p, p))
    block[upper_rows, upper_cols] = values[p:p + weights.size] / weights
    block = block + np.triu(block, 1).T
    gram = np.empty((p + 1, p + 1))
    gram[0, 0] = 1.0
    gram[0, 1:] = gram[1:, 0] = values[:p]
    gram[1:, 1:] = block
    return gram, values[p + weights.size:].copy()


def statistics_noise(dimension: int, norm_bound: float, label_bound: float, epsilon: float,
                     delta: float) -> GridNoise:
    """The ``"gaussian"`` randomizer's grid and discrete Gaussian (module docstring): grid ``2^-10`` of the finer of
    the first ``sigma`` and the per-entry share ``2 R_s / sqrt(D)`` of the diameter."""
    length = statistics_length(dimension)
    diameter = 2.0 * statistics_radius(norm_bound, label_bound)
    first = zcdp_gaussian_sigma(epsilon, delta, diameter)
    grid = power_of_two_grid(min(first, diameter / math.sqrt(length)), GAUSSIAN_GRID_STEPS)
    widened = round_up(diameter * (1.0 + 2.0**-40) + 2.0 * grid * math.sqrt(length))
    return gaussian_grid_noise(zcdp_gaussian_sigma(epsilon, delta, widened), grid)


def _l2ball_report(statistics: np.ndarray, dimension: int, norm_bound: float, label_bound: float, epsilon: float,
                   delta: float, rng: np.random.Generator) -> np.ndarray:
    return l2_ball_randomize(statistics, statistics_radius(norm_bound, label_bound), epsilon, rng)


def _gaussian_report(statistics: np.ndarray, dimension: int, norm_bound: float, label_bound: float, epsilon: float,
                     delta: float, rng: np.random.Generator) -> np.ndarray:
    return grid_report(statistics, statistics_noise(dimension, norm_bound, label_bound, epsilon, delta), rng)


@dataclass(frozen=True)
class StatisticsRandomizer:
    """A row of :data:`STATISTICS_RANDOMIZERS`: whether it is pure epsilon-LDP (delta must then be 0) and its report
    ``(statistics, p, r, B, epsilon, delta, rng) -> reports`` (same shape as ``statistics``)."""

    pure: bool
    report: Callable[[np.ndarray, int, float, float, float, float, np.random.Generator], np.ndarray]


#: The randomizers of the statistics vector (module docstring), by name; the first is the default.
STATISTICS_RANDOMIZERS: dict[str, StatisticsRandomizer] = {
    "l2ball": StatisticsRandomizer(True, _l2ball_report),
    "gaussian": StatisticsRandomizer(False, _gaussian_report),
}


def randomize_regression_statistics(
    x: object, y: object, *, norm_bound: float, label_bound: float, epsilon: float, delta: float = 0.0,
    randomizer: str = "l2ball", rng: np.random.Generator | None = None,
) -> np.ndarray:
    """One report per row: :func:`regression_statistics` through the named randomizer (module docstring)."""
    if randomizer not in STATISTICS_RANDOMIZERS:
        raise ParameterError(f"randomizer must be one of {list(STATISTICS_RANDOMIZERS)}, got {randomizer!r}")
    statistics = regression_statistics(x, y, norm_bound, label_bound)
    dimension = np.atleast_2d(np.asarray(x, dtype=float)).shape[-1]
    return STATISTICS_RANDOMIZERS[randomizer].report(statistics, dimension, norm_bound, label_bound, epsilon, delta,
                                                     generator_or_device(rng))
