"""``glm``: the public-moment GLM (issue 20; docs/privacy.md 8.7.9), the recommended protocol for GLMs when a
public unlabeled table exists.

Build. A ``--public`` table is required: the service computes the device's public constants from it
(:func:`workloads.local.protocols.glm.public_feature_map`: the public mean and the inverse square root of the public
covariance, or with ``whiten=false`` the public standard deviations' inverse) and publishes them in the spec. By
default the map whitens when the public covariance is invertible and standardises otherwise (measured on
ACSemployment, 10 trials: whitening lifts the test AUC from 0.762 to 0.794 at epsilon 1 and from 0.812 to 0.833 at
epsilon 2; benchmarks/README.md); ``whiten=true`` insists (a singular covariance is refused). Options:
``randomizer`` (:data:`~workloads.local.protocols.glm.GLM_RANDOMIZERS`; ``privunit``, pure epsilon, the default;
``l2ball``; ``gaussian`` for an (epsilon, delta) campaign), ``labels`` (``binary``: ``y`` in {0, 1}, the default;
``bounded``: ``s(y) = clip(y, -B, B) / B`` with ``label_bound`` ``B``, default 1), ``whiten``, ``participants``.

Estimates: the models ``logistic``, ``probit``, ``linear`` and ``poisson``, each the root of its moment equation over
the public rows (:mod:`estimators.local.glm.moment`), all from the same stored reports, each free (Remark 16 of the
Stein GLM paper holds here too). Every fit carries an estimated ``(intercept)`` and ``standard_errors`` (delta method,
the randomizer's known covariance; same units as ``coefficients``).

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.moment import MOMENT_LINKS, PublicMomentGLM, moment_error_model
from estimators.local.influence import Influence, mean_shift
from estimators.local.planning import ErrorModel
from estimators.local.quality import check_predictions
from service.campaigns.options import invalid
from service.campaigns.protocols.common import no_covariance, round0, transform_notes
from service.campaigns.public_tables import campaign_public_labels, campaign_public_rows
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import Conflict, InvalidInput
from workloads.local.protocols import ProtocolError, ProtocolSpec
from workloads.local.protocols.glm import GlmSpec, public_feature_map


def build(request: CampaignRequest) -> ProtocolSpec:
    if request.public_rows is None:
        raise invalid("glm needs a public table (parameter public: unlabeled rows with the features): the devices' "
                      "public constants and the moment equation both come from it")
    options = request.options
    labels, label_bound = options["labels"], options["label_bound"]
    if labels == "binary" and label_bound is not None:
        raise invalid("option label_bound applies to labels=bounded (binary labels are 0 or 1)")
    center, matrix = _public_map(request, options["whiten"])  # type: ignore[arg-type]
    return GlmSpec(dimension=len(request.features), epsilon=request.epsilon, delta=request.delta,
                   center=tuple(center.tolist()), matrix=tuple(tuple(row) for row in matrix.tolist()),
                   labels=labels, label_bound=1.0 if label_bound is None else label_bound,
                   randomizer=options["randomizer"], participants=options["participants"])


def _public_map(request: CampaignRequest, whiten: bool | None) -> tuple[np.ndarray, np.ndarray]:
    """The devices' ``(mu, W)``: whitened unless ``whiten=false``; with no ``whiten`` option a singular public
    covariance falls back to the standardisation (an explicit ``whiten=true`` is refused instead)."""
    if whiten is None:
        try:
            return public_feature_map(request.public_rows, True, request.features)
        except ProtocolError:
            return public_feature_map(request.public_rows, False, request.features)
    return public_feature_map(request.public_rows, whiten, request.features)


def raw_units(campaign: CampaignInfo) -> np.ndarray:
    """The linear map from ``(w_0, w)`` in the devices' transformed units to ``(coefficients, intercept)`` in the
    features' own: ``w / scale`` and ``w_0 - <w / scale, center>`` (rows in that order)."""
    scale = np.asarray(campaign.transform.scale, dtype=float)
    center = np.asarray(campaign.transform.center, dtype=float)
    p = scale.size
    out = np.zeros((p + 1, p + 1))
    out[:p, 1:] = np.diag(1.0 / scale)
    out[p, 0] = 1.0
    out[p, 1:] = -center / scale
    return out


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    spec, aggregate = campaign.spec, round0(campaign, aggregates)
    public_rows = campaign_public_rows(engine, campaign)
    if public_rows is None:
        raise Conflict(f"campaign {campaign.name!r} has lost its public table: the moment equation needs it",
                       code="needs_public_table")
    glm = PublicMomentGLM(model).fit(aggregate, spec, public_rows)
    units = raw_units(campaign)
    raw = units @ glm.w_
    raw_covariance = units @ glm.covariance_ @ units.T
    names = (*campaign.features, "(intercept)")
    coefficients = {name: float(v) + 0.0 for name, v in zip(names, raw, strict=True)}
    errors = {name: float(v) for name, v in zip(names, np.sqrt(np.clip(np.diag(raw_covariance), 0.0, None)),
                                                strict=True)}
    # one more report moves T_hat by at most mean_shift (exact); w moves by about ||J^-1|| times that (first order)
    shift = mean_shift(spec.report_field(), glm.target_, aggregate.count)
    details = {"randomizer": spec.randomizer, "labels": spec.labels, "public_rows": int(public_rows.shape[0]),
               "target_moment": glm.target_.tolist(), "transform": campaign.transform.to_json(),
               "report_shift": shift, "moment_projection": glm.projection_}
    notes = transform_notes(campaign)
    if glm.projection_ > 0:
        notes = (f"the estimated moment lay outside the moments the {model} link can produce over the public rows "
                 f"(the reports' noise); it was projected onto them (distance {glm.projection_:.3g}): the estimate is "
                 "noise-dominated in some direction", *notes)
    influence = Influence(None, "l2", "coefficients",
                          "no bound derived: the moment equation's root moves with the reports non-linearly; one "
                          "report moves the mean report by at most details.report_shift, and the root by about "
                          "||J^-1|| times that (first order)")
    kind = "classifier" if MOMENT_LINKS[model].binary else "regressor"
    predictions = check_predictions(public_rows, glm.coef_, glm.covariance_[1:, 1:],
                                    campaign_public_labels(engine, campaign), glm.dependence_)
    return CampaignFit(campaign.name, campaign.protocol, model, kind, campaign.target, campaign.features,
                       coefficients, aggregate.count, details, notes, influence, errors, predictions=predictions)


def plan(spec: GlmSpec, rows: np.ndarray | None, labels: np.ndarray | None) -> ErrorModel:
    """:func:`estimators.local.glm.moment.moment_error_model` over the public rows the moment equation needs."""
    if rows is None:
        raise InvalidInput("planning a glm campaign needs its public table (parameter public): the moment equation "
                           "is solved over it", code="needs_public_table")
    return moment_error_model(spec, rows, labels)
