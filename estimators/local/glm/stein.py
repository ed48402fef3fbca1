"""Stein-lemma GLMs from local reports: private OLS once, then one constant per link (Algs. 1-4, Remarks 11, 16).

Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in non-interactive local differential privacy with public
data" (ALT 2021, and its journal version). Each participant sent noisy ``(x x^T, x y)``
(:mod:`workloads.local.randomizers.sufficient_statistics`); the server

1. estimates ``w_ols = (X^T X)^{-1} X^T y`` from the sums of the reports (:class:`PrivateOLS`), optionally helped by
   public unlabeled rows (Remark 11, :data:`COVARIANCE_SOURCES`);
2. for each link, solves ``c (1/m) sum_j slope(c <x_j, w_ols>) = 1`` over the public rows
   (:func:`estimators.local.glm.scale.solve_link_scale`) and returns ``w = c w_ols`` (:class:`SteinGLM`).

Step 2 reads no private data, so one OLS answers every link for free (Remark 16; :func:`fit_glms`). Algs. 1 and 2 (GLM
with cumulant ``Phi``) and 3 and 4 (non-linear regression with link ``f``) differ only in the link
(:mod:`estimators.local.glm.links`) and in the bound the reports were clipped to (l2 for Gaussian features, l1 for
bounded sub-Gaussian ones), which the spec records.

Noisy ``X^T X`` may be indefinite; the solve projects it onto the PSD cone and takes the minimum-norm solution
(:func:`estimators.psd.solve_psd`; the paper inverts it and assumes ``n`` large enough).

*Feasible sets (issue 18 finding 6).* Every participant's clipped ``x`` has ``||x||_2 <= r`` (``norm_bound``; an l1
clip gives ``||x||_2 <= ||x||_1 <= r`` too) and ``|y| <= B``, so the mean of ``x y`` lies in the l2 ball of radius
``r B`` and the mean of ``x x^T`` in ``{S PSD, tr S <= r^2}`` (the convex hull of ``{x x^T : ||x|| <= r}``). The
private means are projected onto these sets before the solve (:mod:`estimators.local.influence`; a projection onto a
convex set holding the truth moves nothing farther from it). ``w_ols`` itself has no feasible set the public bounds
imply: ``Sigma^{-1} E[x y]`` is unbounded as ``Sigma`` nears singularity, and the bounds say nothing about
``lambda_min(Sigma)``; with a public ``X^T X`` (``covariance="public"``) it lies in ``Sigma_pub^{-1}`` of the ball.
``influence_`` bounds how far one more accepted report moves ``w_ols`` (l2), from the aggregate's schema
(:func:`estimators.local.influence.linear_solve_shift`): ``||Sigma^+|| sup||Delta m||`` with a public ``X^T X``;
``(sup||Delta m|| + sup||Delta S|| ||w||) / (lambda_min(S) - sup||Delta S||)`` when ``S`` comes from the reports,
``None`` (no finite bound) when that margin is not positive. Coefficients are on the
scale of the features as participants hold them: nothing is rescaled or centred (Stein's lemma assumes zero-mean
features; there is no intercept).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from estimators.base import EstimatorError, LinearRegressor, check_positive, check_probability, feature_names_for
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.link_models import LinkModel, link_model
from estimators.local.glm.links import Link, get_link
from estimators.local.glm.scale import IndexSample, solve_link_scale
from estimators.local.influence import Influence, linear_solve_shift, mean_shift, project_psd_trace
from estimators.local.sparse.iht import project_to_ball
from estimators.psd import solve_psd
from workloads.local.protocols import SteinGlmSpec, TwoRoundSteinSpec
from workloads.local.randomizers.sufficient_statistics import clip_features

#: Where ``X^T X`` comes from. "pooled": Remark 11 as printed, ``(sum_i noisy x_i x_i^T + sum_j x_j x_j^T) / (n + m)``;
#: "private": Alg. 1 as printed (Remark 11 off), ``sum_i noisy x_i x_i^T / n``; "public": the public rows alone,
#: ``sum_j x_j x_j^T / m`` (Remark 11's observation taken to its end: ``X^T X`` needs no labels). Public rows are
#: clipped to the campaign's ball like the participants' rows, so every source estimates the same matrix.
COVARIANCE_SOURCES = ("pooled", "private", "public")


def upper_triangle_to_matrix(values: object, dimension: int) -> np.ndarray:
    """The symmetric matrix whose upper triangle (``numpy.triu_indices`` order) is ``values``."""
    vector = np.asarray(values, dtype=float)
    size = dimension * (dimension + 1) // 2
    if vector.shape != (size,):
        raise EstimatorError(f"an upper triangle of a {dimension}x{dimension} matrix has {size} entries, "
                             f"got shape {vector.shape}")
    matrix = np.zeros((dimension, dimension))
    rows, cols = np.triu_indices(dimension)
    matrix[rows, cols] = vector
    matrix[cols, rows] = vector
    return matrix


def gaussian_norm_bound(public_rows: object, participants: int, failure_probability: float = 0.1) -> float:
    """Alg. 1's bound ``r = sqrt(5 ||Sigma_m||_2 p log(n / zeta))`` from the public rows' second-moment matrix.

    By Lemma 6 (Hsu, Kakade & Zhang 2012) a Gaussian ``x`` exceeds it with probability at most ``zeta / n``, so with
    probability ``1 - zeta`` no participant is clipped. Public information only: use it to set a spec's
    ``norm_bound`` before the campaign opens."""
    rows = np.asarray(public_rows, dtype=float)
    if rows.ndim != 2 or rows.shape[0] == 0 or not np.all(np.isfinite(rows)):
        raise EstimatorError(f"public_rows must be a non-empty finite matrix, got shape {rows.shape}")
    n = int(check_positive("participants", participants))
    zeta = check_probability("failure_probability", failure_probability)
    spectral = float(np.linalg.eigvalsh(rows.T @ rows / rows.shape[0])[-1])
    return math.sqrt(5.0 * spectral * rows.shape[1] * math.log(n / zeta))


def known_covariance_norm_bound(dimension: int, covariance_norm: float, participants: int) -> float:
    """Alg. 5's bound ``r = sqrt(10 p ||Sigma||_2 log n)`` when ``||Sigma||_2`` is known (no public rows)."""
    return math.sqrt(10.0 * check_positive("dimension", dimension) * check_positive("covariance_norm", covariance_norm)
                     * math.log(max(check_positive("participants", participants), 2.0)))


