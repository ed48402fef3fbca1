"""Stopping a server without dropping its work: SIGTERM (or SIGINT) drains (issue 31, point 1).

uvicorn's own shutdown stops accepting connections and waits for the requests in flight, but a background job
(``Prefer: respond-async``, :mod:`service.api.background`) is a thread of the worker, not a request: the worker used
to exit under it, leaving its release ``pending`` with its charge and its job ``running`` until some process
recovered them. Now, in each worker process (docs/operations.md, "Stopping and draining"):

1. the signal records a stop request (:func:`service.interrupts.request`), then reaches uvicorn's own handler, which
   stops accepting;
2. every release in flight, a request's or a job's, stops at its next safe point as a command on Ctrl-C does
   (:mod:`service.interrupts`): before its reservation (nothing charged), at a progress step (refunded if no noise
   was drawn; for MST and AIM only the steps whose noise was drawn stay charged, docs/privacy.md 6.5), or it
   completes; a synchronous request answers 503 ``interrupted`` with what became of its charge, a job records
   that answer;
3. when uvicorn has answered every request, the app's shutdown waits for the job threads, at most
   ``MARGINALIA_DRAIN_SECONDS`` (default :data:`DEFAULT_DRAIN_SECONDS`), then the worker exits. A job still running
   then (a step longer than the bound) is left to recovery, as after a crash: its runner is gone once the process is.

Installed when the app starts in the main thread of a process (uvicorn's), never in a test client's thread.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from service import interrupts

log = logging.getLogger("marginalia.api")
DRAIN_VARIABLE = "MARGINALIA_DRAIN_SECONDS"
DEFAULT_DRAIN_SECONDS = 60.0
#: The signals that drain a worker.
SIGNALS = (signal.SIGTERM, signal.SIGINT)

_jobs: set[threading.Thread] = set()
_jobs_lock = threading.Lock()


def track(thread: threading.Thread) -> None:
    """Remember a job's thread until it ends, so that a drain waits for it."""
    with _jobs_lock:
        _jobs.add(thread)


def running_jobs() -> list[threading.Thread]:
    with _jobs_lock:
        _jobs.difference_update({t for t in _jobs if not t.is_alive()})
        return list(_jobs)


def drain_seconds() -> float:
    """``MARGINALIA_DRAIN_SECONDS`` (a non-negative number of seconds) or :data:`DEFAULT_DRAIN_SECONDS`."""
    given = os.environ.get(DRAIN_VARIABLE)
    try:
        seconds = float(given) if given else DEFAULT_DRAIN_SECONDS
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ValueError(f"{DRAIN_VARIABLE} must be a number of seconds >= 0, got {given!r}")
    return seconds


def _draining(previous: Callable[..., Any] | int | None) -> Callable[[int, object], None]:
    def handler(number: int, frame: object) -> None:
        # no logging here (a signal handler may run inside a log call): the shutdown logs it (lifespan)
        interrupts.request(signal.Signals(number).name)
        if callable(previous):
            previous(number, frame)

    return handler


def install_signal_handlers() -> bool:
    """Put the draining handler in front of the current SIGTERM / SIGINT handlers (uvicorn's); False, doing
    nothing, outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for number in SIGNALS:
        previous = signal.getsignal(number)
        if previous is not signal.SIG_IGN:
            signal.signal(number, _draining(previous))
    return True


def wait_for_jobs(seconds: float) -> list[threading.Thread]:
    """Wait until every tracked job thread has ended, at most ``seconds``; returns those still running."""
    deadline = time.monotonic() + seconds
    for thread in running_jobs():
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return running_jobs()


@asynccontextmanager
async def lifespan(app: object) -> AsyncIterator[None]:  # noqa: ARG001 - FastAPI's lifespan signature
    """The app's life: draining handlers at start, the jobs waited for at shutdown (module docstring)."""
    seconds = drain_seconds()
    installed = install_signal_handlers()
    yield
    if not installed:
        return
    if interrupts.requested():
        log.info("stop requested by %s: draining (work in flight stops at its next safe point, jobs are waited "
                 "for up to %g s)", interrupts.signal_name(), seconds)
    import anyio.to_thread

    left = await anyio.to_thread.run_sync(wait_for_jobs, seconds)
    if left:
        log.warning("drain: %d job(s) still running after %g s; recovery will mark them interrupted", len(left),
                    seconds)
    else:
        log.info("drain: every job reached a safe point")
