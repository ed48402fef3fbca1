"""The one way a route spends privacy budget: :func:`run_charged`, idempotent by header.

A charging route (a marginal release now; regression fits that may need a new release later)
validates its body, then hands ``run_charged`` a function that does the work through the
accountant and returns ``(status, body)``. With an ``Idempotency-Key`` header the request claims
the key first (service/idempotency.py) and its response is stored for retries:

* success, or a failure that is not a :class:`ServiceError` (the release may have drawn noise, so
  its charge may stand): the response is stored and replayed to every retry;
* a :class:`ServiceError` (validation, unknown dataset, the accountant's refusal): nothing was
  charged, so the claim is dropped and a corrected retry with the same key runs normally.

Adding ``POST /datasets/{name}/fit/linear`` is: a request schema, a function calling the fit
service, and ``return run_charged(request, principal, body, work, location=...)``.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request
from pydantic import BaseModel

from service import idempotency
from service.api.errors import SafeJSONResponse, error_body_for
from service.api.security import engine_of
from service.auth import Principal
from service.errors import ServiceError

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAY_HEADER = "Idempotent-Replayed"

Work = Callable[[], tuple[int, dict[str, object]]]


def run_charged(
    request: Request,
    principal: Principal,
    body: BaseModel,
    work: Work,
    location: Callable[[dict[str, object]], str] | None = None,
) -> SafeJSONResponse:
    """Run ``work`` once per (API key, Idempotency-Key); see the module docstring."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        status, payload = work()
        return _respond(status, payload, location)
    engine = engine_of(request)
    fingerprint = idempotency.request_hash(request.method, request.url.path, body.model_dump(mode="json"))
    claimed = idempotency.claim(engine, principal.key_id, key, fingerprint)
    if isinstance(claimed, idempotency.Replay):
        response = _respond(claimed.status, claimed.body, location)
        response.headers[REPLAY_HEADER] = "true"
        return response
    try:
        status, payload = work()
    except ServiceError:
        idempotency.abandon(engine, claimed)
        raise
    except Exception as exc:  # noqa: BLE001 - answered and stored, so every retry gets the same answer
        failed_status, failed_body = error_body_for(exc)
        idempotency.complete(engine, claimed, failed_status, failed_body)
        return _respond(failed_status, failed_body, None)
    idempotency.complete(engine, claimed, status, payload)
    return _respond(status, payload, location)


def _respond(status: int, payload: object, location: Callable[[dict[str, object]], str] | None) -> SafeJSONResponse:
    response = SafeJSONResponse(payload, status_code=status)
    if location is not None and 200 <= status < 300 and isinstance(payload, dict):
        response.headers["Location"] = location(payload)
    return response
