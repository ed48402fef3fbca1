"""Where a dataset's rows live, over HTTP (stewards): attach a table through a registered source, and migrate a
stored table to another engine. Neither route takes a server path or a database URL: the operator registers the
places tables may be attached from (``marginalia source add``, :mod:`service.data.attach.sources`), and every error is
rewritten so that it never shows where a source reads (:mod:`service.data.attach.through_source`).

Both read every row (attaching checks each value against the spec, migrating copies it), so on a large table they
take minutes: with ``Prefer: respond-async`` they answer 202 and a job (:mod:`service.api.background`) whose progress
and final answer, the synchronous one exactly, ``GET /jobs/{id}`` shows.

An attach answers data-dependent facts about the source's table (whether every value fits the spec, the exact row
count: docs/privacy.md 1.2), so it is made only by a steward key whose scope covers the source, and its answer goes
to that key only (its job is not shown to the other stewards of the dataset's name:
:func:`service.api.jobs.visible_to`).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from service.access.auth import Principal
from service.api import limits, schemas
from service.api.background import respond
from service.api.errors import SafeJSONResponse
from service.api.guard import GuardedRoute
from service.api.routes_datasets import ACCEPTED, Name, Prefer, dataset_out
from service.api.security import STEWARD, check_scope, check_source_scope, engine_of, require
from service.data import datasets
from service.data.attach.through_source import attach_from_source
from service.data.relocate import migrate_dataset
from service.mechanisms.progress import Progress

#: The job progress message of a migration's copy.
COPYING = "copying rows"

router = APIRouter(prefix="/datasets", tags=["datasets"], route_class=GuardedRoute)


@router.post("/attach", status_code=201, response_model=schemas.DatasetOut, responses=ACCEPTED,
             summary="Attach a table where it lives, through a registered source (stewards)",
             openapi_extra=limits.body(limits.SPEC_BODY, fits="a binning spec of 1,000 columns of 200 categories "
                                       "named in up to 30 ASCII characters, and 1,000 Parquet paths"))
def attach_dataset(
    request: Request, body: schemas.DatasetAttach, principal: Principal = Depends(require(STEWARD)),
    prefer: Prefer = None,  # noqa: ARG001 - read by background.respond; declared for the schema
) -> SafeJSONResponse:
    """Register a table without copying it: Parquet files inside a folder source (`parquet`: paths or globs relative
    to the folder), or a table of a SQL or Spark source (`table`), coded by the public binning spec `bins` inside the
    engine (one row per unit with `privacy_unit`). Everything is checked before anything is stored (the files or
    table exist and have the spec's columns, every value fits the spec); any failure is one error naming the
    parameter or column, and stores nothing. Sources are registered by the operator (`marginalia source add`); a key
    attaches only through the sources its scope names (403 otherwise, before the source is looked up), and 404 for an
    unknown source. A table a dataset already reads is a 409 `already_attached` (one location is one dataset), naming
    that dataset when the key's scope covers it. The check reads every row: send `Prefer: respond-async` to get a job
    at once (202) and follow its phases; its `result` is this answer or this error, shown to this key only."""
    check_scope(principal, body.name)
    check_source_scope(principal, body.source)
    engine = engine_of(request)

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        attach_from_source(engine, body.name, body.source, parquet=body.parquet, table=body.table,
                           bins=body.bins.model_dump(exclude_none=True), privacy_unit=body.privacy_unit,
                           progress=progress, may_name=principal.may_access)
        return 201, dataset_out(datasets.get_dataset(engine, body.name), principal)

    return respond(request, principal.key_id, work, dataset=body.name, kind="attach",
                   location=f"/datasets/{body.name}")


@router.post("/{name}/migrate", response_model=schemas.DatasetOut, responses=ACCEPTED,
             summary="Move a stored table to another engine (stewards)", openapi_extra=limits.body(limits.SMALL_BODY))
def migrate(
    request: Request, name: Name, body: schemas.DatasetMigrate, principal: Principal = Depends(require(STEWARD)),
    prefer: Prefer = None,  # noqa: ARG001 - read by background.respond; declared for the schema
) -> SafeJSONResponse:
    """As `marginalia dataset migrate`: a SQL table of the service database is copied, streamed, into a Parquet file
    (`engine: duckdb`); the dataset switches only once the copy is complete and holds every row. Its budget, ledger
    and releases are untouched; a failure leaves it where it was. An attached table stays where it lives (422); a
    dataset already in the engine asked is a 409. The copy reads every row: send `Prefer: respond-async` to get a job
    at once (202) whose `progress` counts the rows copied; its `result` is this answer or this error."""
    check_scope(principal, name)
    engine = engine_of(request)

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        moved = migrate_dataset(engine, name, body.engine, progress=lambda done, total: progress(done, total, COPYING))
        return 200, dataset_out(moved, principal)

    return respond(request, principal.key_id, work, dataset=name, kind="migrate")
