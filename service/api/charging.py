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
shows (:func:`service.api.background.start`, shared with the routes that spend nothing). The job's answer is
exactly the synchronous request's. For idempotency the 202 is the
response: a retry with the same key gets the same job back (``Idempotent-Replayed: true``) and
charges nothing; if the job ends with a :class:`ServiceError` (nothing charged) the claim is
dropped, as above, so a corrected retry with the same key makes a new job.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request
from pydantic import BaseModel
from sqlalchemy import Engine

from db.models import IdempotencyRecord
from service import runners
from service.access import idempotency
from service.access.auth import Principal
from service.api import background
from service.api.background import Work, charge_stands, prefers_async
from service.api.errors import SafeJSONResponse, database_down, error_body_for
from service.api.security import engine_of
from service.errors import ServiceError
from service.mechanisms.progress import no_progress

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAY_HEADER = "Idempotent-Replayed"


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
    in_background = prefers_async(request)
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
    if in_background:
        return _start_job(engine, principal, work, claimed, dataset, kind)
    try:
        if claimed is None:
            status, payload = work(no_progress)
        else:  # the claim's lease: no other server marks it interrupted while this one runs it
            with runners.Heartbeat(engine, IdempotencyRecord.__table__, claimed.record_id):
                status, payload = work(no_progress)
    except ServiceError as exc:
        if claimed is not None and charge_stands(exc):  # charged: every retry with the key gets this answer
            body = exc.to_json()
            idempotency.complete(engine, claimed, exc.status, body)
            return _respond(exc.status, body, None)
        if claimed is not None:
            idempotency.abandon(engine, claimed)
        raise
    except Exception as exc:  # noqa: BLE001 - answered and stored, so every retry gets the same answer
        if claimed is None or database_down(exc):
            # the database is down: the claim stays open (a retry with the key is told it is in progress, never
            # charged twice) and the caller gets 503 (service/api/errors.py); recovery closes the claim
            raise
        failed_status, failed_body = error_body_for(exc)
        idempotency.complete(engine, claimed, failed_status, failed_body)
        return _respond(failed_status, failed_body, None)
    if claimed is not None:
        idempotency.complete(engine, claimed, status, payload)
    return _respond(status, payload, location)


def _start_job(engine: Engine, principal: Principal, work: Work, claimed: idempotency.Claim | None, dataset: str,
               kind: str) -> SafeJSONResponse:
    """The job of a charging request: its 202 is the claim's stored answer (a retry gets this very job back), and a
    job refused before any charge frees the key, as a synchronous refusal does."""
    if claimed is None:
        return background.start(engine, principal.key_id, work, dataset=dataset, kind=kind)
    claim = claimed
    return background.start(engine, principal.key_id, work, dataset=dataset, kind=kind,
                            accepted=lambda body: idempotency.complete(engine, claim, 202, body),
                            refused=lambda: idempotency.abandon(engine, claim))


def _respond(status: int, payload: object, location: Callable[[dict[str, object]], str] | None) -> SafeJSONResponse:
    response = SafeJSONResponse(payload, status_code=status)
    if location is not None and 200 <= status < 300 and isinstance(payload, dict) and "release_id" in payload:
        response.headers["Location"] = location(payload)
    return response
