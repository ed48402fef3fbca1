"""How far one accepted report can move a local estimate (its *influence bound*), and the projections that keep an
estimate in its feasible set (issue 18, finding 6).

**Influence.** For an estimate computed from ``n`` reports, the influence bound is an upper bound on how far (in the
stated norm) the estimate moves when **one more report** joins them, over every report the server accepts. It is
computed from the round aggregate's :class:`~workloads.local.protocols.ReportSchema` (each field's per-entry range
``[low, high]`` and its l2 ``norm`` when it has one), the bounds the server actually validates, never from constants:
tightening a schema tightens the bound. The building block is :func:`mean_shift`: adding a report ``r`` to ``n``
reports with mean ``m`` moves the mean by ``(r - m) / (n + 1)`` exactly, so by at most ``D / (n + 1)`` with
``D = sup ||r - m||`` over accepted ``r`` (:func:`field_deviation`).

*k reports.* ``k`` added reports move a mean by ``k (mean of the k - m) / (n + k)``, at most ``k D / (n + k) <=
k D / (n + 1)``: for an estimate that is a fixed linear map of a mean followed by a projection (1-Lipschitz), ``k``
malicious participants move it by at most ``k`` times its influence bound. Where the map itself depends on the reports
(a covariance estimated from them) the bound is per report and stated with its formula (:func:`linear_solve_shift`).

**Projections.** Each estimate is mapped onto a convex set that contains the quantity it estimates; a Euclidean
projection onto such a set never moves an estimate farther from the truth (Bauschke & Combettes 2017, Prop. 4.16:
projections onto closed convex sets are firmly non-expansive), so projecting costs no accuracy and bounds what forged
reports can do. :func:`project_interval` (a mean onto ``[lower, upper]``), :func:`estimators.local.sparse.iht.
project_to_ball` (a vector onto an l2 ball) and :func:`project_psd_trace` (a second-moment matrix onto ``{S PSD,
tr S <= r^2}``, the convex hull of ``{x x^T : ||x||_2 <= r}``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimators.base import EstimatorError
from estimators.psd import symmetrize
from workloads.local.protocols import FieldSchema


@dataclass(frozen=True)
class Influence:
    """One report's largest move of an estimate: ``per_report`` (``None``: no finite bound), in ``norm`` (``abs``
    for a number, ``l2`` for a vector), of ``of`` (``mean`` or ``coefficients``), and ``basis``, how it is derived.
    ``intercept``: the bound on the intercept's move that the public transform implies (``None`` when there is none)."""

    per_report: float | None
    norm: str
    of: str
    basis: str
    intercept: float | None = None

    def scaled(self, factor: float, intercept_factor: float | None = None) -> Influence:
        """The bound for the estimate multiplied by at most ``factor`` (a public change of units); the intercept's
        bound is ``per_report * intercept_factor`` when given."""
        if self.per_report is None:
            return self
        value = self.per_report * factor
        return Influence(value, self.norm, self.of, self.basis,
                         None if intercept_factor is None else value * intercept_factor)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"per_report": self.per_report, "norm": self.norm, "of": self.of, "basis": self.basis}
        if self.intercept is not None:
            out["intercept"] = self.intercept
        return out


def field_deviation(field: FieldSchema, current: object) -> float:
    """``sup ||r - current||_2`` over the reports ``r`` the field accepts: entries in ``[low, high]`` (the farthest
    corner of the box, entry by entry) and, when the field has one, l2 norm at most ``norm`` (then also at most
    ``norm + ||current||``)."""
    point = np.asarray(current, dtype=float).reshape(-1)
    if point.size != math.prod(field.shape):
        raise EstimatorError(f"field {field.name!r} has {math.prod(field.shape)} entries, got {point.size}")
    farthest = np.maximum(np.abs(field.low - point), np.abs(field.high - point))
    bound = float(np.linalg.norm(farthest))
    if field.norm is not None:
        bound = min(bound, field.norm + float(np.linalg.norm(point)))
    return bound


