"""Local-DP campaigns: the list, and a campaign's page (its protocol and spec, its rounds with the reports each
received, the local guarantee every participant has, and the participants' spend against their caps, in aggregate:
no pseudonym is shown), with the SQL over the audit views that gives each figure. The readers of
``GET /campaigns/{name}``: stewards, analysts and auditors. Stewards and analysts also fit any of the campaign's
models from its stored aggregates (free, as ``POST /campaigns/{name}/fit``): the coefficients with their standard
errors and intervals, and the fit's verdict with its reasons; a marginals campaign answers any marginal (a chart
with 95 % intervals, a table, CSV) and synthetic rows (CSV) instead, as ``POST /campaigns/{name}/marginal`` and
``/synthetic``."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import text
from starlette.responses import Response

from service.api.console import charts, render
from service.api.console.access import ConsoleRoute, Visitor, anyone, signed_in
from service.api.console.pages.ledger import AuditQuery
from service.api.console.pages.releases import (
    Columns,
    columns_of,
    marginal_csv_response,
    marginal_view,
    synthetic_csv_response,
)
from service.api.routes_campaigns import Name
from service.api.security import ANALYST, STEWARD, engine_of
from service.campaigns import campaigns, estimates, marginal_answers, planning
from service.campaigns.protocols import get_protocol
from service.errors import InvalidInput

router = APIRouter(prefix="/console/campaigns", route_class=ConsoleRoute, include_in_schema=False)

CAMPAIGN_QUERIES = (
    AuditQuery("The local guarantee of every participant of the campaign, and the most any one has spent on it",
               "SELECT epsilon, delta, participants, reports, max_epsilon_spent, max_delta_spent "
               "FROM campaign_local_guarantee WHERE campaign = :name"),
    AuditQuery("The participants' spend across every campaign against their caps (aggregate)",
               "SELECT COUNT(*) AS participants, MAX(epsilon) AS most_spent, "
               "MIN(epsilon_remaining) AS least_remaining, MIN(cap_epsilon) AS smallest_cap "
               "FROM participant_local_spend WHERE participant_id IN "
               "(SELECT participant_id FROM participant_campaign_spend WHERE campaign = :name)"),
)


@router.get("")
def campaign_list(request: Request, visitor: Visitor = Depends(anyone)) -> Response:
    items = [c.to_json(hide_seeded=True) for c in campaigns.list_campaigns(engine_of(request))]
    return render.page(request, "campaigns.html", visitor, title="Campaigns", campaigns=items)


def _audit(request: Request, name: str) -> list[dict[str, object]]:
    """The campaign's audit queries run on the service database: their SQL as shown, columns and rows."""
    found = []
    with engine_of(request).connect() as connection:
        for query in CAMPAIGN_QUERIES:
            result = connection.execute(text(query.sql), {"name": name})
            found.append({"figure": query.figure, "sql": query.shown(name, ":name"), "columns": list(result.keys()),
                          "rows": [list(row) for row in result.all()]})
    return found


def plan_of(request: Request, campaign: dict[str, object]) -> tuple[dict[str, object] | None, str | None]:
    """The plan of the campaign at the participants it planned for, else at the reports it received (free: the
    spec and the public table only), or why there is none."""
    spec = campaign["spec"] if isinstance(campaign["spec"], dict) else {}
    participants = spec.get("participants") or campaign["reports"]
    if not participants:
        return None, "no plan: the campaign names no participant count and has no report yet"
    try:
        plan = planning.plan_stored(engine_of(request), str(campaign["name"]), int(participants))
    except InvalidInput as exc:
        return None, exc.message
    return plan.to_json(), None


def _page(request: Request, visitor: Visitor, name: str, fit: dict[str, object] | None = None,
          chart: object = None) -> Response:
    stored = campaigns.get_campaign(engine_of(request), name)
    campaign = stored.to_json(hide_seeded=True)
    plan, no_plan = plan_of(request, campaign)
    record = get_protocol(stored.protocol)
    return render.page(request, "campaign.html", visitor, title=f"Campaign {name}", campaign=campaign,
                       audit=_audit(request, name), models=record.models, fit=fit, chart=chart, plan=plan,
                       no_plan=no_plan, answers_marginals=record.marginals)


@router.get("/{name}")
def campaign_page(request: Request, name: Name, visitor: Visitor = Depends(anyone)) -> Response:
    return _page(request, visitor, name)


@router.get("/{name}/fit")
def campaign_fit(request: Request, name: Name, model: Annotated[str, Query(min_length=1, max_length=40)],
                 covariance: Annotated[str | None, Query(max_length=10)] = None,
                 visitor: Visitor = Depends(signed_in(STEWARD, ANALYST))) -> Response:
    """The campaign's page with a fit of ``model`` from its stored aggregates (free): its coefficients with their
    intervals as a chart and a table, the verdict and its reasons."""
    engine = engine_of(request)
    stored = campaigns.get_campaign(engine, name)
    stored.refuse_if_seeded()
    fit = estimates.fit_campaign(engine, name, model, covariance or None, False).to_json()
    names = list(fit["coefficients"])
    errors = fit.get("standard_errors") or {}
    chart = charts.intervals(names, [float(fit["coefficients"][n]) for n in names],
                             [None if errors.get(n) is None else float(errors[n]) for n in names],
                             label=f"Coefficients of the {model} fit of campaign {name} with their 95 % intervals")
    return _page(request, visitor, name, fit, chart)


@router.get("/{name}/marginal")
def campaign_marginal(request: Request, name: Name, columns: Columns,
                      visitor: Visitor = Depends(signed_in(STEWARD, ANALYST))) -> Response:
    """Any marginal of a marginals campaign (free, as ``POST /campaigns/{name}/marginal``): a chart with 95 %
    intervals and a table of its cells."""
    answer = marginal_answers.answer_marginal(engine_of(request), name, columns_of(columns))
    source = {"name": f"campaign {name!r}", "base": f"/console/campaigns/{quote(name, safe='')}",
              "intro": f"Campaign {name} ({answer['reports']:,} reports, each epsilon-LDP on the device)",
              "legend": "Any marginal of this campaign (free: post-processing of its reports)"}
    return marginal_view(request, visitor, answer, source, list(campaigns.get_campaign(engine_of(request),
                                                                                        name).features))


@router.get("/{name}/marginal.csv")
def campaign_marginal_csv(request: Request, name: Name, columns: Columns,
                          visitor: Visitor = Depends(signed_in(STEWARD, ANALYST))) -> Response:
    answer = marginal_answers.answer_marginal(engine_of(request), name, columns_of(columns))
    return marginal_csv_response(answer, f"campaign-{name}")


@router.get("/{name}/synthetic.csv")
def campaign_synthetic_csv(request: Request, name: Name, rows: Annotated[int, Query(ge=1, le=100_000)] = 1000,
                           visitor: Visitor = Depends(signed_in(STEWARD, ANALYST))) -> Response:
    return synthetic_csv_response(marginal_answers.answer_synthetic(engine_of(request), name, rows),
                                  f"campaign-{name}")
