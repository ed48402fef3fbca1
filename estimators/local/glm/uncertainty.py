"""Covariances of the Stein GLMs' coefficients from the stored aggregates (issue 20, section 3; the tools and their
assumptions: :mod:`estimators.local.uncertainty`). The delta method in closed form, but for a private ``X^T X``
(a parametric bootstrap); free.

* **OLS** (:func:`ols_covariance`). ``w = S^+ m`` with ``m`` the mean ``x y`` report and ``S`` the ``X^T X / n``
  used. A public ``S`` is fixed: ``Cov(w) = S^+ Cov(m) S^+`` (the delta method is exact here: linear). A private (or
  pooled) ``S`` carries noise too, and at the sizes local DP sees that noise is often comparable to ``S`` itself, so
  the first-order term ``S^+ E w`` misstates it (measured: 9x too large on a noise-dominated 2-round campaign, where
  the PSD projection keeps ``w`` bounded). So the whole solve is bootstrapped: the mean ``x y`` and the mean upper
  triangle drawn from their Gaussian laws (the stored squares give each entry's variance; entries independent, as the
  Gaussian noise is), projected and solved exactly as :class:`PrivateOLS` does.
* **A link over public rows** (:func:`link_covariance`). ``w = c(w_ols) w_ols`` with ``c`` the root of ``h(c, w) = c
  mean_j slope(c <x_j, w>) - 1``; by the implicit function theorem ``grad c = -(dh/dw) / (dh/dc)`` with ``dh/dc =
  mean slope(c t) + c mean slope'(c t) t`` and ``dh/dw = c^2 mean slope'(c t) x``, so the Jacobian is ``J = c I +
  w_ols grad c^T`` and ``Cov(w) = J Cov(w_ols) J^T``.
* **A link of the 2-round protocol** (:func:`two_round_link_covariance`). ``c`` solves ``c g(c s) = 1`` with
  ``g(u) = E slope(u Z)``, ``Z ~ N(0, 1)``, so ``dc/ds = -c^2 g'(u) / (g(u) + u g'(u))`` at ``u = c s`` (``g'(u) =
  E slope'(u Z) Z``, by Gauss-Hermite quadrature), ``s`` the method-of-moments root of ``q(s) = mean(z^2) - 2 beta^2``
  from round 1. ``Var(s) = Var(mean z^2) / q'(s)^2`` with ``q'(s) = 2 s ((2 Phi(a) - 1) - 2 a phi(a))``, ``a = b / s``,
  and ``Var(z^2) = E z^4 - (E z^2)^2`` from the randomizer's law: ``z = clip(t) + Lap(beta)``, ``E z^4 = E clip(t)^4 +
  12 beta^2 E clip(t)^2 + 24 beta^4``, ``E clip(sZ)^4 = s^4 (3 (2 Phi(a) - 1) - 2 phi(a) (a^3 + 3 a)) + 2 b^4 Phi(-a)``.
  Round 0 moves ``w_ols`` and with it the target ``s = sqrt(w^T Sigma w)``: ``J = c I + (dc/ds) w (Sigma w)^T / s``
  with ``Sigma`` round 0's PSD estimate; ``Cov(w) = J Cov(w_ols) J^T + w_ols w_ols^T (dc/ds)^2 Var(s)`` (round 1's
  noise is independent of round 0's).
* **The public-gram variant** (:func:`public_gram_covariance`; ``stein-glm``'s default). The OLS on the public Gram is
  linear in the mean report ``m`` (``(b, v) = G^+ m``, ``w = W^T v``, the label mean ``mu = m_0 + y0``), so ``Cov = L
  Cov(m) L^T`` exactly (the projection of ``m`` onto its ball left out: it binds only when the noise is far larger
  than ``m``). ``Cov(m)`` is the diagonal of the stored sums and squares (:func:`~estimators.local.uncertainty.
  mean_variance`), floored at the Gaussian randomizer's known noise variance; for the l2-ball and PrivUnit2
  randomizers, whose reports lie on a sphere, the cross terms left out are small (nearly isotropic output; the whitened
  features are uncorrelated). A link's ``(c, b)`` solve ``F_1 = c mean_j slope(b + c t_j) - 1 = 0`` and ``F_2 =
  mean_j mean(b + c t_j) - mu = 0`` with ``t_j = <x_j, w>`` (:func:`estimators.local.glm.scale.
  solve_scale_and_offset`); by the implicit function theorem ``d(c, b) = -(dF/d(c, b))^{-1} dF/d(w, mu)`` with
  ``dF_1/dc = mean s + c mean s' t``, ``dF_1/db = c mean s'``, ``dF_2/dc = mean s t``, ``dF_2/db = mean s``,
  ``dF_1/dw = c^2 mean s' x``, ``dF_2/dw = c mean s x``, ``dF_2/dmu = -1`` (``s``, ``s'`` the slope and its derivative
  at ``b + c t_j``), and the model ``(b, c w)`` has Jacobian ``d b`` and ``c I + w (dc)^T`` (plus ``w dc/dmu``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.links import get_link
from estimators.local.glm.public_gram import InterceptSteinGLM, PublicGramOLS
from estimators.local.glm.scale import IndexSample
from estimators.local.glm.stein import PrivateOLS, upper_triangle_to_matrix
from estimators.local.glm.two_round import TwoRoundSteinGLM
from estimators.local.influence import project_psd_trace
from estimators.local.sparse.iht import project_to_ball
from estimators.local.uncertainty import bootstrap_covariance, diagonal, linear_covariance, mean_variance
from estimators.psd import project_psd, solve_psd
from workloads.local.protocols import RoundState, SteinGlmSpec, TwoRoundSteinSpec

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def ols_covariance(ols: PrivateOLS, aggregate: ReportAggregate, norm_bound: float, label_bound: float) -> np.ndarray:
    """``Cov(w_ols)`` of a fitted :class:`PrivateOLS` from its round's aggregate (module docstring)."""
    moment = np.asarray(aggregate.mean("xy"), dtype=float)
    moment_variance = mean_variance(aggregate, "xy")
    if ols.covariance == "public":
        inverse = np.linalg.pinv(np.asarray(ols.covariance_, dtype=float), rcond=ols.rcond, hermitian=True)
        return linear_covariance(inverse, diagonal(moment_variance))
    p, n, m = moment.size, ols.n_reports_, ols.n_public_
    triangle = np.asarray(aggregate.mean("xx"), dtype=float)
    private = project_psd_trace(upper_triangle_to_matrix(triangle, p), norm_bound**2)
    public = np.asarray(ols.covariance_, dtype=float) * (n + m) - private * n  # the public rows' X^T X (0: none)

    def estimate(draw: np.ndarray) -> np.ndarray:
        noisy = project_psd_trace(upper_triangle_to_matrix(draw[p:], p), norm_bound**2)
        moment_draw = project_to_ball(draw[:p], norm_bound * label_bound)
        return solve_psd((noisy * n + public) / (n + m), moment_draw, rcond=ols.rcond)

    variance = np.concatenate([moment_variance, mean_variance(aggregate, "xx")])
    return bootstrap_covariance(estimate, np.concatenate([moment, triangle]), diagonal(variance))


