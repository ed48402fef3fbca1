"""``bernstein`` and ``bernstein-1bit``: the Local Bernstein Mechanism and its 1-bit variant (Wang, Gaboardi & Xu,
NeurIPS 2018, Algs. 2 and 3; docs/privacy.md 8.9), squared loss, ``p <= 3``.

Build: options ``degree`` (k, default 6), ``order`` (the iterated Bernstein order h, default 2), ``lower``/``upper``
(the parameter box, default [-1, 1]), ``loss_scale`` (default the largest squared residual over the box, from
``feature_bound`` and ``label_bound``, default 1), ``participants``. Pure epsilon (delta must be 0); the features
stay in their own units.

Estimate, model ``linear``: for ``bernstein`` the mean report is the risk at every grid point; for
``bernstein-1bit`` per grid point ``2 sum(b y) / count`` from the two running sums (a grid point no participant drew
is an error naming it); then the iterated Bernstein polynomial of it is minimised over the box
(:class:`estimators.local.sparse.bernstein.LocalBernsteinLinearRegression`).

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import math

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse.uncertainty import bernstein_covariance, one_bit_grid_variance
from estimators.local.uncertainty import mean_variance
from service.campaigns.options import invalid
from service.campaigns.protocols.common import diameter, no_covariance, refuse_given, round0, sparse_fit
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import Conflict
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.bernstein import BernsteinSpec, OneBitBernsteinSpec, default_loss_scale

#: what only the default loss_scale is computed from (refused beside a stated loss_scale)
_LOSS_SCALE_FROM = ("feature_bound", "label_bound")


def _settings(request: CampaignRequest, protocol: str) -> dict[str, object]:
    p = len(request.features)
    if p > 3:
        raise invalid(f"dimension mismatch: {protocol} is for p <= 3 (a grid of (k + 1)^p losses), got {p} features "
                      f"{list(request.features)}")
    options = request.options
    lower, upper = options["lower"], options["upper"]
    if not lower < upper:
        raise invalid(f"option lower must be below upper, got lower={lower}, upper={upper}")
    scale = options["loss_scale"]
    if scale is None:
        scale = default_loss_scale(p, lower, upper, options["feature_bound"], options["label_bound"])
    else:
        refuse_given(options, _LOSS_SCALE_FROM, "sets the default loss_scale only: give it or loss_scale, not both")
    return {"dimension": p, "degree": options["degree"], "order": options["order"], "lower": lower, "upper": upper,
            "loss_scale": scale, "epsilon": request.epsilon, "participants": options["participants"]}


def build_laplace(request: CampaignRequest) -> ProtocolSpec:
    return BernsteinSpec(**_settings(request, "bernstein"))


def build_one_bit(request: CampaignRequest) -> ProtocolSpec:
    return OneBitBernsteinSpec(**_settings(request, "bernstein-1bit"))


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    from estimators.local.sparse.bernstein import LocalBernsteinLinearRegression

    spec = campaign.spec
    aggregate = round0(campaign, aggregates)
    if spec.protocol == "bernstein":
        grid_values = aggregate.mean("losses")
    else:
        counts = aggregate.sums["count"]
        if np.any(counts == 0):
            raise Conflict(f"campaign {campaign.name!r}: grid point(s) {np.flatnonzero(counts == 0)[:5].tolist()} "
                           "have no report yet (Alg. 3 needs every grid point)", code="round_pending")
        grid_values = 2.0 * aggregate.sums["weighted"] / counts
    estimator = LocalBernsteinLinearRegression(spec.degree, spec.dimension, spec.order, spec.lower, spec.upper)
    estimator.fit(grid_values[np.newaxis, :])  # one row: the estimated risk at every grid point
    details = {"grid_points": spec.grid_size, "degree": spec.degree, "order": spec.order,
               "box": [spec.lower, spec.upper], "risk_at_minimum": float(estimator.surface_(
                   ((estimator.coef_ - spec.lower) / (spec.upper - spec.lower))[np.newaxis, :])[0]) * spec.loss_scale}
    box = math.sqrt(spec.dimension) * (spec.upper - spec.lower)
    return sparse_fit(campaign, model, estimator.coef_, aggregate.count, details, (),
                      diameter(box, f"the box [{spec.lower:g}, {spec.upper:g}]^{spec.dimension} (the polynomial's "
                               "minimiser is searched over it)"),
                      _covariance(spec, aggregate, grid_values))


def _covariance(spec: ProtocolSpec, aggregate: ReportAggregate, grid_values: np.ndarray) -> np.ndarray:
    """The minimiser's covariance by a parametric bootstrap over the grid values (:mod:`estimators.local.sparse.
    uncertainty`): Alg. 2's mean loss report per point, or Alg. 3's ``2 sum(b y) / count``."""
    from estimators.local.sparse.bernstein import LocalBernsteinLinearRegression

    variance = (mean_variance(aggregate, "losses") if spec.protocol == "bernstein"
                else one_bit_grid_variance(aggregate))

    def fit_grid(values: np.ndarray) -> np.ndarray:
        estimator = LocalBernsteinLinearRegression(spec.degree, spec.dimension, spec.order, spec.lower, spec.upper)
        return estimator.fit(values[np.newaxis, :]).coef_

    return bernstein_covariance(fit_grid, grid_values, variance)
