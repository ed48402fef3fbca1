"""The link's constant ``c``: the root of ``c E[slope(c t)] = 1`` over the distribution of ``t = <x, w_ols>``.

Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021), Lemma 5 / Thm. 21: for Gaussian ``x``, ``w* = c w_ols`` with ``c`` the
fixed point of ``z -> 1 / E[slope(<x, w_ols> z)]``, i.e. a root of ``h(c) = c E[slope(c t)] - 1``. Alg. 1 (last step)
replaces the expectation by an average over the public rows and finds the root by Newton's method; Assumption 2
(and 3, 5, 6) asks that ``h`` reach ``tau > 0`` at some ``c_bar`` with ``h'`` of one sign on ``[0, c_bar]``, i.e. that
the root nearest 0 be a simple up-crossing. When no such root exists, the paper's method has no answer for that link
on those data, and :class:`NoRootError` says so (never a NaN, never a root of the wrong sign).

The distribution of ``t`` is an :class:`IndexSample`: the public rows' ``<x_j, w_ols>`` with equal weights (Algs.
1-4), or a Gaussian ``N(0, s^2)`` by Gauss-Hermite quadrature (the 2-round protocol, where ``s`` is estimated from
the second round's reports).

Method (:func:`solve_link_scale`). With ``u = sign * c > 0`` (``sign`` from the link), ``H(u) = u sign m(sign u) - 1``
where ``m(c) = sum_k w_k slope(c t_k)``; ``H(0) = -1``. A bracket ``[u / 2, u]`` with ``H(u / 2) < 0 <= H(u)`` is found
by doubling (or halving) ``u`` from the natural start ``1 / |slope(0)|`` (the root when every ``t`` is 0; ``1 / s`` with
``s`` the scale of ``t`` when ``slope(0) = 0``). Under the paper's assumption that ``h`` is monotone on ``[0, c_bar]``
the bracket holds the root nearest 0; otherwise it holds a root at the grid's resolution (a factor 2). Newton's method
(``scipy.optimize.root_scalar``, ``H'`` from ``slope_derivative``) runs from the bracket's middle and is kept when it
converges inside the bracket; otherwise Brent's method on the bracket (``scipy.optimize.brentq``). Each evaluation
is one pass over the ``t_k`` (vectorised); a typical solve takes about ten.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, root_scalar

from estimators.base import EstimatorError
from estimators.local.glm.links import Link, get_link

#: Gauss-Hermite nodes for a Gaussian index: exact for polynomial slopes up to degree 399; for the logistic and boosting
#: slopes (poles near the real axis) the constant agrees with adaptive quadrature to 1e-9 relative at c s ~ 2.5,
#: where 64 nodes gave only 6e-5 (tests/estimators/local/test_scale.py). numpy's rule overflows past ~280 nodes.
HERMITE_NODES = 200
_SCAN_STEPS = 60  # doublings (or halvings) from the start: a factor 1e18 either way
#: At a root found over public rows, at least this many rows must carry the average (Kish's effective sample size
#: ``(sum |g_k|)^2 / sum g_k^2`` of ``g_k = slope(c t_k)``; its relative standard error is then about
#: ``1 / sqrt(30) = 18 %`` or less). Without it, a noise-dominated ``w_ols`` (no root in the population) still gets a
#: spurious root from the one row with ``t_k`` nearest 0: ``c slope(c t_k) / m`` exceeds 1 near ``c = m / |...|``.
MIN_EFFECTIVE_ROWS = 30.0
_LARGE = 1e300  # overflowed values of H are capped here, keeping their sign


class NoRootError(EstimatorError):
    """The scale equation of a link has no root on these data (the paper's assumptions fail for that link)."""


@dataclass(frozen=True)
class IndexSample:
    """Points ``t_k`` and weights ``w_k`` (summing to 1) standing for the distribution of ``<x, w_ols>``.

    ``min_effective`` (public rows: :data:`MIN_EFFECTIVE_ROWS`) is the least number of points that must carry the
    average at the root (Kish's effective sample size of ``|slope(c t_k)|``); see :func:`solve_link_scale`."""

    values: np.ndarray
    weights: np.ndarray
    min_effective: float = 0.0

    @classmethod
    def from_rows(cls, rows: object, coef: object) -> IndexSample:
        """``t_j = <x_j, coef>`` for public rows ``x_j``, equally weighted (Alg. 1: ``y~_j = x_j^T w_ols``)."""
        matrix = np.asarray(rows, dtype=float)
        direction = np.asarray(coef, dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != direction.size:
            raise EstimatorError(f"public_rows must be a non-empty (m, {direction.size}) matrix, got {matrix.shape}")
        if not np.all(np.isfinite(matrix)):
            raise EstimatorError("public_rows must be finite")
        return cls(matrix @ direction, np.full(matrix.shape[0], 1.0 / matrix.shape[0]), MIN_EFFECTIVE_ROWS)

    @classmethod
    def gaussian(cls, std: float, nodes: int = HERMITE_NODES) -> IndexSample:
        """``N(0, std^2)`` by probabilists' Gauss-Hermite quadrature."""
        if not np.isfinite(std) or std < 0:
            raise EstimatorError(f"std must be a non-negative finite number, got {std!r}")
        points, weights = np.polynomial.hermite_e.hermegauss(nodes)
        return cls(std * points, weights / weights.sum())

    @property
    def scale(self) -> float:
        """``sqrt(sum_k w_k t_k^2)``, the natural scale of ``t``."""
        return float(np.sqrt(_average(self.weights, np.square(self.values))))


def solve_link_scale(link: str | Link, index: IndexSample) -> float:
    """The root ``c`` of ``c sum_k w_k slope(c t_k) = 1`` nearest 0 on the link's side, or :class:`NoRootError`."""
    link = get_link(link)
    t, w, sign = index.values, index.weights, float(link.sign)

    def h(u: float) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            value = u * sign * _average(w, link.slope(sign * u * t)) - 1.0
        return _capped(value, link)

    def h_and_slope(u: float) -> tuple[float, float]:
        """``H(u)`` and ``H'(u)`` from one pass (Newton's steps)."""
        scaled = sign * u * t
        with np.errstate(over="ignore", invalid="ignore"):
            mean = _average(w, link.slope(scaled))
            derivative = sign * mean + u * _average(w, link.slope_derivative(scaled) * t)
        return _capped(u * sign * mean - 1.0, link), _capped(derivative, link)

    scale = index.scale
    if scale == 0.0:  # every t is 0: h(u) = u sign slope(0) - 1
        at_zero = sign * float(link.slope(np.zeros(1))[0])
        if at_zero <= 0:
            raise NoRootError(f"no root of c E[slope(c t)] = 1 for link {link.name!r}: <x, w_ols> is 0 on every row "
                              f"and slope(0) = {sign * at_zero:.4g} has the wrong sign")
        return sign / at_zero
    at_zero = sign * float(link.slope(np.zeros(1))[0])
    lower, upper = _bracket(h, 1.0 / at_zero if at_zero > 0 else 1.0 / scale, link)
    if h(upper) == 0.0:
        return sign * upper
    root = _newton_in_bracket(h_and_slope, lower, upper)
    if root is None:
        root = brentq(h, lower, upper, xtol=1e-15 * upper, rtol=4 * np.finfo(float).eps, maxiter=200)
    _check_resolved(link, index, sign * float(root))
    return sign * float(root)


def _check_resolved(link: Link, index: IndexSample, c: float) -> None:
    if index.min_effective <= 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.abs(index.weights * link.slope(c * index.values))
    effective = float(np.sum(terms) ** 2 / np.sum(np.square(terms))) if np.sum(terms) > 0 else 0.0
    if not effective >= index.min_effective:
        raise NoRootError(
            f"no root of c E[slope(c t)] = 1 for link {link.name!r} that the public rows resolve: the crossing at "
            f"c = {c:.4g} rests on about {effective:.1f} of {index.values.size} rows (at least "
            f"{index.min_effective:g} needed); the population equation has no root here (the assumptions of "
            f"Wang et al., f(c_bar) >= 1 + tau, fail for this link on these data)")


def _bracket(h, start: float, link: Link) -> tuple[float, float]:  # noqa: ANN001
    """``(u / 2, u)`` with ``h(u / 2) < 0 <= h(u)``, scanning by factors of 2 from ``start``."""
    u, value = start, h(start)
    if value >= 0.0:
        for _ in range(_SCAN_STEPS):
            if h(u / 2.0) < 0.0:
                return u / 2.0, u
            u /= 2.0
        return 0.0, u  # h(0) = -1 < 0
    best = value
    for _ in range(_SCAN_STEPS):
        u *= 2.0
        value = h(u)
        if value >= 0.0:
            return u / 2.0, u
        best = max(best, value)
    raise NoRootError(
        f"no root of c E[slope(c t)] = 1 for link {link.name!r} on these data: c E[slope(c t)] stays below 1 "
        f"(at most {best + 1.0:.4g}) for |c| up to {u:.3g}; the assumptions of Wang et al. (f(c_bar) >= 1 + tau) fail "
        f"for this link here")


def _newton_in_bracket(h_and_slope, lower: float, upper: float) -> float | None:  # noqa: ANN001
    try:
        result = root_scalar(h_and_slope, fprime=True, x0=0.5 * (lower + upper), method="newton",
                             xtol=1e-14 * upper, maxiter=50)
    except (ArithmeticError, ValueError, RuntimeError):
        return None
    if result.converged and lower <= result.root <= upper and np.isfinite(result.root):
        return float(result.root)
    return None


def _average(weights: np.ndarray, values: np.ndarray) -> float:
    """``sum_k w_k v_k`` without BLAS (whose threads make a 1-d dot product slow on a busy machine)."""
    return float(np.sum(weights * values))


def _capped(value: float, link: Link) -> float:
    if np.isnan(value):
        raise NoRootError(f"the scale equation of link {link.name!r} is not a number on these data")
    return float(np.clip(value, -_LARGE, _LARGE))


def solve_scale_and_offset(link: str | Link, index: IndexSample, mean_label: float) -> tuple[float, float]:
    """The constant ``c`` and the intercept ``b`` of a single-index model with an intercept, from ``w_ols``.

    For Gaussian ``x`` (any mean) and ``E[y | x] = mean(b* + <x, w*>)``, Stein's lemma applied to the centred
    features gives ``Cov(x, y) = Sigma w* E[slope(b* + <x, w*>)]``, so the slope of the OLS *with an intercept* is
    ``w_ols = w* E[slope(b* + <x, w*>)]`` (Lemma 5 of Wang et al. with the index shifted by ``b*``). With
    ``w* = c w_ols`` and ``t = <x - mu, w_ols>``: ``c E[slope(b + c t)] = 1`` (Alg. 1's equation with the offset) and
    ``E[mean(b + c t)] = E[y]`` (the intercept makes the model's mean prediction the label's mean), two equations for
    ``(c, b)`` with ``E`` over the index sample (the public rows) and ``E[y]`` estimated from the reports.

    Solved nested (scipy's ``brentq`` twice): for each ``c`` the offset ``b(c)`` is the unique root of the second
    equation (``mean`` is strictly monotone), found on a bracket grown by doubling; then ``c`` is the root of
    ``c E[slope(b(c) + c t)] = 1`` nearest 0 on the link's side, bracketed as in :func:`solve_link_scale`, with the
    same check that enough public rows carry the average. :class:`NoRootError` when ``mean_label`` is outside the range
    of the link's mean on these data or when ``c`` has no root."""
    link = get_link(link)
    t, w, sign = index.values, index.weights, float(link.sign)
    if not np.isfinite(mean_label):
        raise NoRootError(f"the mean label must be finite, got {mean_label!r}")

    def offset(c: float) -> float:
        return _solve_offset(link, t, w, c, float(mean_label))

    def h(u: float) -> float:
        c = sign * u
        b = offset(c)
        with np.errstate(over="ignore", invalid="ignore"):
            value = u * sign * _average(w, link.slope(b + c * t)) - 1.0
        return _capped(value, link)

    at_zero = sign * float(link.slope(np.array([offset(0.0)]))[0])
    scale = index.scale
    start = 1.0 / at_zero if at_zero > 0 else 1.0 / (scale if scale > 0 else 1.0)
    lower, upper = _bracket(h, start, link)
    root = upper if h(upper) == 0.0 else brentq(h, lower, upper, xtol=1e-15 * upper, rtol=4 * np.finfo(float).eps,
                                                maxiter=200)
    c = sign * float(root)
    b = offset(c)
    if c != 0.0:
        _check_resolved(link, IndexSample(t + b / c, w, index.min_effective), c)
    return c, b


def _solve_offset(link: Link, t: np.ndarray, w: np.ndarray, c: float, target: float) -> float:
    """The ``b`` with ``sum_k w_k mean(b + c t_k) = target`` (``mean`` strictly monotone: one root at most)."""
    direction = float(link.sign)

    def gap(b: float) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            value = direction * (_average(w, link.mean(b + c * t)) - target)
        return _capped(value, link)

    reach = max(1.0, abs(c) * float(np.max(np.abs(t), initial=0.0)))  # b beyond +-reach moves every row alike
    low, high = -reach, reach
    for _ in range(_SCAN_STEPS):
        if gap(low) <= 0.0 <= gap(high):
            return float(brentq(gap, low, high, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200))
        low, high = 2.0 * low, 2.0 * high
    raise NoRootError(f"link {link.name!r}: no intercept makes the mean prediction over the public rows equal the "
                      f"estimated mean label {target:.4g} (outside the range of the link's mean)")
