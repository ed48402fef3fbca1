"""The server's side of the Local Bernstein Mechanism (and its 1-bit variant) for ERM in dimension p <= 3.

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Sec. 3-5. The participants report noisy evaluations of a public loss on the grid
``{v / k : v in {0..k}^p}`` (:mod:`workloads.local.randomizers.bernstein`); the server

1. estimates the empirical risk at every grid point: the mean of the Alg. 2 reports
   (:func:`aggregate_grid_reports`), or ``2 mean_{i in I_l} b_i y_i`` over the participants assigned to grid point
   ``l`` in Alg. 3 (:func:`aggregate_one_bit_reports`; the factor 2 is our derivation, see the randomizer module);
2. builds the (iterated) Bernstein polynomial of those values (:class:`BernsteinSurface`, Def. 2-6): with
   ``b_{v,k}(x) = C(k, v) x^v (1 - x)^{k - v}`` and ``M[u, v] = b_{v,k}(u / k)``, the iterated operator of order
   ``h``, ``B^(h) = I - (I - B_k)^h = sum_{i=1}^h C(h, i) (-1)^{i-1} B_k^i`` (Def. 4), evaluates as
   ``B^(h)(f; x) = b(x)^T A_h f_grid`` with ``A_h = sum_{i=1}^h C(h, i) (-1)^{i-1} M^{i-1}``, because
   ``B_k^i f(x) = b(x)^T M^{i-1} f_grid``; in ``p`` dimensions ``A_h`` acts along every axis of the grid tensor and
   the basis is the tensor product (Def. 6, eq. 2);
3. minimises it over the constraint set (step 11). The polynomial of noisy values is in general not convex, so this
   is not a cvxpy problem: the constraint set is a box and we search a tensor grid over it, then refine around the
   best point on successively finer grids (:func:`minimize_on_box`); with ``p <= 3`` this is exhaustive enough and
   deterministic.

Parameters live in a box ``[lower, upper]^p`` mapped affinely to ``[0, 1]^p`` (Sec. 3: "these closed intervals can
be extended to arbitrarily bounded closed intervals"). Post-processing of the reports: no further privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from estimators.base import (
    EstimatorError,
    LinearRegressor,
    as_matrix,
    check_count,
    check_generator,
    check_vector,
    feature_names_for,
)
from workloads.local.randomizers.bernstein import check_bernstein_dimension
from workloads.parameters import ParameterError


def check_dimension(dimension: object) -> int:
    """``1 <= p <= 3``: the participants' rule (``workloads.local.randomizers.bernstein.check_bernstein_dimension``)."""
    try:
        return check_bernstein_dimension(dimension)
    except ParameterError as exc:
        raise EstimatorError(str(exc)) from None


def bernstein_basis(x: object, degree: int) -> np.ndarray:
    """``b_{v,k}(x)`` for every ``x`` (rows) and ``v = 0..k`` (columns), Def. 2."""
    k = check_count("degree", degree)
    points = np.asarray(x, dtype=float).reshape(-1)
    v = np.arange(k + 1)
    binomials = np.array([math.comb(k, j) for j in v], dtype=float)
    return binomials * points[:, np.newaxis] ** v * (1.0 - points[:, np.newaxis]) ** (k - v)


def iterated_bernstein_matrix(degree: int, order: int) -> np.ndarray:
    """``A_h = sum_{i=1}^h C(h, i) (-1)^{i-1} M^{i-1}`` with ``M[u, v] = b_{v,k}(u/k)`` (Def. 4)."""
    k = check_count("degree", degree)
    h = check_count("order", order)
    m = bernstein_basis(np.arange(k + 1) / k, k)
    power = np.eye(k + 1)
    total = np.zeros((k + 1, k + 1))
    for i in range(1, h + 1):
        total += math.comb(h, i) * (-1) ** (i - 1) * power
        power = power @ m
    return total


