"""The 2-round Stein GLM protocol without public data (journal version, App. E, Alg. 5; ALT 2021, Remark 10).

Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in non-interactive local differential privacy with public
data". Round 0 collects noisy ``(x x^T, x y)`` and gives ``w_ols`` (:class:`~estimators.local.glm.stein.PrivateOLS` with
``covariance="private"``: there are no public rows); round 1 collects noisy projections ``<x, w_ols>``, and the server
finds the link's constant from them instead of from public rows.

**Departure (the server's use of round 1).** Alg. 5 plugs each noisy projection ``z_i`` into the scale equation,
``1 = c (1/n) sum_i Phi''(c z_i)``. With noise of standard deviation comparable to the projection itself this solves
a different equation (``Phi''`` averaged over the *noisy* values) and does not converge to ``c_Phi`` as ``n`` grows, and
it needs every report. Alg. 5 already assumes Gaussian ``x``, under which ``t = <x, w_ols>`` is ``N(0, s^2)`` with
``s^2 = w_ols^T Sigma w_ols``, and ``E[slope(c t)]`` depends on ``s`` alone. So we estimate ``s`` by the method of
moments from running sums: with ``z_i = clip(t_i, -b, b) + Lap(beta)``,
``E[z^2] = q(s) + 2 beta^2``, ``q(s) = E[clip(s Z, -b, b)^2] = s^2 ((2 Phi(a) - 1) - 2 a phi(a)) + 2 b^2 (1 - Phi(a))``,
``a = b / s`` (our derivation; ``q`` increases from 0 to ``b^2``), solve ``q(s) = mean(z^2) - 2 beta^2``, then solve
the scale equation for ``t ~ N(0, s^2)`` by Gauss-Hermite quadrature. This is consistent (the clipping is undone
exactly under the Gaussian model), and needs only the count and the sum of squares.

The clip bound ``b`` published with ``w_ols`` is ``projection_scale`` times round 0's own estimate of ``s``,
``sqrt(w_ols^T Sigma_hat w_ols)`` with ``Sigma_hat`` the PSD projection of the noisy ``X^T X / n``, capped by the
largest possible ``|<x, w_ols>|`` over the ball (``r ||w||_2`` for l2, ``r ||w||_inf`` for l1); the paper projects
onto the label range ``[0, 1]``, which does not contain the negative half of a zero-mean projection.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.links import Link
from estimators.local.glm.scale import IndexSample
from estimators.local.glm.stein import PrivateOLS, SteinGLM, upper_triangle_to_matrix
from estimators.psd import project_psd
from workloads.local.protocols import RoundState, TwoRoundSteinSpec

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def _check(spec: object, aggregate: object, round_index: int) -> tuple[TwoRoundSteinSpec, ReportAggregate]:
    if not isinstance(spec, TwoRoundSteinSpec):
        raise EstimatorError(f"spec must be a TwoRoundSteinSpec, got {type(spec).__name__}")
    if not isinstance(aggregate, ReportAggregate) or aggregate.protocol != spec.protocol or (
        aggregate.round_index != round_index
    ):
        raise EstimatorError(f"expected the aggregate of round {round_index} of a {spec.protocol!r} campaign, "
                             f"got {aggregate!r}")
    if aggregate.count == 0:
        raise EstimatorError(f"round {round_index} holds no reports yet")
    return spec, aggregate


def first_round_ols(spec: TwoRoundSteinSpec, first: ReportAggregate,
                    feature_names: Sequence[str] | None = None) -> PrivateOLS:
    """``w_ols`` from round 0 alone (no public rows)."""
    spec, first = _check(spec, first, 0)
    return PrivateOLS(covariance="private", feature_names=feature_names).fit(first, spec)


def next_state(spec: TwoRoundSteinSpec, completed_round: int, aggregates: Sequence[ReportAggregate]) -> RoundState:
    """Round 1's public state from round 0's aggregate: ``coef`` (``w_ols``) and the clip ``bound``."""
    if completed_round != 0:
        raise EstimatorError(f"{spec.protocol!r} has rounds 0 and 1; there is no round after round {completed_round}")
    spec, first = _check(spec, aggregates[0], 0)
    ols = first_round_ols(spec, first)
    coef = ols.coef_
    covariance = project_psd(upper_triangle_to_matrix(first.sums["xx"], spec.dimension) / first.count)
    spread = float(np.sqrt(max(coef @ covariance @ coef, 0.0)))
    largest = spec.norm_bound * float(np.linalg.norm(coef, ord=2 if spec.norm == "l2" else np.inf))
    bound = min(spec.projection_scale * spread, largest)
    if not bound > 0:
        raise EstimatorError("round 0 gave w_ols = 0 (or a zero spread of <x, w_ols>): there is nothing to project")
    return spec.projection_state(coef, bound)


def clipped_second_moment(std: float, bound: float) -> float:
    """``E[clip(std Z, -bound, bound)^2]`` for standard normal ``Z``."""
    if std <= 0:
        return 0.0
    a = bound / std
    inside = (2.0 * ndtr(a) - 1.0) - 2.0 * a * _INV_SQRT_2PI * np.exp(-0.5 * a * a)
    return float(std**2 * inside + 2.0 * bound**2 * ndtr(-a))


def projection_std(spec: TwoRoundSteinSpec, state: RoundState, second: ReportAggregate) -> float:
    """The method-of-moments estimate of ``s``, the standard deviation of ``<x, w_ols>`` (see the module docstring)."""
    spec, second = _check(spec, second, 1)
    bound = state.number("bound")
    beta = spec.projection_laplace_scale(state)
    target = float(second.second_moment("projection")) - 2.0 * beta**2
    if target <= 0.0:
        return 0.0
    if target >= bound**2:
        raise EstimatorError(
            f"the round-1 projections saturate their clip bound {bound:.4g} (estimated E[clip(t)^2] = {target:.4g}): "
            f"s cannot be identified; raise projection_scale")
    upper = bound
    while clipped_second_moment(upper, bound) < target:
        upper *= 2.0
    return float(brentq(lambda s: clipped_second_moment(s, bound) - target, 0.0, upper, xtol=1e-14 * upper))


class TwoRoundSteinGLM:
    """Alg. 5's model for one link from the two rounds' aggregates (no public rows).

    ``fit(spec, state, first, second)``: ``state`` is round 1's public state (as published). Sets ``ols_`` (round 0's
    :class:`PrivateOLS`), ``projection_std_``, ``scale_``, ``model_``, ``coef_`` and ``intercept_``."""

    def __init__(self, link: str | Link = "logistic", feature_names: Sequence[str] | None = None) -> None:
        self.link = link
        self.feature_names = feature_names

    def fit(self, spec: TwoRoundSteinSpec, state: RoundState, first: ReportAggregate,
            second: ReportAggregate) -> TwoRoundSteinGLM:
        self.ols_ = first_round_ols(spec, first, self.feature_names)
        published = np.asarray(state.vector("coef", spec.dimension))
        if not np.allclose(published, self.ols_.coef_, rtol=1e-12, atol=0.0):
            raise EstimatorError("round 1's published coef is not the OLS estimate of this round-0 aggregate")
        self.projection_std_ = projection_std(spec, state, second)
        glm = SteinGLM(self.link).fit(self.ols_, IndexSample.gaussian(self.projection_std_))
        self.scale_, self.model_ = glm.scale_, glm.model_
        self.coef_, self.intercept_ = glm.coef_, glm.intercept_
        return self
