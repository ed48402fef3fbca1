"""One line in the access log per request (``marginalia.access``, :mod:`service.observability.logs`), and its time
in ``marginalia_request_seconds`` (:mod:`service.observability.metrics`), labelled alike.

An ASGI middleware, outermost but for the catch-all, so that it sees every answer (an error's too) and its time.
It logs the method, the route's template (``/releases/{release_id}/marginal``: what a caller typed into the path,
a dataset's name say, is not logged), the status, the milliseconds to the answer's first byte and the caller's key
id and role when the route identified one (:data:`service.api.security.PRINCIPAL`). Never a header, the query
string, a body or a client address: a log shipped to a third party must not hold keys or data.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.security import PRINCIPAL
from service.observability.logs import event
from service.observability.metrics import REQUEST_SECONDS

log = logging.getLogger("marginalia.access")
#: The route field of a request that matched no route (an unknown path: its text is not logged either).
UNMATCHED = "(no route)"


def route_template(scope: Scope) -> str:
    """The path template of the route that answered (:data:`UNMATCHED` when none did)."""
    route = scope.get("route")
    return getattr(route, "path", None) or UNMATCHED


class ObservedRequests:
    """The middleware of the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500, "ms": None}

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["ms"] = (time.perf_counter() - started) * 1000.0
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            elapsed = status["ms"] if status["ms"] is not None else (time.perf_counter() - started) * 1000.0
            principal = scope.get(PRINCIPAL)
            REQUEST_SECONDS.labels(scope["method"], route_template(scope), str(status["code"])).observe(elapsed / 1000)
            event(log, f"{scope['method']} {route_template(scope)} {status['code']}", method=scope["method"],
                  route=route_template(scope), status=status["code"], ms=round(elapsed, 1),
                  key_id=getattr(principal, "key_id", None), role=getattr(principal, "role", None))
