"""Private logistic regression: DD-SSP with a Chebyshev surrogate (Ferrando & Sheldon 2024, "Private Regression
via Data-Dependent Sufficient Statistic Perturbation", Prop. 3.4, App. A) and ObjPert (App. C).

Labels are ``y in {-1, +1}`` throughout (Sec. 3.3); the fitted models predict
``P(y = +1 | x) = 1 / (1 + e^{-x.theta})``.
"""

from __future__ import annotations

import copy
from decimal import Decimal

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
from estimators.central.certified import ExactLogisticObjective, certified_minimizer
from estimators.central.objpert import objpert_hessian, objpert_objective, objpert_regularization
from estimators.central.sufficient_stats import GramStatistics
from estimators.psd import project_psd, solve_psd
from workloads.chebyshev import chebyshev_monomial_coefficients


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
        self._intercept = stats.intercept
        self._store(theta, stats.feature_names, stats.intercept)
        return self

    def calibrated(self, slope: float, shift: float) -> DDSSPLogisticRegression:
        """This fit with the score ``x.theta`` replaced by ``slope x.theta + shift`` (:func:`platt_scaling`): the
        coefficients times ``slope``, the intercept ``slope intercept + shift`` (``shift`` must be 0 without an
        intercept). ``slope`` must be positive, so the scores' order (and the AUC) is unchanged. Returns a new model;
        the surrogate fit it came from stays on it as ``surrogate_theta_``."""
        slope = check_positive("slope", slope)
        if not np.isfinite(shift) or (shift != 0.0 and not self._intercept):
            raise EstimatorError(f"shift must be finite, and 0 for a model without an intercept; got {shift!r}")
        theta = self.theta_()
        out = copy.copy(self)
        moved = slope * theta
        if self._intercept:
            moved[0] += shift
        out._store(moved, self.feature_names_, self._intercept)
        out.surrogate_theta_ = theta
        out.calibration_ = (slope, float(shift))
        return out

    def theta_(self) -> np.ndarray:
        """``[intercept?, coef...]``, laid out as ``Z^T Z``'s rows of ``X``."""
        return np.concatenate([[self.intercept_], self.coef_]) if self._intercept else self.coef_.copy()

    def surrogate_log_likelihood(self, theta: np.ndarray) -> float:
        """Prop. 3.4's ``n b0 + b1 theta^T X^T y + b2 theta^T X^T X theta`` at ``theta = [intercept?, coef]``."""
        if not hasattr(self, "chebyshev_coefficients_"):
            raise EstimatorError("surrogate_log_likelihood needs a fitted model")
        b0, b1, b2 = self.chebyshev_coefficients_
        theta = np.asarray(theta, dtype=float)
        return float(self._n * b0 + b1 * theta @ self._linear + b2 * theta @ self._quadratic @ theta)


