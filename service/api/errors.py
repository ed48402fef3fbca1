"""Every error the API returns is JSON ``{"error": code, "message": ...}``; never a stack trace.

* :class:`~service.errors.ServiceError` -> its own status and code (404, 409, 422, ...);
* a request that does not match the schema -> 422 ``invalid_request`` naming the field(s) (a field the route does
  not take: with the fields it takes), or 400 ``malformed_json`` when the body is not JSON at all;
* a ``ValueError`` subclass raised by the project's own packages (they signal bad input that way:
  ``PrivacyParameterError``, ``WorkloadError``, ``MechanismError``, ...) -> 422 ``invalid_input``;
* a path parameter that names nothing (an id that is not ASCII decimals up to 2^31-1, a name that no dataset can
  have) -> 404 ``not_found``, as for an unknown route;
* an unknown route -> 404; a method the path does not take -> 405 with ``Allow`` listing the methods it takes (every
  route of the path, RFC 9110 15.5.6); a body over the route's limit -> 413 (service/api/limits.py);
* the service database does not answer (a connection refused or dropped: SQLAlchemy's ``OperationalError`` or
  ``InterfaceError``, or :class:`db.engine.DatabaseUnavailable`) -> 503 ``database_unavailable`` with ``Retry-After``,
  on every route that needs it (``GET /health`` does not; ``GET /health/ready`` says which check failed);
* anything else -> 500 ``internal_error`` with a reference number; the traceback goes to the
  server log only, with the message of any exception that is not the project's own withheld (a driver's or a
  library's message may quote a cell value: :mod:`service.error_text`), unless ``MARGINALIA_DEBUG=1``.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any

import pydantic_core
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.error_text import debugging, is_bad_input, shown_traceback
from service.errors import ServiceError

log = logging.getLogger("marginalia.api")



class SafeJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped (so a lone surrogate echoed in a message cannot break the
    encoding) and NaN/infinity refused (they are not JSON).

    Encoded by pydantic-core's serializer (a FastAPI dependency, pinned), about 10x faster than ``json.dumps`` on the
    thousands of floats of a marginal, which was most of a marginal's latency (docs/api.md). Its compact output
    decodes to the same values as ``json.dumps``'s (floats in shortest round-trip form; an exponent may be written
    ``e-9`` for ``e-09``). Anything else takes the strict path, :func:`strict_json`: an answer holding NaN or
    infinity is refused there (the bytes ``NaN`` / ``Infinity`` inside a string also send it there, where it is
    encoded normally), non-ASCII text is escaped, and a lone surrogate is escaped instead of failing."""

    def render(self, content: Any) -> bytes:
        try:
            body = pydantic_core.to_json(content, inf_nan_mode="constants")
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError):
            return strict_json(content)
        if not body.isascii() or b"NaN" in body or b"Infinity" in body:
            return strict_json(content)
        return body


def strict_json(content: Any) -> bytes:
    """``content`` as ASCII JSON, refusing NaN and infinity (:class:`ValueError`)."""
    return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(status: int, code: str, message: str, headers: Mapping[str, str] | None = None,
                   **extra: object) -> SafeJSONResponse:
    headers = {**(headers or {}), **({"WWW-Authenticate": "Bearer"} if status == 401 else {})}
    return SafeJSONResponse({"error": code, "message": message, **extra}, status_code=status, headers=headers)


#: Seconds a client waits before retrying a 503 ``database_unavailable``.
RETRY_AFTER_SECONDS = 5
DATABASE_DOWN = ("the service database does not answer; nothing was done by this request. Retry in a few seconds; "
                 "the operator sees the cause in the server log and at GET /health/ready")


