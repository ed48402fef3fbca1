"""Idempotent charging requests: a retry with the same ``Idempotency-Key`` never charges twice.

The protocol follows the IETF draft "The Idempotency-Key HTTP Header Field"
(draft-ietf-httpapi-idempotency-key-header): keys are scoped to the client (here: the API key),
the first request with a key *claims* it, and later requests with that key

* get the stored response of the first one, unchanged (``done``);
* get 409 ``idempotency_in_progress`` while the first one still runs (``pending``);
* get 422 ``idempotency_key_reused`` if their method, path or body differ from the first one's.

What is stored once the first request finishes:

* its response, success or failure, whenever budget may have been spent;
* nothing when it failed with a :class:`~service.errors.ServiceError` raised by validation or by
  the accountant's refusal (nothing was charged): the claim is dropped so a corrected retry
  with the same key can run. See :func:`service.api.charging.run_charged`.

A server killed while a claimed request runs leaves the claim ``pending``. Each claim records its runner (the
process, :mod:`service.runners`) and a heartbeat while the request runs; :func:`recover_interrupted_claims` (run at
start-up and periodically by every server, like :func:`service.releases.recovery.recover_interrupted`) turns a
pending claim whose runner is provably gone into a stored 409 ``request_interrupted`` response, so the retry is told
what happened instead of being charged again. A claim whose runner lives (another server's request, still running)
is never touched: its retry gets 409 ``idempotency_in_progress`` until it finishes, then its answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError

from db.engine import transaction
from db.models import IdempotencyRecord, utcnow
from service import runners
from service.errors import Conflict, InvalidInput, ServiceError

MAX_KEY_LENGTH = 200
INTERRUPTED_STATUS = 409
INTERRUPTED_BODY = {
    "error": "request_interrupted",
    "message": "the server stopped while this request ran; any release it started was marked failed_after_noise "
    "and its charge stands (see the ledger). Retry with a new Idempotency-Key to make a new release.",
}


@dataclass(frozen=True)
class Claim:
    """This request holds the key: run it, then :func:`complete` or :func:`abandon` the claim."""

    record_id: int


@dataclass(frozen=True)
class Replay:
    """The key was used before by an identical, finished request: answer with its response."""

    status: int
    body: object


def check_key(key: str) -> str:
    """Validate an ``Idempotency-Key`` header value (1–200 visible ASCII characters)."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all(33 <= ord(c) <= 126 for c in key):
        raise ServiceError(
            f"Idempotency-Key must be 1–{MAX_KEY_LENGTH} visible ASCII characters (a UUID is a good choice)",
            code="invalid_idempotency_key",
            status=400,
        )
    return key


def request_hash(method: str, path: str, body: object) -> str:
    """SHA-256 of the method, the path and the canonical JSON of the (validated) body."""
    canonical = json.dumps([method.upper(), path, body], sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def claim(engine: Engine, api_key_id: int, key: str, fingerprint: str) -> Claim | Replay:
    """Claim ``key`` for this request, or return the stored response of the request that did."""
    check_key(key)
    for _ in range(3):  # a competing claim can be abandoned between our INSERT and our SELECT
        try:
            with transaction(engine) as session:
                record = IdempotencyRecord(api_key_id=api_key_id, key=key, request_hash=fingerprint, state="pending",
                                           created_at=utcnow(), **runners.current().columns())
                session.add(record)
                session.flush()
                return Claim(record.id)
        except IntegrityError:
            pass
        with transaction(engine) as session:
            existing = session.execute(
                select(IdempotencyRecord).where(IdempotencyRecord.api_key_id == api_key_id,
                                                IdempotencyRecord.key == key)
            ).scalar_one_or_none()
            if existing is None:
                continue
            if existing.request_hash != fingerprint:
                raise InvalidInput(
                    f"Idempotency-Key {key!r} was already used for a different request; "
                    "use a new key for a new request",
                    code="idempotency_key_reused",
                )
            if existing.state == "pending":
                raise Conflict(
                    f"a request with Idempotency-Key {key!r} is still running; retry later to get its response",
                    code="idempotency_in_progress",
                )
            return Replay(int(existing.response_status), json.loads(existing.response_json))
    raise Conflict(f"Idempotency-Key {key!r} is contended; retry later", code="idempotency_in_progress")


def complete(engine: Engine, claimed: Claim, status: int, body: object) -> None:
    """Store the response of the claiming request; every later retry gets it back."""
    with transaction(engine) as session:
        session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.id == claimed.record_id)
            .values(state="done", response_status=status, response_json=json.dumps(body), finished_at=utcnow())
        )


def abandon(engine: Engine, claimed: Claim) -> None:
    """Drop the claim of a request that charged nothing, so the key can be used again."""
    with transaction(engine) as session:
        session.execute(delete(IdempotencyRecord).where(IdempotencyRecord.id == claimed.record_id))


def recover_interrupted_claims(engine: Engine) -> int:
    """Give the claims left ``pending`` by a runner that is provably gone (:func:`service.runners.is_gone`) the
    stored 409 ``request_interrupted`` response. Safe while other servers run claimed requests: theirs are alive.
    Returns how many."""
    with transaction(engine) as session:
        pending = session.execute(
            select(IdempotencyRecord.id, IdempotencyRecord.runner_host, IdempotencyRecord.runner_pid,
                   IdempotencyRecord.runner_started, IdempotencyRecord.heartbeat_at, IdempotencyRecord.created_at)
            .where(IdempotencyRecord.state == "pending")).all()
    gone = [row[0] for row in pending if runners.is_gone(*row[1:])]
    if not gone:
        return 0
    with transaction(engine) as session:
        result = session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.id.in_(gone), IdempotencyRecord.state == "pending")
            .values(state="done", response_status=INTERRUPTED_STATUS, response_json=json.dumps(INTERRUPTED_BODY),
                    finished_at=utcnow())
        )
        return int(result.rowcount or 0)
