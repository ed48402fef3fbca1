"""The Gram matrix ``Z^T Z`` of ``Z = [1?, X, y]`` from marginals (Prop. 3.2, Alg. 1) or from rows.

Prop. 3.2 (Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient Statistic Perturbation"): with
``mu_jk`` the ``(j, k)`` marginal as a ``k_j x k_k`` count matrix,
``(Z^T Z)_[j,k] = A_j mu_jk A_k^T``, and on the diagonal ``mu_jj = diag(mu_j)`` so
``(Z^T Z)_[j,j] = A_j diag(mu_j) A_j^T`` from the 1-way marginal. With an intercept (a constant column 1 in front,
see :mod:`workloads.encodings`) the extra row is ``(n, A_1 mu_1, ..., A_y mu_y)``: it is the Prop. 3.2 formula for a
one-level attribute whose encoding is ``[1]``.

Noisy marginals. A marginal release read through ``marginal(attrs)`` may give non-integer, negative and mutually
inconsistent counts. Nothing is clipped (clipping biases every block upward); each off-diagonal block is computed
once and mirrored, so the result is exactly symmetric; indefiniteness is left to the estimators
(:mod:`estimators.psd`). The total ``n`` (the intercept's diagonal entry, and ``n b0`` in Prop. 3.4) is estimated by
:func:`estimate_total`: the mean of the sums of all marginals read, each weighted by ``1 / cells``. If every cell
carries independent noise of one variance ``sigma^2`` (the Gaussian marginal mechanism with a shared scale), a
marginal with ``c`` cells sums to ``n`` plus noise of variance ``c sigma^2``, so these are the inverse-variance
weights; for consistent marginals (AIM / private-pgm models) every sum is the same and any weighting gives it.
A known or separately released total can be passed instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from estimators.base import EstimatorError, as_matrix
from workloads.encodings import DesignEncoding

Marginal = Callable[[tuple[str, ...]], np.ndarray]


@dataclass(frozen=True, eq=False)
class GramStatistics:
    """``Z^T Z`` for ``Z = [1?, X, y]`` with its labels.

    ``zz`` is ``q x q`` with ``q = intercept + len(feature_names) + 1``; ``n`` is the (estimated) number of rows.
    Any symmetric matrix laid out this way is accepted, e.g. a noisy Gram release (AdaSSP); its ``y^T y`` entry may
    be NaN when the release left it out (:func:`estimators.central.adassp.adassp_entry_std`).
    """

    zz: np.ndarray
    feature_names: tuple[str, ...]
    target: str
    intercept: bool
    n: float

    def __post_init__(self) -> None:
        zz = np.asarray(self.zz, dtype=float)
        q = int(self.intercept) + len(self.feature_names) + 1
        if zz.shape != (q, q):
            raise EstimatorError(f"zz must be {q} x {q} for {len(self.feature_names)} features, got {zz.shape}")
        if not (np.all(np.isfinite(zz[:-1])) and np.all(np.isfinite(zz[-1, :-1]))):
            raise EstimatorError("zz must be finite (only the y^T y entry may be NaN, meaning not released)")
        if np.isinf(zz[-1, -1]):
            raise EstimatorError("zz: the y^T y entry must be finite or NaN")
        if not np.isfinite(self.n):
            raise EstimatorError(f"n must be finite, got {self.n!r}")
        object.__setattr__(self, "zz", 0.5 * (zz + zz.T))
        object.__setattr__(self, "feature_names", tuple(self.feature_names))

    @classmethod
    def for_design(cls, design: DesignEncoding, zz: np.ndarray, n: float) -> GramStatistics:
        return cls(np.asarray(zz, dtype=float), design.feature_names, design.target, design.intercept, float(n))

    @property
    def xtx(self) -> np.ndarray:
        """``X^T X`` including the intercept column when present (Eq. (1) of Ferrando & Sheldon)."""
        return self.zz[:-1, :-1]

    @property
    def xty(self) -> np.ndarray:
        """``X^T y = sum_i y_i x_i`` (intercept entry first when present)."""
        return self.zz[:-1, -1]

    @property
    def yty(self) -> float:
        """``y^T y`` (NaN if the release left it out)."""
        return float(self.zz[-1, -1])

    @property
    def dimension(self) -> int:
        """Columns of ``X`` in the Gram matrix (intercept included): ``d`` of AdaSSP's Alg. 2."""
        return self.zz.shape[0] - 1


