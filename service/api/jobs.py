"""Background jobs: a long request of the API, its progress while it runs, and its answer once done.

A charging request sent with ``Prefer: respond-async`` (RFC 7240) is answered ``202 Accepted`` at
once with a job (``Location: /jobs/{id}``); the work runs in a thread of the server and writes its
progress into the ``jobs`` row (:class:`JobProgress`, at most every :data:`PROGRESS_SECONDS`), then the
answer the synchronous request would have given (:func:`finish`). ``GET /jobs/{id}`` reads the row,
so a client can show the progress of a release that takes minutes instead of waiting blind.

Each job records its runner like a release does (service/runners.py): the jobs of a server that was
killed are failed with a ``request_interrupted`` answer by the next command or server start
(:func:`service.releases.recovery.recover_jobs`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select, update

from db.engine import serialized_transaction, transaction
from db.models import Job, utcnow
from service import runners
from service.errors import Conflict, NotFound
from service.interrupts import Interrupted
from service.mechanisms.progress import FIT_PHASE

#: Progress is written to the database at most this often (and at the end of every phase).
PROGRESS_SECONDS = 0.5
STATES = ("running", "done", "failed")


@dataclass(frozen=True)
class JobView:
    id: int
    owner: int | None  # the API key that created it (None: made in process); never shown
    dataset: str
    kind: str
    state: str
    progress: dict[str, object]
    fit: dict[str, int] | None
    response_status: int | None
    response: object
    created_at: datetime
    finished_at: datetime | None

    def to_json(self) -> dict[str, object]:
        return {"job_id": self.id, "dataset": self.dataset, "kind": self.kind, "state": self.state,
                "progress": self.progress, "fit": self.fit, "status_code": self.response_status,
                "result": self.response, "created_at": self.created_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None}


def create(engine: Engine, dataset: str, kind: str, api_key_id: int | None = None) -> int:
    """A new ``running`` job of this process; returns its id."""
    with transaction(engine) as session:
        job = Job(api_key_id=api_key_id, dataset=dataset, kind=kind, state="running", progress_done=0,
                  progress_total=0, progress_message="queued", fit_done=0, fit_total=0, created_at=utcnow(),
                  **runners.current().columns())
        session.add(job)
        session.flush()
        return job.id


def finish(engine: Engine, job_id: int, state: str, status: int, body: object) -> None:
    """Store the job's answer (``done``: the 2xx answer; ``failed``: the error answer)."""
    if state not in STATES[1:]:
        raise ValueError(f"a job finishes done or failed, not {state!r}")
    with transaction(engine) as session:
        session.execute(update(Job).where(Job.id == job_id, Job.state == "running").values(
            state=state, response_status=status, response_json=json.dumps(body), finished_at=utcnow()))


def get(engine: Engine, job_id: int) -> JobView:
    """The job ``job_id`` (404 when there is none); who may see it is :func:`visible_to`."""
    with transaction(engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise NotFound(f"no job with id {job_id}", code="job_not_found")
        return JobView(
            id=job.id, owner=job.api_key_id, dataset=job.dataset, kind=job.kind, state=job.state,
            progress={"done": job.progress_done, "total": job.progress_total, "message": job.progress_message},
            fit={"done": job.fit_done, "total": job.fit_total} if job.fit_total else None,
            response_status=job.response_status,
            response=json.loads(job.response_json) if job.response_json is not None else None,
            created_at=job.created_at, finished_at=job.finished_at,
        )


#: Who a cancelled job says stopped it.
CANCELLED_BY = "a Cancel from the console"


def cancellable(kind: str) -> bool:
    """Whether a job of ``kind`` can be asked to stop: a release only (its progress reports are the release engine's
    safe points); a fit or an attach is not stopped halfway."""
    return kind == "release"


def request_cancel(engine: Engine, job_id: int) -> None:
    """Ask the running release job ``job_id`` to stop at its next safe point (409 when it has ended, or is no
    release: a fit or an attach is not stopped halfway). Its thread reads the request with its progress
    (:class:`JobProgress`); the release then ends as on Ctrl-C: refunded if no noise was drawn, otherwise charged
    exactly for the steps that drew noise (docs/privacy.md 6.5).

    It reads, then writes: a write transaction from its start (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's row lock),
    because a deferred SQLite transaction that read while the job's thread wrote its progress cannot take the write
    lock afterwards (SQLite refuses such an upgrade at once, without waiting: the cancel failed under load)."""
    with serialized_transaction(engine) as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None:
            raise NotFound(f"no job with id {job_id}", code="job_not_found")
        if not cancellable(job.kind):
            raise Conflict(f"job {job_id} is a {job.kind}: only a release can be stopped halfway",
                           code="not_cancellable")
        if job.state != "running":
            raise Conflict(f"job {job_id} has ended ({job.state}): there is nothing to stop", code="job_ended")
        if job.cancel_requested_at is None:
            job.cancel_requested_at = utcnow()


def visible_to(job: JobView, key_id: int, role: str, may_access_dataset: bool) -> bool:
    """Whether a caller may read ``job``: the key that created it, and stewards whose scope covers its dataset.
    A job's answer is its owner's (an analyst's fit, a steward's release): another analyst or an auditor sees the
    release in the ledger, not the request. An attach's answer (whether a source's table fits the spec, its exact
    row count: docs/privacy.md 1.2) is its owner's only, the one key known to be scoped to that source."""
    if job.owner == key_id:
        return True
    return role == "steward" and may_access_dataset and job.kind != "attach"


class JobProgress:
    """The ``progress(done, total, message)`` callback of a job: keeps the latest report and writes it
    to the job's row at most every :data:`PROGRESS_SECONDS` (always at the end of a phase). Reports of a
    model fit (``FIT_PHASE``) go to the ``fit_*`` columns; the next step clears them."""

    def __init__(self, engine: Engine, job_id: int, seconds: float = PROGRESS_SECONDS, *,
                 cancellable: bool = False) -> None:
        self.engine, self.job_id, self.seconds = engine, job_id, seconds
        self.cancellable = cancellable
        self._written = {True: 0.0, False: 0.0}  # by "is a fit report": a fit's reports do not hide a new step

    def __call__(self, done: int, total: int, message: str) -> None:
        fitting = message == FIT_PHASE
        now = time.monotonic()
        if now - self._written[fitting] < self.seconds and done < total:
            return
        if fitting:
            values: dict[str, object] = {"fit_done": int(done), "fit_total": int(total)}
        else:
            values = {"progress_done": int(done), "progress_total": int(total), "progress_message": message[:500],
                      "fit_done": 0, "fit_total": 0}
        with transaction(self.engine) as session:
            session.execute(update(Job).where(Job.id == self.job_id).values(**values))
            cancelled = self.cancellable and session.execute(
                select(Job.cancel_requested_at).where(Job.id == self.job_id)).scalar_one() is not None
        self._written[fitting] = now
        if cancelled:  # a progress report is a safe point of the release (service/interrupts.py)
            raise Interrupted(f"interrupted by {CANCELLED_BY}", by=CANCELLED_BY)