class PrivateOLS(LinearRegressor):
    """``w_ols`` from an aggregate of noisy ``(x x^T, x y)`` reports (the server's first step in Algs. 1-5).

    ``covariance`` picks the source of ``X^T X`` (:data:`COVARIANCE_SOURCES`; "pooled" is Remark 11, used in the
    paper's experiments; "private" turns it off). ``X^T y`` always comes from the reports: ``sum_i noisy x_i y_i / n``.
    Fitted: ``coef_`` (``w_ols``), ``intercept_ = 0``, ``covariance_`` (the ``X^T X / n`` estimate used: its private
    part projected onto ``{S PSD, tr S <= r^2}``), ``moment_`` (``X^T y / n`` projected onto the ball of radius
    ``r B``), ``n_reports_``, ``n_public_``, ``influence_`` (module docstring).
    """

    def __init__(self, covariance: str = "pooled", rcond: float = 1e-10,
                 feature_names: Sequence[str] | None = None) -> None:
        self.covariance = covariance
        self.rcond = rcond
        self.feature_names = feature_names

    def fit(self, aggregate: ReportAggregate, spec: SteinGlmSpec | TwoRoundSteinSpec,
            public_rows: object = None) -> PrivateOLS:
        if self.covariance not in COVARIANCE_SOURCES:
            raise EstimatorError(f"covariance must be one of {COVARIANCE_SOURCES}, got {self.covariance!r}")
        if not isinstance(spec, SteinGlmSpec | TwoRoundSteinSpec):
            raise EstimatorError(f"spec must be a Stein GLM spec, got {type(spec).__name__}")
        if not isinstance(aggregate, ReportAggregate) or (aggregate.round_index, aggregate.protocol) != (
            0, spec.protocol
        ):
            raise EstimatorError(f"aggregate must hold round 0 of a {spec.protocol!r} campaign, got {aggregate!r}")
        p = spec.dimension
        n = aggregate.count
        if n == 0:
            raise EstimatorError("the aggregate holds no reports yet")
        if "xx" not in aggregate.sums and self.covariance != "public":
            raise EstimatorError(f"the reports carry no x x^T (a gram=False campaign): covariance must be 'public', "
                                 f"got {self.covariance!r}")
        radius = spec.norm_bound
        private_xx = None
        if "xx" in aggregate.sums and self.covariance != "public":
            raw = upper_triangle_to_matrix(aggregate.sums["xx"], p) / n
            private_xx = project_psd_trace(raw, radius**2) * n
        public_xx, m = self._public_second_moments(spec, public_rows)
        sources = {
            "private": lambda: private_xx / n,
            "pooled": lambda: (private_xx + public_xx) / (n + m),
            "public": lambda: public_xx / m,
        }
        self.covariance_ = sources[self.covariance]()
        raw_moment = aggregate.sums["xy"] / n
        self.moment_ = project_to_ball(raw_moment, radius * spec.label_bound)
        self.n_reports_, self.n_public_ = n, m
        rcond = check_positive("rcond", self.rcond)
        coef = solve_psd(self.covariance_, self.moment_, rcond=rcond)
        self._store(coef, feature_names_for(self.feature_names, p), intercept=False)
        self.influence_ = self._influence(aggregate, raw_moment, rcond)
        return self

    def _influence(self, aggregate: ReportAggregate, raw_moment: np.ndarray, rcond: float) -> Influence:
        """One more accepted report's largest move of ``coef_`` (module docstring)."""
        fields = {f.name: f for f in aggregate.schema.fields}
        n, m = self.n_reports_, self.n_public_
        moment_shift = mean_shift(fields["xy"], raw_moment, n)
        matrix_shift = 0.0
        if self.covariance != "public":
            # the report's upper triangle moves the private mean by (R - S) / (n + 1); each off-diagonal entry
            # counts twice in the Frobenius norm, so the bound uses the triangle's deviation times sqrt(2)
            private_mean = upper_triangle_to_matrix(aggregate.sums["xx"], self.covariance_.shape[0]) / n
            rows, cols = np.triu_indices(private_mean.shape[0])
            matrix_shift = math.sqrt(2.0) * mean_shift(fields["xx"], private_mean[rows, cols], n)
            if self.covariance == "pooled":
                matrix_shift *= n / (n + m)
        bound = linear_solve_shift(self.covariance_, self.coef_, moment_shift, matrix_shift, rcond)
        basis = ("X^T X from the public rows: one report moves the mean x y by at most its validated range's farthest "
                 "point / (n + 1), and w_ols = Sigma^+ m by that times ||Sigma^+||") if matrix_shift == 0.0 else (
                 "(sup ||Delta m|| + sup ||Delta S|| ||w||) / (lambda_min(S) - sup ||Delta S||), each sup over the "
                 "validated report ranges (Weyl's inequality)")
        if bound is None:
            basis = ("no finite bound: the estimated X^T X is within one report's change of singular, so one report "
                     "can move w_ols arbitrarily far; " + basis)
        return Influence(bound, "l2", "coefficients", basis)

    def _public_second_moments(self, spec: SteinGlmSpec | TwoRoundSteinSpec,
                               public_rows: object) -> tuple[np.ndarray, int]:
        if self.covariance == "private":
            return np.zeros((spec.dimension, spec.dimension)), 0
        if public_rows is None:
            raise EstimatorError(f"covariance={self.covariance!r} needs public_rows (or use covariance='private')")
        rows = np.asarray(public_rows, dtype=float)
        if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != spec.dimension or not np.all(np.isfinite(rows)):
            raise EstimatorError(f"public_rows must be a non-empty finite (m, {spec.dimension}) matrix, "
                                 f"got shape {rows.shape}")
        clipped = clip_features(rows, spec.norm_bound, spec.norm)
        return clipped.T @ clipped, rows.shape[0]


