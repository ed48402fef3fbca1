"""Releases and their answers: the list, a release's page (mechanism, what it asked and measured, its charge in the
ledger for those who may read the ledger), any marginal of it as a chart with 95 % intervals and as CSV, and
synthetic rows as CSV. Answers are free post-processing (``service.releases.answers``), as through the API, and for
the same roles: analysts and stewards (``service.api.routes_releases``)."""

from __future__ import annotations

import csv
import io
import itertools
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.accounting import accountant
from service.api.console import charts, render
from service.api.console.access import ConsoleRoute, Visitor, anyone, signed_in
from service.api.paths import path_id
from service.api.security import ANALYST, AUDITOR, STEWARD, check_scope, engine_of
from service.errors import InvalidInput
from service.releases import answers

router = APIRouter(prefix="/console/releases", route_class=ConsoleRoute, include_in_schema=False)
ReleaseId = path_id("Release id.")
answering = signed_in(ANALYST, STEWARD)

#: A marginal with more cells than this is shown as a table only (a chart of thousands of bars reads as noise).
MAX_CHART_CELLS = 400
Columns = Annotated[list[str], Query(max_length=8, description="The marginal's columns.")]


def visible_release(request: Request, release_id: int, visitor: Visitor) -> answers.StoredRelease:
    """The release, once the visitor's scope covers its dataset (404 when there is none, as the API answers)."""
    release = answers.get_release(engine_of(request), release_id)
    check_scope(visitor.principal, release.dataset.name)
    return release


def charge_of(request: Request, visitor: Visitor, dataset: str, release_id: int) -> list[dict[str, object]]:
    """The ledger's rows of this release (its charge and any refund), for those who may read the ledger."""
    if visitor.role not in (STEWARD, AUDITOR):
        return []
    return accountant.ledger_rows(engine_of(request), dataset, release_id)


@router.get("")
def release_list(request: Request, visitor: Visitor = Depends(anyone)) -> Response:
    items = [r.to_json(hide_seeded_details=True) for r in answers.list_releases(engine_of(request), None)
             if visitor.principal.may_access(r.dataset.name)]
    return render.page(request, "releases.html", visitor, title="Releases", releases=items)


@router.get("/{release_id}")
def release_page(request: Request, release_id: ReleaseId, visitor: Visitor = Depends(anyone)) -> Response:
    release = visible_release(request, release_id, visitor)
    shown = release.to_json(hide_seeded_details=True)
    return render.page(request, "release.html", visitor, title=f"Release {release_id}", release=shown,
                       columns=list(release.dataset.domain.names),
                       charge=charge_of(request, visitor, release.dataset.name, release_id))


def marginal_table(answer: dict[str, object]) -> list[dict[str, object]]:
    """A marginal answer's cells, one row each: the label of each column's value, the count, its standard error
    and its 95 % interval (no interval where the answer has no standard errors)."""
    attributes = list(answer["attributes"])  # type: ignore[call-overload]
    counts = np.asarray(answer["counts"], dtype=float)
    errors = None if answer["standard_errors"] is None else np.asarray(answer["standard_errors"], dtype=float)
    labels: dict[str, list[str]] = answer.get("labels") or {}  # type: ignore[assignment]
    rows = []
    for cell in itertools.product(*(range(n) for n in counts.shape)):
        names = {a: (labels[a][code] if a in labels and code < len(labels[a]) else str(code))
                 for a, code in zip(attributes, cell, strict=True)}
        se = None if errors is None else float(errors[cell])
        value = float(counts[cell])
        rows.append({"cell": names, "count": value, "standard_error": se,
                     "low": None if se is None else value - charts.Z95 * se,
                     "high": None if se is None else value + charts.Z95 * se})
    return rows