class ObjPertLogisticRegression(BinaryClassifier):
    """Objective perturbation (Kifer et al. 2012; Ferrando & Sheldon, App. C, Alg. 3) with a certified approximate
    minimiser and optional output noise (approximate minima perturbation, Iyengar et al. 2019; docs/privacy.md 8.6).

    ``fit(X, y, noise, output_noise=...)`` sees rows: it runs inside the release engine, which samples ``noise``
    (``b``, :func:`estimators.central.objpert.objpert_noise_scale`) and ``output_noise`` and stores only the fitted
    model.
    ``X`` is the encoded feature matrix without intercept; with ``fit_intercept`` a column of ones is prepended and
    both noise vectors have one entry per column of ``[1, X]``. ``row_norm_bound`` is ``||X||`` of Prop. 3.1 for those
    columns; a row exceeding it is an error (the privacy proof would not cover it). ``l2`` is an optional extra
    regulariser ``r(theta) = l2 / 2 ||theta||^2``.

    The minimiser: scipy's trust-region Newton method (``trust-exact``) from 0 on the un-divided objective ``J``, then
    :func:`estimators.central.certified.certified_minimizer`, which stops only when the exact gradient of ``J`` is at
    most ``gradient_tolerance`` (default ``1e-10 * Delta``, i.e. within ``1e-10`` of the exact minimiser). The fitted
    coefficients are that point plus ``output_noise``. No diagnostic (iterations, gradient norm) is kept: they
    depend on the data. Any ``n >= 0`` works, including no rows at all.

    ``sample_weight`` (non-negative integers, default 1 each) gives each row's multiplicity: the distinct rows of a
    table with their counts give the same objective, gradient, Hessian and certificate as the table itself, in
    memory bounded by the distinct rows (the calibration, ``Delta`` and ``b``, depends only on ``row_norm_bound``).
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        row_norm_bound: float,
        fit_intercept: bool = True,
        l2: float = 0.0,
        gradient_tolerance: float | None = None,
        max_iter: int = 500,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.row_norm_bound = row_norm_bound
        self.fit_intercept = fit_intercept
        self.l2 = l2
        self.gradient_tolerance = gradient_tolerance
        self.max_iter = max_iter

    def design_matrix(self, X: object) -> np.ndarray:
        matrix = as_matrix("X", X)
        return np.column_stack([np.ones(matrix.shape[0]), matrix]) if self.fit_intercept else matrix

    def fit(
        self,
        X: object,
        y: object,
        noise: object,
        feature_names: tuple[str, ...] | None = None,
        output_noise: object = None,
        sample_weight: object = None,
    ) -> ObjPertLogisticRegression:
        eps = check_positive("epsilon", self.epsilon)
        check_probability("delta", self.delta)
        bound = check_positive("row_norm_bound", self.row_norm_bound)
        l2 = check_non_negative("l2", self.l2)
        design = self.design_matrix(X)
        n, d = design.shape
        labels = np.asarray(y, dtype=float)
        if labels.shape != (n,) or not np.all(np.isin(labels, (-1.0, 1.0))):
            raise EstimatorError("y must hold one label in {-1, +1} per row of X")
        counts = None
        if sample_weight is not None:
            counts = np.asarray(sample_weight)
            if counts.shape != (n,) or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
                raise EstimatorError("sample_weight must hold one non-negative integer (a row count) per row of X")
            counts = counts.astype(np.int64)
        weights = None if counts is None else counts.astype(np.float64)
        b = np.asarray(noise, dtype=float)
        if b.shape != (d,) or not np.all(np.isfinite(b)):
            raise EstimatorError(f"noise must be a finite vector of length {d} (intercept included), got {b.shape}")
        shift = np.zeros(d) if output_noise is None else np.asarray(output_noise, dtype=float)
        if shift.shape != (d,) or not np.all(np.isfinite(shift)):
            raise EstimatorError(f"output_noise must be a finite vector of length {d} (intercept included)")
        if n and float(np.max(np.sum(design**2, axis=1))) > bound * bound * (1.0 + 1e-12):
            raise EstimatorError(f"a row of X (intercept included) has a norm above row_norm_bound={bound:.6g}; "
                                 "the bound must hold for every possible row")
        width = d - int(self.fit_intercept)
        names = tuple(feature_names) if feature_names is not None else tuple(f"x{i}" for i in range(width))
        if len(names) != width:
            raise EstimatorError(f"feature_names must name {width} columns, got {len(names)}")
        regularization = objpert_regularization(eps, bound)
        tolerance = 1e-10 * regularization if self.gradient_tolerance is None else self.gradient_tolerance
        tolerance = check_positive("gradient_tolerance", tolerance)

        def value_and_gradient(theta: np.ndarray) -> tuple[float, np.ndarray]:
            return objpert_objective(theta, design, labels, b, regularization, l2, weights)

        def hessian(theta: np.ndarray) -> np.ndarray:
            return objpert_hessian(theta, design, labels, regularization, l2, weights)

        result = minimize(
            value_and_gradient,
            np.zeros(d),
            jac=True,
            hess=hessian,
            method="trust-exact",
            options={"gtol": tolerance, "maxiter": int(self.max_iter)},
        )
        start = result.x if np.all(np.isfinite(result.x)) else np.zeros(d)
        objective = ExactLogisticObjective(design, labels, b, regularization + l2, counts)
        theta = certified_minimizer(objective, start, hessian, tolerance)
        self.regularization_ = regularization
        self.gradient_tolerance_ = tolerance
        # the released point is a function of the exact sum theta_hat + output noise (rounded once: post-processing)
        self._store(np.array([float(t + Decimal(float(s))) for t, s in zip(theta, shift, strict=True)]), names,
                    self.fit_intercept)
        return self


def platt_scaling(scores: object, labels: object, intercept: bool) -> tuple[float, float]:
    """``(slope, shift)`` of the logistic model ``P(y = +1 | s) = 1 / (1 + e^{-(slope s + shift)})`` fitted by maximum
    likelihood to ``scores`` and ``labels`` in ``{-1, +1}`` (Platt 1999, "Probabilistic Outputs for Support Vector
    Machines", Sec. 2; ``shift`` is 0 when ``intercept`` is False). DD-SSP's surrogate (Prop. 3.4) is a scaled
    least-squares fit of the labels: its direction ranks rows well (its AUC), but its scale and offset are those of a
    linear probability model, which for a rare class puts almost every score on the majority's side. Re-fitting only
    those two numbers on rows drawn from the release's model (free: post-processing) gives labels and probabilities
    on the logistic scale again.

    The fit is scikit-learn's, through :class:`estimators.central.reference.LogisticReference`, with an l2 penalty of
    1 (``C = 1``) on the slope: negligible against the thousands of rows it is fitted on, and it keeps the slope
    finite when the rows are separable."""
    from estimators.central.reference import LogisticReference

    s = as_matrix("scores", np.asarray(scores, dtype=float).reshape(-1, 1))
    y = np.asarray(labels, dtype=float)
    if y.shape != (s.shape[0],):
        raise EstimatorError(f"labels must hold one label per score, got {y.shape} for {s.shape[0]} scores")
    fitted = LogisticReference(fit_intercept=intercept, C=1.0).fit(s, y)
    return float(fitted.coef_[0]), float(fitted.intercept_)
