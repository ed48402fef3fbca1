"""The label-private Lasso: l1-penalised least squares on public features and Gaussian-randomized labels.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Sec. 5,
after Thm. 5: with the reports ``tilde y_i`` of Label-LDP-IHT (:mod:`workloads.local.randomizers.gaussian_label`),

    theta = argmin_theta (1 / 2n) ||tilde y - X theta||_2^2 + lambda ||theta||_1,   lambda = O(sqrt(log p / (n eps^2)))

(Negahban, Ravikumar, Wainwright & Yu 2012). Post-processing of the reports: no further privacy cost.

**The default lambda.** The paper gives only the order. The label noise is Gaussian with standard deviation
``sigma_1`` (itself proportional to ``1/eps``), and for a design with unit-scale columns (``x`` in ``{-1, +1}^p``:
``||X_j||^2 / n = 1``) the classical choice is ``lambda = sigma sqrt(2 log p / n)``, the level of the largest
coordinate of the noise term ``X^T z / n`` (Bickel, Ritov & Tsybakov 2009, Sec. 3): we use
``lambda = sigma_1 sqrt(2 log p / n)``, which is the paper's ``sqrt(log p / (n eps^2))`` with its constant made
explicit. The model noise ``sigma_i`` (bounded by ``C = 0.05`` in Sec. 7) is ignored next to ``sigma_1``. ``alpha``
sets lambda explicitly (scikit-learn's name for the penalty).

**Solving.** With the thin QR factorisation ``X = Q R`` (``R`` of size ``min(n, p) x p``),
``||tilde y - X theta||^2 = ||Q^T tilde y - R theta||^2 + const``, so cvxpy solves a problem of size ``p`` rather
than ``n`` (exactly the same minimiser). The solve goes through :func:`estimators.local.sparse.convex.solve_convex`; a
status other than ``optimal`` raises :class:`~estimators.local.sparse.convex.ConvexSolverError`.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np

from estimators.base import (
    EstimatorError,
    LinearRegressor,
    as_matrix,
    check_positive,
    check_vector,
    feature_names_for,
)
from estimators.local.sparse.convex import solve_convex
from workloads.local.randomizers.gaussian_label import label_noise_sigma


def default_lasso_penalty(label_noise_std: float, n: int, p: int) -> float:
    """``lambda = sigma_1 sqrt(2 log p / n)`` (``log 2`` stands in for ``log p`` when ``p = 1``)."""
    sigma = check_positive("label_noise_std", label_noise_std)
    return sigma * math.sqrt(2.0 * math.log(max(p, 2)) / n)


def lasso_least_squares(X: np.ndarray, y: np.ndarray, penalty: float, problem_name: str) -> np.ndarray:
    """``argmin (1/2n) ||y - X theta||^2 + penalty ||theta||_1`` with cvxpy, via the thin QR of ``X``."""
    n, p = X.shape
    q, r = np.linalg.qr(X, mode="reduced")
    target = q.T @ y
    theta = cp.Variable(p)
    objective = cp.sum_squares(r @ theta - target) / (2.0 * n) + penalty * cp.norm1(theta)
    solve_convex(cp.Problem(cp.Minimize(objective)), problem_name)
    return np.asarray(theta.value, dtype=float)


def lasso_from_moments(gram: object, moment: object, penalty: float, problem_name: str) -> np.ndarray:
    """The same minimiser from ``G = X^T X / n`` and ``b = X^T y / n``: ``(1/2n) ||y - X theta||^2`` is
    ``theta^T G theta / 2 - b^T theta`` plus a constant. ``G`` (positive semi-definite, e.g. a public table's) is
    factored ``G = L^T L`` from its eigendecomposition (negative rounding eigenvalues set to 0), so cvxpy sees
    ``||L theta||^2 / 2``. Used by the collections service (``G`` public, ``b`` the label reports' running mean)."""
    second = np.asarray(gram, dtype=float)
    if second.ndim != 2 or second.shape[0] != second.shape[1] or not np.all(np.isfinite(second)):
        raise EstimatorError(f"gram must be a finite square matrix, got shape {second.shape}")
    p = second.shape[0]
    b = check_vector("moment", moment, p)
    values, vectors = np.linalg.eigh((second + second.T) / 2.0)
    factor = np.sqrt(np.clip(values, 0.0, None))[:, np.newaxis] * vectors.T
    theta = cp.Variable(p)
    objective = cp.sum_squares(factor @ theta) / 2.0 - b @ theta + check_positive("penalty", penalty) * cp.norm1(theta)
    solve_convex(cp.Problem(cp.Minimize(objective)), problem_name)
    return np.asarray(theta.value, dtype=float)


def refit_on_support(gram: object, moment: object, coef: object, tolerance: float = 1e-6) -> np.ndarray:
    """Least squares on the Lasso's support: ``theta_S = G_SS^+ b_S``, ``theta`` 0 off ``S`` (Belloni & Chernozhukov,
    "Least squares after model selection in high-dimensional sparse models", Bernoulli 19(2), 2013, the post-Lasso
    estimator; it removes the Lasso's shrinkage bias ``lambda G_SS^-1 sign(theta_S)``). ``S`` holds the coordinates
    whose ``|coef|`` exceeds ``tolerance`` times the largest (solver zeros are not exact). It uses only ``G`` and
    ``b``, the quantities the Lasso used: post-processing, free. ``G_SS^+`` is the pseudo-inverse (``lstsq``), so a
    singular public ``G_SS`` still answers its minimum-norm solution."""
    second = np.asarray(gram, dtype=float)
    b = check_vector("moment", moment, second.shape[0])
    theta = check_vector("coef", coef, second.shape[0])
    largest = float(np.max(np.abs(theta))) if theta.size else 0.0
    out = np.zeros_like(theta)
    if largest == 0.0:
        return out
    support = np.flatnonzero(np.abs(theta) > tolerance * largest)
    out[support] = np.linalg.lstsq(second[np.ix_(support, support)], b[support], rcond=None)[0]
    return out


class LabelPrivateLasso(LinearRegressor):
    """Sec. 5's Lasso on label reports: ``fit(X, noisy_y)``; no intercept (the model of Sec. 5 has none).

    ``epsilon``, ``delta`` and ``label_bound`` are the public parameters the labels were randomized with; they set
    ``sigma_1`` and with it the default ``alpha`` (lambda). Fitted: ``coef_``, ``alpha_`` (the lambda used).
    """

    def __init__(self, epsilon: float, delta: float, label_bound: float, alpha: float | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.label_bound = label_bound
        self.alpha = alpha

    def check_settings(self) -> None:
        """The settings' errors (epsilon, delta, label bound, alpha), for a caller that validates before collecting."""
        label_noise_sigma(self.label_bound, self.epsilon, self.delta)
        if self.alpha is not None:
            check_positive("alpha", self.alpha)

    def fit(self, X: object, noisy_y: object, feature_names: object = None) -> LabelPrivateLasso:
        design = as_matrix("X", X)
        n, p = design.shape
        labels = check_vector("noisy_y", noisy_y, n)
        names = feature_names_for(feature_names, p)
        if self.alpha is None:
            sigma = label_noise_sigma(self.label_bound, self.epsilon, self.delta)
            penalty = default_lasso_penalty(sigma, n, p)
        else:
            penalty = check_positive("alpha", self.alpha)
        self.alpha_ = penalty
        self._store(lasso_least_squares(design, labels, penalty, "label-private Lasso"), names, intercept=False)
        return self
