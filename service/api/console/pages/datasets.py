"""Datasets and their budgets: the list, and a dataset's page (its engine, privacy unit, domain with labels, budget
gauges with the anchor explained, and its releases). What each role sees is what the API shows it: the exact row
count to stewards only (``service.api.routes_datasets.dataset_out``)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from service.accounting import accountant
from service.api.console import render
from service.api.console.access import ConsoleRoute, Visitor, anyone
from service.api.routes_datasets import Name, dataset_out
from service.api.security import check_scope, engine_of
from service.data import datasets
from service.errors import ServiceError
from service.releases import answers

router = APIRouter(prefix="/console/datasets", route_class=ConsoleRoute, include_in_schema=False)


def budget_view(status: dict[str, object]) -> dict[str, object]:
    """The gauges of a budget (epsilon, delta, rho: spent against what can be spent) and the anchor in one sentence."""
    rho_spent = float(status["rho_spent"])  # type: ignore[arg-type]
    rho_room = rho_spent + float(status["rho_spendable"])  # type: ignore[arg-type]
    if status["zcdp_anchor_fixed"]:
        anchor = (f"The first zCDP release fixed the accountant's Rényi order at alpha = {status['zcdp_alpha']:.6g} "
                  f"and paid a one-time offset of epsilon {status['zcdp_offset']:.6g}; every later zCDP release costs "
                  "only alpha × rho in epsilon (docs/privacy.md 6.3).")
    else:
        anchor = ("No zCDP release yet: the first one (gaussian, residual, mst, aim) also pays a one-time offset in "
                  "epsilon that fixes how rho is priced; later ones pay only their rho's price (docs/privacy.md 6.3).")
    return {"status": status, "anchor": anchor, "gauges": [
        ("epsilon", float(status["epsilon_spent"]), float(status["epsilon_total"])),  # type: ignore[arg-type]
        ("delta", float(status["delta_spent"]), float(status["delta_total"])),  # type: ignore[arg-type]
        ("rho (zCDP)", rho_spent, rho_room),
    ]}


def budget_or_none(request: Request, name: str) -> dict[str, object] | None:
    try:
        return budget_view(accountant.budget_status(engine_of(request), name).to_json())
    except ServiceError as exc:
        if exc.code == "no_budget":
            return None
        raise


@router.get("")
def dataset_list(request: Request, visitor: Visitor = Depends(anyone)) -> Response:
    engine = engine_of(request)
    shown = [dataset_out(d, visitor.principal) for d in datasets.list_datasets(engine)
             if visitor.principal.may_access(d.name)]
    budgets = {d["name"]: budget_or_none(request, str(d["name"])) for d in shown}
    return render.page(request, "datasets.html", visitor, title="Datasets" if visitor.role != "auditor" else "Budgets",
                       datasets=shown, budgets=budgets)


@router.get("/{name}")
def dataset_page(request: Request, name: Name, visitor: Visitor = Depends(anyone)) -> Response:
    check_scope(visitor.principal, name)
    engine = engine_of(request)
    dataset = dataset_out(datasets.get_dataset(engine, name), visitor.principal)
    releases = [r.to_json(hide_seeded_details=True) for r in answers.list_releases(engine, name)]
    return render.page(request, "dataset.html", visitor, title=f"Dataset {name}", dataset=dataset,
                       budget=budget_or_none(request, name), releases=releases)
