"""Who may call what: bearer-key authentication, role checks and steward scopes.

Every route but ``GET /health`` needs ``Authorization: Bearer <key>``; a missing, malformed,
unknown or revoked key is 401. A live key whose role is not allowed on the route is 403, as is a
scoped steward key used on a dataset outside its scope, or attaching through a source outside its source scope.
Roles and scopes are checked before anything is read, so a 403 reveals nothing about whether a dataset, release or
source exists.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, Request
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


def authenticate(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Principal:
    """The principal behind the request's bearer key (401 otherwise)."""
    if credentials is None:
        raise Unauthorized("this route needs an API key: send the header `Authorization: Bearer <key>`")
    principal = auth.lookup_key(engine_of(request), credentials.credentials)
    if principal is None:
        raise Unauthorized("the API key is unknown or has been revoked")
    return principal


def require(*roles: str) -> Callable[..., Principal]:
    """A dependency that authenticates the caller and admits only ``roles``."""

    def dependency(principal: Principal = Depends(authenticate)) -> Principal:
        if principal.role not in roles:
            article = "an" if principal.role[0] in "aeiou" else "a"
            raise Forbidden(f"this route is for {' or '.join(roles)} keys; yours is {article} {principal.role} key")
        return principal

    dependency.__name__ = f"require_{'_'.join(roles)}"
    return dependency


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