class BernsteinSurface:
    """The (iterated) Bernstein polynomial of grid values ``f(v / k)`` on ``[0, 1]^p`` (Def. 6, eq. 2)."""

    def __init__(self, grid_values: object, degree: int, dimension: int, order: int = 1) -> None:
        self.degree = check_count("degree", degree)
        self.dimension = check_dimension(dimension)
        self.order = check_count("order", order)
        size = (self.degree + 1) ** self.dimension
        values = check_vector("grid_values", grid_values, size)
        tensor = values.reshape((self.degree + 1,) * self.dimension)
        a = iterated_bernstein_matrix(self.degree, self.order)
        for axis in range(self.dimension):
            tensor = np.moveaxis(np.tensordot(a, tensor, axes=([1], [axis])), 0, axis)
        self.coefficients = tensor

    def on_tensor_grid(self, axes: list[np.ndarray]) -> np.ndarray:
        """Values at every point of the tensor grid ``axes[0] x ... x axes[p-1]`` (points in ``[0, 1]``)."""
        if len(axes) != self.dimension:
            raise EstimatorError(f"axes must hold {self.dimension} arrays, got {len(axes)}")
        tensor = self.coefficients
        for axis, points in enumerate(axes):
            basis = bernstein_basis(points, self.degree)
            tensor = np.moveaxis(np.tensordot(basis, tensor, axes=([1], [axis])), 0, axis)
        return tensor

    def __call__(self, points: object) -> np.ndarray:
        """Values at the rows of ``points`` (``N x p``, in ``[0, 1]^p``)."""
        rows = as_matrix("points", points, self.dimension)
        bases = [bernstein_basis(rows[:, j], self.degree) for j in range(self.dimension)]
        letters = "abc"[: self.dimension]
        spec = ",".join(f"n{letter}" for letter in letters) + f",{letters}->n"
        return np.einsum(spec, *bases, self.coefficients)


def _grid_resolution(dimension: int) -> int:
    return {1: 2001, 2: 161, 3: 41}[dimension]


def minimize_on_box(
    function_on_grid: Callable[[list[np.ndarray]], np.ndarray],
    lower: np.ndarray,
    upper: np.ndarray,
    refinements: int = 6,
) -> np.ndarray:
    """The minimiser of a function over the box ``[lower, upper]`` (in ``[0, 1]^p``) by refined grid search.

    ``function_on_grid(axes)`` returns the values on the tensor grid of ``axes``. Each refinement searches a grid of
    the same size over the cells around the current best point, clipped to the box.
    """
    p = lower.size
    resolution = _grid_resolution(p)
    lo, hi = lower.astype(float).copy(), upper.astype(float).copy()
    best = 0.5 * (lo + hi)
    for _ in range(refinements + 1):
        axes = [np.linspace(lo[j], hi[j], resolution) for j in range(p)]
        values = function_on_grid(axes)
        index = np.unravel_index(int(np.argmin(values)), values.shape)
        best = np.array([axes[j][index[j]] for j in range(p)])
        step = (hi - lo) / (resolution - 1)
        lo, hi = np.maximum(lower, best - 2.0 * step), np.minimum(upper, best + 2.0 * step)
        if np.all(hi - lo <= 1e-15):
            break
    return best


def aggregate_grid_reports(reports: object, grid_size: int) -> np.ndarray:
    """Alg. 2, step 6: the mean of the participants' reports, one estimate of the empirical risk per grid point."""
    rows = as_matrix("reports", reports, check_count("grid_size", grid_size))
    if rows.shape[0] == 0:
        raise EstimatorError("reports must hold at least one participant's report")
    return rows.mean(axis=0)


def assign_grid_points(n: int, grid_size: int, rng: np.random.Generator) -> np.ndarray:
    """Alg. 3, step 6: a public random partition of ``n`` participants into ``grid_size`` near-equal groups."""
    count = check_count("n", n)
    size = check_count("grid_size", grid_size)
    if count < size:
        raise EstimatorError(f"n={count} participants cannot cover grid_size={size} grid points (one each at least)")
    return check_generator(rng).permutation(np.arange(count) % size)


