"""The one way a route spends privacy budget: :func:`run_charged`, idempotent by header, and
synchronous or in the background.

A charging route (a marginal release, a regression fit that may need a new release) validates its
body, then hands ``run_charged`` a function ``work(progress)`` that does the work through the
accountant and returns ``(status, body)``. With an ``Idempotency-Key`` header the request claims
the key first (service/access/idempotency.py) and its response is stored for retries:

* success, or a failure that is not a :class:`ServiceError` (the release may have drawn noise, so
  its charge may stand): the response is stored and replayed to every retry;
* a :class:`ServiceError` (validation, unknown dataset, the accountant's refusal): nothing was
  charged, so the claim is dropped and a corrected retry with the same key runs normally.

With ``Prefer: respond-async`` (RFC 7240) the answer is ``202 Accepted`` at once: a job
(service/api/jobs.py, ``Location: /jobs/{id}``) whose progress and final answer ``GET /jobs/{id}``
shows. The job's answer is exactly the synchronous request's. For idempotency the 202 is the
response: a retry with the same key gets the same job back (``Idempotent-Replayed: true``) and
charges nothing; if the job ends with a :class:`ServiceError` (nothing charged) the claim is
dropped, as above, so a corrected retry with the same key makes a new job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi import Request
from pydantic import BaseModel
from sqlalchemy import Engine

from db.models import Job
from service.access import idempotency
from service.access.auth import Principal
from service.api import jobs
from service.api.errors import SafeJSONResponse, error_body_for
from service.api.security import engine_of
from service.errors import ServiceError
from service.mechanisms.progress import Progress, no_progress
from service.releases import runners

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAY_HEADER = "Idempotent-Replayed"
PREFER_ASYNC = "respond-async"

Work = Callable[[Progress], tuple[int, dict[str, object]]]


def prefers_async(request: Request) -> bool:
    """Whether the request says ``Prefer: respond-async`` (RFC 7240; other preferences may follow)."""
    return any(part.strip().split("=")[0].strip().lower() == PREFER_ASYNC
               for value in request.headers.getlist("prefer") for part in value.split(","))


def run_charged(
    request: Request,
    principal: Principal,
    body: BaseModel,
    work: Work,
    location: Callable[[dict[str, object]], str] | None = None,
    *,
    dataset: str,
    kind: str,
) -> SafeJSONResponse:
    """Run ``work`` once per (API key, Idempotency-Key), now or as a job; see the module docstring."""
    engine = engine_of(request)
    background = prefers_async(request)
    key = request.headers.get(IDEMPOTENCY_HEADER)
    claimed: idempotency.Claim | None = None
    if key is not None:
        fingerprint = idempotency.request_hash(request.method, request.url.path, body.model_dump(mode="json"))
        found = idempotency.claim(engine, principal.key_id, key, fingerprint)
        if isinstance(found, idempotency.Replay):
            response = _respond(found.status, found.body, location)
            response.headers[REPLAY_HEADER] = "true"
            return response
        claimed = found
    if background:
        return _start_job(engine, principal, work, claimed, dataset, kind)
    try:
        status, payload = work(no_progress)
    except ServiceError:
        if claimed is not None:
            idempotency.abandon(engine, claimed)
        raise
    except Exception as exc:  # noqa: BLE001 - answered and stored, so every retry gets the same answer
        if claimed is None:
            raise
        failed_status, failed_body = error_body_for(exc)
        idempotency.complete(engine, claimed, failed_status, failed_body)
        return _respond(failed_status, failed_body, None)
    if claimed is not None:
        idempotency.complete(engine, claimed, status, payload)
    return _respond(status, payload, location)


def _start_job(engine: Engine, principal: Principal, work: Work, claimed: idempotency.Claim | None, dataset: str,
               kind: str) -> SafeJSONResponse:
    job_id = jobs.create(engine, dataset, kind, principal.key_id)
    accepted = jobs.get(engine, job_id).to_json()
    if claimed is not None:
        idempotency.complete(engine, claimed, 202, accepted)  # a retry gets this very job back
    thread = threading.Thread(target=_run_job, args=(engine, job_id, work, claimed), name=f"job-{job_id}",
                              daemon=True)
    thread.start()
    response = _respond(202, accepted, None)
    response.headers["Location"] = f"/jobs/{job_id}"
    response.headers["Preference-Applied"] = PREFER_ASYNC
    return response


def _run_job(engine: Engine, job_id: int, work: Work, claimed: idempotency.Claim | None) -> None:
    """The job's thread: the work with progress into the job's row, then its answer (never raises)."""
    with runners.Heartbeat(engine, Job.__table__, job_id):
        try:
            status, payload = work(jobs.JobProgress(engine, job_id))
        except ServiceError as exc:  # nothing was charged: the key may be used again
            jobs.finish(engine, job_id, "failed", exc.status, exc.to_json())
            if claimed is not None:
                idempotency.abandon(engine, claimed)
            return
        except Exception as exc:  # noqa: BLE001 - the answer is the job's, as the synchronous request's would be
            failed_status, failed_body = error_body_for(exc)
            jobs.finish(engine, job_id, "failed", failed_status, failed_body)
            return
        jobs.finish(engine, job_id, "done", status, payload)


def _respond(status: int, payload: object, location: Callable[[dict[str, object]], str] | None) -> SafeJSONResponse:
    response = SafeJSONResponse(payload, status_code=status)
    if location is not None and 200 <= status < 300 and isinstance(payload, dict) and "release_id" in payload:
        response.headers["Location"] = location(payload)
    return response
