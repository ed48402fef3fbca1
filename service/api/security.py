"""Who may call what: bearer-key authentication, role checks and steward scopes.

Every route but ``GET /health`` needs ``Authorization: Bearer <key>``; a missing, malformed,
unknown or revoked key is 401. A live key whose role is not allowed on the route is 403, as is a
scoped steward key used on a dataset outside its scope, or attaching through a source outside its source scope.
Roles and scopes are checked before anything is read, so a 403 reveals nothing about whether a dataset, release or
source exists.

The key and the role are checked before a byte of the request's body is read: FastAPI reads and parses a route's
body before it solves the route's dependencies, so :class:`service.api.guard.GuardedRoute` looks the key up
(:func:`identify`) and runs the checks that :func:`require` recorded on the route's dependency (``dependency.admit``,
with its ``roles``: declared once), then leaves the principal in the request's scope (:data:`PRINCIPAL`), where
:func:`authenticate` finds it instead of looking the key up a second time. Scope checks that need a dataset's or a
source's name stay in the routes (:func:`check_scope`, :func:`check_source_scope`).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine

from service.access import auth
from service.access.auth import Principal
from service.errors import ServiceError

STEWARD, ANALYST, AUDITOR = "steward", "analyst", "auditor"
EVERYONE = (STEWARD, ANALYST, AUDITOR)

_bearer = HTTPBearer(auto_error=False, description="An API key from `marginalia keys create`.")


class Unauthorized(ServiceError):
    code = "unauthorized"
    status = 401


class Forbidden(ServiceError):
    code = "forbidden"
    status = 403


def engine_of(request: Request) -> Engine:
    return request.app.state.engine


#: Where :class:`~service.api.guard.GuardedRoute` leaves the principal it admitted, in the request's ASGI scope.
PRINCIPAL = "marginalia.principal"


def principal_for(engine: Engine, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The principal behind a bearer key (401 when there is none, or it is unknown or revoked). A database call."""
    if credentials is None:
        raise Unauthorized("this route needs an API key: send the header `Authorization: Bearer <key>`")
    principal = auth.lookup_key(engine, credentials.credentials)
    if principal is None:
        raise Unauthorized("the API key is unknown or has been revoked")
    return principal


def check_role(principal: Principal, roles: tuple[str, ...]) -> Principal:
    """``principal`` if its role is one of ``roles`` (403 otherwise)."""
    if principal.role not in roles:
        article = "an" if principal.role[0] in "aeiou" else "a"
        raise Forbidden(f"this route is for {' or '.join(roles)} keys; yours is {article} {principal.role} key")
    return principal


async def identify(request: Request) -> Principal:
    """The caller's principal, before anything of the body is read: the bearer key parsed as :data:`_bearer` parses
    it and looked up in a worker thread (a database call, never on the event loop); 401 as :func:`authenticate`."""
    credentials = await _bearer(request)
    return await run_in_threadpool(principal_for, engine_of(request), credentials)


def authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """The principal behind the request's bearer key (401 otherwise): the one the route's guard already identified,
    or (outside a guarded route) the key looked up now."""
    identified = request.scope.get(PRINCIPAL)
    if identified is not None:
        return identified
    return principal_for(engine_of(request), credentials)


def _any_key(principal: Principal) -> Principal:
    return principal


def require(*roles: str) -> Callable[..., Principal]:
    """A dependency that authenticates the caller and admits only ``roles``. It records them (``.roles``) and its
    check (``.admit``), which the route's guard runs before the body is read (:func:`service.api.guard.admissions`)."""

    def dependency(principal: Principal = Depends(authenticate)) -> Principal:
        return check_role(principal, roles)

    dependency.__name__ = f"require_{'_'.join(roles)}"
    dependency.roles = roles  # type: ignore[attr-defined]
    dependency.admit = lambda principal: check_role(principal, roles)  # type: ignore[attr-defined]
    return dependency


authenticate.admit = _any_key  # type: ignore[attr-defined]  # a route that needs a key: any live key


def check_scope(principal: Principal, dataset: str) -> None:
    """403 unless ``principal`` may act on ``dataset`` (scoped steward keys)."""
    if not principal.may_access(dataset):
        raise Forbidden(f"this key is scoped to the datasets {list(principal.scope or ())}, not {dataset!r}")


def check_source_scope(principal: Principal, source: str) -> None:
    """403 unless ``principal`` may attach tables through the source ``source``; checked before the source is looked
    up, so that a key learns nothing about the sources outside its scope, not even whether they exist."""
    if not principal.may_attach_from(source):
        scope = list(principal.sources or ())
        allowed = f"the sources {scope}" if scope else "no source"
        raise Forbidden(f"this key may attach tables through {allowed}, not through {source!r}")
