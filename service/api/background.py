"""A route's work now or as a background job: ``Prefer: respond-async`` (RFC 7240).

A long route hands its work as a function ``work(progress)`` returning ``(status, body)``. Without the header the
work runs now and its answer is the response (:func:`respond`); with it the answer is ``202 Accepted`` at once
(:func:`start`): a job (service/api/jobs.py, ``Location: /jobs/{id}``) runs the work in a thread of the server,
writes its progress into the job's row, then the exact answer the synchronous request would have given, an error
included (a :class:`ServiceError` as its own status and body, anything else as :func:`error_body_for` answers it).

:func:`service.api.charging.run_charged` runs a charging request through :func:`start`, with its idempotency claim
stored as the 202 (``accepted``) and dropped when the job is refused before any charge (``refused``); the routes
that spend no budget (attach, migrate) use :func:`respond` directly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi import Request
from sqlalchemy import Engine

from db.models import Job
from service import runners
from service.api import drain, jobs
from service.api.errors import SafeJSONResponse, error_body_for
from service.api.security import engine_of
from service.errors import ServiceError
from service.mechanisms.progress import Progress, no_progress

PREFER_ASYNC = "respond-async"

Work = Callable[[Progress], tuple[int, dict[str, object]]]


def charge_stands(exc: BaseException) -> bool:
    """Whether ``exc`` ended a release after its noise was drawn, so that (part of) its charge stands: a stop
    request at a safe point (:class:`service.interrupts.Interrupted`) or a failure after noise. Its idempotency
    claim then keeps the answer, never freed for a retry to charge again."""
    failure = getattr(exc, "release_failure", None)
    return failure is not None and getattr(failure, "status", None) == "failed_after_noise"


def prefers_async(request: Request) -> bool:
    """Whether the request says ``Prefer: respond-async`` (RFC 7240; other preferences may follow)."""
    return any(part.strip().split("=")[0].strip().lower() == PREFER_ASYNC
               for value in request.headers.getlist("prefer") for part in value.split(","))


def respond(request: Request, owner: int | None, work: Work, *, dataset: str, kind: str,
            location: str | None = None) -> SafeJSONResponse:
    """``work``'s answer now (with ``Location: location`` on a 2xx), or with ``Prefer: respond-async`` a 202 and
    the job doing it (:func:`start`), owned by the API key ``owner``."""
    if prefers_async(request):
        return start(engine_of(request), owner, work, dataset=dataset, kind=kind)
    status, payload = work(no_progress)
    response = SafeJSONResponse(payload, status_code=status)
    if location is not None and 200 <= status < 300:
        response.headers["Location"] = location
    return response


def start(engine: Engine, owner: int | None, work: Work, *, dataset: str, kind: str,
          accepted: Callable[[dict[str, object]], None] | None = None,
          refused: Callable[[], None] | None = None) -> SafeJSONResponse:
    """A new job of ``owner`` running ``work`` in a thread (:func:`launch`); its 202 answer."""
    job_id, body = launch(engine, owner, work, dataset=dataset, kind=kind, accepted=accepted, refused=refused)
    response = SafeJSONResponse(body, status_code=202)
    response.headers["Location"] = f"/jobs/{job_id}"
    response.headers["Preference-Applied"] = PREFER_ASYNC
    return response


def launch(engine: Engine, owner: int | None, work: Work, *, dataset: str, kind: str,
           accepted: Callable[[dict[str, object]], None] | None = None,
           refused: Callable[[], None] | None = None) -> tuple[int, dict[str, object]]:
    """A new job of ``owner`` running ``work`` in a thread: its id and its first state (the 202's body; the console
    sends its visitor to the job's page instead). ``accepted(body)`` is called with that body before the work starts,
    ``refused()`` when the work ends with a :class:`ServiceError`."""
    job_id = jobs.create(engine, dataset, kind, owner)
    body = jobs.get(engine, job_id).to_json()
    if accepted is not None:
        accepted(body)
    thread = threading.Thread(target=_run, args=(engine, job_id, work, refused, jobs.cancellable(kind)),
                              name=f"job-{job_id}", daemon=True)
    drain.track(thread)  # a SIGTERM waits for it (service/api/drain.py)
    thread.start()
    return job_id, body


def _run(engine: Engine, job_id: int, work: Work, refused: Callable[[], None] | None, cancellable: bool) -> None:
    """The job's thread: the work with progress into the job's row (a release's progress also reads whether it was
    asked to stop: :func:`service.api.jobs.request_cancel`), then its answer (never raises)."""
    with runners.Heartbeat(engine, Job.__table__, job_id):
        try:
            status, payload = work(jobs.JobProgress(engine, job_id, cancellable=cancellable))
        except ServiceError as exc:
            jobs.finish(engine, job_id, "failed", exc.status, exc.to_json())
            if refused is not None and not charge_stands(exc):
                refused()
            return
        except Exception as exc:  # noqa: BLE001 - the answer is the job's, as the synchronous request's would be
            failed_status, failed_body = error_body_for(exc)
            jobs.finish(engine, job_id, "failed", failed_status, failed_body)
            return
        jobs.finish(engine, job_id, "done", status, payload)