def cells_chart(rows: list[dict[str, object]], answer: dict[str, object], source: str, *, label: str,
                beside: charts.Series | None = None) -> object:
    """The bars of a marginal's cells (:func:`marginal_table`) from ``source`` (``release 3``, ``campaign
    'survey'``), each with its 95 % interval when the answer has standard errors, and the series ``beside`` next to
    them; None past :data:`MAX_CHART_CELLS` cells."""
    if len(rows) > MAX_CHART_CELLS:
        return None
    categories = [", ".join(f"{a}={v}" for a, v in row["cell"].items()) for row in rows]  # type: ignore[attr-defined]
    errors = None if answer["standard_errors"] is None else [float(r["standard_error"]) for r in rows]  # type: ignore[arg-type]
    series = [charts.Series(source, [float(r["count"]) for r in rows], errors)]  # type: ignore[arg-type]
    return charts.bars(categories, series + ([] if beside is None else [beside]), label=label)


@router.get("/{release_id}/marginal")
def marginal_page(request: Request, release_id: ReleaseId, columns: Columns,
                  visitor: Visitor = Depends(answering)) -> Response:
    release = visible_release(request, release_id, visitor)
    answer = answers.answer_marginal(engine_of(request), release_id, columns_of(columns))
    source = {"name": f"release {release_id}", "base": f"/console/releases/{release_id}",
              "intro": f"Release {release_id} ({release.mechanism}) of {release.dataset.name}",
              "legend": "Any marginal of this release (free: post-processing)"}
    return marginal_view(request, visitor, answer, source, list(release.dataset.domain.names))


def marginal_view(request: Request, visitor: Visitor, answer: dict[str, object], source: dict[str, str],
                  columns: list[str]) -> Response:
    """The page of a marginal answer from ``source`` (a release or a campaign: its name, its pages' base path, the
    sentence that introduces it and the legend of the form asking for another): a chart and a table of its cells."""
    rows = marginal_table(answer)
    chart = cells_chart(rows, answer, source["name"], label=f"Counts of the marginal over "
                        f"{', '.join(answer['attributes'])} from {source['name']}, with 95 % intervals")
    return render.page(request, "marginal.html", visitor, title=f"Marginal of {source['name']}", source=source,
                       answer=answer, rows=rows, chart=chart, max_cells=MAX_CHART_CELLS, columns=columns)


def columns_of(columns: list[str]) -> list[str]:
    chosen = [c for c in dict.fromkeys(c.strip() for c in columns) if c]
    if not chosen:
        raise InvalidInput("columns: choose at least one column of the release's dataset", code="invalid_parameter")
    return chosen


def csv_response(header: list[str], rows: list[list[object]], filename: str) -> Response:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@router.get("/{release_id}/marginal.csv")
def marginal_csv(request: Request, release_id: ReleaseId, columns: Columns,
                 visitor: Visitor = Depends(answering)) -> Response:
    visible_release(request, release_id, visitor)
    answer = answers.answer_marginal(engine_of(request), release_id, columns_of(columns))
    return marginal_csv_response(answer, f"release-{release_id}")


def marginal_csv_response(answer: dict[str, object], stem: str) -> Response:
    """A marginal answer as CSV: each cell's labels, count, standard error and 95 % interval."""
    attributes = [str(a) for a in answer["attributes"]]  # type: ignore[attr-defined]
    rows = [[*row["cell"].values(), row["count"], row["standard_error"], row["low"], row["high"]]  # type: ignore[union-attr]
            for row in marginal_table(answer)]
    return csv_response([*attributes, "count", "standard_error", "ci95_low", "ci95_high"], rows,
                        f"{stem}-{'-'.join(attributes)}.csv")


@router.get("/{release_id}/synthetic.csv")
def synthetic_csv(request: Request, release_id: ReleaseId, rows: Annotated[int, Query(ge=1, le=100_000)] = 1000,
                  visitor: Visitor = Depends(answering)) -> Response:
    visible_release(request, release_id, visitor)
    return synthetic_csv_response(answers.answer_synthetic(engine_of(request), release_id, rows),
                                  f"release-{release_id}")


def synthetic_csv_response(answer: dict[str, object], stem: str) -> Response:
    """A synthetic answer's rows as CSV."""
    names = list(answer["columns"])  # type: ignore[call-overload]
    data = answer["data"]
    table = [[data[c][i] for c in names] for i in range(int(answer["rows"]))]  # type: ignore[index, call-overload]
    return csv_response(names, table, f"{stem}-synthetic-{answer['rows']}.csv")
