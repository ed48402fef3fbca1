"""``stein-glm`` and ``stein-glm-2round``: the Stein-lemma GLMs (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021;
docs/privacy.md 8.7.2 and 8.7.3).

Build. ``stein-glm``, one round, in two variants (``--option variant``). ``public-gram`` (the default with a
``--public`` table): ``y (1, clip(W x))`` through a randomizer of
:data:`~workloads.local.protocols.vector_reports.VECTOR_RANDOMIZERS` (``privunit``, PrivUnit2, pure epsilon, the
default; ``l2ball``, pure epsilon; ``gaussian``), ``W`` the public whitening, the norm bound a public quantile of
``||W x||`` (:data:`~service.campaigns.protocols.catalog.DEFAULT_NORM_QUANTILE`) or stated, labels centred at
``label_center``; ``paper`` (Algs. 1-4, the default without a public table): noisy ``(x x^T, x y)`` (or ``x y`` alone
with ``gram=false``), Gaussian (``delta > 0``); ``norm_bound`` stated or Alg. 1's bound from the ``--public`` table.
``stein-glm-2round`` (Alg. 5): two rounds without public data, ``layout`` ``split-budget`` (every participant reports
twice, half the budget each) or ``split-groups``; ``norm_bound`` stated, from ``covariance_norm`` (Alg. 5's bound,
growing with log n), or from the public table. Round 1's public state (``w_ols`` from round 0) is
:func:`estimators.local.glm.two_round.next_state`.

Estimates: model ``linear`` (the private OLS) or any link of :data:`estimators.local.glm.links.LINKS`. ``stein-glm``
public-gram: the OLS with an intercept on the public Gram, then each link's constant and intercept over the public rows
(:mod:`estimators.local.glm.public_gram`). ``stein-glm`` paper: one OLS from round 0 (Remark 11: ``X^T X`` pooled with
the public rows, or from them alone for a ``gram=false`` campaign) and the link's constant found over the public rows
(Algs. 1-4). Remark 16: every link comes from the same stored reports, each free. ``stein-glm-2round``: the same models
from Alg. 5's two rounds, no public rows needed. A link with no constant on these data is an error naming the link
(:mod:`service.campaigns.estimates`).

The two records and their options: :mod:`service.campaigns.protocols.catalog`."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.links import LINKS
from estimators.local.glm.planning import public_gram_error_model, stein_ols_error_model
from estimators.local.glm.public_gram import InterceptSteinGLM, PublicGramOLS, public_whitening, quantile_norm_bound
from estimators.local.glm.stein import PrivateOLS, SteinGLM, gaussian_norm_bound, known_covariance_norm_bound
from estimators.local.glm.two_round import TwoRoundSteinGLM, first_round_ols
from estimators.local.glm.uncertainty import (
    link_covariance,
    ols_covariance,
    public_gram_covariance,
    two_round_link_covariance,
)
from estimators.local.influence import Influence
from estimators.local.planning import ErrorModel
from service.campaigns.options import invalid
from service.campaigns.protocols.catalog import DEFAULT_NORM_QUANTILE
from service.campaigns.protocols.common import (
    raw_influence,
    raw_scale,
    raw_standard_errors,
    refuse_given,
    round0,
    transform_influence,
    transform_notes,
)
from service.campaigns.public_tables import campaign_public_rows
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import Conflict, InvalidInput
from workloads.local.protocols import ProtocolSpec, SteinGlmSpec, TwoRoundSteinSpec


# ---------------------------------------------------------------------------------------------------------- building
def _norm_bound(request: CampaignRequest, participants: int | None) -> float:
    """The stated ``norm_bound``, else Alg. 1's bound from the public rows (public information only)."""
    stated = request.options["norm_bound"]
    if stated is not None:
        return stated
    if request.public_rows is None:
        raise invalid("norm_bound is needed: option norm_bound (the public bound on a participant's ||x||), "
                      "or a public table (parameter public) to derive Alg. 1's bound from")
    n = participants or request.public_rows.shape[0]
    return gaussian_norm_bound(request.public_rows, max(n, 2))


