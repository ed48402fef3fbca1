"""``linear-ssp``: low-dimensional linear regression with an intercept from one report of sufficient statistics per
participant (local sufficient-statistics perturbation; docs/privacy.md 8.9 (g)).

Build: a target, ``p`` features; devices centre and scale the features with the campaign's public transform (the
``--public`` table's mean and standard deviation, or stated ``feature_bounds``), like the Stein GLMs. Options:
``norm_bound`` (``r``, the public l2 bound on the transformed features; default the largest norm of a transformed
public row, else ``sqrt(p)`` with stated ``feature_bounds``, which map every feature into ``[-1, 1]``), ``label_bound``
(``B``, default 1), ``randomizer`` (:data:`~workloads.local.randomizers.regression_statistics.STATISTICS_RANDOMIZERS`:
``l2ball``, the default, pure epsilon with delta 0; ``gaussian``, delta > 0), ``ridge`` (a public lambda >= 0;
default AdaSSP's rule, :mod:`estimators.local.linear_ssp`), ``participants``.

Estimate, model ``linear``: :class:`estimators.local.linear_ssp.SspLinearRegression` on round 0's aggregate, the
coefficients and their standard errors mapped back to the features' own units. Plan: the delta method's covariance
before any report (:func:`estimators.local.linear_ssp.linear_ssp_error_model`), over the public rows.

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import math

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.linear_ssp import SspLinearRegression, linear_ssp_error_model
from estimators.local.planning import ErrorModel
from service.campaigns.options import invalid
from service.campaigns.protocols.common import no_covariance, round0, transform_notes
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import InvalidInput
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.linear_ssp import LinearSspSpec


def _norm_bound(request: CampaignRequest) -> float:
    options = request.options
    stated = options["norm_bound"]
    if stated is not None:
        return stated  # type: ignore[return-value]
    if request.public_rows is not None:
        return float(np.linalg.norm(request.public_rows, axis=1).max())
    if options["feature_bounds"] is not None:
        return math.sqrt(len(request.features))
    raise invalid("linear-ssp needs option norm_bound (the public bound on ||x|| of the transformed features), or a "
                  "public table (parameter public) or option feature_bounds to take it from")


def build(request: CampaignRequest) -> ProtocolSpec:
    options = request.options
    return LinearSspSpec(dimension=len(request.features), norm_bound=_norm_bound(request),
                         label_bound=options["label_bound"], epsilon=request.epsilon, delta=request.delta,
                         randomizer=options["randomizer"], ridge=options["ridge"],
                         participants=options["participants"])


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    spec, aggregate = campaign.spec, round0(campaign, aggregates)
    fitted = SspLinearRegression(feature_names=campaign.features).fit(aggregate, spec)
    # the features' own units: raw_j = theta_j / scale_j, intercept = theta_0 - sum_j raw_j center_j (a linear map)
    scale = np.asarray(campaign.transform.scale, dtype=float)
    center = np.asarray(campaign.transform.center, dtype=float)
    to_raw = np.zeros((spec.dimension + 1, spec.dimension + 1))
    to_raw[0, 0] = 1.0
    to_raw[0, 1:] = -center / scale
    to_raw[1:, 1:] = np.diag(1.0 / scale)
    raw = to_raw @ np.r_[fitted.intercept_, fitted.coef_]
    names = (*campaign.features, "(intercept)")
    coefficients = {name: float(value) + 0.0 for name, value in zip(names, np.r_[raw[1:], raw[0]], strict=True)}
    errors = None
    if fitted.covariance_ is not None:
        spread = np.sqrt(np.clip(np.diag(to_raw @ fitted.covariance_ @ to_raw.T), 0.0, None))
        errors = {name: float(value) for name, value in zip(names, np.r_[spread[1:], spread[0]], strict=True)}
    smallest = float(np.abs(scale).min())
    influence = fitted.influence_.scaled(1.0 / smallest, float(np.linalg.norm(center)) + smallest)
    details = {"ridge": fitted.ridge_, "randomizer": spec.randomizer, "norm_bound": spec.norm_bound,
               "label_bound": spec.label_bound, "transform": campaign.transform.to_json()}
    notes = ("features scaled into the l2 ball of radius norm_bound and labels clipped to [-label_bound, "
             "label_bound] on the devices; standard errors by the delta method from the reports' variance",
             *transform_notes(campaign))
    return CampaignFit(campaign.name, campaign.protocol, model, "regressor", campaign.target, campaign.features,
                       coefficients, aggregate.count, details, notes, influence, standard_errors=errors)


def plan(spec: LinearSspSpec, rows: np.ndarray | None, labels: np.ndarray | None) -> ErrorModel:
    """:func:`estimators.local.linear_ssp.linear_ssp_error_model` over the public rows, whose ``X^T X`` the error
    depends on."""
    if rows is None:
        raise InvalidInput("planning a linear-ssp campaign needs a public table (parameter public): the error "
                           "depends on the features' X^T X, which the plan takes from its rows",
                           code="needs_public_table")
    return linear_ssp_error_model(spec, rows, labels)