def link_jacobian(link: str, coef: np.ndarray, scale: float, public_rows: np.ndarray) -> np.ndarray:
    """``d(c w) / d w`` at ``w = coef``, ``c = scale`` the link's constant over the public rows (module docstring)."""
    law = get_link(link)
    rows = np.asarray(public_rows, dtype=float)
    w = np.asarray(coef, dtype=float)
    t = rows @ w
    with np.errstate(over="ignore", invalid="ignore"):
        slope, curvature = law.slope(scale * t), law.slope_derivative(scale * t)
    by_c = float(np.mean(slope) + scale * np.mean(curvature * t))
    by_w = scale**2 * (curvature @ rows) / rows.shape[0]
    gradient = -by_w / by_c if by_c != 0.0 else np.zeros_like(w)
    return scale * np.eye(w.size) + np.outer(w, gradient)


def link_covariance(link: str, ols: PrivateOLS, scale: float, public_rows: np.ndarray,
                    ols_cov: np.ndarray) -> np.ndarray:
    """``Cov(c w_ols)`` for a link fitted over public rows, by the delta method."""
    return linear_covariance(link_jacobian(link, ols.coef_, scale, public_rows), ols_cov)


def _clip_moments(std: float, bound: float) -> tuple[float, float, float]:
    """``E clip(sZ)^2``, ``E clip(sZ)^4`` and ``d/ds E clip(sZ)^2`` for standard normal ``Z``."""
    a = bound / std
    inner = 2.0 * ndtr(a) - 1.0
    density = _INV_SQRT_2PI * math.exp(-0.5 * a * a)
    second = std**2 * (inner - 2.0 * a * density) + 2.0 * bound**2 * ndtr(-a)
    fourth = std**4 * (3.0 * inner - 2.0 * density * (a**3 + 3.0 * a)) + 2.0 * bound**4 * ndtr(-a)
    return second, fourth, 2.0 * std * (inner - 2.0 * a * density)


