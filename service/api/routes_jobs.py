"""Job routes: the progress and the answer of a request sent with ``Prefer: respond-async``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from service.access.auth import Principal
from service.api import jobs, schemas
from service.api.guard import GuardedRoute
from service.api.paths import path_id
from service.api.security import EVERYONE, engine_of, require
from service.errors import NotFound
from service.releases.recovery import recover_jobs

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=GuardedRoute)

JobId = path_id("Job id (from the 202 answer's `job_id`).")


@router.get("/{job_id}", response_model=schemas.JobOut, summary="A background request's progress and answer")
def get_job(request: Request, job_id: JobId, principal: Principal = Depends(require(*EVERYONE))) -> dict[str, object]:
    """While `state` is `running`: the release's steps (`progress`) and, while a model is fitted, its
    iterations (`fit`). Then `status_code` and `result`: the answer the synchronous request would have
    given. Readable by the key that sent the request and by stewards whose scope covers its dataset; to anyone
    else a job does not exist (404, so ids reveal nothing). A `running` job whose server is provably gone (its
    process dead, or its lease expired: docs/operations.md) is failed with 409 `request_interrupted` as it is
    read, by whichever server answers."""
    engine = engine_of(request)
    job = jobs.get(engine, job_id)
    if not jobs.visible_to(job, principal.key_id, principal.role, principal.may_access(job.dataset)):
        raise NotFound(f"no job with id {job_id}", code="job_not_found")
    if job.state == "running" and recover_jobs(engine, only=job_id):
        job = jobs.get(engine, job_id)
    return job.to_json()
