"""Who is looking at a console page: a signed-in person's key and session (the access checks make one)."""

from __future__ import annotations

from dataclasses import dataclass

from service.access.auth import Principal
from service.api.console.sessions import Session


@dataclass(frozen=True)
class Visitor:
    """A signed-in person: the key's principal and the session (whose CSRF token the page's forms carry)."""

    principal: Principal
    session: Session
    csrf_token: str

    @property
    def role(self) -> str:
        return self.principal.role