#: options of one variant only (refused, naming the variant, under the other)
_PAPER_ONLY = ("gram", "xy_ratio", "norm")
_PUBLIC_GRAM_ONLY = ("randomizer", "norm_quantile", "label_center", "whiten")


def build_one_round(request: CampaignRequest) -> ProtocolSpec:
    """``variant`` public-gram (the default with a ``--public`` table) or paper (the default without one)."""
    default = "public-gram" if request.public_rows is not None else "paper"
    variant = request.options["variant"] or default
    other = "public-gram" if variant == "paper" else "paper"
    refuse_given(request.options, _PUBLIC_GRAM_ONLY if variant == "paper" else _PAPER_ONLY,
                 f"applies to variant={other}, not to variant={variant}")
    return _build_paper(request) if variant == "paper" else _build_public_gram(request)


def _build_paper(request: CampaignRequest) -> ProtocolSpec:
    """Algs. 1-4 as printed (and every option they had): noisy ``(x x^T, x y)``, Gaussian."""
    if request.delta <= 0:
        raise invalid(f"delta must be in (0, 1) for stein-glm variant=paper (Gaussian reports), got {request.delta}")
    options = request.options
    participants = options["participants"]
    label_bound = options["label_bound"]
    return SteinGlmSpec(
        dimension=len(request.features), norm_bound=_norm_bound(request, participants),
        label_bound=1.0 if label_bound is None else label_bound, epsilon=request.epsilon, delta=request.delta,
        norm=options["norm"], gram=options["gram"], xy_ratio=options["xy_ratio"], participants=participants,
        variant="paper")


def _build_public_gram(request: CampaignRequest) -> ProtocolSpec:
    """``x y`` only, ``X^T X`` from the public rows (:class:`~workloads.local.protocols.SteinGlmSpec`)."""
    rows = request.public_rows
    if rows is None:
        raise invalid("stein-glm variant=public-gram takes X^T X from a public table: give one (parameter "
                      "public), or option variant=paper")
    options = request.options
    whitening = public_whitening(rows) if options["whiten"] else None
    stated, quantile = options["norm_bound"], options["norm_quantile"]
    if stated is not None and quantile is not None:
        raise invalid("give option norm_bound or option norm_quantile, not both")
    if stated is None:
        quantile = DEFAULT_NORM_QUANTILE if quantile is None else quantile
        stated = quantile_norm_bound(rows, quantile, whitening)
    label_bound, label_center = options["label_bound"], options["label_center"]
    if label_bound is None and label_center is None:
        label_bound, label_center = 0.5, 0.5  # labels in [0, 1]: the binary GLMs' 0/1 labels, centred
    return SteinGlmSpec(
        dimension=len(request.features), norm_bound=stated, label_bound=1.0 if label_bound is None else label_bound,
        epsilon=request.epsilon, delta=request.delta, participants=options["participants"],
        variant="public-gram", randomizer=options["randomizer"], norm_quantile=quantile,
        label_center=0.0 if label_center is None else label_center,
        whitening=None if whitening is None else tuple(whitening.ravel().tolist()))


def build_two_round(request: CampaignRequest) -> ProtocolSpec:
    if request.delta <= 0:
        raise invalid(f"delta must be in (0, 1) for stein-glm-2round (its first round is Gaussian), "
                      f"got {request.delta}")
    options = request.options
    layout = options["layout"]
    participants = options["participants"]
    covariance_norm = options["covariance_norm"]
    if layout == "split-budget":
        refuse_given(options, ("first_size", "second_size"), "applies to layout=split-groups, not to "
                     "layout=split-budget")
    if options["norm_bound"] is None and covariance_norm is not None:
        if participants is None:
            raise invalid("option covariance_norm needs option participants (Alg. 5's bound grows with log n)")
        norm_bound = known_covariance_norm_bound(len(request.features), covariance_norm, participants)
    else:
        norm_bound = _norm_bound(request, participants)
    common = {"norm": options["norm"], "projection_scale": options["projection_scale"]}
    label_bound = options["label_bound"]
    if layout == "split-budget":
        return TwoRoundSteinSpec.split_budget(len(request.features), norm_bound, label_bound, request.epsilon,
                                              request.delta, participants, **common)
    return TwoRoundSteinSpec.split_groups(len(request.features), norm_bound, label_bound, request.epsilon,
                                          request.delta, options["first_size"], options["second_size"],
                                          **common)