def aggregate_one_bit_reports(bits: object, public_strings: object, assignment: object, grid_size: int) -> np.ndarray:
    """Alg. 3, steps 12-18: ``2 mean_{i in I_l} b_i y_i`` for each grid point ``l`` (unbiased for the group mean)."""
    size = check_count("grid_size", grid_size)
    b = np.asarray(bits)
    y = np.asarray(public_strings, dtype=float)
    groups = np.asarray(assignment)
    if not (b.ndim == y.ndim == groups.ndim == 1 and b.size == y.size == groups.size):
        raise EstimatorError("bits, public_strings and assignment must be 1-d arrays of one length")
    if not np.all((b == 0) | (b == 1)):
        raise EstimatorError("bits must be 0 or 1")
    if not np.all(np.isfinite(y)):
        raise EstimatorError("public_strings must be finite")
    if not np.issubdtype(groups.dtype, np.integer) or groups.min() < 0 or groups.max() >= size:
        raise EstimatorError(f"assignment must hold grid indices in 0..{size - 1}")
    counts = np.bincount(groups, minlength=size)
    if np.any(counts == 0):
        raise EstimatorError(f"grid point(s) {np.flatnonzero(counts == 0)[:5].tolist()} have no participant")
    sums = np.bincount(groups, weights=b.astype(float) * y, minlength=size)
    return 2.0 * sums / counts


class _LocalBernsteinFit:
    """Shared settings and fit of the Bernstein estimators (Alg. 2 and Alg. 3 reports)."""

    def __init__(
        self,
        degree: int,
        dimension: int,
        order: int = 1,
        lower: float = 0.0,
        upper: float = 1.0,
        constraint_lower: object = None,
        constraint_upper: object = None,
    ) -> None:
        self.degree = degree
        self.dimension = dimension
        self.order = order
        self.lower = lower
        self.upper = upper
        self.constraint_lower = constraint_lower
        self.constraint_upper = constraint_upper

    def _box(self) -> tuple[int, int, float, float, np.ndarray, np.ndarray]:
        k = check_count("degree", self.degree)
        p = check_dimension(self.dimension)
        low, high = float(self.lower), float(self.upper)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise EstimatorError(f"lower < upper must be finite, got lower={self.lower!r}, upper={self.upper!r}")

        def to_unit(name: str, value: object, default: float) -> np.ndarray:
            bound = np.full(p, default) if value is None else check_vector(name, np.broadcast_to(value, (p,)), p)
            if np.any(bound < low) or np.any(bound > high):
                raise EstimatorError(f"{name} must lie in the parameter box [{low}, {high}]")
            return (bound - low) / (high - low)

        c_low = to_unit("constraint_lower", self.constraint_lower, low)
        c_high = to_unit("constraint_upper", self.constraint_upper, high)
        if np.any(c_low > c_high):
            raise EstimatorError("constraint_lower must not exceed constraint_upper")
        return k, p, low, high, c_low, c_high

    def check_settings(self) -> None:
        """The settings' errors (p > 3, a bad degree, order or box), for a caller that validates before collecting."""
        self._box()
        check_count("order", self.order)

    def _fit_grid_values(self, grid_values: np.ndarray, feature_names: object) -> None:
        k, p, low, high, c_low, c_high = self._box()
        surface = BernsteinSurface(grid_values, k, p, check_count("order", self.order))
        t = minimize_on_box(surface.on_tensor_grid, c_low, c_high)
        self.grid_values_ = grid_values
        self.surface_ = surface
        self._store(low + (high - low) * t, feature_names_for(feature_names, p), intercept=False)  # type: ignore[attr-defined]

    def fit(self, reports: object, feature_names: object = None) -> _LocalBernsteinFit:
        """Alg. 2: ``reports`` holds one row of ``(k + 1)^p`` noisy loss values per participant."""
        k, p, *_ = self._box()
        self._fit_grid_values(aggregate_grid_reports(reports, (k + 1) ** p), feature_names)
        return self

    def fit_one_bit(
        self, bits: object, public_strings: object, assignment: object, feature_names: object = None
    ) -> _LocalBernsteinFit:
        """Alg. 3: one bit per participant, her public Laplace number and her public grid point."""
        k, p, *_ = self._box()
        values = aggregate_one_bit_reports(bits, public_strings, assignment, (k + 1) ** p)
        self._fit_grid_values(values, feature_names)
        return self


class LocalBernsteinLinearRegression(_LocalBernsteinFit, LinearRegressor):
    """The Local Bernstein Mechanism with a squared loss: the minimiser is a linear model (``coef_``)."""
