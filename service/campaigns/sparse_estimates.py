"""Estimates of the sparse and low-dimensional campaigns, from the rounds' running aggregates.

Registered with :func:`service.campaigns.estimates.register_estimates` (imported at the end of that module):

* ``ldp-iht``, model ``iht`` (Alg. 1): the IHT step from the last round with reports, taken at that round's
  published ``theta`` with the mean of its gradient reports (``estimators.local.sparse.ldp_iht_rounds``). A campaign
  still running gives the estimate after the rounds done so far (``details.rounds_used``);
* ``label-ldp``, models ``iht`` (Alg. 2) and ``lasso`` (Sec. 5), both from the SAME reports, each free:
  ``G = X^T X / n`` from the public table's rows (transformed as the devices transform them) and
  ``b = (sum of the reports x_i tilde y_i) / (number of reports)``;
* ``bernstein``, model ``linear`` (Wang, Gaboardi & Xu 2018, Alg. 2): the mean report is the risk at every grid
  point; the iterated Bernstein polynomial of it is minimised over the box (``estimators.local.sparse.bernstein``);
* ``bernstein-1bit``, model ``linear`` (Alg. 3): per grid point ``2 sum(b y) / count`` from the two running sums,
  then the same; a grid point no participant drew is an error naming it;
* ``dr-erm``, model ``linear`` (Alg. 4): the mean report gives the projected statistics; projected least squares
  over ``Phi C`` and the recovery in ``C`` with cvxpy (``estimators.local.sparse.dr_erm``).

A cvxpy failure (the Lasso, DR-ERM) is an error with code ``solver_failed`` naming each solver's status, never a model.
Coefficients are on the features' own scale (the campaign's public transform undone), as for every campaign model.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence, mean_shift
from estimators.local.sparse.iht import label_iht_from_moments
from estimators.local.sparse.ldp_iht_rounds import campaign_estimate
from service.campaigns.campaigns import CampaignInfo
from service.campaigns.estimates import (
    CampaignFit,
    Estimates,
    _public_rows,
    _raw_scale,
    _round0,
    register_estimates,
    transform_influence,
)
from service.errors import Conflict, InvalidInput, ServiceError


def _no_covariance(campaign: CampaignInfo, covariance: str | None) -> None:
    if covariance is not None:
        raise InvalidInput(f"covariance applies to the Stein GLM campaigns, not to campaign {campaign.name!r} "
                           f"({campaign.protocol})", code="invalid_parameter")


def _diameter(radius: float, what: str) -> Influence:
    """The bound of an estimate confined to a set of l2 diameter ``radius``: one report can move it across the set."""
    return Influence(radius, "l2", "coefficients", f"the estimate lies in {what}; no smaller bound is derived "
                     "(hard thresholding and a minimiser over the set are not Lipschitz in the reports)")


def _sparse_fit(campaign: CampaignInfo, model: str, coef: np.ndarray, reports: int, details: dict[str, Any],
                notes: tuple[str, ...], influence: Influence) -> CampaignFit:
    # the support: entries above 1e-6 of the largest (IHT's are exact zeros; an interior-point Lasso leaves ~1e-8)
    floor = 1e-6 * float(np.max(np.abs(coef), initial=0.0))
    support = [name for name, value in zip(campaign.features, coef, strict=True) if abs(value) > floor]
    out_notes = list(notes)
    if campaign.transform.source != "identity":
        out_notes.append(f"features were centred and scaled on the devices ({campaign.transform.source}); the "
                         "coefficients here are on the features' own scale")
    return CampaignFit(campaign.name, campaign.protocol, model, "regressor", campaign.target, campaign.features,
                       _raw_scale(campaign, coef), reports,
                       {**details, "support": support, "transform": campaign.transform.to_json()}, tuple(out_notes),
                       influence if influence.per_report is None else transform_influence(campaign, influence))


def _solved(solve: Any, what: str) -> Any:
    """``solve()``, a cvxpy failure becoming the error ``solver_failed`` that names each solver's status."""
    from estimators.local.sparse.convex import ConvexSolverError  # cvxpy loads in seconds: only when needed

    try:
        return solve()
    except ConvexSolverError as error:
        raise ServiceError(f"{what}: {error}", code="solver_failed", status=422) from None