# ------------------------------------------------------------------------------------------------------- estimating
def fit_one_round(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
                  covariance: str | None) -> CampaignFit:
    if campaign.spec.variant == "public-gram":
        return _fit_public_gram(engine, campaign, aggregates, model, covariance)
    spec, aggregate = campaign.spec, round0(campaign, aggregates)
    public_rows = campaign_public_rows(engine, campaign)
    if covariance is None:
        covariance = "private" if public_rows is None else ("pooled" if spec.gram else "public")
    ols = PrivateOLS(covariance=covariance, feature_names=campaign.features).fit(aggregate, spec, public_rows)
    details: dict[str, Any] = {"variant": "paper", "covariance": covariance, "public_rows": ols.n_public_}
    coef, influence = ols.coef_, ols.influence_
    covariance_of_coef = ols_cov = ols_covariance(ols, aggregate, spec.norm_bound, spec.label_bound)
    if model != "linear":
        if public_rows is None:
            raise InvalidInput(f"model {model!r} needs a public table to find the link's constant over (Algs. 1-4); "
                               f"campaign {campaign.name!r} has none: fit 'linear', or run a stein-glm-2round "
                               "campaign", code="needs_public_table")
        glm = SteinGLM(model).fit(ols, public_rows)
        coef, influence = glm.coef_, _link_influence(campaign, details, ols.influence_)
        details["link_constant"] = float(glm.scale_)
        covariance_of_coef = link_covariance(model, ols, glm.scale_, public_rows, ols_cov)
    return _glm_fit(campaign, model, coef, aggregate.count, details, influence,
                    raw_standard_errors(campaign, covariance_of_coef), notes=(_NO_INTERCEPT,))


#: what a variant=paper fit says of its (intercept)
_NO_INTERCEPT = ("variant=paper (Algs. 1-4) estimates no intercept: the (intercept) shown is only what undoing the "
                 "public centring implies, so the model's mean prediction need not match the base rate")


def _fit_public_gram(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
                     covariance: str | None) -> CampaignFit:
    """OLS with an intercept on the public Gram, then the link's constant and intercept over the public rows."""
    if covariance not in (None, "public"):
        raise InvalidInput(f"campaign {campaign.name!r} (stein-glm variant=public-gram) reports x y only: X^T X comes "
                           f"from its public table, covariance must be 'public', got {covariance!r}",
                           code="invalid_parameter")
    spec, aggregate = campaign.spec, round0(campaign, aggregates)
    public_rows = campaign_public_rows(engine, campaign)
    ols = PublicGramOLS(feature_names=campaign.features).fit(aggregate, spec, public_rows)
    details: dict[str, Any] = {
        "variant": "public-gram", "covariance": "public", "public_rows": ols.n_public_,
        "randomizer": spec.randomizer, "norm_bound": spec.norm_bound, "norm_quantile": spec.norm_quantile,
        "whitened": spec.whitening is not None, "mean_label": ols.mean_label_}
    coef, intercept, glm = ols.coef_, ols.intercept_, None
    influence = _intercept_influence(campaign, ols.influence_)
    if model != "linear":
        glm = InterceptSteinGLM(model).fit(ols, public_rows)
        coef, intercept = glm.coef_, glm.intercept_
        details["link_constant"] = float(glm.scale_)
        influence = _link_influence(campaign, details, ols.influence_)
    covariance_of_fit = public_gram_covariance(ols, aggregate, spec, glm, public_rows)
    return _glm_fit(campaign, model, coef, aggregate.count, details, influence,
                    raw_standard_errors(campaign, covariance_of_fit, intercept=True), intercept)


