"""Estimates from a campaign's stored aggregates: post-processing, free, as often as asked.

Reads only the rounds' running aggregates (never the reports) and the public table's rows:

* ``ldp-avg``, model ``mean``: the average of the reports (``estimators.local.ldp_avg.LdpAverage``);
* ``stein-glm``, model ``linear`` (the private OLS) or any link of ``estimators.local.glm.links.LINKS`` (``logistic``,
  ``poisson``, ``probit``, ``cubic``, ``sigmoid``, ``boosting``, ``logistic-loss``): one OLS from round 0 (Remark 11:
  ``X^T X`` pooled with the public rows, or from them alone for a ``gram=false`` campaign) and the link's constant
  found over the public rows (Algs. 1-4). Remark 16: every link comes from the same stored reports, each free;
* ``stein-glm-2round``: the same models from Alg. 5's two rounds, no public rows needed.

Each protocol's estimates are registered (:func:`register_estimates`: the model names and one function), so a new
protocol joins without editing this dispatch. Coefficients are returned on the scale of the features as participants
hold them: the campaign's public transform ``x' = (x - center) / scale`` is undone, so
``score = <w / scale, x> - <w / scale, center>`` gives ``coefficients`` keyed by feature name and an ``(intercept)``.
A link with no constant on these data (the paper's assumptions fail) is an error naming the link.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import CampaignRound
from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.links import LINKS
from estimators.local.glm.scale import NoRootError
from estimators.local.glm.stein import PrivateOLS, SteinGLM
from estimators.local.glm.two_round import TwoRoundSteinGLM, first_round_ols
from estimators.local.influence import Influence
from estimators.local.ldp_avg import LdpAverage
from service.campaigns.campaigns import CampaignInfo, get_campaign
from service.campaigns.campaigns import campaign_public_rows as _public_rows
from service.errors import Conflict, InvalidInput

ZERO_COST = {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
GLM_MODELS = ("linear", *LINKS)


@dataclass(frozen=True)
class CampaignFit:
    """A fit's answer; ``to_json`` has the shape of ``marginalia fit``'s (``coefficients`` with ``(intercept)``,
    ``cost``) plus the campaign that answered."""

    campaign: str
    protocol: str
    model: str
    kind: str  # "regressor", "classifier" or "mean"
    target: str | None
    feature_names: tuple[str, ...]
    coefficients: dict[str, float]
    reports: int
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: how far one more accepted report can move the estimate (``estimators.local.influence.Influence``), in the
    #: units of ``coefficients``
    influence: Influence | None = None

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "protocol": self.protocol, "model": self.model, "task": self.model,
                "kind": self.kind, "method": f"{self.protocol} (local DP)", "target": self.target,
                "feature_names": list(self.feature_names), "coefficients": dict(self.coefficients),
                "cost": dict(ZERO_COST), "reports": self.reports, "details": self.details, "notes": list(self.notes),
                "influence": None if self.influence is None else self.influence.to_json()}


def _aggregates(engine: Engine, campaign: CampaignInfo) -> list[ReportAggregate | None]:
    """Each round's running aggregate (``None`` before its first report)."""
    with transaction(engine) as session:
        rows = session.execute(select(CampaignRound).where(CampaignRound.campaign_id == campaign.id)
                               .order_by(CampaignRound.round_index)).scalars().all()
        return [None if r.aggregate_json is None else ReportAggregate.from_json(json.loads(r.aggregate_json))
                for r in rows]


def _round0(campaign: CampaignInfo, aggregates: list[ReportAggregate | None]) -> ReportAggregate:
    first = aggregates[0]
    if first is None or first.count == 0:
        raise Conflict(f"campaign {campaign.name!r} has no reports yet: nothing to estimate", code="no_reports")
    return first


def _raw_scale(campaign: CampaignInfo, coef: np.ndarray) -> dict[str, float]:
    """Coefficients for the features as participants hold them, and the intercept the transform implies."""
    scale = np.asarray(campaign.transform.scale)
    center = np.asarray(campaign.transform.center)
    raw = np.asarray(coef, dtype=float) / scale
    out = {name: float(v) for name, v in zip(campaign.features, raw, strict=True)}
    out["(intercept)"] = float(-(raw @ center)) + 0.0  # + 0.0: no "-0.0" when nothing was centred
    return out


@dataclass(frozen=True)
class Estimates:
    """What a protocol's campaigns answer: ``models`` (names) and ``fit(engine, campaign, aggregates, model,
    covariance)``, which reads only the rounds' aggregates (``None`` for a round without reports) and public rows."""

    models: tuple[str, ...]
    fit: Callable[[Engine, CampaignInfo, list[ReportAggregate | None], str, str | None], CampaignFit]


#: protocol name -> its estimates; a new protocol joins with :func:`register_estimates`.
ESTIMATES: dict[str, Estimates] = {}


def register_estimates(protocol: str, estimates: Estimates) -> Estimates:
    if protocol in ESTIMATES:
        raise ValueError(f"protocol {protocol!r} has estimates already")
    ESTIMATES[protocol] = estimates
    return estimates


def fit_campaign(engine: Engine, name_or_id: str | int, model: str, covariance: str | None = None) -> CampaignFit:
    """The model ``model`` from campaign ``name_or_id``'s stored aggregates (see the module docstring)."""
    campaign = get_campaign(engine, name_or_id)
    estimates = ESTIMATES.get(campaign.protocol)
    if estimates is None:
        raise InvalidInput(f"campaign {campaign.name!r} runs protocol {campaign.protocol!r}, which has no estimates "
                           "yet", code="unknown_model")
    if model not in estimates.models:
        raise InvalidInput(f"model must be one of {list(estimates.models)} for a {campaign.protocol!r} campaign, "
                           f"got {model!r}", code="unknown_model")
    try:
        return estimates.fit(engine, campaign, _aggregates(engine, campaign), model, covariance)
    except NoRootError as error:
        raise InvalidInput(f"link {model!r} has no constant on the data of campaign {campaign.name!r}: {error}",
                           code="no_root") from None
    except EstimatorError as error:
        raise InvalidInput(f"campaign {campaign.name!r}, model {model!r}: {error}", code="estimation_failed") from None


