"""The FastAPI application: :func:`create_app` wires routes, authentication and error handling
around an engine. It touches no database at construction; ``marginalia serve``
(:mod:`service.api.server`) migrates and recovers the database before serving."""

from __future__ import annotations

from importlib import metadata

from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy import Engine

from service.access.auth import Principal
from service.api import (
    console,
    lifespan,
    readiness,
    routes_attach,
    routes_campaigns,
    routes_datasets,
    routes_jobs,
    routes_releases,
    schemas,
)
from service.api.console import sessions
from service.api.errors import SafeJSONResponse, install_error_handlers
from service.api.guard import GuardedRoute
from service.api.limits import DEFAULT_MAX_BODY_BYTES
from service.api.observe import ObservedRequests
from service.api.security import AUDITOR, STEWARD, Forbidden, require

DESCRIPTION = """Differentially private statistics about sensitive tables, under an exact privacy budget.

Stewards load tables (or attach them where they live, through sources the operator registers), set budgets
and make releases; analysts read domains, budgets and releases and answer marginals or draw synthetic rows from
releases (free post-processing); auditors read the ledger.
Local-DP collections: stewards register public tables and create campaigns; participants (and gateways, for
pseudonyms) fetch a campaign's public state and submit randomized reports; analysts fit models from the stored
aggregates, free. No route returns a row of a sensitive table or a participant's report. Authenticate with
`Authorization: Bearer <key>` (`marginalia keys create`). Every error is JSON `{"error": code, "message": ...}`.
"""

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": schemas.ErrorBody, "description": description}
    for status, description in [
        (400, "Malformed request (e.g. the body is not JSON)"),
        (401, "Missing, unknown or revoked API key"),
        (403, "The key's role or scope does not allow this"),
        (404, "No such dataset, release, job or route"),
        (409, "Conflict: budget exceeded, duplicate name, release not complete, idempotency key in use"),
        (413, "Request body too large"),
        (422, "Invalid input: the message names the field, parameter or column"),
        (503, "The service database does not answer (`database_unavailable`): retry after `Retry-After` seconds"),
    ]
}


def version() -> str:
    try:
        return metadata.version("marginalia")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


def create_app(engine: Engine, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               console_secret: str | None = None) -> FastAPI:
    """The HTTP API over the database behind ``engine``, and the web console at ``/console``, whose session cookies
    are signed with ``console_secret`` (default: the operator's ``MARGINALIA_CONSOLE_SECRET``, else a random one:
    service/api/console/sessions.py)."""
    app = FastAPI(title="Marginalia", version=version(), description=DESCRIPTION, lifespan=lifespan.lifespan,
                  default_response_class=SafeJSONResponse, responses=ERROR_RESPONSES)
    app.router.route_class = GuardedRoute  # every route admits its caller before reading its body (guard.py)
    app.state.engine = engine
    app.state.max_body_bytes = max_body_bytes  # the ceiling of every route's own limit (service/api/limits.py)
    install_error_handlers(app)
    app.add_middleware(ObservedRequests)  # outside the catch-all: it logs the 500s too

    @app.get("/health", response_model=schemas.Health, tags=["service"], summary="Liveness (no key needed)")
    def health() -> dict[str, str]:
        """The process answers (it reads no database: a database that is down is readiness's concern)."""
        return {"status": "ok", "version": version()}

    @app.get("/health/ready", response_model=schemas.Readiness, tags=["service"],
             summary="Readiness (no key needed): the database, the schema and every attach source, named",
             responses={503: {"model": schemas.Readiness, "description": "Not ready: the database or its schema"}})
    def ready() -> SafeJSONResponse:
        """200 ``ready`` (or ``degraded``: a source is down, everything else works), 503 ``not_ready`` when the
        service database does not answer or is not at this code's schema (service/api/readiness.py)."""
        found = readiness.readiness(engine)
        return SafeJSONResponse(found.to_json(), status_code=200 if found.ready else 503)

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse,
             summary="Prometheus metrics (steward keys not scoped to datasets, and auditors)",
             responses={200: {"content": {"text/plain": {}}, "description": "The text exposition format"}})
    def metrics(principal: Principal = Depends(require(STEWARD, AUDITOR))) -> Response:
        """Requests, releases, refunds, jobs, engine time and spent budget (service/observability/metrics.py);
        nothing derived from a table. A steward key scoped to datasets sees no other dataset, so it is refused."""
        if principal.role == STEWARD and principal.scope is not None:
            raise Forbidden("metrics name every dataset: this route is for steward keys not scoped to datasets, "
                            "and auditors")
        from service.api.ledger_metrics import LedgerCollector
        from service.observability.metrics import CONTENT_TYPE, exposition

        return Response(exposition(LedgerCollector(engine)), media_type=CONTENT_TYPE)

    app.include_router(routes_datasets.router)
    app.include_router(routes_attach.router)
    app.include_router(routes_releases.router)
    app.include_router(routes_jobs.router)
    app.include_router(routes_campaigns.router)
    console.install(app, console_secret or sessions.console_secret())
    return app