def _intercept_influence(campaign: CampaignInfo, influence: Influence) -> Influence:
    """The OLS bound (on ``(b, w)`` jointly, l2) in the features' own units: ``w / scale`` moves by at most
    ``bound / min |scale|``, the intercept ``b - <w / scale, center>`` by at most ``bound (1 + ||center|| /
    min |scale|)``."""
    if influence.per_report is None:
        return influence
    smallest = float(np.min(np.abs(np.asarray(campaign.transform.scale, dtype=float))))
    center = float(np.linalg.norm(np.asarray(campaign.transform.center, dtype=float)))
    bound = influence.per_report
    return Influence(bound / smallest, "l2", "coefficients", influence.basis, bound * (1.0 + center / smallest))


def fit_two_round(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
                  covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    first = round0(campaign, aggregates)
    if model == "linear":
        ols = first_round_ols(spec, first, campaign.features)
        return _glm_fit(campaign, model, ols.coef_, first.count, {"covariance": "private", "rounds_used": 1},
                        ols.influence_,
                        raw_standard_errors(campaign, ols_covariance(ols, first, spec.norm_bound, spec.label_bound)))
    second = aggregates[1]
    if campaign.rounds[0].status != "closed" or second is None or second.count == 0:
        raise Conflict(f"model {model!r} of campaign {campaign.name!r} needs round 1's projections (Alg. 5): "
                       f"round 1 is {campaign.rounds[1].status} with {campaign.rounds[1].reports} reports",
                       code="round_pending")
    glm = TwoRoundSteinGLM(model, campaign.features).fit(spec, campaign.round_state(1), first, second)
    details = {"link_constant": float(glm.scale_), "projection_std": float(glm.projection_std_), "rounds_used": 2}
    influence = _link_influence(campaign, details, glm.ols_.influence_)
    covariance_of_coef = two_round_link_covariance(glm, spec, campaign.round_state(1), first, second,
                                                   ols_covariance(glm.ols_, first, spec.norm_bound,
                                                                  spec.label_bound))
    return _glm_fit(campaign, model, glm.coef_, first.count + second.count, details, influence,
                    raw_standard_errors(campaign, covariance_of_coef))


def _link_influence(campaign: CampaignInfo, details: dict[str, Any], ols: Influence) -> Influence:
    """A link model ``c w_ols``: its OLS step's bound goes to ``details.ols_influence``; for ``c`` none is derived."""
    details["ols_influence"] = transform_influence(campaign, ols).to_json()
    return Influence(None, "l2", "coefficients",
                     "no bound derived: the link's constant c is the root of an equation over the public rows that "
                     "depends on w_ols non-linearly; details.ols_influence bounds the move of w_ols itself")


def _glm_fit(campaign: CampaignInfo, model: str, coef: np.ndarray, reports: int,
             details: dict[str, Any], influence: Influence, standard_errors: dict[str, float],
             intercept: float = 0.0, notes: tuple[str, ...] = ()) -> CampaignFit:
    """The answer, with ``standard_errors`` in the features' own units (:mod:`estimators.local.glm.uncertainty`,
    delta method)."""
    binary = model != "linear" and LINKS[model].binary
    if influence.intercept is None:
        influence = raw_influence(campaign, influence)
    return CampaignFit(campaign.name, campaign.protocol, model, "classifier" if binary else "regressor",
                       campaign.target, campaign.features, raw_scale(campaign, coef, intercept), reports,
                       {**details, "transform": campaign.transform.to_json()}, (*notes, *transform_notes(campaign)),
                       influence, standard_errors=standard_errors)


def plan_one_round(spec: ProtocolSpec, rows: np.ndarray | None, labels: np.ndarray | None) -> ErrorModel:
    """The OLS's error model: variant=paper's private OLS
    (:func:`estimators.local.glm.planning.stein_ols_error_model`) or public-gram's OLS on the public Gram
    (:func:`~estimators.local.glm.planning.public_gram_error_model`); both need the public rows, whose ``X^T X``
    the estimate leans on."""
    if rows is None:
        raise InvalidInput("planning a stein-glm campaign needs a public table (parameter public): the error depends "
                           "on the features' X^T X, which the plan takes from its rows", code="needs_public_table")
    if spec.variant == "public-gram":  # type: ignore[attr-defined]
        return public_gram_error_model(spec, rows, labels)  # type: ignore[arg-type]
    return stein_ols_error_model(spec, rows, labels)  # type: ignore[arg-type]
