"""What every route does before a byte of its body is read: the key and the role, then the body's limit.

FastAPI reads and parses a route's JSON body before it solves the route's dependencies, so with ``Depends(require(
...))`` alone a caller without a key had a 94 MB body parsed on the event loop before the 401 (issue 27, finding 3:
5.25 s, ``GET /health`` stalled 5.09 s, the worker grew by 0.56 GB). :class:`GuardedRoute` is the route class of every
router of the API (``APIRouter(route_class=GuardedRoute)``); its handler, in this order:

1. **admits the caller**: when the route's dependencies carry admission checks (:func:`~service.api.security.
   require` records its roles, :func:`admissions` finds them at any depth), the bearer key is looked up in a worker
   thread (:func:`~service.api.security.identify`) and checked, answering 401 or 403 exactly as the dependencies do,
   with nothing of the body read; the principal is left in the request's scope, where the dependency finds it
   (:data:`~service.api.security.PRINCIPAL`), so the key is looked up once;
2. **bounds the body** by the route's own limit, declared beside it (``openapi_extra=limits.body(...)``,
   :mod:`service.api.limits`; a route with a body and no limit is refused when the app is built), never above the
   app's ceiling: a declared ``Content-Length`` over it is 413 before anything is read, a streamed body is abandoned
   at the first chunk past it (:func:`~service.api.limits.within`, the report route's reader too);
3. **parses a large JSON body off the event loop**: past :data:`INLINE_PARSE_BYTES` the body is decoded and validated
   against the route's body model in a worker thread, as FastAPI would have (the same 400 ``malformed_json`` and 422
   ``invalid_request`` answers), and FastAPI gets the validated model (which it does not validate again). Smaller
   bodies take FastAPI's usual path.

``GET /health`` has no admission check, and routing answers 404 and 405 before any route is chosen: they behave as
before. Checks that need the dataset's name (a scoped steward's) stay in the routes, after the body is read.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope

from service.access.auth import Principal
from service.api import limits
from service.api.security import PRINCIPAL, identify

#: Bodies up to this size are parsed by FastAPI on the event loop (well under a millisecond); larger ones in a thread.
INLINE_PARSE_BYTES = 64 * limits.KiB

Admission = Callable[[Principal], object]


def admissions(dependant: Dependant) -> list[Admission]:
    """The admission checks of a route's dependencies (``dependency.admit``), innermost first, as FastAPI runs them."""
    found: list[Admission] = []
    for sub in dependant.dependencies:
        found.extend(admissions(sub))
        check = getattr(sub.call, "admit", None)
        if check is not None:
            found.append(check)
    return found


class BoundedRequest(Request):
    """The request as a guarded route reads it: its body bounded by ``limit`` (:func:`service.api.limits.within`),
    and its JSON, once validated off the event loop, handed over as ``parsed``."""

    def __init__(self, scope: Scope, receive: Receive, limit: int, hint: str | None) -> None:
        super().__init__(scope, receive)
        self.limit, self.hint = limit, hint
        self.parsed: object | None = None

    async def stream(self) -> AsyncIterator[bytes]:
        what = f"{self.method} {self.url.path}"
        async for chunk in limits.within(self, super().stream(), self.limit, what, self.hint):
            yield chunk

    async def json(self) -> Any:
        return self.parsed if self.parsed is not None else decode_json(await self.body())


def decode_json(raw: bytes) -> Any:
    """``raw`` as JSON; a body that is not UTF-8 is malformed JSON too (:class:`json.JSONDecodeError`, a 400
    ``malformed_json``, where ``json.loads`` raised a ``UnicodeDecodeError``)."""
    try:
        return json.loads(raw)
    except UnicodeDecodeError as error:
        raise json.JSONDecodeError("the body is not UTF-8", "", error.start) from None


def _is_json(request: Request) -> bool:
    """Whether FastAPI would parse the body as JSON (``application/json`` or ``application/*+json``)."""
    value = request.headers.get("content-type")
    if not value:
        return False
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


class GuardedRoute(APIRoute):
    """An API route that admits its caller and bounds its body before reading it (the module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        checks = admissions(self.dependant)
        declared = limits.declared(self.openapi_extra)
        takes_body = self.body_field is not None or "requestBody" in (self.openapi_extra or {})
        if takes_body and declared is None:
            raise TypeError(f"route {sorted(self.methods)} {self.path} takes a body but declares no limit: add "
                            "openapi_extra=limits.body(...) (service/api/limits.py)")
        validate = self._validator()

        async def guarded(request: Request) -> Response:
            if checks:
                principal = await identify(request)
                for check in checks:
                    check(principal)
                request.scope[PRINCIPAL] = principal
            ceiling = request.app.state.max_body_bytes
            bounded = BoundedRequest(request.scope, request.receive,
                                     min(declared.bytes if declared else 0, ceiling), declared and declared.hint)
            if validate is not None and _is_json(bounded):
                raw = await bounded.body()
                if len(raw) > INLINE_PARSE_BYTES:
                    bounded.parsed = await run_in_threadpool(validate, raw)
            return await handler(bounded)

        return guarded

    def _validator(self) -> Callable[[bytes], object] | None:
        """For a route with one JSON body model: decode and validate a body as FastAPI does (its errors, its loc)."""
        if self.body_field is None or len(self.dependant.body_params) != 1 or self._embed_body_fields:
            return None
        field = self.body_field

        def validate(raw: bytes) -> object:
            try:
                data = decode_json(raw)
            except json.JSONDecodeError as error:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body", error.pos),
                                               "msg": "JSON decode error", "input": {},
                                               "ctx": {"error": error.msg}}]) from None
            value, errors = field.validate(data, {}, loc=("body",))
            if errors:
                raise RequestValidationError(errors)
            return value

        return validate
