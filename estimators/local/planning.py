"""Predicting a local fit's error before any report: the closed-form error model of a protocol, and what it implies.

A protocol's planner (registered on its campaign record) returns an :class:`ErrorModel`: the covariance, at ``n``
participants, of its estimate's linear part (the randomizer's known variance plus the data's, propagated through the
estimator's linearisation over the public rows), the point that linear part is centred on, the coefficients the error
is measured against, and the estimator's non-linear last step if it has one (hard thresholding, a projection). From it:

* :func:`expected_error`: the root expected squared error ``sqrt(E ||w_hat - w||^2)`` at ``n``, absolute and relative
  to ``||w||``. Without a non-linear step and with the centre on the reference it is the closed form
  ``sqrt(||centre - w||^2 + tr Cov(n))``; with one, the expectation over draws ``centre + Cov(n)^{1/2} z``,
  ``z ~ N(0, I)`` (the central limit of a mean of ``n`` independent reports), passed through the step;
* :func:`participants_for`: the smallest ``n`` whose predicted relative (or absolute, without a reference) error is
  at most a target, by bisection on ``log n`` (the predicted error falls with ``n``);
* :func:`auc_range`: for a binary target held by the public table, the AUC on the public rows of coefficient vectors
  drawn from the predicted distribution.

The draws use fixed standard normal vectors (common random numbers), so the predicted error is a deterministic,
continuous function of ``n`` and the bisection is well posed. They are draws of a predicted distribution over public
quantities only: no data, no privacy, no seed a caller could choose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from estimators.base import EstimatorError

#: how many coefficient vectors the sampled predictions draw
DRAWS = 400
#: the fixed stream of the standard normal draws (common random numbers; public, data-free)
_STREAM = 20_261_125
#: the largest participant count the planner searches
MAX_PARTICIPANTS = 10**12
#: the lower and upper quantiles of the predicted AUC range
AUC_QUANTILES = (0.05, 0.95)
#: the most public rows an AUC is evaluated on (evenly spaced rows of a larger table)
AUC_ROWS = 4_000

Covariance = Callable[[int], np.ndarray]
Step = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ErrorModel:
    """What a planner predicts (module docstring).

    ``covariance(n)``: the ``p x p`` covariance of the estimate's linear part at ``n`` participants; ``centre``: its
    mean (``None``: the reference; a function of ``n`` for an estimator whose shrinkage depends on it, as
    ``linear-ssp``'s default ridge); ``reference``: the coefficients the error is measured against (``None``: unknown,
    only the absolute error of the linear part is predicted); ``step``: the estimator's last, non-linear step, applied
    to rows of draws (``None``: the estimate is the linear part); ``metric`` says what is measured, in which units (the
    fit's standard errors'), and ``reference_source`` where the reference comes from (the error's formulas, absolute
    and relative, are :data:`ABSOLUTE_ERROR` and :data:`RELATIVE_ERROR`); ``notes`` state the assumptions."""

    covariance: Covariance
    reference: np.ndarray | None
    reference_source: str
    metric: str
    centre: np.ndarray | Callable[[int], np.ndarray] | None = None
    step: Step | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: a cache of ``Cov(1)`` and its square root (:func:`_root_at`)
    _roots: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.reference is None and (self.step is not None or self.centre is not None):
            raise EstimatorError("an error model with a non-linear step or a centre needs a reference")

    def centre_at(self, n: int) -> np.ndarray | None:
        """The linear part's mean at ``n`` participants."""
        if self.centre is None:
            return self.reference
        return np.asarray(self.centre(n) if callable(self.centre) else self.centre, dtype=float)


#: what :class:`PredictedError`'s ``error`` and ``relative`` are, in words a plan prints
ABSOLUTE_ERROR = "sqrt(E ||estimate - reference||^2), in the units of what is measured (the model's metric)"
RELATIVE_ERROR = "the absolute error over ||reference||"


