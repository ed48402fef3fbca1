"""Who may open a console page or send one of its forms: the session, the role, the scope, the CSRF token.

Every console route is a :class:`ConsoleRoute` (a :class:`~service.api.guard.GuardedRoute`: its body bounded by its
declared limit before a byte is read) whose dependency :func:`signed_in` admits the visitor: the session cookie
verified (:mod:`service.api.console.sessions`), its key looked up again (a revoked key's session ends at once) and the
role checked by the API's own :func:`~service.api.security.check_role`; pages about a dataset check the scope with the
API's :func:`~service.api.security.check_scope`. So a page refuses exactly whom the matching API route refuses.

A form's body is read by :func:`form_fields` (``application/x-www-form-urlencoded``, parsed by the standard library)
and checked by :func:`checked_form`: a missing or wrong CSRF token is 403 before the form does anything.

Refusals and errors are pages, not JSON: :class:`ConsoleRoute` renders every :class:`~service.errors.ServiceError`
as the error page with its status and message (the API's own messages, which name no cell value), a visitor without
a session who asks for a page is sent to the sign-in page (303), and any other failure is the API's safe 500 message.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import RedirectResponse, Response

from service.access import auth
from service.api.console import render
from service.api.console.sessions import SESSION_COOKIE, Sessions
from service.api.console.visitor import Visitor
from service.api.errors import error_body_for
from service.api.guard import GuardedRoute
from service.api.security import EVERYONE, Forbidden, Unauthorized, check_role, engine_of
from service.errors import InvalidInput, ServiceError

#: Headers of every console answer: no script, style or frame from anywhere else, nothing cached, no referrer.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class SignInNeeded(Unauthorized):
    """No live session: a page answers with the sign-in page, a form with 401."""


def sessions_of(request: Request) -> Sessions:
    return request.app.state.console_sessions


def signed_in(*roles: str) -> Callable[..., Visitor]:
    """A dependency that admits a visitor with a live session whose key has one of ``roles`` (403 otherwise). It
    records them (``.roles``) for the tests that walk every page as every role."""

    def dependency(request: Request) -> Visitor:
        sessions = sessions_of(request)
        session = sessions.verify(request.cookies.get(SESSION_COOKIE))
        if session is None:
            raise SignInNeeded("sign in to the console first: your session is missing or has expired")
        principal = auth.principal_by_id(engine_of(request), session.key_id)
        if principal is None:
            raise SignInNeeded("the API key of this session has been revoked: sign in again with a live key")
        check_role(principal, roles)
        return Visitor(principal, session, sessions.csrf_token(session))

    dependency.__name__ = f"console_{'_'.join(roles)}"
    dependency.roles = roles  # type: ignore[attr-defined]
    return dependency


anyone = signed_in(*EVERYONE)


async def form_fields(request: Request) -> dict[str, list[str]]:
    """The fields of a form's body (``application/x-www-form-urlencoded``), as lists of values by name."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidInput("console forms are sent as application/x-www-form-urlencoded", code="invalid_request")
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("the form is not UTF-8", code="invalid_request") from None
    return parse_qs(text, keep_blank_values=True, max_num_fields=2000)


def checked_form(visitor: Visitor, fields: dict[str, list[str]], request: Request) -> dict[str, list[str]]:
    """``fields`` once its CSRF token is the visitor's session's (403 otherwise)."""
    token = (fields.get("csrf_token") or [None])[0]
    if not sessions_of(request).csrf_valid(visitor.session, token):
        raise Forbidden("this form's CSRF token is missing or does not belong to your session: reload the page and "
                        "send it again")
    return fields


def field(fields: dict[str, list[str]], name: str, default: str | None = None) -> str | None:
    """The first value of the form field ``name`` (stripped), or ``default`` when it is absent or blank."""
    values = fields.get(name) or []
    value = values[0].strip() if values else ""
    return value if value else default


class ConsoleRoute(GuardedRoute):
    """A console route: guarded like every API route, answering pages (errors included) with the console's headers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def console(request: Request) -> Response:
            try:
                response = await handler(request)
            except SignInNeeded as exc:
                if request.method == "GET":
                    target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                    response = RedirectResponse(f"/console/sign-in?next={target}", status_code=303)
                else:
                    response = render.error_page(request, exc.status, exc.message)
            except ServiceError as exc:
                response = render.error_page(request, exc.status, exc.message)
            except RequestValidationError as exc:
                names = sorted({".".join(str(part) for part in error.get("loc", ())[1:]) for error in exc.errors()})
                response = render.error_page(request, 422, f"not a valid value: {', '.join(names)}")
            except Exception as exc:  # noqa: BLE001 - the last line: the API's safe answer (logged there), as a page
                status, body = error_body_for(exc)
                response = render.error_page(request, status, str(body["message"]))
            response.headers.update(SECURITY_HEADERS)
            return response

        return console

