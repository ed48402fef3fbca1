"""Release routes: list and describe releases, and answer from them (free post-processing).

A release made in-process with a known seed (tests, benchmarks) is listed with ``"seeded": true`` and without its
details, and answers nothing here (409 ``seeded_release``): whoever knows its seed can subtract its noise."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from service.access.auth import Principal
from service.api import limits, schemas
from service.api.guard import GuardedRoute
from service.api.paths import path_id
from service.api.security import ANALYST, EVERYONE, STEWARD, check_scope, engine_of, require
from service.releases import answers
from service.releases.answers import StoredRelease

router = APIRouter(prefix="/releases", tags=["releases"], route_class=GuardedRoute)

ReleaseId = path_id("Release id.")


def _visible(request: Request, release_id: int, principal: Principal) -> StoredRelease | None:
    """The release, when the caller's scope must be checked against its dataset (scoped stewards);
    None for unscoped callers, whose answers come straight from the service (which 404s)."""
    if principal.scope is None:
        return None
    release = answers.get_release(engine_of(request), release_id)
    check_scope(principal, release.dataset.name)
    return release


@router.get("", response_model=list[schemas.ReleaseInfo], summary="List releases")
def list_releases(
    request: Request,
    principal: Principal = Depends(require(*EVERYONE)),
    dataset: Annotated[str | None, Query(min_length=1, max_length=schemas.MAX_NAME, pattern=schemas.NAME_PATTERN,
                                         description="Only the releases of this dataset.")] = None,
) -> list[dict[str, object]]:
    if dataset is not None:
        check_scope(principal, dataset)
    items = answers.list_releases(engine_of(request), dataset)
    return [r.to_json(hide_seeded_details=True) for r in items if principal.may_access(r.dataset.name)]


@router.get("/{release_id}", response_model=schemas.ReleaseInfo, summary="A release's mechanism, parameters, status")
def get_release(
    request: Request, release_id: ReleaseId, principal: Principal = Depends(require(*EVERYONE))
) -> dict[str, object]:
    release = _visible(request, release_id, principal) or answers.get_release(engine_of(request), release_id)
    return release.to_json(hide_seeded_details=True)


@router.post("/{release_id}/marginal", response_model=schemas.MarginalOut,
             summary="Any marginal from a release (free; analysts, stewards)",
             openapi_extra=limits.body(limits.NAMES_BODY))
def marginal(
    request: Request,
    release_id: ReleaseId,
    body: schemas.MarginalQuery,
    principal: Principal = Depends(require(ANALYST, STEWARD)),
) -> dict[str, object]:
    _visible(request, release_id, principal)
    return answers.answer_marginal(engine_of(request), release_id, list(body.attributes), codes=body.codes,
                                   bootstrap=body.bootstrap)


@router.post("/{release_id}/synthetic", response_model=schemas.SyntheticOut,
             summary="Synthetic rows drawn from a release (free; analysts, stewards)",
             openapi_extra=limits.body(limits.SMALL_BODY))
def synthetic(
    request: Request,
    release_id: ReleaseId,
    body: schemas.SyntheticQuery,
    principal: Principal = Depends(require(ANALYST, STEWARD)),
) -> dict[str, object]:
    _visible(request, release_id, principal)
    return answers.answer_synthetic(engine_of(request), release_id, body.rows, codes=body.codes)