def mean_shift(field: FieldSchema, mean: object, count: int) -> float:
    """The largest l2 move of the mean of ``count`` reports of ``field`` (now ``mean``) when one accepted report
    joins them: :func:`field_deviation` ``/ (count + 1)``."""
    if count < 1:
        raise EstimatorError(f"count must be at least 1, got {count}")
    return field_deviation(field, mean) / (count + 1)


def project_interval(value: float, lower: float, upper: float) -> float:
    """The projection of a number onto ``[lower, upper]``."""
    return float(min(max(value, lower), upper))


def project_psd_trace(matrix: object, trace_bound: float) -> np.ndarray:
    """The Frobenius projection of a symmetric matrix onto ``{S PSD, tr S <= trace_bound}``.

    The set is unitarily invariant, so the projection keeps the eigenvectors and projects the eigenvalues onto
    ``{lambda >= 0, sum lambda <= t}`` (Lewis 1995, "The convex analysis of unitarily invariant matrix functions"):
    clip at 0, and if the sum still exceeds ``t`` project onto the simplex ``{lambda >= 0, sum = t}`` (the sort-based
    algorithm of Held, Wolfe & Crowder 1974; Duchi et al. 2008, Fig. 1). ``{x x^T : ||x||_2 <= r}`` has this set with
    ``t = r^2`` as its convex hull, so every mean of such matrices lies in it."""
    if not (math.isfinite(trace_bound) and trace_bound > 0):
        raise EstimatorError(f"trace_bound must be a finite positive number, got {trace_bound!r}")
    values, vectors = np.linalg.eigh(symmetrize("matrix", matrix))
    values = np.clip(values, 0.0, None)
    if values.sum() > trace_bound:
        ordered = np.sort(values)[::-1]
        totals = np.cumsum(ordered) - trace_bound
        ranks = np.arange(1, ordered.size + 1)
        last = int(np.nonzero(ordered - totals / ranks > 0)[0][-1])
        values = np.clip(values - totals[last] / (last + 1), 0.0, None)
    return (vectors * values) @ vectors.T


def linear_solve_shift(matrix: object, coef: object, rhs_shift: float, matrix_shift: float,
                       rcond: float = 1e-10) -> float | None:
    """A bound on ``||w' - w||_2`` for ``w = C^+ m`` (``C`` the PSD matrix used, ``w`` = ``coef``) when ``m`` moves by
    at most ``rhs_shift`` and ``C`` by at most ``matrix_shift`` (Frobenius, hence spectral).

    ``C' (w' - w) = (m' - m) - (C' - C) w`` gives ``||w' - w|| <= (rhs_shift + matrix_shift ||w||) / lambda_min(C')``
    and ``lambda_min(C') >= lambda_min(C) - matrix_shift`` (Weyl). Valid when both are invertible as solved: the
    margin must exceed ``rcond`` times the largest eigenvalue ``solve_psd`` compares with; otherwise (or when ``C``
    is singular) no finite bound holds and the answer is ``None``. With ``matrix_shift = 0`` ``C^+`` is one fixed
    linear map and the bound is ``rhs_shift / (smallest eigenvalue kept)`` even for a singular ``C``."""
    values = np.clip(np.linalg.eigvalsh(symmetrize("matrix", matrix)), 0.0, None)
    top = float(values.max()) if values.size else 0.0
    if top <= 0.0:
        return 0.0 if matrix_shift == 0.0 else None
    if matrix_shift == 0.0:
        kept = values[values > rcond * top]
        return rhs_shift / float(kept.min())
    margin = float(values.min()) - matrix_shift
    if margin <= rcond * (top + matrix_shift):
        return None
    return (rhs_shift + matrix_shift * float(np.linalg.norm(np.asarray(coef, dtype=float)))) / margin
