"""Private logistic regression: DD-SSP with a Chebyshev surrogate (paper 002, Prop. 3.4, App. A) and ObjPert (App. C).

Labels are ``y in {-1, +1}`` throughout (Sec. 3.3); the fitted models predict
``P(y = +1 | x) = 1 / (1 + e^{-x.theta})``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from estimators.base import (
    BinaryClassifier,
    EstimatorError,
    as_matrix,
    check_non_negative,
    check_positive,
    check_probability,
)
from estimators.objpert import objpert_hessian, objpert_objective, objpert_regularization
from estimators.psd import project_psd, solve_psd
from estimators.sufficient_stats import GramStatistics
from workloads.chebyshev import chebyshev_monomial_coefficients

_NEWTON_POLISH_STEPS = 5


class DDSSPLogisticRegression(BinaryClassifier):
    """DD-SSP logistic regression: maximise Prop. 3.4's surrogate of the log-likelihood from ``Z^T Z``.

    Derivation (App. A, checked): with ``phi(s) = -log(1 + e^{-s}) ~ b0 + b1 s + b2 s^2`` on ``[-R, R]``
    (:mod:`workloads.chebyshev`, monomial coefficients) and ``s_i = y_i x_i.theta``,
    ``sum_i phi(s_i) ~ n b0 + b1 theta^T (sum_i y_i x_i) + b2 theta^T (sum_i y_i^2 x_i x_i^T) theta
    = n b0 + b1 theta^T X^T y + b2 theta^T X^T X theta``, using ``y_i^2 = 1``; ``X^T y = sum_i y_i x_i`` is the
    ``X``-``y`` block of ``Z^T Z`` with the target encoded ``{-1, +1}``.

    Maximiser. The surrogate is concave when ``b2 < 0`` (checked; ``b2 ~ -0.062`` for ``R = 6``) and ``X^T X`` is
    PSD, which we enforce by projecting it (:func:`estimators.psd.project_psd`). Its gradient
    ``b1 X^T y + 2 b2 X^T X theta`` vanishes at ``theta = -b1 / (2 b2) (X^T X)^+ X^T y``: a scaled least-squares fit
    of the ``{-1, +1}`` labels (about ``4.02 x`` for ``R = 6``). Where noisy ``X^T y`` has a component along a
    null direction of the projected ``X^T X`` the surrogate is unbounded; the pseudo-inverse (eigenvalues below
    ``rcond`` times the largest dropped) maximises over the directions the statistics determine. ``ridge`` adds
    ``ridge I`` to ``X^T X`` (a penalty ``b2 ridge ||theta||^2``), default 0.
    """

    def __init__(
        self, radius: float = 6.0, chebyshev_method: str = "projection", ridge: float = 0.0, rcond: float = 1e-10
    ) -> None:
        self.radius = radius
        self.chebyshev_method = chebyshev_method
        self.ridge = ridge
        self.rcond = rcond

    def fit(self, stats: GramStatistics) -> DDSSPLogisticRegression:
        if not isinstance(stats, GramStatistics):
            raise EstimatorError(f"stats must be a GramStatistics, got {type(stats).__name__}")
        b = chebyshev_monomial_coefficients(2, self.radius, method=self.chebyshev_method)
        if not b[2] < 0:
            raise EstimatorError(f"the quadratic coefficient b2={b[2]:.4g} must be negative for a concave surrogate")
        ridge = check_non_negative("ridge", self.ridge)
        rcond = check_positive("rcond", self.rcond)
        theta = solve_psd(stats.xtx, -b[1] / (2.0 * b[2]) * stats.xty, ridge=ridge, rcond=rcond)
        self.chebyshev_coefficients_ = b
        self._quadratic = project_psd(stats.xtx) + ridge * np.eye(stats.dimension)
        self._linear = stats.xty.copy()
        self._n = stats.n
        self._store(theta, stats.feature_names, stats.intercept)
        return self

    def surrogate_log_likelihood(self, theta: np.ndarray) -> float:
        """Prop. 3.4's ``n b0 + b1 theta^T X^T y + b2 theta^T X^T X theta`` at ``theta = [intercept?, coef]``."""
        if not hasattr(self, "chebyshev_coefficients_"):
            raise EstimatorError("surrogate_log_likelihood needs a fitted model")
        b0, b1, b2 = self.chebyshev_coefficients_
        theta = np.asarray(theta, dtype=float)
        return float(self._n * b0 + b1 * theta @ self._linear + b2 * theta @ self._quadratic @ theta)