@dataclass(frozen=True)
class PredictedError:
    """``error``: ``sqrt(E ||w_hat - w||^2)``; ``relative``: that over ``||w||`` (``None`` without a reference);
    ``standard_errors``: the linear part's per-coefficient standard deviations at ``n``."""

    participants: int
    error: float
    relative: float | None
    standard_errors: np.ndarray


def public_table(rows: object, labels: object, dimension: int, protocol: str) -> tuple[np.ndarray, np.ndarray | None]:
    """A planner's public table checked: ``rows`` a finite ``(m, dimension)`` matrix, ``labels`` (``None``: the table
    has no target) finite, one per row; an :class:`EstimatorError` naming ``protocol`` otherwise."""
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != dimension or not np.all(np.isfinite(x)):
        raise EstimatorError(f"planning a {protocol} campaign: the public rows must be a finite (m, {dimension}) "
                             f"matrix, got shape {x.shape}")
    y = None if labels is None else np.asarray(labels, dtype=float)
    if y is not None and (y.shape != (x.shape[0],) or not np.all(np.isfinite(y))):
        raise EstimatorError(f"planning a {protocol} campaign: the public target must be finite, one per row")
    return x, y


def _covariance(model: ErrorModel, n: int) -> np.ndarray:
    matrix = np.asarray(model.covariance(n), dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.all(np.isfinite(matrix)):
        raise EstimatorError(f"the planner's covariance at n={n} is not a finite square matrix (shape {matrix.shape})")
    return (matrix + matrix.T) / 2.0


def symmetric_root(matrix: np.ndarray) -> np.ndarray:
    """A symmetric square root (negative eigenvalues of a rounding error set to 0)."""
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def public_normals(dimension: int) -> np.ndarray:
    """``DRAWS`` standard normal vectors of ``dimension`` from the fixed public stream (common random numbers)."""
    return np.random.default_rng(_STREAM).standard_normal((DRAWS, dimension))


def _root_at(model: ErrorModel, n: int) -> np.ndarray:
    """``Cov(n)^{1/2}``; when ``Cov(n)`` is a multiple ``k Cov(1)`` (every ``1 / n`` model), ``sqrt(k) Cov(1)^{1/2}``
    from one decomposition per model (the bisection asks for many ``n``)."""
    matrix = _covariance(model, n)
    base = model._roots.get("base")
    if base is None:
        model._roots["base"] = base = (_covariance(model, 1), None)
    unit, root = base
    factor = float(np.trace(matrix)) / float(np.trace(unit)) if np.trace(unit) > 0 else 0.0
    if factor > 0 and np.allclose(matrix, factor * unit, rtol=1e-9, atol=1e-15 * float(np.abs(matrix).max())):
        if root is None:
            model._roots["base"] = (unit, root := symmetric_root(unit))
        return math.sqrt(factor) * root
    return symmetric_root(matrix)


def draw_estimates(model: ErrorModel, n: int) -> np.ndarray:
    """``DRAWS`` estimates from the predicted distribution at ``n`` (rows), through the non-linear step if any."""
    centre = model.centre_at(n)
    if centre is None:
        raise EstimatorError("drawing estimates needs a reference (the public table's target)")
    root = _root_at(model, n)
    draws = centre + public_normals(root.shape[0]) @ root
    return draws if model.step is None else np.asarray(model.step(draws), dtype=float)


def _check_participants(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= MAX_PARTICIPANTS:
        raise EstimatorError(f"participants must be a whole number in [1, {MAX_PARTICIPANTS}], got {n!r}")
    return int(n)


def expected_error(model: ErrorModel, n: int) -> PredictedError:
    """The predicted root expected squared error at ``n`` participants (module docstring)."""
    n = _check_participants(n)
    covariance = _covariance(model, n)
    standard_errors = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    if model.reference is None:
        return PredictedError(n, math.sqrt(max(float(np.trace(covariance)), 0.0)), None, standard_errors)
    reference = np.asarray(model.reference, dtype=float)
    if model.step is None:
        bias = float(np.sum((model.centre_at(n) - reference) ** 2))
        squared = bias + max(float(np.trace(covariance)), 0.0)
    else:
        squared = float(np.mean(np.sum((draw_estimates(model, n) - reference) ** 2, axis=1)))
    scale = float(np.linalg.norm(reference))
    error = math.sqrt(squared)
    return PredictedError(n, error, error / scale if scale > 0 else None, standard_errors)


def _measure(prediction: PredictedError) -> float:
    return prediction.error if prediction.relative is None else prediction.relative


def participants_for(model: ErrorModel, target: float) -> int | None:
    """The smallest ``n`` (to about 1%) whose predicted relative error (absolute without a reference) is at most
    ``target``; ``None`` when even :data:`MAX_PARTICIPANTS` does not reach it (a bias the noise does not cause)."""
    if not isinstance(target, int | float) or isinstance(target, bool) or not math.isfinite(target) or target <= 0:
        raise EstimatorError(f"target_error must be a positive number, got {target!r}")
    if _measure(expected_error(model, MAX_PARTICIPANTS)) > target:
        return None
    if _measure(expected_error(model, 1)) <= target:
        return 1
    low, high = 0.0, math.log(MAX_PARTICIPANTS)  # error(exp(low)) > target >= error(exp(high))
    while high - low > 0.01:
        middle = (low + high) / 2.0
        if _measure(expected_error(model, max(1, round(math.exp(middle))))) <= target:
            high = middle
        else:
            low = middle
    return max(1, math.ceil(math.exp(high)))


def column_aucs(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The AUC of each column of ``scores`` for boolean ``labels`` (Mann-Whitney, ties counted half)."""
    from scipy.stats import rankdata

    ranks = rankdata(scores, axis=0)
    positives = int(labels.sum())
    negatives = labels.size - positives
    return (ranks[labels].sum(axis=0) - positives * (positives + 1) / 2.0) / (positives * negatives)


def binary_labels(labels: object) -> np.ndarray | None:
    """The labels as booleans (the larger of two values is positive), or ``None`` unless exactly two values occur."""
    values = np.asarray(labels, dtype=float)
    levels = np.unique(values[np.isfinite(values)])
    if levels.size != 2 or not np.all(np.isfinite(values)):
        return None
    return values == levels[1]


def auc_sample(rows: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    """The public rows and boolean labels an AUC is evaluated on: at most :data:`AUC_ROWS` evenly spaced rows.
    Refused unless the target has exactly two values and both occur among those rows."""
    positive = binary_labels(labels)
    if positive is None:
        raise EstimatorError("the AUC needs a target with exactly two values")
    x = np.asarray(rows, dtype=float)
    if x.shape[0] > AUC_ROWS:
        kept = np.linspace(0, x.shape[0] - 1, AUC_ROWS).round().astype(int)
        x, positive = x[kept], positive[kept]
    if positive.all() or not positive.any():
        raise EstimatorError("the AUC needs both classes among the public rows")
    return x, positive


def auc_range(model: ErrorModel, n: int, rows: object, labels: object) -> dict[str, float]:
    """The AUC on the public ``rows`` of the predicted estimates at ``n``: its mean, the :data:`AUC_QUANTILES`
    range, and the reference's own AUC (on at most :data:`AUC_ROWS` evenly spaced rows). Scores are ``<x, w>``:
    every link the campaign answers is increasing in it, so they share this AUC."""
    n = _check_participants(n)
    x, positive = auc_sample(rows, labels)
    aucs = column_aucs(positive, x @ draw_estimates(model, n).T)
    reference = float(column_aucs(positive, (x @ np.asarray(model.reference, dtype=float))[:, np.newaxis])[0])
    low, high = np.quantile(aucs, AUC_QUANTILES)
    return {"mean": float(aucs.mean()), "low": float(low), "high": float(high), "reference": reference}
