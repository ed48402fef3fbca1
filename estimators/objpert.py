"""Objective perturbation for logistic regression: calibration and objective (paper 002, App. C, Alg. 3).

Alg. 3 (Kifer, Smith & Thakurta 2012, the paper's [26]) minimises

    J(theta) = L(theta) + r(theta) / n + Delta / (2 n) ||theta||^2 + b^T theta / n,

with ``L`` the average logistic loss ``log(1 + exp(-y x.theta))``, ``y in {-1, +1}``, and

* ``Delta >= ||X||^2 / (2 eps)`` (step 1). Check: Kifer et al. need ``Delta >= 2 lambda / eps`` with ``lambda`` a bound
  on the eigenvalues of the per-example Hessian; App. C derives ``lambda = ||X||^2 / 4`` (``phi'' <= 1/4``), so
  ``2 (||X||^2 / 4) / eps = ||X||^2 / (2 eps)``.
* ``b ~ N(0, ||X||^2 (8 log(2/delta) + 4 eps) / eps^2 I)`` (step 2), a covariance: the standard deviation per
  coordinate is ``||X|| sqrt(8 log(2/delta) + 4 eps) / eps``. The gradient bound is ``|y| ||x|| <= ||X||``.

The noise ``b`` is sampled by the release engine (one noise module) and passed in. Privacy needs the exact
minimiser (Kifer et al.); the solver runs a trust-region Newton method to a gradient norm of ``tol``. The
regularisation covers every coordinate, an intercept column included (strong convexity in all directions is what
the privacy proof uses), and ``||X||`` must bound the rows *with* that column (Prop. 3.1 counts it).
"""

from __future__ import annotations

import math

import numpy as np

from estimators.base import check_non_negative, check_positive, check_probability


def objpert_regularization(epsilon: float, row_norm_bound: float) -> float:
    """``Delta = ||X||^2 / (2 eps)`` (Alg. 3, step 1, at equality)."""
    return check_positive("row_norm_bound", row_norm_bound) ** 2 / (2.0 * check_positive("epsilon", epsilon))


def objpert_noise_scale(epsilon: float, delta: float, row_norm_bound: float) -> float:
    """Standard deviation of each coordinate of ``b``: ``||X|| sqrt(8 log(2/delta) + 4 eps) / eps`` (Alg. 3, step 2)."""
    eps = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    bound = check_positive("row_norm_bound", row_norm_bound)
    return bound * math.sqrt(8.0 * math.log(2.0 / delta) + 4.0 * eps) / eps


def objpert_objective(
    theta: np.ndarray, X: np.ndarray, y: np.ndarray, noise: np.ndarray, regularization: float, l2: float = 0.0
) -> tuple[float, np.ndarray]:
    """``J(theta)`` of Alg. 3 and its gradient, with ``r(theta) = l2 / 2 ||theta||^2`` (``X`` includes any intercept).

    ``J = mean_i log(1 + exp(-y_i x_i.theta)) + (l2 + Delta) / (2 n) ||theta||^2 + noise.theta / n``.
    """
    n = X.shape[0]
    margins = y * (X @ theta)
    weight = check_non_negative("regularization", regularization) + check_non_negative("l2", l2)
    value = float(np.mean(np.logaddexp(0.0, -margins)) + (weight * theta @ theta / 2.0 + noise @ theta) / n)
    slope = -y * 0.5 * (1.0 - np.tanh(0.5 * margins))  # d/dm log(1 + e^{-m}) = -1 / (1 + e^{m})
    gradient = (X.T @ slope + weight * theta + noise) / n
    return value, gradient


def objpert_hessian(
    theta: np.ndarray, X: np.ndarray, y: np.ndarray, regularization: float, l2: float = 0.0
) -> np.ndarray:
    """Hessian of ``J``: ``X^T diag(s (1 - s)) X / n + (Delta + l2) / n I`` with ``s`` the fitted probabilities."""
    n = X.shape[0]
    s = 0.5 * (1.0 + np.tanh(0.5 * (y * (X @ theta))))
    curvature = s * (1.0 - s)
    return (X.T * curvature) @ X / n + (regularization + l2) / n * np.eye(X.shape[1])
