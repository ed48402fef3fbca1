"""Objective perturbation for logistic regression: calibration and objective (Ferrando & Sheldon 2024, "Private
Regression via Data-Dependent Sufficient Statistic Perturbation", App. C, Alg. 3), with the certified stopping rule of
approximate minima perturbation.

Alg. 3 (Kifer, Smith & Thakurta 2012, the paper's [26]) minimises, written here without the division by ``n`` (which
does not change the minimiser, and keeps the private row count out of every stopping rule),

    J(theta) = sum_i log(1 + exp(-y_i x_i.theta)) + r(theta) + Delta / 2 ||theta||^2 + b^T theta,

with ``y in {-1, +1}`` and

* ``Delta >= ||X||^2 / (2 eps)`` (step 1). Check: Kifer et al. need ``Delta >= 2 lambda / eps`` with ``lambda`` a bound
  on the eigenvalues of the per-example Hessian; App. C derives ``lambda = ||X||^2 / 4`` (``phi'' <= 1/4``), so
  ``2 (||X||^2 / 4) / eps = ||X||^2 / (2 eps)``.
* ``b ~ N(0, ||X||^2 (8 log(2/delta) + 4 eps) / eps^2 I)`` (step 2), a covariance: the standard deviation per
  coordinate is ``||X|| sqrt(8 log(2/delta) + 4 eps) / eps``. The gradient bound is ``|y| ||x|| <= ||X||``.

Both are rounded UP here (more regularisation and more noise than the formula: still covered by the theorem).

The noise ``b`` is sampled by the release engine (one noise module) and passed in. Kifer et al.'s guarantee is for
the exact minimiser; the solver therefore stops only when the exact gradient of ``J`` is certified to be at most a
public ``gamma`` (:mod:`estimators.central.certified`), so ``||theta_hat - theta*|| <= gamma / Delta``, and the
release adds Gaussian output noise for that residual (approximate minima perturbation, Iyengar et al. 2019;
docs/privacy.md 8.6).
The regularisation covers every coordinate, an intercept column included (strong convexity in all directions is
what the privacy proof uses), and ``||X||`` must bound the rows *with* that column (Prop. 3.1 counts it).
"""

from __future__ import annotations

import math

import numpy as np

from estimators.base import check_non_negative, check_positive, check_probability
from estimators.psd import project_psd

#: Relative margin that covers the rounding of the few float operations of a calibration formula (each is
#: correctly rounded to within 2^-53; a handful of them stay far below 1e-14).
_ROUNDING_MARGIN = 1e-14


def round_up(value: float) -> float:
    """``value`` enlarged past the rounding error of a short float computation: a safe upper bound."""
    return math.nextafter(value * (1.0 + _ROUNDING_MARGIN), math.inf)


def objpert_regularization(epsilon: float, row_norm_bound: float) -> float:
    """``Delta = ||X||^2 / (2 eps)`` (Alg. 3, step 1, at equality), rounded up."""
    return round_up(check_positive("row_norm_bound", row_norm_bound) ** 2 / (2.0 * check_positive("epsilon", epsilon)))


def objpert_noise_scale(epsilon: float, delta: float, row_norm_bound: float) -> float:
    """Standard deviation of each coordinate of ``b``: ``||X|| sqrt(8 log(2/delta) + 4 eps) / eps`` (Alg. 3, step 2),
    rounded up."""
    eps = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    bound = check_positive("row_norm_bound", row_norm_bound)
    return round_up(bound * math.sqrt(8.0 * math.log(2.0 / delta) + 4.0 * eps) / eps)


def objpert_objective(
    theta: np.ndarray, X: np.ndarray, y: np.ndarray, noise: np.ndarray, regularization: float, l2: float = 0.0,
    weights: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """``J(theta)`` (un-divided) and its gradient, with ``r(theta) = l2 / 2 ||theta||^2`` (``X`` includes any
    intercept): ``J = sum_i w_i log(1 + exp(-y_i x_i.theta)) + (l2 + Delta) / 2 ||theta||^2 + noise.theta``.

    ``weights`` (default all 1) are row multiplicities: ``X``, ``y`` may hold each distinct row once with ``w_i`` its
    count, and ``J`` is then exactly the sum over the rows with their duplicates (the loss is a sum of per-row terms;
    ``Delta``, ``noise`` and the row norm bound do not depend on ``n``)."""
    margins = y * (X @ theta)
    weight = check_non_negative("regularization", regularization) + check_non_negative("l2", l2)
    losses = np.logaddexp(0.0, -margins)
    slope = -y * 0.5 * (1.0 - np.tanh(0.5 * margins))  # d/dm log(1 + e^{-m}) = -1 / (1 + e^{m})
    if weights is not None:
        losses, slope = weights * losses, weights * slope
    value = float(np.sum(losses) + weight * theta @ theta / 2.0 + noise @ theta)
    gradient = X.T @ slope + weight * theta + noise
    return value, gradient


def objpert_hessian(
    theta: np.ndarray, X: np.ndarray, y: np.ndarray, regularization: float, l2: float = 0.0,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Hessian of ``J``: ``X^T diag(w s (1 - s)) X + (Delta + l2) I`` with ``s`` the fitted probabilities and ``w`` the
    row multiplicities (default 1), computed as ``W^T W`` with ``W = diag(sqrt(w s (1 - s))) X`` (one symmetric
    rank-k update in BLAS)."""
    s = 0.5 * (1.0 + np.tanh(0.5 * (y * (X @ theta))))
    curvature = s * (1.0 - s) if weights is None else weights * s * (1.0 - s)
    weighted = X * np.sqrt(curvature)[:, None]
    return weighted.T @ weighted + (regularization + l2) * np.eye(X.shape[1])


def objpert_covariance(curvature: np.ndarray, regularization: float, noise_std: float, output_noise_std: float,
                       l2: float = 0.0) -> dict[str, np.ndarray]:
    """The covariance of the released coefficients, to first order, from a curvature ``H`` (the loss's Hessian
    ``sum_i p_i (1 - p_i) x_i x_i^T`` at the released point; a noisy estimate is projected onto the PSD cone here):
    ``{"noise": ..., "sampling": ...}``, two ``d x d`` matrices.

    Derivation (the delta method through the stationarity condition; ours). The released ``theta`` solves
    ``grad L(theta) + (Delta + l2) theta + b = 0`` (``L`` the un-divided loss), and the same estimator without noise
    solves it with ``b = 0``. The implicit function theorem around that point gives ``theta - theta_0 = -J^{-1} b +
    o(||b||)`` with ``J = H + (Delta + l2) I``, so with ``b ~ N(0, beta I)`` and the output noise ``N(0, sigma_out^2
    I)`` the noise part is ``beta J^{-2} + sigma_out^2 I``. The noise-free estimator's variance over samples of the
    population is the sandwich ``J^{-1} V J^{-1}`` with ``V = sum_i g_i g_i^T`` the scores' second moment; for the
    logistic loss ``E[g g^T | x] = p (1 - p) x x^T`` when the model holds (the information identity), so ``V = H``
    and the sampling part is ``J^{-1} H J^{-1}``.
    """
    H = project_psd(np.asarray(curvature, dtype=float))
    d = H.shape[0]
    inverse = np.linalg.inv(H + (check_non_negative("regularization", regularization) + l2) * np.eye(d))
    noise = check_non_negative("noise_std", noise_std) ** 2 * inverse @ inverse
    noise = noise + check_non_negative("output_noise_std", output_noise_std) ** 2 * np.eye(d)
    return {"noise": noise, "sampling": inverse @ H @ inverse}
