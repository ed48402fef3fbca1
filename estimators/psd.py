"""Symmetric positive semi-definite repairs and solves for noisy Gram matrices.

A Gram matrix ``X^T X`` recovered from noisy marginals (or released with Gaussian noise) is symmetric only up to
rounding and may be indefinite. Everything here is post-processing of released statistics:

* :func:`project_psd` -- the Frobenius-nearest PSD matrix: eigen-decompose, set negative eigenvalues to 0
  (Higham, *Computing a nearest symmetric positive semidefinite matrix*, 1988, Thm. 2.1 for symmetric input).
* :func:`solve_psd` -- ``(P + ridge I)^+ b`` for that projection ``P``: eigenvalues at or below
  ``rcond * max eigenvalue`` are treated as zero (minimum-norm solution), so directions the statistics do not
  determine (a level nobody has, a direction noise made negative) get coefficient 0 instead of a blow-up.
"""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError, check_non_negative, check_positive


def symmetrize(name: str, matrix: object) -> np.ndarray:
    array = np.asarray(matrix, dtype=float)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise EstimatorError(f"{name} must be a square matrix, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise EstimatorError(f"{name} must be finite")
    return 0.5 * (array + array.T)


def project_psd(matrix: object) -> np.ndarray:
    """Nearest (Frobenius) symmetric PSD matrix: negative eigenvalues of the symmetric part set to 0."""
    values, vectors = np.linalg.eigh(symmetrize("matrix", matrix))
    return (vectors * np.clip(values, 0.0, None)) @ vectors.T


def smallest_eigenvalue(matrix: object) -> float:
    """``lambda_min`` of the symmetric part (AdaSSP, Alg. 2 step 1)."""
    return float(np.linalg.eigvalsh(symmetrize("matrix", matrix))[0])


def solve_psd(matrix: object, rhs: object, ridge: float = 0.0, rcond: float = 1e-10) -> np.ndarray:
    """Minimum-norm solution of ``(P + ridge I) theta = rhs`` with ``P = project_psd(matrix)``.

    ``rcond`` is relative to the largest eigenvalue of ``P + ridge I``; smaller eigenvalues count as zero. With an
    exact, well-conditioned Gram matrix and ``ridge = 0`` this is ``matrix^{-1} rhs`` to rounding.
    """
    ridge = check_non_negative("ridge", ridge)
    rcond = check_positive("rcond", rcond)
    values, vectors = np.linalg.eigh(symmetrize("matrix", matrix))
    b = np.asarray(rhs, dtype=float)
    if b.shape != (values.size,) or not np.all(np.isfinite(b)):
        raise EstimatorError(f"rhs must be a finite vector of length {values.size}, got shape {b.shape}")
    values = np.clip(values, 0.0, None) + ridge
    top = values.max() if values.size else 0.0
    keep = values > rcond * top if top > 0 else np.zeros(values.size, dtype=bool)
    inverse = np.zeros_like(values)
    inverse[keep] = 1.0 / values[keep]
    return vectors @ (inverse * (vectors.T @ b))
