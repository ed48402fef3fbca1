"""Estimates of the sparse-regression campaigns (Wang & Xu, ICML 2019), from the rounds' running aggregates.

Registered with :func:`service.collections.estimates.register_estimates` (imported at the end of that module):

* ``ldp-iht``, model ``iht`` (Alg. 1): the IHT step from the last round with reports, taken at that round's
  published ``theta`` with the mean of its gradient reports (``estimators.local.sparse.ldp_iht_rounds``). A campaign
  still running gives the estimate after the rounds done so far (``details.rounds_used``);
* ``label-ldp``, models ``iht`` (Alg. 2) and ``lasso`` (Sec. 5), both from the SAME reports, each free:
  ``G = X^T X / n`` from the public table's rows (transformed as the devices transform them) and
  ``b = (sum of the reports x_i tilde y_i) / (number of reports)``.

A cvxpy failure of the Lasso is an error with code ``solver_failed`` naming each solver's status, never a model.
Coefficients are on the features' own scale (the campaign's public transform undone), as for every campaign model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse.iht import label_iht_from_moments
from estimators.local.sparse.ldp_iht_rounds import campaign_estimate
from service.collections.campaigns import CampaignInfo
from service.collections.estimates import (
    CampaignFit,
    Estimates,
    _public_rows,
    _raw_scale,
    _round0,
    register_estimates,
)
from service.errors import Conflict, ServiceError


def _sparse_fit(campaign: CampaignInfo, model: str, coef: np.ndarray, reports: int, details: dict[str, Any],
                notes: tuple[str, ...]) -> CampaignFit:
    # the support: entries above 1e-6 of the largest (IHT's are exact zeros; an interior-point Lasso leaves ~1e-8)
    floor = 1e-6 * float(np.max(np.abs(coef), initial=0.0))
    support = [name for name, value in zip(campaign.features, coef, strict=True) if abs(value) > floor]
    out_notes = list(notes)
    if campaign.transform.source != "identity":
        out_notes.append(f"features were centred and scaled on the devices ({campaign.transform.source}); the "
                         "coefficients here are on the features' own scale")
    return CampaignFit(campaign.name, campaign.protocol, model, "regressor", campaign.target, campaign.features,
                       _raw_scale(campaign, coef), reports,
                       {**details, "support": support, "transform": campaign.transform.to_json()}, tuple(out_notes))


def _ldp_iht(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
             covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    _round0(campaign, aggregates)
    states = [None if r.state is None else campaign.round_state(r.index) for r in campaign.rounds]
    coef, used = campaign_estimate(spec, states, aggregates)
    reports = sum(a.count for a in aggregates[:used] if a is not None)
    notes = () if used == spec.steps else (f"the estimate after {used} of the {spec.steps} rounds",)
    return _sparse_fit(campaign, model, coef, reports,
                       {"rounds_used": used, "rounds": spec.steps, "sparsity": spec.sparsity, "eta": spec.eta},
                       notes)


def _label_ldp(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
               covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    aggregate = _round0(campaign, aggregates)
    public = _public_rows(engine, campaign)
    if public is None:  # the builder refuses a label-ldp campaign without one; a deleted table lands here
        raise Conflict(f"campaign {campaign.name!r} has no public table to take X^T X from", code="needs_public_table")
    gram = public.T @ public / public.shape[0]
    moment = aggregate.mean("xy")
    details: dict[str, Any] = {"public_rows": int(public.shape[0]), "label_noise_std": spec.label_noise}
    if model == "iht":
        run = label_iht_from_moments(gram, moment, spec.sparsity, spec.iterations, spec.eta, spec.radius)
        details.update({"iterations": spec.iterations, "sparsity": spec.sparsity, "eta": spec.eta})
        return _sparse_fit(campaign, model, run.theta, aggregate.count, details, ())
    from estimators.local.sparse.convex import ConvexSolverError  # cvxpy loads in seconds: only when needed
    from estimators.local.sparse.lasso import default_lasso_penalty, lasso_from_moments

    penalty = spec.alpha if spec.alpha is not None else default_lasso_penalty(spec.label_noise, aggregate.count,
                                                                              spec.dimension)
    try:
        coef = lasso_from_moments(gram, moment, penalty, f"label-private Lasso of campaign {campaign.name!r}")
    except ConvexSolverError as error:
        raise ServiceError(str(error), code="solver_failed", status=422) from None
    details["alpha"] = penalty
    return _sparse_fit(campaign, model, coef, aggregate.count, details, ())


register_estimates("ldp-iht", Estimates(("iht",), _ldp_iht))
register_estimates("label-ldp", Estimates(("iht", "lasso"), _label_ldp))
