"""Principals and their API keys.

A key is a random 256-bit token shown ONCE, when it is created; the database keeps only its
SHA-256 hash (``api_keys.key_hash``), so a copy of the database does not let anyone call the API.
A token carries 256 bits of entropy, so an unsalted fast hash is enough: there is no password to
guess. Each key belongs to one role:

* ``steward``: loads tables, sets budgets, makes releases; optionally scoped to named datasets
  (``scope``; ``None`` = every dataset) and to the attach sources it may attach tables through (``sources``;
  ``None`` = every source, the default of a key not scoped to datasets; a key scoped to datasets attaches through
  no source unless it names some, since attaching is reading: docs/privacy.md 1.2);
* ``analyst``: reads datasets' domains, budgets and releases, queries marginals and synthetic rows;
* ``auditor``: reads budgets, releases and the privacy ledger;
* ``participant``: one person of a local-DP collection: fetches a campaign's public state and submits her own
  reports, nothing else;
* ``gateway``: a relay that submits batches of reports for participants it names by pseudonyms (it is not a person
  and spends nothing itself; each pseudonym is a participant with her own ledger and cap), only to the campaigns a
  steward named in its scope and within its quotas of reports (:mod:`service.campaigns.gateways`).

What each role may call is decided in :mod:`service.api.security`; this module only stores keys.
Revoked keys stay in the table (with ``revoked_at``) so the ledger's principals stay explainable.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select

from db.engine import serialized_transaction, transaction
from db.models import API_KEY_ROLES, ApiKey, utcnow
from service.errors import Conflict, InvalidInput, NotFound

ROLES = API_KEY_ROLES
KEY_PREFIX = "mgl_"
MAX_NAME_LENGTH = 200
MAX_SCOPE = 1000


@dataclass(frozen=True)
class Principal:
    """Who is calling: the holder of one live API key."""

    key_id: int
    name: str
    role: str
    scope: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None

    def may_access(self, dataset: str) -> bool:
        """Whether this principal's scope covers ``dataset`` (unscoped keys cover every dataset)."""
        return self.scope is None or dataset in self.scope

    def may_attach_from(self, source: str) -> bool:
        """Whether this principal's source scope covers the attach source ``source`` (``None``: every source)."""
        return self.sources is None or source in self.sources

    @property
    def label(self) -> str:
        """How the ledger and the releases table name this principal."""
        return f"{self.role}:{self.name} (key {self.key_id})"[:200]


@dataclass(frozen=True)
class KeyInfo:
    """What may be shown about a key: never the key nor its hash."""

    id: int
    name: str
    role: str
    scope: tuple[str, ...] | None
    created_at: datetime
    revoked_at: datetime | None
    sources: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "datasets": None if self.scope is None else list(self.scope),
            "sources": None if self.sources is None else list(self.sources),
            "created_at": self.created_at.isoformat(),
            "revoked_at": None if self.revoked_at is None else self.revoked_at.isoformat(),
        }


def hash_key(key: str) -> str:
    """The SHA-256 hex digest that is stored in place of ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(row.id, row.name, row.role, _names(row.scope_json), row.created_at, row.revoked_at,
                   _names(row.source_scope_json))


def _names(stored: str | None) -> tuple[str, ...] | None:
    return None if stored is None else tuple(json.loads(stored))


def _stored(names: tuple[str, ...] | None) -> str | None:
    return None if names is None else json.dumps(list(names))


def _check_scope(role: str, names: list[str] | tuple[str, ...] | None, what: str, *,
                 empty: bool = False) -> tuple[str, ...] | None:
    """The scope ``names`` of kind ``what`` (``datasets`` or ``sources``) without repeats, checked: a steward key's
    only, at most :data:`MAX_SCOPE` names, each a valid name; ``empty`` allows no name at all."""
    if names is None:
        return None
    if role != "steward":
        raise InvalidInput(f"only steward keys can be scoped to {what}, not {role} keys", code="invalid_parameter")
    unique = tuple(dict.fromkeys(names))
    if not unique and not empty:
        raise InvalidInput(f"{what}: a scoped key needs at least one name", code="invalid_parameter")
    if len(unique) > MAX_SCOPE:
        raise InvalidInput(f"{what}: at most {MAX_SCOPE} names in a scope", code="invalid_parameter")
    for name in unique:
        if not isinstance(name, str) or not name.strip() or name != name.strip() or len(name) > MAX_NAME_LENGTH:
            raise InvalidInput(f"{what}: {name!r} is not a valid name", code="invalid_parameter")
    return unique


def create_key(
    engine: Engine, role: str, name: str, datasets: list[str] | tuple[str, ...] | None = None,
    sources: list[str] | tuple[str, ...] | None = None,
) -> tuple[KeyInfo, str]:
    """Create a key for a new principal. Returns its public record and the key itself, which is
    not stored anywhere and cannot be shown again.

    ``datasets`` scopes a steward key to those dataset names (which need not exist yet: a scoped
    steward may load a dataset of that name). ``sources`` scopes it to those attach sources (which need not exist
    yet either); without it, a key scoped to datasets attaches through no source and an unscoped key through every
    source: attaching reads a table and answers whether every value fits the spec, so a key limited to some datasets
    is not given every table of the server (docs/privacy.md 1.2)."""
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {list(ROLES)}, got {role!r}", code="invalid_parameter")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(f"name must be 1–{MAX_NAME_LENGTH} characters, got {name!r}", code="invalid_parameter")
    scope = _check_scope(role, datasets, "datasets")
    source_scope = _check_scope(role, sources, "sources", empty=True)
    if source_scope is None and scope is not None:
        source_scope = ()
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    with transaction(engine) as session:
        row = ApiKey(name=name.strip(), role=role, key_hash=hash_key(key), scope_json=_stored(scope),
                     source_scope_json=_stored(source_scope), created_at=utcnow())
        session.add(row)
        session.flush()
        return _info(row), key


def revoke_key(engine: Engine, key_id: int) -> KeyInfo:
    """Revoke a key: every later request made with it gets 401. Revoking twice is a conflict."""
    with serialized_transaction(engine) as session:  # read-then-write: take SQLite's write lock first
        row = session.get(ApiKey, key_id)
        if row is None:
            raise NotFound(f"no API key with id {key_id}", code="key_not_found")
        if row.revoked_at is not None:
            raise Conflict(f"API key {key_id} was already revoked at {row.revoked_at.isoformat()}",
                           code="already_revoked")
        row.revoked_at = utcnow()
        session.flush()
        return _info(row)


def list_keys(engine: Engine) -> list[KeyInfo]:
    """Every key ever created (revoked ones included), oldest first, without keys or hashes."""
    with transaction(engine) as session:
        return [_info(row) for row in session.execute(select(ApiKey).order_by(ApiKey.id)).scalars()]


def lookup_key(engine: Engine, key: str) -> Principal | None:
    """The principal holding ``key``, or None when the key is unknown or revoked."""
    if not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    with transaction(engine) as session:
        row = session.execute(
            select(ApiKey).where(ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None))
        ).scalar_one_or_none()
        return None if row is None else _principal(row)


def principal_by_id(engine: Engine, key_id: int) -> Principal | None:
    """The principal of the key with id ``key_id``, or None when there is none or it has been revoked (the console's
    session names its key by id, never by the key: :mod:`service.api.console.sessions`)."""
    with transaction(engine) as session:
        row = session.get(ApiKey, key_id)
        return None if row is None or row.revoked_at is not None else _principal(row)


def _principal(row: ApiKey) -> Principal:
    info = _info(row)
    return Principal(info.id, info.name, info.role, info.scope, info.sources)