def two_round_link_covariance(glm: TwoRoundSteinGLM, spec: TwoRoundSteinSpec, state: RoundState,
                              first: ReportAggregate, second: ReportAggregate, ols_cov: np.ndarray) -> np.ndarray:
    """``Cov(c w_ols)`` for Alg. 5's link (module docstring)."""
    w = np.asarray(glm.ols_.coef_, dtype=float)
    c, s = float(glm.scale_), float(glm.projection_std_)
    if s <= 0.0:
        return c**2 * ols_cov
    law, standard = get_link(glm.link), IndexSample.gaussian(1.0)
    u = c * s
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(np.sum(standard.weights * law.slope(u * standard.values)))
        tilt = float(np.sum(standard.weights * law.slope_derivative(u * standard.values) * standard.values))
    by_c = mean + u * tilt
    by_s = -c * c * tilt / by_c if by_c != 0.0 else 0.0  # dc/ds
    sigma = project_psd(upper_triangle_to_matrix(first.sums["xx"], spec.dimension) / first.count)
    spread = float(w @ sigma @ w)
    jacobian = c * np.eye(w.size)
    if spread > 0.0:
        jacobian = jacobian + by_s * np.outer(w, sigma @ w) / math.sqrt(spread)
    covariance = linear_covariance(jacobian, ols_cov)
    bound, beta = state.number("bound"), spec.projection_laplace_scale(state)
    clip2, clip4, slope = _clip_moments(s, bound)
    variance_z2 = max(clip4 + 12.0 * beta**2 * clip2 + 24.0 * beta**4 - (clip2 + 2.0 * beta**2) ** 2, 0.0)
    variance_s = variance_z2 / second.count / slope**2 if slope > 0.0 else math.inf
    return covariance + np.outer(w, w) * by_s**2 * variance_s


def public_gram_mean_covariance(aggregate: ReportAggregate, spec: SteinGlmSpec) -> np.ndarray:
    """``Cov(m)`` of the public-gram mean report: the stored squares' per-entry variance over ``n``, floored at the
    Gaussian randomizer's known noise variance (module docstring)."""
    floor = spec.noise.xy_noise.variance if spec.randomizer == "gaussian" else 0.0
    return diagonal(mean_variance(aggregate, "xy", floor))


def public_gram_ols_jacobian(ols: PublicGramOLS, spec: SteinGlmSpec) -> np.ndarray:
    """``d(b, w, mu) / dm``, ``(p + 2) x (p + 1)``: the OLS's intercept and slope on the standardized features and the
    label mean, each linear in the mean report ``m`` (module docstring)."""
    inverse = np.linalg.pinv(np.asarray(ols.covariance_, dtype=float), rcond=ols.rcond, hermitian=True)
    to_features = np.eye(spec.dimension + 1)
    to_features[1:, 1:] = spec.whitening_matrix.T
    label = np.zeros((1, spec.dimension + 1))
    label[0, 0] = 1.0
    return np.vstack([to_features @ inverse, label])


def intercept_link_jacobian(glm: InterceptSteinGLM, ols: PublicGramOLS, public_rows: object) -> np.ndarray:
    """``d(b, c w) / d(b_ols, w_ols, mu)``, ``(p + 1) x (p + 2)``: the implicit-function derivative of the two
    equations of :func:`~estimators.local.glm.scale.solve_scale_and_offset` (module docstring)."""
    law = get_link(glm.link)
    rows = np.asarray(public_rows, dtype=float)
    w, c, b = np.asarray(ols.coef_, dtype=float), float(glm.scale_), float(glm.intercept_)
    t = rows @ w
    with np.errstate(over="ignore", invalid="ignore"):
        slope, curvature = law.slope(b + c * t), law.slope_derivative(b + c * t)
    count = rows.shape[0]
    by_unknowns = np.array([[np.mean(slope) + c * np.mean(curvature * t), c * np.mean(curvature)],
                            [np.mean(slope * t), np.mean(slope)]])
    by_w = np.vstack([c * c * (curvature @ rows) / count, c * (slope @ rows) / count])
    by_mu = np.array([0.0, 0.0 if glm.mean_label_ != ols.mean_label_ else -1.0])  # a clamped mean: no derivative
    solved = -np.linalg.pinv(by_unknowns) @ np.column_stack([by_w, by_mu])  # rows: dc, db over (w, mu)
    p = w.size
    jacobian = np.zeros((p + 1, p + 2))
    jacobian[0, 1:] = solved[1]
    jacobian[1:, 1:p + 1] = c * np.eye(p) + np.outer(w, solved[0, :p])
    jacobian[1:, p + 1] = w * solved[0, p]
    return jacobian


def public_gram_covariance(ols: PublicGramOLS, aggregate: ReportAggregate, spec: SteinGlmSpec,
                           glm: InterceptSteinGLM | None = None, public_rows: object = None) -> np.ndarray:
    """``Cov(b, w)`` (intercept first, standardized features) of the public-gram OLS, or of a link's model ``(b, c w)``
    when ``glm`` (fitted over ``public_rows``) is given (module docstring)."""
    jacobian = public_gram_ols_jacobian(ols, spec)
    if glm is None:
        jacobian = jacobian[:-1]
    else:
        jacobian = intercept_link_jacobian(glm, ols, public_rows) @ jacobian
    return linear_covariance(jacobian, public_gram_mean_covariance(aggregate, spec))
