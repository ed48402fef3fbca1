"""Estimates from a campaign's stored aggregates: post-processing, free, as often as asked.

:func:`fit_campaign` reads only the rounds' running aggregates (never the reports) and hands them to the campaign's
protocol (its record in :mod:`service.campaigns.protocols`: the models it answers and its ``fit``), which may read the
public table's rows too. What each protocol answers: docs/campaigns.md, and the docstring of its module. Errors of the
estimators become answers naming the model: a link with no constant on these data (the paper's assumptions fail) is
``no_root``, any other :class:`~estimators.base.EstimatorError` ``estimation_failed``.

Every answer carries its coefficients' ``standard_errors`` (the protocol's fit computes them: docs/campaigns.md) and a
``quality`` verdict from them (:mod:`estimators.local.quality`); a fit that is not ``ok`` also carries a note saying so,
and so does a fit for which no bound on one report's influence is derived (:func:`unbounded_influence_text`).
With ``strict``, a ``noise-dominated`` fit is refused instead (422 ``noise_dominated``; a fit stores nothing either
way, and costs nothing).
"""

from __future__ import annotations

import json
from dataclasses import replace

from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import CampaignRound
from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.scale import NoRootError
from estimators.local.influence import Influence
from estimators.local.quality import Quality, assess, assess_mean, assess_predictions, undetermined_names
from service.campaigns.campaigns import get_campaign
from service.campaigns.protocols import get_protocol
from service.campaigns.types import CampaignFit, CampaignInfo
from service.errors import InvalidInput, ServiceError


def stored_aggregates(engine: Engine, campaign: CampaignInfo) -> list[ReportAggregate | None]:
    """Each round's running aggregate (``None`` before its first report)."""
    with transaction(engine) as session:
        rows = session.execute(select(CampaignRound).where(CampaignRound.campaign_id == campaign.id)
                               .order_by(CampaignRound.round_index)).scalars().all()
        return [None if r.aggregate_json is None else ReportAggregate.from_json(json.loads(r.aggregate_json))
                for r in rows]


def fit_campaign(engine: Engine, name_or_id: str | int, model: str, covariance: str | None = None,
                 strict: bool = False) -> CampaignFit:
    """The model ``model`` from campaign ``name_or_id``'s stored aggregates, with its quality verdict (see the module
    docstring); ``strict`` refuses a noise-dominated fit."""
    fit = _fit(engine, name_or_id, model, covariance)
    quality = judge(fit)
    if strict and quality.verdict == "noise-dominated":
        raise ServiceError(f"campaign {fit.campaign!r}, model {model!r}: the fit is noise-dominated ("
                           f"{'; '.join(quality.reasons)}); refused because strict was asked", code="noise_dominated",
                           status=422)
    notes = fit.notes if not quality.warns else (*fit.notes, warning_text(quality))
    if fit.influence is not None and fit.influence.per_report is None:
        notes = (*notes, unbounded_influence_text(fit.influence))
    return replace(fit, quality=quality, notes=notes)


def unbounded_influence_text(influence: Influence) -> str:
    """The note (and the CLI's caption) of a fit for which no bound on one report's influence is derived: what the
    analyst may conclude from it and what not, in plain words (docs/campaigns.md, what k malicious participants can
    do)."""
    return (f"no bound on how far one report can move these {influence.of}: the standard errors measure the "
            "randomizers' noise when every report is honest, but nothing here limits what a participant who sends a "
            "forged report (any report the server accepts) does to the estimate, so a few such reports cannot be "
            "ruled out as the cause of a difference; bind gateways to the campaign with quotas to keep their number "
            f"small. What is known: {influence.basis}")


def judge(fit: CampaignFit) -> Quality:
    """The verdict of a fit: a mean against its range ``[lower, upper]``; a fit whose protocol checked its predictions
    (on public labels, or by the reports' dependence test) by them (``estimators.local.quality.assess_predictions``);
    any other by its coefficients, naming those not determined."""
    if fit.kind == "mean" and fit.standard_errors is not None:
        (name, error), = fit.standard_errors.items()
        return assess_mean(name, error, fit.details["lower"], fit.details["upper"])
    if fit.predictions is not None and fit.standard_errors is not None:
        return assess_predictions(fit.coefficients, fit.standard_errors, fit.predictions)
    quality = assess(fit.coefficients, fit.standard_errors, selected="support" in fit.details)
    if fit.standard_errors is None or "support" in fit.details:
        return quality
    return replace(quality, undetermined=undetermined_names(fit.coefficients, fit.standard_errors))


def warning_text(quality: Quality) -> str:
    """The note (and the CLI's and client's warning) of a fit that is not ``ok``."""
    return f"{quality.verdict}: {'; '.join(quality.reasons)}"


def _fit(engine: Engine, name_or_id: str | int, model: str, covariance: str | None) -> CampaignFit:
    campaign = get_campaign(engine, name_or_id)
    protocol = get_protocol(campaign.protocol)
    if protocol.marginals:
        raise InvalidInput(f"campaign {campaign.name!r} ({campaign.protocol}) fits no model: ask it for marginals "
                           "and synthetic rows instead (its marginal and synthetic answers)", code="unknown_model")
    if model not in protocol.models:
        raise InvalidInput(f"model must be one of {list(protocol.models)} for a {campaign.protocol!r} campaign, "
                           f"got {model!r}", code="unknown_model")
    try:
        return protocol.fit(engine, campaign, stored_aggregates(engine, campaign), model, covariance)
    except NoRootError as error:
        raise InvalidInput(f"link {model!r} has no constant on the data of campaign {campaign.name!r}: {error}",
                           code="no_root") from None
    except EstimatorError as error:
        raise InvalidInput(f"campaign {campaign.name!r}, model {model!r}: {error}", code="estimation_failed") from None
