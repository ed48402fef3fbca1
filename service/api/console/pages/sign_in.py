"""Signing in and out: an API key in, a session cookie out (:mod:`service.api.console.sessions`); the key is never
stored, shown or put in a URL."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from service.access import auth
from service.api import limits
from service.api.console import render
from service.api.console.access import ConsoleRoute, Visitor, anyone, checked_form, field, form_fields, sessions_of
from service.api.console.sessions import COOKIE_PATH, SESSION_COOKIE, SIGN_IN_COOKIE, SIGN_IN_SECONDS
from service.api.security import EVERYONE, engine_of

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

FORM = limits.body(limits.SMALL_BODY)


def _home(next_path: str | None) -> str:
    """Where to go after signing in: ``next_path`` when it is a console page of this server, else the home page."""
    if next_path and next_path.startswith("/console/") and not next_path.startswith("//") and "\\" not in next_path:
        return next_path
    return "/console/datasets"


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


@router.get("")
def home() -> Response:
    return RedirectResponse("/console/datasets", status_code=303)


@router.get("/sign-in")
def sign_in_form(request: Request, next: str | None = None) -> Response:  # noqa: A002 - the query's name
    """The sign-in form, then back to the page ``next`` (a console page)."""
    return _sign_in_page(request, next)


def _sign_in_page(request: Request, next_path: str | None, problem: str | None = None, status: int = 200) -> Response:
    """The sign-in form, with a fresh pre-session cookie and the token that goes with it (login CSRF)."""
    cookie, token = sessions_of(request).sign_in_cookie()
    response = render.page(request, "sign_in.html", None, title="Sign in", sign_in_token=token,
                           next=_home(next_path), problem=problem, status=status)
    response.set_cookie(SIGN_IN_COOKIE, cookie, max_age=SIGN_IN_SECONDS, path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=_secure(request))
    return response


@router.post("/sign-in", openapi_extra=FORM)
async def sign_in(request: Request) -> Response:
    """Check the form's token against the pre-session cookie, look the key up as the API does, and open a session of
    a steward, analyst or auditor key. A wrong key answers the form again, saying so (401)."""
    fields = await form_fields(request)
    sessions = sessions_of(request)
    if not sessions.sign_in_valid(request.cookies.get(SIGN_IN_COOKIE), field(fields, "sign_in_token")):
        return _sign_in_page(request, field(fields, "next"), status=403,
                            problem="The sign-in form expired or did not come from this console: sign in again.")
    key = field(fields, "key") or ""
    principal = await run_in_threadpool(auth.lookup_key, engine_of(request), key)
    if principal is None:
        return _sign_in_page(request, field(fields, "next"), status=401,
                            problem="That API key is unknown or has been revoked.")
    if principal.role not in EVERYONE:
        return _sign_in_page(request, field(fields, "next"), status=403,
                            problem=f"The console is for steward, analyst and auditor keys; this is a "
                                    f"{principal.role} key.")
    cookie, _ = sessions.issue(principal.key_id)
    response = RedirectResponse(_home(field(fields, "next")), status_code=303)
    response.set_cookie(SESSION_COOKIE, cookie, max_age=sessions.lifetime, path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=_secure(request))
    response.delete_cookie(SIGN_IN_COOKIE, path=COOKIE_PATH)
    return response


@router.post("/sign-out", openapi_extra=FORM)
def sign_out(request: Request, visitor: Visitor = Depends(anyone),
             fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    checked_form(visitor, fields, request)
    response = RedirectResponse("/console/sign-in", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response
