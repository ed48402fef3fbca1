"""Private linear regression from released statistics: DD-SSP (Ferrando & Sheldon 2024, "Private Regression via
Data-Dependent Sufficient Statistic Perturbation", Alg. 1) and AdaSSP (App. B, Alg. 2).

Both fit from a :class:`~estimators.central.sufficient_stats.GramStatistics` (``Z^T Z`` with ``Z = [1?, X, y]``),
never from rows; they are post-processing of a release.
"""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError, LinearRegressor, check_non_negative, check_positive
from estimators.central.adassp import AdaSSPNoiseScales, adassp_lambda_min_tilde, adassp_ridge
from estimators.central.sufficient_stats import GramStatistics
from estimators.psd import solve_psd


def _check_stats(stats: object) -> GramStatistics:
    if not isinstance(stats, GramStatistics):
        raise EstimatorError(f"stats must be a GramStatistics, got {type(stats).__name__}")
    return stats


class DDSSPLinearRegression(LinearRegressor):
    """DD-SSP linear regression: ``theta = tilde{X^T X}^{-1} tilde{X^T y}`` from marginal-based statistics (Alg. 1).

    Noisy statistics. ``tilde{X^T X}`` from noisy marginals can be indefinite or nearly singular. The solve projects
    it onto the PSD cone (negative eigenvalues -> 0) and takes the minimum-norm solution, treating eigenvalues at or
    below ``rcond`` times the largest as zero (:func:`estimators.psd.solve_psd`): a direction with no curvature in
    the released statistics gets coefficient 0 instead of an arbitrarily large one. ``ridge`` (default 0) adds
    ``ridge I`` after the projection, to every coordinate (intercept included, as in Alg. 2's ``lambda I``). Both
    are fixed settings chosen without looking at the data; with exact marginals of a full-rank design and the
    defaults the estimate equals OLS to rounding.
    """

    def __init__(self, ridge: float = 0.0, rcond: float = 1e-10) -> None:
        self.ridge = ridge
        self.rcond = rcond

    def fit(self, stats: GramStatistics) -> DDSSPLinearRegression:
        stats = _check_stats(stats)
        ridge = check_non_negative("ridge", self.ridge)
        rcond = check_positive("rcond", self.rcond)
        theta = solve_psd(stats.xtx, stats.xty, ridge=ridge, rcond=rcond)
        self._store(theta, stats.feature_names, stats.intercept)
        return self


class AdaSSPLinearRegression(LinearRegressor):
    """AdaSSP (Wang 2018; Ferrando & Sheldon, App. B, Alg. 2) from a noisy Gram release.

    ``fit(stats, lambda_min_noisy, scales)`` takes the noisy ``Z^T Z`` (``stats``), the noisy minimum eigenvalue
    ``lambda_min(X^T X) + sigma Z`` *before* the shift and the clipping at 0 (step 2 is finished here, as
    post-processing), and the :class:`~estimators.central.adassp.AdaSSPNoiseScales` the release used. It sets
    ``ridge_ = max(0, ridge_offset - tilde_lambda_min)`` (step 3) and returns
    ``theta = (hat{X^T X} + ridge_ I)^{-1} hat{X^T y}`` (output step). The ridge covers the intercept column too.
    If noise still leaves ``hat{X^T X} + ridge_ I`` indefinite (probability about ``failure_prob``), the solve
    falls back to its PSD projection with the minimum-norm solution (:func:`estimators.psd.solve_psd`).
    """

    def __init__(self, rcond: float = 1e-10) -> None:
        self.rcond = rcond

    def fit(self, stats: GramStatistics, lambda_min_noisy: float, scales: AdaSSPNoiseScales) -> AdaSSPLinearRegression:
        stats = _check_stats(stats)
        if not isinstance(scales, AdaSSPNoiseScales):
            raise EstimatorError(f"scales must be an AdaSSPNoiseScales, got {type(scales).__name__}")
        if scales.d != stats.dimension:
            raise EstimatorError(f"scales were computed for d={scales.d} columns, stats have {stats.dimension}")
        self.lambda_min_tilde_ = adassp_lambda_min_tilde(lambda_min_noisy, scales)
        self.ridge_ = adassp_ridge(self.lambda_min_tilde_, scales)
        regularized = stats.xtx + self.ridge_ * np.eye(stats.dimension)
        theta = solve_psd(regularized, stats.xty, ridge=0.0, rcond=check_positive("rcond", self.rcond))
        self._store(theta, stats.feature_names, stats.intercept)
        return self
