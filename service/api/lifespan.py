"""A worker's life around the app: draining on SIGTERM (:mod:`service.api.drain`) and recovering, every
:data:`SWEEP_SECONDS`, the work of servers that died (:func:`service.releases.recovery.recover_everything`).

Each recovery touches only work whose runner is provably gone (:mod:`service.runners`: on this host, its process is
dead or its pid reused; elsewhere, its heartbeat is older than the lease), so the sweep is safe while other servers
run: a job of a server killed with ``kill -9`` is failed ``request_interrupted`` within a sweep on the same host and
within the lease elsewhere, not left ``running`` for as long as anyone polls (issue 31, point 2). Both run only in
the main thread of a server process (uvicorn's), never in a test client's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service import runners
from service.api import drain
from service.error_text import shown_message

log = logging.getLogger("marginalia.runners")
#: Seconds between two recovery sweeps of a worker: a heartbeat (the lease is many beats long).
SWEEP_SECONDS = runners.HEARTBEAT_SECONDS


class Sweeper:
    """A daemon thread running the recoveries every ``seconds`` until stopped."""

    def __init__(self, app: FastAPI, seconds: float = SWEEP_SECONDS) -> None:
        self.app, self.seconds = app, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recovery-sweep", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from service.releases.recovery import recover_everything

        while not self._stop.wait(self.seconds):
            try:
                recovered = recover_everything(self.app.state.engine)
            except Exception as exc:  # noqa: BLE001 - a missed sweep is harmless: the next one comes
                log.warning("recovery sweep failed: %s", shown_message(exc))
                continue
            if any(recovered.values()):
                log.info("recovered the work of a server that stopped: %s", recovered)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The sweep and the drain of the module docstring."""
    async with drain.lifespan(app):
        sweeper = Sweeper(app) if threading.current_thread() is threading.main_thread() else None
        if sweeper is not None:  # a server's worker: uvicorn configured its logging (service.observability.logs)
            logging.captureWarnings(True)
            sweeper.start()
        try:
            yield
        finally:
            if sweeper is not None:
                sweeper.stop()
