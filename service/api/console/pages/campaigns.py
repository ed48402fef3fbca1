"""Local-DP campaigns: the list, and a campaign's page (its protocol and spec, its rounds with the reports each
received, the local guarantee every participant has, and the participants' spend against their caps, in aggregate:
no pseudonym is shown), with the SQL over the audit views that gives each figure. The readers of
``GET /campaigns/{name}``: stewards, analysts and auditors."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy import text
from starlette.responses import Response

from service.api.console import render
from service.api.console.access import ConsoleRoute, Visitor, anyone
from service.api.console.pages.ledger import AuditQuery
from service.api.routes_campaigns import Name
from service.api.security import engine_of
from service.campaigns import campaigns

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


@router.get("/{name}")
def campaign_page(request: Request, name: Name, visitor: Visitor = Depends(anyone)) -> Response:
    campaign = campaigns.get_campaign(engine_of(request), name).to_json(hide_seeded=True)
    found = []
    with engine_of(request).connect() as connection:
        for query in CAMPAIGN_QUERIES:
            result = connection.execute(text(query.sql), {"name": name})
            found.append({"figure": query.figure, "sql": query.shown(name, ":name"), "columns": list(result.keys()),
                          "rows": [list(row) for row in result.all()]})
    return render.page(request, "campaign.html", visitor, title=f"Campaign {name}", campaign=campaign, audit=found)