def _check_ols(ols: object) -> PrivateOLS:
    if not isinstance(ols, PrivateOLS) or not hasattr(ols, "coef_"):
        raise EstimatorError(f"ols must be a fitted PrivateOLS, got {ols!r}")
    return ols


def _index(ols: PrivateOLS, public_rows: object) -> IndexSample:
    if isinstance(public_rows, IndexSample):
        return public_rows
    if public_rows is None:
        raise EstimatorError("public_rows are needed to find the link's constant (or pass an IndexSample)")
    return IndexSample.from_rows(public_rows, ols.coef_)


class SteinGLM:
    """The constant ``c`` of one link and the model ``w = c w_ols`` (Algs. 1-4, last step).

    ``fit(ols, public_rows)`` takes a fitted :class:`PrivateOLS` and the public rows (or any
    :class:`~estimators.local.glm.scale.IndexSample`); it sets ``scale_`` (``c``) and ``model_``, a fitted
    :class:`~estimators.local.glm.link_models.LinkModel` (``coef_``, ``predict``, ``predict_proba`` for binary
    links), and mirrors ``coef_`` and ``intercept_``. :class:`~estimators.local.glm.scale.NoRootError` when ``c`` does
    not exist.
    """

    def __init__(self, link: str | Link = "logistic") -> None:
        self.link = link

    def fit(self, ols: PrivateOLS, public_rows: object) -> SteinGLM:
        ols = _check_ols(ols)
        link = get_link(self.link)
        self.scale_ = solve_link_scale(link, _index(ols, public_rows))
        self.model_ = link_model(link, self.scale_ * ols.coef_, self.scale_, ols.feature_names_)
        self.coef_, self.intercept_ = self.model_.coef_, self.model_.intercept_
        return self


def fit_glms(ols: PrivateOLS, links: Iterable[str | Link], public_rows: object) -> dict[str, LinkModel]:
    """Remark 16: one model per link from one private OLS, each costing one root-finding over the public rows.

    Raises :class:`~estimators.local.glm.scale.NoRootError` (naming the link) for a link with no constant on these
    data."""
    ols = _check_ols(ols)
    index = _index(ols, public_rows)
    return {get_link(link).name: SteinGLM(link).fit(ols, index).model_ for link in links}
