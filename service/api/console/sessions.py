"""The console's sessions: a signed, expiring cookie that names an API key by its id, and the CSRF tokens of its forms.

A person signs in with an API key once (``POST /console/sign-in``); the key is looked up as the API looks it up and is
then forgotten: the cookie holds the key's **id**, the session's expiry and a random nonce, signed with HMAC-SHA256
(:mod:`hmac`, RFC 2104) under the server's console secret. Nothing in the cookie lets anyone call the API, and a copy of
it stops working at its expiry or when the key is revoked (every request looks the key id up again:
:func:`service.access.auth.principal_by_id`).

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it), ``Path=/console``
(the API never sees it) and ``Secure`` when the console is served over HTTPS.

**CSRF.** Every form carries a token derived from the session: ``HMAC(secret, "csrf" | nonce)``. A page of another
site can neither read it (the same-origin policy) nor derive it (it does not know the secret), and SameSite=Strict
keeps the cookie off its requests besides. The sign-in form, which comes before any session, gets the same protection
from a short-lived pre-session cookie with a nonce of its own (login CSRF: a page that signs a victim in as the
attacker). Tokens are compared in constant time (:func:`hmac.compare_digest`).

**The secret** is the operator's ``MARGINALIA_CONSOLE_SECRET`` when set (at least 32 characters), otherwise drawn at
random when the server starts and shared with its workers (:func:`service.api.server.serve`): a restart then signs
everyone out, which is the safe default.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The environment variable that holds the operator's console secret (shared by every worker of a server).
SECRET_ENV = "MARGINALIA_CONSOLE_SECRET"
MIN_SECRET_LENGTH = 32
#: How long a session lasts after sign-in (8 hours: a working day), and the sign-in form's own token.
SESSION_SECONDS = 8 * 3600
SIGN_IN_SECONDS = 15 * 60

SESSION_COOKIE = "marginalia_console"
SIGN_IN_COOKIE = "marginalia_console_sign_in"
COOKIE_PATH = "/console"
_VERSION = "v1"


class ConsoleSecretError(ValueError):
    """The operator's console secret is unusable (too short)."""


def console_secret(environ: dict[str, str] | None = None) -> str:
    """The console secret: the operator's :data:`SECRET_ENV`, checked, or a new random one."""
    value = (os.environ if environ is None else environ).get(SECRET_ENV)
    if value is None or value == "":
        return secrets.token_urlsafe(32)
    if len(value) < MIN_SECRET_LENGTH:
        raise ConsoleSecretError(f"{SECRET_ENV} must be at least {MIN_SECRET_LENGTH} characters (it signs the "
                                 "console's session cookies); unset it to draw a random one at every start")
    return value


@dataclass(frozen=True)
class Session:
    """A verified session: the API key it signs in as, when it ends, and its nonce (the root of its CSRF token)."""

    key_id: int
    expires: int
    nonce: str


class Sessions:
    """Signs and verifies the console's cookies and tokens under one secret (the module docstring)."""

    def __init__(self, secret: str, *, lifetime: int = SESSION_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self._secret = secret.encode("utf-8")
        self.lifetime = lifetime
        self.clock = clock

    def _sign(self, *parts: str) -> str:
        return hmac.new(self._secret, "|".join(parts).encode("utf-8"), hashlib.sha256).hexdigest()

    def issue(self, key_id: int) -> tuple[str, Session]:
        """A new session of the key ``key_id``: the cookie's value and the session."""
        session = Session(key_id, int(self.clock()) + self.lifetime, secrets.token_urlsafe(16))
        body = f"{_VERSION}.{session.key_id}.{session.expires}.{session.nonce}"
        return f"{body}.{self._sign('session', body)}", session

    def verify(self, cookie: str | None) -> Session | None:
        """The session ``cookie`` carries, or None when it is missing, forged, malformed or expired."""
        if not cookie or len(cookie) > 300:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign("session", body)):
            return None
        version, key_id, expires, nonce = (body.split(".") + ["", "", "", ""])[:4]
        if version != _VERSION or not key_id.isdigit() or not expires.isdigit() or not nonce:
            return None
        if int(expires) <= self.clock():
            return None
        return Session(int(key_id), int(expires), nonce)

    def csrf_token(self, session: Session) -> str:
        """The token every form of ``session`` carries."""
        return self._sign("csrf", session.nonce)

    def csrf_valid(self, session: Session, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token, self.csrf_token(session))

    # the sign-in form: a pre-session cookie (a nonce and its expiry) and the token derived from it

    def sign_in_cookie(self) -> tuple[str, str]:
        """A new pre-session cookie's value and the token of the sign-in form that goes with it."""
        nonce = secrets.token_urlsafe(16)
        body = f"{nonce}.{int(self.clock()) + SIGN_IN_SECONDS}"
        return f"{body}.{self._sign('sign-in-cookie', body)}", self._sign("sign-in", nonce)

    def sign_in_valid(self, cookie: str | None, token: str | None) -> bool:
        """Whether the sign-in form's ``token`` goes with the pre-session ``cookie``, which has not expired."""
        if not cookie or not token or len(cookie) > 200:
            return False
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign("sign-in-cookie", body)):
            return False
        nonce, _, expires = body.partition(".")
        if not expires.isdigit() or int(expires) <= self.clock():
            return False
        return hmac.compare_digest(token, self._sign("sign-in", nonce))