def database_down(exc: BaseException) -> bool:
    """Whether ``exc`` says the service database is unreachable (module docstring), not a bug."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    from db.engine import DatabaseUnavailable

    return isinstance(exc, OperationalError | InterfaceError | DatabaseUnavailable)


def error_body_for(exc: BaseException) -> tuple[int, dict[str, str]]:
    """Status and body for an exception raised while handling a request."""
    if isinstance(exc, ServiceError):
        return exc.status, exc.to_json()
    if database_down(exc):
        log.warning("the service database does not answer: %s", type(exc).__name__)
        return 503, {"error": "database_unavailable", "message": DATABASE_DOWN}
    if is_bad_input(exc):
        return 422, {"error": "invalid_input", "message": str(exc)}
    reference = secrets.token_hex(6)
    if debugging():  # the operator asked for everything (MARGINALIA_DEBUG=1): foreign messages included
        log.error("internal error %s", reference, exc_info=exc)
    else:  # the type and frames only: a driver's or a library's message may quote a cell value
        log.error("internal error %s: %s", reference, shown_traceback(exc))
    message = f"the server failed to handle this request; the log has the details (reference {reference})"
    return 500, {"error": "internal_error", "message": message}


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


async def _service_error(request: Request, exc: ServiceError) -> SafeJSONResponse:  # noqa: ARG001
    return error_response(exc.status, exc.code, exc.message)


async def _validation_error(request: Request, exc: RequestValidationError) -> SafeJSONResponse:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "malformed_json", "the request body is not valid JSON")
    if any(e.get("loc", ("",))[0] == "path" for e in errors):
        return _names_nothing(request, [e for e in errors if e.get("loc", ("",))[0] == "path"])
    fields = [_field(e.get("loc", ())) for e in errors]
    parts = [f"{_field(e.get('loc', ()))}: {_problem(request, e)}" for e in errors[:10]]
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return error_response(422, "invalid_request", "; ".join(parts) + more, fields=fields)


def _problem(request: Request, error: dict[str, Any]) -> str:
    """What is wrong with one field. A field the request does not have (``sparsityy``, or a setting of a method the
    server does not know) says so and, at the top of the body, names the fields the route takes: the client sends
    settings unchecked (it carries no catalog of the server's), so this is where a misspelled one is named."""
    loc = error.get("loc", ())
    if error.get("type") != "extra_forbidden":
        return str(error.get("msg", "invalid"))
    if len(loc) != 2 or loc[0] != "body":
        return f"not a field of {_field(loc[:-1])}"
    body_field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(body_field, "field_info", None), "annotation", None)
    taken = list(getattr(model, "model_fields", {}))
    return "not a field of this request" + (f" (it takes {', '.join(taken)})" if taken else "")


def _names_nothing(request: Request, errors: list[dict[str, Any]]) -> SafeJSONResponse:
    """404 for a path whose parameters can name nothing (``/releases/3_0``, ``/jobs/99999999999999999999``): no
    resource is there, as for an unknown route; the message says which parameter and why."""
    why = "; ".join(f"{_field(e['loc'][1:])}: {_reason(e)}" for e in errors[:3])
    return error_response(404, "not_found", f"nothing at {request.method} {request.url.path} ({why})")


def _reason(error: dict[str, Any]) -> str:
    """A validation error's message, without pydantic's "Value error, " before a validator's own words."""
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error.get("msg", "invalid"))


async def _http_error(request: Request, exc: StarletteHTTPException) -> SafeJSONResponse:
    codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
    code = codes.get(exc.status_code, "http_error")
    message = f"no route {request.method} {request.url.path}" if exc.status_code == 404 else str(exc.detail)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = allowed_methods(request)
        headers["Allow"] = ", ".join(allowed)
        message = f"{request.method} is not a method of {request.url.path}; it takes {', '.join(allowed)}"
    return error_response(exc.status_code, code, message, headers)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes at the request's path (starlette's 405 names only the first route
    whose path matched: ``DELETE /datasets/x/budget`` was told ``GET``, not ``GET, PUT``)."""
    path = get_route_path(request.scope)
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        regex, taken = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and taken and regex.match(path):
            methods.update(taken)
    return sorted(methods)


async def _own_value_error(request: Request, exc: ValueError) -> SafeJSONResponse:
    status, body = error_body_for(exc)
    return error_response(status, body["error"], body["message"])


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ValueError, _own_value_error)
    app.add_middleware(CatchAll)


class CatchAll:
    """The last line: an exception no handler took becomes a JSON 500 without internals."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001
            if started:
                raise
            status, body = error_body_for(exc)
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
            await error_response(status, body["error"], body["message"], headers)(scope, receive, send)
