"""``marginalia serve``: migrate, recover, then serve the API with uvicorn (``workers`` processes); and
:func:`background_server`, which runs ``marginalia serve`` in a subprocess on loopback (for demos,
benchmarks and the tests against a real server).

Start-up brings the schema to the newest migration and repairs what a killed process left behind:
releases still ``pending`` whose runner is provably gone become ``failed_after_noise`` (their charges
stand; :func:`service.releases.recovery.recover_interrupted`, which every command also runs), background jobs
of a dead server fail with a ``request_interrupted`` answer (:func:`service.releases.recovery.recover_jobs`),
and idempotency claims still ``pending`` get that answer too
(:func:`service.access.idempotency.recover_interrupted_claims`). Each of these touches only work whose runner is
provably gone (:mod:`service.runners`: its process dead, or its lease expired), so it is safe while other servers
serve the same database; every worker repeats it periodically (:mod:`service.api.lifespan`), so the work of a
server that died is recovered by the others, and ``GET /jobs/{id}`` recovers the job it reads.

Several workers (``--workers N``, uvicorn's process manager, each worker :func:`app_from_environment`) share
the database, which is what keeps every guarantee across them: the ledger charges under a serialized
transaction, a background job runs in a thread of the worker that accepted it and ``GET /jobs/{id}`` reads
its row (any worker answers it), and recovery fails only releases and jobs whose own runner process is
provably gone (:mod:`service.runners` records the worker's pid), never a live sibling's. Each
worker keeps its own caches of decoded releases (:mod:`service.releases.answers`). Every connection has Nagle's
algorithm off (:mod:`service.api.tcp`: uvicorn's worker processes left it on). Put a TLS-terminating
proxy in front when serving beyond loopback.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from service.api.console.sessions import SECRET_ENV, console_secret
from service.api.limits import DEFAULT_MAX_BODY_BYTES
from service.api.tcp import NoDelayH11Protocol
from service.observability.metrics import MULTIPROCESS_VARIABLE

log = logging.getLogger("marginalia.api")
REPO = Path(__file__).resolve().parents[2]
#: How the parent passes the request size limit to its workers (the database URL goes in MARGINALIA_DATABASE_URL).
MAX_BODY_ENV = "MARGINALIA_MAX_BODY_BYTES"


def default_workers() -> int:
    """``marginalia serve``'s default number of worker processes: one per core (2 where unknown)."""
    return os.cpu_count() or 2


def prepare_database(engine: Engine) -> dict[str, int]:
    """Upgrade to the newest schema and recover interrupted work; returns what was recovered."""
    from db.migrate import upgrade_to_head
    from service.releases.recovery import recover_everything

    upgrade_to_head(engine)
    return recover_everything(engine)


def uvicorn_config(url: str, host: str, port: int, *, log_level: str | None = None,
                   max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, workers: int = 1) -> dict[str, object]:
    """uvicorn's settings for ``workers`` processes. One worker serves the app built here (a test may patch this
    process); several need an import string, so each worker builds its app with :func:`app_from_environment`
    from the environment set by :func:`serve`. Every process logs as :mod:`service.observability.logs` configures
    (uvicorn applies ``log_config`` in each worker); uvicorn's own access log is off, the app writes its own
    (:mod:`service.api.observe`: no client address, query string or header)."""
    from service.observability.logs import log_level as chosen_level
    from service.observability.logs import logging_config

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    level = chosen_level(log_level)
    settings: dict[str, object] = {"host": host, "port": port, "log_level": level, "workers": workers,
                                   "access_log": False, "http": NoDelayH11Protocol,
                                   "log_config": logging_config(level)}
    if workers > 1:
        settings.update(app="service.api.server:app_from_environment", factory=True,
                        env={"MARGINALIA_DATABASE_URL": url, MAX_BODY_ENV: str(max_body_bytes),
                             # one console secret for every worker (a session signed by one is valid in all)
                             SECRET_ENV: console_secret()})
    return settings


def app_from_environment():  # noqa: ANN201 - a FastAPI app; the import stays inside (uvicorn workers' factory)
    """The app of one uvicorn worker: the database of ``MARGINALIA_DATABASE_URL``, already migrated and recovered
    by the parent (:func:`serve`)."""
    from db.engine import database_url, make_engine
    from service.api.app import create_app

    return create_app(make_engine(database_url()),
                      max_body_bytes=int(os.environ.get(MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES)))


def serve(url: str, host: str, port: int, *, log_level: str | None = None,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, workers: int = 1) -> None:
    """Serve the API for the database at ``url`` with ``workers`` processes until interrupted."""
    import uvicorn

    from db.migrate import open_database
    from service.api.app import create_app
    from service.observability.logs import configure

    settings = uvicorn_config(url, host, port, log_level=log_level, max_body_bytes=max_body_bytes, workers=workers)
    configure(str(settings["log_level"]))
    engine = open_database(url)
    recovered = prepare_database(engine)
    log.info("database ready (%s); recovered: %s; %d worker(s)", engine.url.render_as_string(hide_password=True),
             recovered, workers)
    log.info("the web console: http://%s:%d/console (sign in with a steward, analyst or auditor key)",
             f"[{host}]" if ":" in host else host, port)
    if workers == 1:
        uvicorn.run(create_app(engine, max_body_bytes=max_body_bytes), **settings)
        return
    engine.dispose()
    environment = settings.pop("env")
    os.environ.update(environment)  # the workers are spawned with this process's environment
    with tempfile.TemporaryDirectory(prefix="marginalia-metrics-") as metrics_folder:
        # every worker's request and engine times, added up by whichever worker answers GET /metrics
        os.environ[MULTIPROCESS_VARIABLE] = metrics_folder
        try:
            uvicorn.run(settings.pop("app"), **settings)
        finally:
            os.environ.pop(MULTIPROCESS_VARIABLE, None)


# a server in the background ------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_command(port: int, workers: int | None = None, log_level: str = "warning") -> list[str]:
    """``marginalia serve`` on 127.0.0.1:``port`` with this interpreter (``workers``: its default when None)."""
    return [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", log_level, *([] if workers is None else ["--workers", str(workers)])]


@dataclass
class BackgroundServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash, as far as the database can tell)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (uvicorn shuts down cleanly), SIGKILL after 20 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def background_server(
    database_url: str,
    log: Path,
    command: Callable[[int], list[str]] = serve_command,
    startup_seconds: float = 120.0,
) -> Iterator[BackgroundServer]:
    """Run ``command(port)`` (default: ``marginalia serve``) for ``database_url`` on a free loopback
    port, wait until ``GET /health`` answers, and stop it when the block ends. Output goes to ``log``."""
    port = free_port()
    env = {**os.environ, "MARGINALIA_DATABASE_URL": database_url}
    with log.open("ab") as sink:
        process = subprocess.Popen(command(port), cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = BackgroundServer(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_until_healthy(server, startup_seconds)
        yield server
    finally:
        server.stop()


def _wait_until_healthy(server: BackgroundServer, seconds: float) -> None:
    """Poll ``GET /health`` with one HTTP client: a client per look builds an SSL context each time (about 50 ms of
    CPU), which on two busy cores slowed the very server start it waited for (issue 29: ``make demo``)."""
    import httpx

    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=2) as http:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"the server exited with status {server.process.returncode}:\n"
                                   f"{server.log_tail()}")
            try:
                if http.get(server.url + "/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer /health within {seconds:g} s:\n{server.log_tail()}")
