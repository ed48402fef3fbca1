"""Readiness: whether this server can do its work now (``GET /health/ready``), apart from liveness (``GET /health``:
the process answers).

A load balancer or a process manager sends traffic to a server that is ready and restarts one that is not alive;
the two differ exactly when something the server needs is down (the service database, a warehouse), where a restart
would not help. Each check is named and says ``ok`` or why not, in our words, never a driver's message, a host, a
port, a role or a URL (the route needs no key: docs/operations.md). The checks, each bounded by
:data:`CHECK_SECONDS`:

- ``database``: the service database answers ``SELECT 1``;
- ``schema``: it is at the schema this code knows as newest (:func:`db.migrate.at_head`);
- ``source:NAME``, for every attach source the operator registered (``marginalia source add``): a ``parquet`` folder
  exists and may be read; a ``sql`` database accepts a connection with the password its reference names; the
  ``spark`` session's Spark Connect endpoint (``MARGINALIA_SPARK_REMOTE``) accepts a TCP connection, or, in local
  mode, ``java`` is on the PATH. A removed source that still serves datasets is checked too (their releases read
  through it).

A source that is down makes the server not ready for attaches and releases through it only; it is reported, and the
server is still ``ready`` when the service database is, since everything else works (``degraded`` says which).
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from urllib.parse import urlparse

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from service.data.attach.sources import (
    CONNECT_SECONDS,
    PARQUET,
    SPARK_SOURCE,
    SQL_SOURCE,
    Source,
    connect_failure,
    list_sources,
)

#: A check that takes longer than this fails (a warehouse that does not answer must not stall a probe).
CHECK_SECONDS = CONNECT_SECONDS
#: Spark Connect's default port (``sc://host`` without one).
SPARK_CONNECT_PORT = 15002


@dataclass(frozen=True)
class Check:
    """One named check and its outcome (``detail``: why it failed, in our words; empty when ``ok``)."""

    name: str
    ok: bool
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Readiness:
    """All checks: ``ready`` when the service database and its schema are; ``degraded`` when a source is down."""

    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(c.ok for c in self.checks if not c.name.startswith("source:"))

    @property
    def status(self) -> str:
        if not self.ready:
            return "not_ready"
        return "ready" if all(c.ok for c in self.checks) else "degraded"

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "checks": [c.to_json() for c in self.checks]}


def readiness(engine: Engine) -> Readiness:
    """Every check of the module docstring, the sources' only when the database answers (they are listed there)."""
    database = _database(engine)
    if not database.ok:
        return Readiness((database, Check("schema", False, "not checked: the service database does not answer")))
    checks = [database, _schema(engine)]
    checks += _sources(engine)
    return Readiness(tuple(checks))


def _database(engine: Engine) -> Check:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except DBAPIError:
        return Check("database", False, "the service database does not answer (MARGINALIA_DATABASE_URL)")
    return Check("database", True)


def _schema(engine: Engine) -> Check:
    from db.migrate import head_revision, schema_revisions

    found = schema_revisions(engine)
    if found == [head_revision()]:
        return Check("schema", True)
    return Check("schema", False, f"the schema is at {found!r}, this code's newest is {head_revision()!r}: run "
                                  "`marginalia init` with the newest marginalia")


def _sources(engine: Engine) -> list[Check]:
    checks = []
    for source in list_sources(engine):
        name = f"source:{source.name}"
        if source.kind == PARQUET:
            root = source.root or ""
            ok = os.path.isdir(root) and os.access(root, os.R_OK | os.X_OK)
            checks.append(Check(name, ok, "" if ok else "its folder is missing or may not be read by this server"))
        elif source.kind == SQL_SOURCE:
            checks.append(_sql_source(name, source))
        elif source.kind == SPARK_SOURCE:
            checks.append(_spark_source(name))
    return checks


def _sql_source(name: str, source: Source) -> Check:
    reason = connect_failure(source.connection())
    return Check(name, reason is None, "" if reason is None else reason)


def _spark_source(name: str) -> Check:
    from service.data.engines.spark import SPARK_REMOTE_VARIABLE

    remote = os.environ.get(SPARK_REMOTE_VARIABLE)
    if not remote:
        ok = shutil.which("java") is not None
        return Check(name, ok, "" if ok else "local-mode Spark needs java on the PATH")
    address = urlparse(remote.replace("sc://", "tcp://", 1))
    try:
        with socket.create_connection((address.hostname or "localhost", address.port or SPARK_CONNECT_PORT),
                                      timeout=CHECK_SECONDS):
            pass
    except OSError:
        return Check(name, False, f"the Spark Connect server ({SPARK_REMOTE_VARIABLE}) does not accept a connection")
    return Check(name, True)
