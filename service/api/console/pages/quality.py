"""A release's quality, for stewards only: any marginal of a release beside the table's exact marginal, as overlaid
bars per cell, with the L1 error of the normalised answer. The exact counts are read from the table by its engine
(:class:`~service.data.oracle.TableCountOracle`, whose errors name no value) after the look is recorded
(:mod:`service.access.exact_views`); auditors see every recorded look on the ledger page."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from service.access import exact_views
from service.api.console import charts, render
from service.api.console.access import ConsoleRoute, Visitor, signed_in
from service.api.console.pages.releases import (
    Columns,
    ReleaseId,
    cells_chart,
    columns_of,
    marginal_table,
    visible_release,
)
from service.api.security import STEWARD, engine_of
from service.data.oracle import TableCountOracle
from service.releases import answers

router = APIRouter(prefix="/console/releases", route_class=ConsoleRoute, include_in_schema=False)
stewarding = signed_in(STEWARD)


@router.get("/{release_id}/quality")
def quality_page(request: Request, release_id: ReleaseId, columns: Columns,
                 visitor: Visitor = Depends(stewarding)) -> Response:
    release = visible_release(request, release_id, visitor)
    engine = engine_of(request)
    answer = answers.answer_marginal(engine, release_id, columns_of(columns))
    attributes = tuple(str(a) for a in answer["attributes"])  # type: ignore[attr-defined]
    exact_views.record(engine, release.dataset.name, release_id, visitor.principal, attributes)
    with TableCountOracle(engine, release.dataset) as oracle:
        exact = oracle.counts(attributes).astype(float)
    rows = marginal_table(answer)
    noisy = np.asarray(answer["counts"], dtype=float)
    total = float(exact.sum())
    error = float(np.abs(noisy - exact).sum() / total) if total > 0 else None
    for row, value in zip(rows, exact.ravel(), strict=True):
        row["exact"] = float(value)
    chart = cells_chart(rows, answer, f"release {release_id}",
                        beside=charts.Series("exact (the table)", list(exact.ravel())),
                        label=f"Release {release_id}'s marginal over {', '.join(attributes)} beside the table's "
                              "exact marginal")
    return render.page(request, "quality.html", visitor, title=f"Quality of release {release_id}",
                       release=release.to_json(hide_seeded_details=True), answer=answer, rows=rows, chart=chart,
                       error=error, columns=list(release.dataset.domain.names))