class ObjPertLogisticRegression(BinaryClassifier):
    """Objective perturbation (Kifer et al. 2012; paper 002, App. C, Alg. 3) with the noise vector given.

    ``fit(X, y, noise)`` sees rows: it runs inside the release engine, which samples ``noise`` with
    :func:`estimators.objpert.objpert_noise_scale` and stores only the fitted model. ``X`` is the encoded feature
    matrix without intercept; with ``fit_intercept`` a column of ones is prepended and ``noise`` has one entry per
    column of ``[1, X]``. ``row_norm_bound`` is ``||X||`` of Prop. 3.1 for those columns; a row exceeding it is an
    error, because the privacy proof would not cover it. ``l2`` is an optional extra regulariser
    ``r(theta) = l2 / 2 ||theta||^2``. The minimiser is scipy's trust-region Newton method (``trust-exact``) from 0,
    deterministic, polished by at most 5 plain Newton steps (``J`` is strongly convex) until the gradient norm is at
    most ``tol``; ``converged_`` says whether it got there and ``gradient_norm_`` how close it is.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        row_norm_bound: float,
        fit_intercept: bool = True,
        l2: float = 0.0,
        tol: float = 1e-9,
        max_iter: int = 500,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.row_norm_bound = row_norm_bound
        self.fit_intercept = fit_intercept
        self.l2 = l2
        self.tol = tol
        self.max_iter = max_iter

    def design_matrix(self, X: object) -> np.ndarray:
        X = as_matrix("X", X)
        return np.column_stack([np.ones(X.shape[0]), X]) if self.fit_intercept else X

    def fit(
        self, X: object, y: object, noise: object, feature_names: tuple[str, ...] | None = None
    ) -> ObjPertLogisticRegression:
        eps = check_positive("epsilon", self.epsilon)
        check_probability("delta", self.delta)
        bound = check_positive("row_norm_bound", self.row_norm_bound)
        l2 = check_non_negative("l2", self.l2)
        design = self.design_matrix(X)
        n, d = design.shape
        if n == 0:
            raise EstimatorError("X must have at least one row")
        labels = np.asarray(y, dtype=float)
        if labels.shape != (n,) or not np.all(np.isin(labels, (-1.0, 1.0))):
            raise EstimatorError(f"y must be a vector of {n} labels in {{-1, +1}}")
        b = np.asarray(noise, dtype=float)
        if b.shape != (d,) or not np.all(np.isfinite(b)):
            raise EstimatorError(f"noise must be a finite vector of length {d} (intercept included), got {b.shape}")
        largest = float(np.sqrt(np.max(np.sum(design**2, axis=1))))
        if largest > bound * (1.0 + 1e-12):
            raise EstimatorError(
                f"row_norm_bound={bound:.6g} is below the norm {largest:.6g} of a row of X (intercept included)"
            )
        names = tuple(feature_names) if feature_names is not None else tuple(f"x{i}" for i in range(X.shape[1]))
        if len(names) != d - int(self.fit_intercept):
            raise EstimatorError(f"feature_names must name {d - int(self.fit_intercept)} columns, got {len(names)}")
        regularization = objpert_regularization(eps, bound)

        def value_and_gradient(theta: np.ndarray) -> tuple[float, np.ndarray]:
            return objpert_objective(theta, design, labels, b, regularization, l2)

        def hessian(theta: np.ndarray) -> np.ndarray:
            return objpert_hessian(theta, design, labels, regularization, l2)

        result = minimize(
            value_and_gradient,
            np.zeros(d),
            jac=True,
            hess=hessian,
            method="trust-exact",
            options={"gtol": check_positive("tol", self.tol), "maxiter": int(self.max_iter)},
        )
        theta, tol = result.x, float(self.tol)
        gradient = value_and_gradient(theta)[1]
        for _ in range(_NEWTON_POLISH_STEPS):  # the trust region stalls once J's changes reach rounding level
            if np.linalg.norm(gradient) <= tol:
                break
            theta = theta - np.linalg.solve(hessian(theta), gradient)
            gradient = value_and_gradient(theta)[1]
        self.regularization_ = regularization
        self.gradient_norm_ = float(np.linalg.norm(gradient))
        self.converged_ = bool(self.gradient_norm_ <= tol)
        self.n_iter_ = int(result.nit)
        self._store(theta, names, self.fit_intercept)
        return self
