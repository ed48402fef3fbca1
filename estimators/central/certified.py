"""A certified approximate minimiser of the objective-perturbation objective (docs/privacy.md, section 8.6).

Approximate minima perturbation (Iyengar, Near, Song, Thakkar, Thakurta & Wang 2019, "Towards Practical
Differentially Private Convex Optimization", IEEE S&P, Alg. 1) needs a point ``theta_hat`` whose distance to the exact
minimiser ``theta*`` of the perturbed objective is at most a public bound, whatever the data. For a
``Lambda``-strongly convex objective ``J`` (here ``Lambda`` is the regularisation ``Delta`` of Kifer, Smith & Thakurta
2012), ``||theta_hat - theta*|| <= ||grad J(theta_hat)|| / Lambda``; so it suffices to stop only when the gradient of
the *un-divided* objective (no division by the private row count)

    J(theta) = sum_i log(1 + exp(-y_i x_i.theta)) + (Delta + l2) / 2 ||theta||^2 + b.theta

has norm at most a public tolerance ``gamma``. Floating point cannot certify that for every data size (the computed
gradient of a sum of n terms is only accurate to about ``n u ||X||``), so the check runs here in decimal arithmetic
with ``DIGITS`` significant digits (Python's ``decimal``: every operation, exp included, is correctly rounded, with a
relative error of at most ``u = 10^(1 - DIGITS) / 2``) on the exact values of the float inputs. Its own error is
bounded explicitly (:meth:`ExactLogisticObjective.error_bound`, the standard bound for sums and products in the
unit roundoff, Higham 2002, "Accuracy and Stability of Numerical Algorithms", Lemma 3.1 and Sec. 4.2), and the
certificate asks for ``computed norm + error bound <= gamma``, so the exact gradient is at most ``gamma``; when the
bound exceeds ``gamma / 2`` the precision grows.

The iterate lives in decimal (it is never rounded to float before the check) and is polished by Newton steps from
the float solver's answer, with the float64 Hessian as the (positive definite) preconditioner: the full step is
taken when it lowers the certified gradient norm, otherwise the step is chosen by Armijo backtracking on the decimal
``J``. Gradient-related directions with the Armijo rule converge to the minimiser of a strongly convex smooth
function (Bertsekas, "Nonlinear Programming", 2nd ed., Prop. 1.2.1), so the rule is met after finitely many steps;
if the decimal arithmetic itself stalls, the precision grows.

Identical rows are grouped first (with their counts), so a table with few distinct rows is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext

import numpy as np

from estimators.base import EstimatorError

#: Significant decimal digits of the certificate's arithmetic (grown by ``DIGITS_STEP`` when a step stalls or the
#: arithmetic's own error bound is too large).
DIGITS = 30
DIGITS_STEP = 20
MAX_DIGITS = 400
#: Newton steps of the polish before giving up (each needs one or a few evaluations of the gradient).
MAX_STEPS = 100
_ARMIJO = Decimal("1e-4")
_HALVINGS = 60
_ONE = Decimal(1)


def _context(digits: int) -> Context:
    return Context(prec=digits, Emax=MAX_EMAX, Emin=MIN_EMIN)


class ExactLogisticObjective:
    """``J`` of the module docstring, evaluated in decimal arithmetic on the exact values of ``design``, ``y``,
    ``noise`` and ``weight = Delta + l2`` (floats, converted exactly). ``design`` includes any intercept column.
    ``counts`` (non-negative integers, default 1 each) are the rows' multiplicities: a table given as its distinct
    rows with their counts has the same ``J`` as the table itself (identical rows are grouped either way)."""

    def __init__(self, design: np.ndarray, y: np.ndarray, noise: np.ndarray, weight: float,
                 counts: np.ndarray | None = None) -> None:
        n, d = design.shape
        self.dimension = d
        data = np.ascontiguousarray(np.column_stack([design, y]), dtype=np.float64)
        multiplicity = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
        if multiplicity.shape != (n,) or np.any(multiplicity < 0):
            raise EstimatorError(f"counts must hold one non-negative integer per row, got shape {multiplicity.shape}")
        if n:
            keys = data.view(np.dtype((np.void, data.dtype.itemsize * data.shape[1]))).ravel()
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            counts = np.bincount(inverse.reshape(-1), weights=multiplicity, minlength=len(first)).astype(np.int64)
            unique = data[first]
        else:
            unique, counts = data, np.zeros(0, dtype=np.int64)
        self._unique, self._counts = unique, counts.astype(np.float64)
        self.counts = [Decimal(int(c)) for c in counts]
        self.labels = [Decimal(float(v)) for v in unique[:, -1]]
        exact: dict[float, Decimal] = {}
        # column j: the distinct rows where it is not zero, and its value there (None stands for exactly 1)
        self.columns: list[list[tuple[int, Decimal | None]]] = []
        for j in range(d):
            rows = np.flatnonzero(unique[:, j])
            values = unique[rows, j].tolist()
            self.columns.append([(i, None if v == 1.0 else exact.setdefault(v, Decimal(v)))
                                 for i, v in zip(rows.tolist(), values, strict=True)])
        self.noise = [Decimal(float(v)) for v in noise]
        self.weight = Decimal(float(weight))
        self._noise_float = np.abs(np.asarray(noise, dtype=np.float64))
        self._weight_float = float(weight)

    def error_bound(self, theta: np.ndarray, digits: int) -> float:
        """An upper bound on ``||computed gradient - exact gradient||`` at ``theta`` (float, rounded up generously).

        Every gradient coordinate is a sum of at most ``U + 2`` terms (U distinct rows), each made from exact inputs
        by at most ``d + 8`` correctly rounded operations; the margin ``m_i`` carries an absolute error of at most
        ``(d + 1) u sum_j |x_ij theta_j|``, and ``m -> 1 / (1 + e^m)`` is 1/4-Lipschitz, so with ``K = U + d + 20``
        and ``u = 10^(1 - digits) / 2``, coordinate ``j`` is off by at most
        ``K u (sum_i c_i |x_ij| (1 + sum_k |x_ik theta_k|) + |(Delta + l2) theta_j| + |b_j|)`` (Higham 2002, Lemma 3.1:
        ``gamma_k = k u / (1 - k u) <= 2 k u`` while ``k u <= 1/2``). The bound on the 2-norm is the sum over ``j``."""
        unit = 0.5 * 10.0 ** (1 - digits)
        k = len(self.counts) + self.dimension + 20
        if k * unit > 0.25:
            return float("inf")
        magnitude = np.abs(self._unique[:, :-1])
        spread = 1.0 + magnitude @ np.abs(theta)
        per_column = (self._counts * spread) @ magnitude + np.abs(self._weight_float * theta) + self._noise_float
        return 2.0 * 2.0 * k * unit * float(np.sum(per_column)) * (1.0 + 1e-9)

    def _margins(self, theta: Sequence[Decimal]) -> list[Decimal]:
        sums = [Decimal(0)] * len(self.labels)
        for j, entries in enumerate(self.columns):
            t = theta[j]
            for i, x in entries:
                sums[i] += t if x is None else x * t
        return [label * s for label, s in zip(self.labels, sums, strict=True)]

    def value(self, theta: Sequence[Decimal]) -> Decimal:
        """``J(theta)``: ``log(1 + e^{-m}) = ln(1 + e^{-|m|}) + max(-m, 0)`` keeps every exponent non-positive."""
        loss = Decimal(0)
        for count, m in zip(self.counts, self._margins(theta), strict=True):
            loss += count * ((_ONE + (-abs(m)).exp()).ln() + max(-m, Decimal(0)))
        square = sum((t * t for t in theta), Decimal(0))
        return loss + self.weight * square / 2 + sum((b * t for b, t in zip(self.noise, theta, strict=True)),
                                                     Decimal(0))

    def gradient(self, theta: Sequence[Decimal]) -> list[Decimal]:
        """``grad J(theta) = -sum_i y_i x_i / (1 + e^{m_i}) + (Delta + l2) theta + b``."""
        scales = [-count * label / (_ONE + m.exp())
                  for count, label, m in zip(self.counts, self.labels, self._margins(theta), strict=True)]
        gradient = []
        for j, entries in enumerate(self.columns):
            total = self.weight * theta[j] + self.noise[j]
            total += sum((scales[i] if x is None else x * scales[i] for i, x in entries), Decimal(0))
            gradient.append(total)
        return gradient


def _norm(vector: Sequence[Decimal]) -> Decimal:
    return sum((v * v for v in vector), Decimal(0)).sqrt()


def certified_minimizer(
    objective: ExactLogisticObjective,
    start: np.ndarray,
    hessian: Callable[[np.ndarray], np.ndarray],
    tolerance: float,
) -> list[Decimal]:
    """A point (decimal) at which the exact gradient of ``objective`` has norm at most ``tolerance``, polished from
    ``start`` (the float solver's answer). Raises :class:`EstimatorError` (naming no data-dependent number) when
    ``MAX_STEPS`` Newton steps do not certify it, which the convergence theorem above excludes."""
    if not tolerance > 0:
        raise EstimatorError(f"tolerance must be > 0, got {tolerance!r}")
    digits = DIGITS
    with localcontext(_context(digits)):
        theta = [Decimal(float(t)) for t in start]
        gradient = objective.gradient(theta)
        norm = _norm(gradient)
    for _ in range(MAX_STEPS):
        error = objective.error_bound(np.array([float(t) for t in theta]), digits)
        if error > tolerance / 2 and digits < MAX_DIGITS:  # too coarse to certify anything: more digits
            digits += DIGITS_STEP
            with localcontext(_context(digits)):
                gradient = objective.gradient(theta)
                norm = _norm(gradient)
            continue
        with localcontext(_context(digits)):
            if norm + Decimal(error) <= Decimal(float(tolerance)):
                return theta
            direction = np.linalg.solve(hessian(np.array([float(t) for t in theta])),
                                        np.array([float(g) for g in gradient]))
            step = [Decimal(float(p)) for p in direction]
            candidate = [t - p for t, p in zip(theta, step, strict=True)]
            candidate_gradient = objective.gradient(candidate)
            candidate_norm = _norm(candidate_gradient)
            if candidate_norm >= norm:  # the full step did not help: backtrack on J (Armijo)
                current = objective.value(theta)
                slope = sum((g * p for g, p in zip(gradient, step, strict=True)), Decimal(0))
                size = _ONE
                for _ in range(_HALVINGS):
                    candidate = [t - size * p for t, p in zip(theta, step, strict=True)]
                    if objective.value(candidate) <= current - _ARMIJO * size * slope:
                        candidate_gradient = objective.gradient(candidate)
                        candidate_norm = _norm(candidate_gradient)
                        break
                    size /= 2
                else:
                    if digits >= MAX_DIGITS:
                        break
                    digits += DIGITS_STEP  # the decimal arithmetic stalled: more digits, same point
                    with localcontext(_context(digits)):
                        gradient = objective.gradient(theta)
                        norm = _norm(gradient)
                    continue
            theta, gradient, norm = candidate, candidate_gradient, candidate_norm
    raise EstimatorError("the solver could not certify that the gradient of the objective is below its tolerance")
