"""Where a dataset's rows live, over HTTP (stewards): attach a table through a registered source, and migrate a
stored table to another engine. Neither route takes a server path or a database URL: the operator registers the
places tables may be attached from (``marginalia source add``, :mod:`service.data.sources`), and every error is
rewritten so that it never shows where a source reads (:mod:`service.data.source_attach`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from service.access.auth import Principal
from service.api import schemas
from service.api.errors import SafeJSONResponse
from service.api.routes_datasets import Name, dataset_out
from service.api.security import STEWARD, check_scope, engine_of, require
from service.data import datasets
from service.data.relocate import migrate_dataset
from service.data.source_attach import attach_from_source

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.post("/attach", status_code=201, response_model=schemas.DatasetOut,
             summary="Attach a table where it lives, through a registered source (stewards)")
def attach_dataset(
    request: Request, body: schemas.DatasetAttach, principal: Principal = Depends(require(STEWARD))
) -> SafeJSONResponse:
    """Register a table without copying it: Parquet files inside a folder source (`parquet`: paths or globs relative
    to the folder), or a table of a SQL or Spark source (`table`), coded by the public binning spec `bins` inside the
    engine (one row per unit with `privacy_unit`). Everything is checked before anything is stored (the files or
    table exist and have the spec's columns, every value fits the spec); any failure is one error naming the
    parameter or column, and stores nothing. Sources are registered by the operator (`marginalia source add`); 404
    for an unknown source."""
    check_scope(principal, body.name)
    engine = engine_of(request)
    attach_from_source(engine, body.name, body.source, parquet=body.parquet, table=body.table,
                       bins=body.bins.model_dump(exclude_none=True), privacy_unit=body.privacy_unit)
    payload = dataset_out(datasets.get_dataset(engine, body.name), principal)
    return SafeJSONResponse(payload, status_code=201, headers={"Location": f"/datasets/{body.name}"})


@router.post("/{name}/migrate", response_model=schemas.DatasetOut,
             summary="Move a stored table to another engine (stewards)")
def migrate(
    request: Request, name: Name, body: schemas.DatasetMigrate, principal: Principal = Depends(require(STEWARD))
) -> dict[str, object]:
    """As `marginalia dataset migrate`: a SQL table of the service database is copied, streamed, into a Parquet file
    (`engine: duckdb`); the dataset switches only once the copy is complete and holds every row. Its budget, ledger
    and releases are untouched; a failure leaves it where it was. An attached table stays where it lives (422); a
    dataset already in the engine asked is a 409."""
    check_scope(principal, name)
    return dataset_out(migrate_dataset(engine_of(request), name, body.engine), principal)