def estimate_total(marginals: Iterable[np.ndarray]) -> float:
    """Inverse-cell-count weighted mean of the marginals' sums (see the module docstring)."""
    weighted, weights = 0.0, 0.0
    for table in marginals:
        table = np.asarray(table, dtype=float)
        weighted += float(table.sum()) / table.size
        weights += 1.0 / table.size
    if weights == 0.0:
        raise EstimatorError("marginals: need at least one marginal to estimate the total")
    return weighted / weights


def _read(marginal: Marginal, attrs: tuple[str, ...], shape: tuple[int, ...]) -> np.ndarray:
    table = np.asarray(marginal(attrs), dtype=float)
    if table.shape != shape:
        raise EstimatorError(f"marginal{attrs} must have shape {shape} (axes in the order asked), got {table.shape}")
    if not np.all(np.isfinite(table)):
        raise EstimatorError(f"marginal{attrs} has non-finite counts")
    return table


def gram_from_marginals(design: DesignEncoding, marginal: Marginal, total: float | None = None) -> GramStatistics:
    """Prop. 3.2 / Alg. 1: ``Z^T Z`` from the 1-way and 2-way marginals that ``marginal(attrs)`` returns.

    ``marginal`` is called with every tuple of :meth:`DesignEncoding.required_marginals` and must return counts with
    axes in the order asked. ``total`` overrides the estimated row count (only used for the intercept entry and
    ``GramStatistics.n``).
    """
    blocks = design.gram_blocks()
    q = len(design.gram_names)
    zz = np.zeros((q, q))
    read: list[np.ndarray] = []
    ones = []
    for enc, rows in blocks:
        mu = _read(marginal, (enc.attribute,), (enc.levels,))
        read.append(mu)
        zz[rows, rows] = (enc.matrix * mu) @ enc.matrix.T  # A diag(mu) A^T
        ones.append(enc.matrix @ mu)  # the intercept row: A_j mu_j
    for a, (enc_a, rows_a) in enumerate(blocks):
        for enc_b, rows_b in blocks[a + 1 :]:
            mu = _read(marginal, (enc_a.attribute, enc_b.attribute), (enc_a.levels, enc_b.levels))
            read.append(mu)
            block = enc_a.matrix @ mu @ enc_b.matrix.T
            zz[rows_a, rows_b] = block
            zz[rows_b, rows_a] = block.T
    n = estimate_total(read) if total is None else float(total)
    if design.intercept:
        zz[0, 0] = n
        for (_, rows), row in zip(blocks, ones, strict=True):
            zz[0, rows] = row
            zz[rows, 0] = row
    return GramStatistics.for_design(design, zz, n)


def gram_from_rows(X: object, y: object, intercept: bool = False) -> np.ndarray:
    """``Z^T Z`` for ``Z = [1?, X, y]`` computed from encoded rows (for tests, references and exact releases)."""
    X = as_matrix("X", X)
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],) or not np.all(np.isfinite(y)):
        raise EstimatorError(f"y must be a finite vector of length {X.shape[0]}, got shape {y.shape}")
    parts = ([np.ones((X.shape[0], 1))] if intercept else []) + [X, y[:, None]]
    Z = np.concatenate(parts, axis=1)
    return Z.T @ Z


def statistics_from_rows(design: DesignEncoding, rows: object) -> GramStatistics:
    """Encode integer-coded rows with ``design`` and return their exact :class:`GramStatistics`."""
    X, y = design.encode(rows)
    return GramStatistics.for_design(design, gram_from_rows(X, y, design.intercept), X.shape[0])