def _mean(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
          covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    fitted = LdpAverage().fit(_round0(campaign, aggregates), spec)
    scale, center = campaign.transform.scale[0], campaign.transform.center[0]
    feature = campaign.features[0]
    details = {"std_error": fitted.std_error_ * scale, "noise_std_error": fitted.noise_std_error_ * scale,
               "lower": spec.lower * scale + center, "upper": spec.upper * scale + center,
               "raw_mean": fitted.raw_mean_ * scale + center}
    return CampaignFit(campaign.name, campaign.protocol, "mean", "mean", None, (feature,),
                       {feature: fitted.mean_ * scale + center}, fitted.n_reports_, details,
                       ("the average of the participants' values clipped to [lower, upper], projected onto [lower, "
                        "upper]",), fitted.influence_.scaled(abs(scale)))


def _stein(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
           covariance: str | None) -> CampaignFit:
    spec, aggregate = campaign.spec, _round0(campaign, aggregates)
    public_rows = _public_rows(engine, campaign)
    if covariance is None:
        covariance = "private" if public_rows is None else ("pooled" if spec.gram else "public")
    ols = PrivateOLS(covariance=covariance, feature_names=campaign.features).fit(aggregate, spec, public_rows)
    details: dict[str, Any] = {"covariance": covariance, "public_rows": ols.n_public_}
    coef, influence = ols.coef_, ols.influence_
    if model != "linear":
        if public_rows is None:
            raise InvalidInput(f"model {model!r} needs a public table to find the link's constant over (Algs. 1-4); "
                               f"campaign {campaign.name!r} has none: fit 'linear', or run a stein-glm-2round "
                               "campaign", code="needs_public_table")
        glm = SteinGLM(model).fit(ols, public_rows)
        coef, influence = glm.coef_, _link_influence(campaign, details, ols.influence_)
        details["link_constant"] = float(glm.scale_)
    return _glm_fit(campaign, model, coef, aggregate.count, details, influence)


def _two_round(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
               covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    first = _round0(campaign, aggregates)
    if model == "linear":
        ols = first_round_ols(spec, first, campaign.features)
        return _glm_fit(campaign, model, ols.coef_, first.count, {"covariance": "private", "rounds_used": 1},
                        ols.influence_)
    second = aggregates[1]
    if campaign.rounds[0].status != "closed" or second is None or second.count == 0:
        raise Conflict(f"model {model!r} of campaign {campaign.name!r} needs round 1's projections (Alg. 5): "
                       f"round 1 is {campaign.rounds[1].status} with {campaign.rounds[1].reports} reports",
                       code="round_pending")
    glm = TwoRoundSteinGLM(model, campaign.features).fit(spec, campaign.round_state(1), first, second)
    details = {"link_constant": float(glm.scale_), "projection_std": float(glm.projection_std_), "rounds_used": 2}
    influence = _link_influence(campaign, details, first_round_ols(spec, first, campaign.features).influence_)
    return _glm_fit(campaign, model, glm.coef_, first.count + second.count, details, influence)


def _link_influence(campaign: CampaignInfo, details: dict[str, Any], ols: Influence) -> Influence:
    """A link model ``c w_ols``: its OLS step's bound goes to ``details.ols_influence``; for ``c`` none is derived."""
    details["ols_influence"] = transform_influence(campaign, ols).to_json()
    return Influence(None, "l2", "coefficients",
                     "no bound derived: the link's constant c is the root of an equation over the public rows that "
                     "depends on w_ols non-linearly; details.ols_influence bounds the move of w_ols itself")


def transform_influence(campaign: CampaignInfo, influence: Influence) -> Influence:
    """The bound in the features' own units: ``raw = coef / scale`` moves by at most ``1 / min |scale|`` times the
    coefficients, and the intercept ``-<raw, center>`` by that times ``||center||``."""
    scale = np.abs(np.asarray(campaign.transform.scale, dtype=float))
    center = float(np.linalg.norm(np.asarray(campaign.transform.center, dtype=float)))
    return influence.scaled(1.0 / float(scale.min()), center)


def _glm_fit(campaign: CampaignInfo, model: str, coef: np.ndarray, reports: int,
             details: dict[str, Any], influence: Influence) -> CampaignFit:
    binary = model != "linear" and LINKS[model].binary
    notes = []
    if campaign.transform.source != "identity":
        notes.append(f"features were centred and scaled on the devices ({campaign.transform.source}); the "
                     "coefficients here are on the features' own scale")
    return CampaignFit(campaign.name, campaign.protocol, model, "classifier" if binary else "regressor",
                       campaign.target, campaign.features, _raw_scale(campaign, coef), reports,
                       {**details, "transform": campaign.transform.to_json()}, tuple(notes),
                       influence if influence.per_report is None else transform_influence(campaign, influence))


register_estimates("ldp-avg", Estimates(("mean",), _mean))
register_estimates("stein-glm", Estimates(GLM_MODELS, _stein))
register_estimates("stein-glm-2round", Estimates(GLM_MODELS, _two_round))


# Protocols whose estimates live in their own modules register themselves on import.
from service.campaigns import sparse_estimates  # noqa: E402, F401, I001
