"""Stopping a command on Ctrl-C (SIGINT) or SIGTERM at a known point, never in the middle of anything.

Python's default SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens to be:
inside a garbage-collection callback of JAX (where Python prints "Exception ignored" and drops it, so
the release went on, completed and was charged), inside the import of an extension module (a
segfault was seen), or between a charge and its refund. The command line instead calls
:func:`defer_signals` before anything else: a signal then only *records* the request, and the code
asks :func:`raise_if_requested` at points where stopping is safe. The release engine asks before it
reserves a charge and at every progress callback of a mechanism (each measurement, selection round
and estimation iteration); it then refunds the charge if no noise was drawn and keeps it otherwise -- for
MST and AIM, only the charge of the steps whose noise was drawn (docs/privacy.md 6.5) -- and says which
(service/releases/engine.py). A process that never calls :func:`defer_signals` (the
server, the tests) is unaffected: :func:`raise_if_requested` never raises there.

Signals whose handler was ``SIG_IGN`` when the process started (a background job of a
non-interactive shell) stay ignored.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Iterable
from typing import Protocol

from service.errors import ServiceError

#: Exit status of a command stopped by a signal: 128 + SIGINT, as shells report it.
EXIT_STATUS = 128 + signal.SIGINT

_requested = threading.Event()
_signal_name: list[str] = []


class Outcome(Protocol):
    """What became of a release that stopped (service.releases.recovery.ReleaseFailure)."""

    def sentence(self) -> str: ...

    def to_json(self) -> dict[str, object]: ...


class Interrupted(ServiceError):
    """The command was asked to stop (Ctrl-C, SIGTERM) and stopped at a safe point. ``outcome`` says
    what became of the release it was running, if any (charged or refunded, and how much)."""

    code = "interrupted"
    status = 503

    def __init__(self, message: str, *, outcome: Outcome | None = None, by: str | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        #: who asked, when it was not a signal (the console's Cancel of a job: service/api/jobs.py)
        self.by = by


def defer_signals(signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """From now on, ``signals`` only record a request to stop (main thread only; for the rest of the
    process). Signals that are ignored stay ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    deferred = [number for number in signals if signal.getsignal(number) is not signal.SIG_IGN]
    for number in deferred:
        signal.signal(number, _record)
    # Python restores the default handlers while it shuts down, and a signal arriving then would kill the
    # process after its outcome was printed; the command is over, so from its exit on they are ignored.
    atexit.register(lambda: [signal.signal(number, signal.SIG_IGN) for number in deferred])


def _record(number: int, frame: object) -> None:  # noqa: ARG001 - the signal module's handler signature
    first = not _requested.is_set()
    _requested.set()
    _signal_name.append(signal.Signals(number).name)
    if first:  # a plain write: no lock that the interrupted code might hold (rich's console has one)
        os.write(2, b"\ninterrupt received: stopping at the next safe point...\n")


def request(name: str = "SIGINT") -> None:
    """Record a request to stop, as the signal handler does (for tests, and for callers that stop
    a command for reasons of their own)."""
    _requested.set()
    _signal_name.append(name)


def requested() -> bool:
    return _requested.is_set()


def clear() -> None:
    """Forget a recorded request (tests; a long-lived process that handled it)."""
    _requested.clear()
    _signal_name.clear()


def signal_name() -> str:
    return _signal_name[0] if _signal_name else "an interrupt"


def raise_if_requested(where: str) -> None:
    """Raise :class:`Interrupted` if a stop was requested; ``where`` completes "interrupted ...",
    e.g. "before the release was reserved: nothing was charged"."""
    if _requested.is_set():
        raise Interrupted(f"interrupted by {signal_name()} {where}")
