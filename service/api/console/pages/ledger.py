"""The auditor's view of a budget: the ledger as a timeline (the composed epsilon after every entry, each release a
step that opens it), the composition of what is spent (pure epsilon, delta, rho and the zCDP anchor that prices it),
and beside each figure the SQL that recomputes it from the audit views (docs/privacy.md 6.4, README "Auditing with
plain SQL"), run on the service database as it is shown, with its result; the ledger as CSV. Auditors and stewards,
as ``GET /datasets/{name}/ledger``."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from sqlalchemy import text
from starlette.responses import Response

from service.accounting import accountant
from service.api.console import charts, render
from service.api.console.access import ConsoleRoute, Visitor, signed_in
from service.api.console.pages.datasets import budget_or_none
from service.api.console.pages.releases import csv_response
from service.api.routes_datasets import Name
from service.api.security import AUDITOR, STEWARD, check_scope, engine_of

router = APIRouter(prefix="/console/datasets", route_class=ConsoleRoute, include_in_schema=False)
auditing = signed_in(AUDITOR, STEWARD)


@dataclass(frozen=True)
class AuditQuery:
    """A figure of a page and the SQL over the audit views that recomputes it (``:dataset``, or another named
    parameter, bound to the name the page is about)."""

    figure: str
    sql: str

    def shown(self, value: str, parameter: str = ":dataset") -> str:
        """The SQL as an auditor pastes it into a SQL shell: the parameter's value as a quoted literal."""
        return self.sql.replace(parameter, "'" + value.replace("'", "''") + "'")


AUDIT_QUERIES = (
    AuditQuery("Composed epsilon spent (ledger units of 1e-12; `budget show` divides by 1e12)",
               "SELECT epsilon_spent_units FROM budget_remaining WHERE dataset = :dataset"),
    AuditQuery("The same figure recomputed from the ledger's sums and the anchor, C + ceil(alpha R) + t",
               "SELECT epsilon_spent_units, epsilon_recomputed_units, agrees FROM budget_audit "
               "WHERE dataset = :dataset"),
    AuditQuery("The sums behind it: pure epsilon, delta, rho and the priced epsilon",
               "SELECT SUM(epsilon_units), SUM(delta_units), SUM(rho_units), SUM(epsilon_priced_units) "
               "FROM privacy_ledger WHERE dataset = :dataset"),
    AuditQuery("The total and what remains (epsilon, delta)",
               "SELECT epsilon_total, epsilon_remaining, delta_remaining FROM budget_remaining "
               "WHERE dataset = :dataset"),
    AuditQuery("Every look a steward took at this table's exact figures (the console's quality view), oldest first",
               "SELECT v.created_at, v.principal, v.release_id, v.attributes_json FROM exact_views v "
               "JOIN datasets d ON d.id = v.dataset_id WHERE d.name = :dataset ORDER BY v.id"),
)


def run_audit(request: Request, dataset: str) -> list[dict[str, object]]:
    """Every audit query run on the service database: its SQL as shown, its columns and its rows."""
    found = []
    with engine_of(request).connect() as connection:
        for query in AUDIT_QUERIES:
            result = connection.execute(text(query.sql), {"dataset": dataset})
            found.append({"figure": query.figure, "sql": query.shown(dataset), "columns": list(result.keys()),
                          "rows": [list(row) for row in result.all()]})
    return found


def timeline_steps(entries: list[dict[str, object]]) -> list[charts.Step]:
    steps = []
    for entry in entries:
        release = entry["release_id"]
        what = f"{entry['entry']} {entry['mechanism']}" + (f" (release {release})" if release is not None else "")
        steps.append(charts.Step(str(entry["created_at"]).replace("T", " ")[:19], float(entry["epsilon_spent_after"]),
                                 what, None if release is None else f"/console/releases/{release}"))
    return steps


@router.get("/{name}/ledger")
def ledger_page(request: Request, name: Name, visitor: Visitor = Depends(auditing)) -> Response:
    check_scope(visitor.principal, name)
    entries = accountant.ledger_rows(engine_of(request), name)
    budget = budget_or_none(request, name)
    total = float(budget["status"]["epsilon_total"]) if budget else 0.0  # type: ignore[index]
    chart = charts.timeline(timeline_steps(entries), total,
                            label=f"Composed epsilon spent on {name} after each ledger entry, against the total")
    return render.page(request, "ledger.html", visitor, title=f"Ledger of {name}", dataset=name, entries=entries,
                       budget=budget, chart=chart, audit=run_audit(request, name))


@router.get("/{name}/ledger.csv")
def ledger_csv(request: Request, name: Name, visitor: Visitor = Depends(auditing)) -> Response:
    check_scope(visitor.principal, name)
    entries = accountant.ledger_rows(engine_of(request), name)
    header = ["entry_id", "entry", "release_id", "release_status", "campaign_id", "mechanism", "epsilon", "delta",
              "rho", "epsilon_priced", "epsilon_spent_after", "principal", "note", "created_at"]
    return csv_response(header, [[entry.get(c) for c in header] for entry in entries], f"ledger-{name}.csv")