def _ldp_iht(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
             covariance: str | None) -> CampaignFit:
    _no_covariance(campaign, covariance)
    spec = campaign.spec
    _round0(campaign, aggregates)
    states = [None if r.state is None else campaign.round_state(r.index) for r in campaign.rounds]
    coef, used = campaign_estimate(spec, states, aggregates)
    reports = sum(a.count for a in aggregates[:used] if a is not None)
    notes = () if used == spec.steps else (f"the estimate after {used} of the {spec.steps} rounds",)
    return _sparse_fit(campaign, model, coef, reports,
                       {"rounds_used": used, "rounds": spec.steps, "sparsity": spec.sparsity, "eta": spec.eta},
                       notes, _diameter(2.0 * spec.radius, f"the l2 ball of radius R = {spec.radius:g} (Alg. 1 "
                                        "projects every iterate onto it)"))


def _label_ldp(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
               covariance: str | None) -> CampaignFit:
    _no_covariance(campaign, covariance)
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
        return _sparse_fit(campaign, model, run.theta, aggregate.count, details, (),
                           _diameter(2.0 * spec.radius, f"the l2 ball of radius R = {spec.radius:g} (Alg. 2 "
                                     "projects every iterate onto it)"))
    from estimators.local.sparse.lasso import default_lasso_penalty, lasso_from_moments

    penalty = spec.alpha if spec.alpha is not None else default_lasso_penalty(spec.label_noise, aggregate.count,
                                                                              spec.dimension)
    coef = _solved(lambda: lasso_from_moments(gram, moment, penalty, "label-private Lasso"),
                   f"campaign {campaign.name!r}")
    details["alpha"] = penalty
    return _sparse_fit(campaign, model, coef, aggregate.count, details, (), _lasso_influence(aggregate, gram, moment))


def _lasso_influence(aggregate: ReportAggregate, gram: np.ndarray, moment: np.ndarray) -> Influence:
    """The Lasso ``argmin (1/2) w^T G w - b^T w + alpha ||w||_1`` is ``1 / lambda_min(G)``-Lipschitz in ``b`` (strong
    convexity and the monotone subdifferential); ``b`` is a mean of the server's ``x_row tilde y``, whose range is the
    aggregate's schema. The Lasso of Sec. 5 is penalised, not constrained: it has no feasible set to project onto."""
    field = next(f for f in aggregate.schema.fields if f.name == "xy")
    smallest = float(np.linalg.eigvalsh(gram)[0])
    if smallest <= 0.0:
        return Influence(None, "l2", "coefficients", "no finite bound: the public X^T X is singular, so the Lasso's "
                         "solution is not Lipschitz in the reports' mean")
    return Influence(mean_shift(field, moment, aggregate.count) / smallest, "l2", "coefficients",
                     "sup ||Delta b|| / lambda_min(X^T X / m): one more report within the validated range of x tilde "
                     "y moves b by at most its farthest point / (n + 1), and the Lasso is 1/lambda_min-Lipschitz in b")


def _bernstein(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
               covariance: str | None) -> CampaignFit:
    _no_covariance(campaign, covariance)
    from estimators.local.sparse.bernstein import LocalBernsteinLinearRegression

    spec = campaign.spec
    aggregate = _round0(campaign, aggregates)
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
    return _sparse_fit(campaign, model, estimator.coef_, aggregate.count, details, (),
                       _diameter(box, f"the box [{spec.lower:g}, {spec.upper:g}]^{spec.dimension} (the polynomial's "
                                 "minimiser is searched over it)"))


def _dr_erm(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
            covariance: str | None) -> CampaignFit:
    _no_covariance(campaign, covariance)
    from estimators.local.sparse.dr_erm import DRERMLinearRegression

    spec = campaign.spec
    aggregate = _round0(campaign, aggregates)
    estimator = DRERMLinearRegression(spec.constraint, spec.radius)
    _solved(lambda: estimator.fit(aggregate.mean("statistics"), spec.projection()), f"campaign {campaign.name!r}")
    details = {"rows": spec.rows, "projection_seed": spec.projection_seed, "constraint": spec.constraint,
               "radius": spec.radius}
    # C: the l1 ball of radius R (diameter 2R) or the probability simplex (diameter sqrt(2), whatever the radius)
    diameter, what = (2.0 * spec.radius, f"the l1 ball of radius {spec.radius:g}") if spec.constraint == "l1" else (
        math.sqrt(2.0), "the probability simplex")
    return _sparse_fit(campaign, model, estimator.coef_, aggregate.count, details, (),
                       _diameter(diameter, f"C, {what} (step 7 recovers w in C)"))


register_estimates("ldp-iht", Estimates(("iht",), _ldp_iht))
register_estimates("label-ldp", Estimates(("iht", "lasso"), _label_ldp))
register_estimates("bernstein", Estimates(("linear",), _bernstein))
register_estimates("bernstein-1bit", Estimates(("linear",), _bernstein))
register_estimates("dr-erm", Estimates(("linear",), _dr_erm))
