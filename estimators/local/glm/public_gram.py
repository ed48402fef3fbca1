"""Stein-lemma GLMs with an intercept from ``x y`` reports alone, ``X^T X`` from the public rows (``stein-glm``'s
default variant, ``public-gram``).

Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021), Remark 11 and Sec. 5: public unlabeled rows improve the estimate of
``X^T X``; since ``X^T X`` needs no labels, the public rows can carry it alone, and the participants' whole budget goes
to ``x y``. Each participant reported ``R(y (1, x))`` (:mod:`workloads.local.protocols.stein_glm`, ``x`` publicly
standardized and clipped to the ball of radius ``r``, ``R`` an unbiased randomizer), so the mean of the reports
estimates ``m = (E[y], E[x y])`` without bias. The server

1. (:class:`PublicGramOLS`) projects the mean onto the ball of radius ``B sqrt(1 + r^2)`` that holds ``m`` (a
   projection onto a convex set holding the truth moves nothing farther from it), builds the public Gram
   ``G = mean_j z_j z_j^T`` of ``z_j = (1, clip(W x_j))`` (the same map as the devices', ``W`` the public
   whitening) and solves ``G theta = m`` (:func:`estimators.psd.solve_psd`): ``theta = (b_ols, v_ols)``, the OLS of
   ``y`` on ``(1, W x)``, and ``w_ols = W^T v_ols`` the slope on the standardized ``x`` (the linear probability model
   for a binary label);
2. (:class:`InterceptSteinGLM`) for a link, finds ``c`` and the intercept ``b`` with ``c E_pub[slope(b + c t)] = 1``
   and ``E_pub[mean(b + c t)] = E[y]``, ``t = <x_j, w_ols>`` over the public rows
   (:func:`estimators.local.glm.scale.solve_scale_and_offset`, where Stein's lemma with an intercept is derived), and
   returns ``w = c w_ols`` with intercept ``b``: the model's mean prediction over the public rows equals the
   estimated label mean (calibration in the large), which Algs. 1-4 (no intercept) cannot give.

Step 2 reads no private data: every link comes from one collection (Remark 16). ``influence_`` of the OLS: the public
Gram is a fixed matrix, so one more accepted report moves ``theta`` by at most ``||G^+||`` times its move of the mean
(:func:`estimators.local.influence.linear_solve_shift` with no matrix shift), and ``(b, W^T v)`` by at most
``max(1, ||W||)`` times that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimators.base import EstimatorError, LinearRegressor, check_positive, feature_names_for
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.link_models import link_model
from estimators.local.glm.links import Link, get_link
from estimators.local.glm.scale import MIN_EFFECTIVE_ROWS, IndexSample, solve_scale_and_offset
from estimators.local.influence import Influence, linear_solve_shift, mean_shift
from estimators.local.sparse.iht import project_to_ball
from estimators.psd import solve_psd
from workloads.local.protocols import SteinGlmSpec


def _public_matrix(public_rows: object, dimension: int) -> np.ndarray:
    rows = np.asarray(public_rows, dtype=float) if public_rows is not None else np.empty((0, dimension))
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != dimension or not np.all(np.isfinite(rows)):
        raise EstimatorError(f"public_rows must be a non-empty finite (m, {dimension}) matrix (the public-gram "
                             f"variant takes X^T X from them), got shape {rows.shape}")
    return rows


class PublicGramOLS(LinearRegressor):
    """``(b_ols, w_ols)`` from an aggregate of public-gram reports and the public rows (module docstring, step 1).

    Fitted: ``coef_`` (``w_ols``), ``intercept_`` (``b_ols``), ``mean_label_`` (the estimate of ``E[clip(y)]``,
    entry 0 of ``moment_``), ``moment_`` (the projected mean report), ``covariance_`` (the public Gram of
    ``(1, clip(x))``), ``n_reports_``, ``n_public_``, ``influence_``."""

    def __init__(self, rcond: float = 1e-10, feature_names: Sequence[str] | None = None) -> None:
        self.rcond = rcond
        self.feature_names = feature_names

    def fit(self, aggregate: ReportAggregate, spec: SteinGlmSpec, public_rows: object) -> PublicGramOLS:
        if not isinstance(spec, SteinGlmSpec) or spec.variant != "public-gram":
            raise EstimatorError(f"spec must be a public-gram stein-glm spec, got {spec!r}")
        if not isinstance(aggregate, ReportAggregate):
            raise EstimatorError(f"aggregate must hold round 0 of a {spec.protocol!r} campaign, got {aggregate!r}")
        n = aggregate.round0_count(spec.protocol)
        rows = _public_matrix(public_rows, spec.dimension)
        features = spec.device_features(rows)
        self.covariance_ = features.T @ features / rows.shape[0]
        raw_moment = np.asarray(aggregate.sums["xy"], dtype=float) / n
        self.moment_ = project_to_ball(raw_moment, spec.report_radius)
        self.mean_label_ = float(self.moment_[0]) + spec.label_center
        self.n_reports_, self.n_public_ = n, rows.shape[0]
        rcond = check_positive("rcond", self.rcond)
        theta = solve_psd(self.covariance_, self.moment_, rcond=rcond)
        theta[0] += spec.label_center  # the OLS of y - y0 on (1, x) has the intercept of y's, less y0
        whitening = spec.whitening_matrix
        theta[1:] = whitening.T @ theta[1:]  # <W x, v> = <x, W^T v>: the coefficients of the standardized x
        self._store(theta, feature_names_for(self.feature_names, spec.dimension), intercept=True)
        field = aggregate.schema.fields[0]
        bound = linear_solve_shift(self.covariance_, theta, mean_shift(field, raw_moment, n), 0.0, rcond)
        if bound is not None:
            bound *= max(1.0, float(np.linalg.norm(whitening, 2)))
        self.influence_ = Influence(bound, "l2", "coefficients",
                                    "X^T X from the public rows: one report moves the mean report by at most its "
                                    "validated range's farthest point / (n + 1), and (b, w) = G^+ m by that times "
                                    "||G^+|| (intercept included)")
        return self


class InterceptSteinGLM:
    """The link's constant ``c`` and intercept ``b``, the model ``b + <x, c w_ols>`` (module docstring, step 2).

    ``fit(ols, public_rows)``: ``scale_`` (``c``), ``intercept_`` (``b``), ``coef_`` and ``model_`` (a fitted
    :class:`~estimators.local.glm.link_models.LinkModel`). The label mean used is ``ols.mean_label_``, for a binary
    link first projected onto ``[1 / (2 n), 1 - 1 / (2 n)]`` (a probability, kept off 0 and 1 so that the intercept is
    finite). :class:`~estimators.local.glm.scale.NoRootError` when ``(c, b)`` does not exist on these data."""

    def __init__(self, link: str | Link = "logistic") -> None:
        self.link = link

    def fit(self, ols: PublicGramOLS, public_rows: object) -> InterceptSteinGLM:
        if not isinstance(ols, PublicGramOLS) or not hasattr(ols, "coef_"):
            raise EstimatorError(f"ols must be a fitted PublicGramOLS, got {ols!r}")
        link = get_link(self.link)
        rows = _public_matrix(public_rows, ols.coef_.size)
        mean_label = ols.mean_label_
        if link.binary:
            floor = 0.5 / ols.n_reports_
            mean_label = min(max(mean_label, floor), 1.0 - floor)
        index = IndexSample(rows @ ols.coef_, np.full(rows.shape[0], 1.0 / rows.shape[0]), MIN_EFFECTIVE_ROWS)
        self.scale_, self.intercept_ = solve_scale_and_offset(link, index, mean_label)
        self.model_ = link_model(link, self.scale_ * ols.coef_, self.scale_, ols.feature_names_, self.intercept_)
        self.coef_ = self.model_.coef_
        self.mean_label_ = mean_label
        return self


#: eigenvalues of the public correlation matrix below this fraction of the largest count as 0 in the whitening
WHITENING_RCOND = 1e-8


def public_whitening(public_rows: object) -> np.ndarray:
    """``W = Sigma_pub^{-1/2}`` (symmetric, "ZCA"), ``Sigma_pub`` the public rows' covariance (of the standardized
    features: their correlation matrix); directions with eigenvalue below :data:`WHITENING_RCOND` times the largest
    are dropped (``W`` maps them to 0). Public information only. In ``W x`` coordinates the public Gram is the
    identity, so the noise of the reports is not amplified by a badly conditioned ``X^T X``."""
    rows = np.asarray(public_rows, dtype=float)
    if rows.ndim != 2 or rows.shape[0] < 2 or not np.all(np.isfinite(rows)):
        raise EstimatorError(f"public_rows must be a finite matrix with at least 2 rows, got shape {rows.shape}")
    values, vectors = np.linalg.eigh(np.cov(rows, rowvar=False, bias=True).reshape(rows.shape[1], rows.shape[1]))
    kept = values > WHITENING_RCOND * max(float(values.max()), 0.0)
    inverse_root = np.where(kept, 1.0 / np.sqrt(np.where(kept, values, 1.0)), 0.0)
    return (vectors * inverse_root) @ vectors.T


def quantile_norm_bound(public_rows: object, quantile: float, whitening: object = None) -> float:
    """The ``quantile`` of ``||W x_j||_2`` over the public rows (``W``: ``whitening``, or the identity)."""
    rows = np.asarray(public_rows, dtype=float)
    if rows.ndim != 2 or rows.shape[0] == 0 or not np.all(np.isfinite(rows)):
        raise EstimatorError(f"public_rows must be a non-empty finite matrix, got shape {rows.shape}")
    if not 0.0 < quantile <= 1.0:
        raise EstimatorError(f"quantile must be in (0, 1], got {quantile!r}")
    mapped = rows if whitening is None else rows @ np.asarray(whitening, dtype=float).T
    bound = float(np.quantile(np.linalg.norm(mapped, axis=1), quantile))
    if not bound > 0:
        raise EstimatorError(f"the {quantile:g} quantile of the public rows' norms is 0: raise the quantile or state "
                             "norm_bound")
    return bound
