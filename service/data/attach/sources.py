"""Attach sources: the places the operator lets stewards attach tables from over HTTP (``marginalia source add``).

A route that took a server path or a database URL would let any steward key probe the server's files and network,
and would send database passwords over the wire. So the operator, who has the server's shell, names the places
once, and ``POST /datasets/attach`` names a source and what to read *inside* it
(:mod:`service.data.attach.through_source`). A steward key attaches only through the sources its scope names
(``keys create --source NAME``; :mod:`service.access.auth`), since an attach reads the table and answers whether
its values fit the spec (docs/privacy.md 1.2). The kinds of source:

- ``parquet``: a folder of the server (kept as its real path); stewards attach Parquet files or globs inside it;
- ``sql``: a SQLAlchemy URL *without* a password, and where the password is: an environment variable of the server
  processes or a file the operator names (:mod:`service.data.credentials`; stored: the reference, never the
  secret); stewards attach a table of that database (give the URL a read-only role that reads only what stewards
  may attach);
- ``spark``: the service's Spark session (``MARGINALIA_SPARK_REMOTE``, or local mode); stewards attach a table of
  its catalog (never a path Spark reads).

``source add`` checks what it registers: the folder exists; the database accepts a connection with the password
the reference names (read in the shell running the command; ``--no-check`` registers a source whose password only
the server processes have).

A dataset attached through a ``sql`` source names the source in its location and connects with the source's
current URL and credentials; so ``source update`` (a new password reference, a moved database) serves every dataset
attached through it, and touches no budget. Datasets attached through a ``parquet`` or ``spark`` source keep their
own copy of the location (the files it read, the table). Removing a source stops *new* attaches through it: a
source that datasets still read through is kept, marked removed (its URL and credentials serve them), and is deleted
once none does (the service has no command that deletes a dataset, so refusing the removal while one exists would
make a source that was once used permanent).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session

from db.engine import (
    DatabaseUnavailable,
    make_engine,
    safe_url,
    serialized_transaction,
    sqlite_file_missing,
    transaction,
)
from db.models import SOURCE_KINDS, AttachSource, Dataset, utcnow
from service.data.credentials import CredentialReference, CredentialsUnavailable, SourceConnection, refuse_password
from service.errors import Conflict, InvalidInput, NotFound

PARQUET, SQL_SOURCE, SPARK_SOURCE = SOURCE_KINDS
#: What DuckDB reads as a glob in a path: a folder holding one could make a file name match another file.
GLOB_CHARACTERS = set("*?[")
#: How long ``source add`` and readiness wait for a database to accept a connection.
CONNECT_SECONDS = 3
_NAME = re.compile(r"^[^\x00-\x1f\x7f/]{1,200}$")


@dataclass(frozen=True)
class Source:
    """A registered source. ``root`` (a real folder path) and ``url`` (never with a password) stay on the server;
    ``credentials``: where a ``sql`` source's password is (None: the database needs none, or ``needs_credentials``);
    ``removed``: the source takes no new attach but serves ``datasets`` (their names), attached through it."""

    name: str
    kind: str
    root: str | None = None
    url: str | None = None
    principal: str = "cli"
    id: int | None = None
    credentials: CredentialReference | None = None
    needs_credentials: bool = False
    removed: bool = False
    datasets: tuple[str, ...] = field(default=())

    def where(self) -> str:
        """Where the source reads, for the operator: the folder, the URL, or the session."""
        if self.kind == PARQUET:
            return str(self.root)
        if self.kind == SQL_SOURCE:
            return safe_url(str(self.url))
        remote = os.environ.get("MARGINALIA_SPARK_REMOTE")
        return f"Spark Connect at {remote}" if remote else "Spark in local mode"

    def password(self) -> str:
        """Where a ``sql`` source's password is, for the operator (never the password)."""
        if self.credentials is not None:
            return self.credentials.describe()
        if self.needs_credentials:
            return "needed: run `marginalia source update` with --password-env or --password-file"
        return "none" if self.kind == SQL_SOURCE else ""

    def connection(self) -> SourceConnection:
        """How to connect to a ``sql`` source's database (:class:`~service.data.credentials.SourceConnection`)."""
        return SourceConnection(self.name, str(self.url), self.credentials, self.needs_credentials)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "kind": self.kind, "where": self.where(),
                                  "principal": self.principal}
        if self.kind == SQL_SOURCE:
            out["password"] = self.password()
            out["needs_credentials"] = self.needs_credentials
        out["removed"] = self.removed
        out["datasets"] = list(self.datasets)
        return out


def add_source(engine: Engine, name: str, *, parquet_root: Path | None = None, sql: str | None = None,
               spark: bool = False, password_env: str | None = None, password_file: Path | None = None,
               check: bool = True, principal: str = "cli") -> Source:
    """Register source ``name``: exactly one of a folder (``parquet_root``, which must exist), a database URL
    (``sql``, without a password: ``password_env`` or ``password_file`` says where it is) or the Spark session
    (``spark``). A database must accept a connection now unless ``check`` is False (module docstring)."""
    _check_name(name)
    if sum([parquet_root is not None, sql is not None, bool(spark)]) != 1:
        raise InvalidInput("give exactly one of --parquet-root DIR, --sql URL or --spark", code="invalid_parameter")
    reference = CredentialReference.from_options(password_env, password_file)
    if reference is not None and sql is None:
        raise InvalidInput("--password-env and --password-file go with --sql URL only", code="invalid_parameter")
    if parquet_root is not None:
        source = Source(name, PARQUET, root=_folder(parquet_root), principal=principal)
    elif sql is not None:
        _check_url(sql)
        source = Source(name, SQL_SOURCE, url=sql, principal=principal, credentials=reference)
        if check:
            check_connects(source.connection(), "--sql")
    else:
        source = Source(name, SPARK_SOURCE, principal=principal)
    with serialized_transaction(engine) as session:
        existing = session.execute(select(AttachSource).where(AttachSource.name == name)).scalar_one_or_none()
        if existing is not None:
            state = "a removed source still serving datasets is" if existing.removed_at is not None else "a source is"
            raise Conflict(f"{state} named {name!r}; choose another name (or `marginalia source update {name}`)",
                           code="duplicate_source")
        row = AttachSource(name=name, kind=source.kind, root=source.root, url=source.url, principal=principal,
                           credentials=None if reference is None else reference.stored())
        session.add(row)
        session.flush()
        return _source(session, row)


def update_source(engine: Engine, name: str, *, sql: str | None = None, password_env: str | None = None,
                  password_file: Path | None = None, no_password: bool = False, check: bool = True) -> Source:
    """Point the ``sql`` source ``name`` at a new URL (``sql``: the same tables, moved or reached as another role)
    and/or a new place for its password (``password_env``, ``password_file``; ``no_password``: the database needs
    none). Every dataset attached through the source connects this way from now on; no budget, release or ledger
    entry changes. Refused, changing nothing, unless the database accepts a connection (``check``), each dataset's
    table is still one of its tables, and no dataset's table becomes one another dataset reads."""
    reference = CredentialReference.from_options(password_env, password_file)
    if no_password and reference is not None:
        raise InvalidInput("give --no-password or a password's place, not both", code="invalid_parameter")
    if sql is None and reference is None and not no_password:
        raise InvalidInput("nothing to update: give --sql URL, --password-env VAR, --password-file PATH or "
                           "--no-password", code="invalid_parameter")
    with serialized_transaction(engine) as session:
        row = _row(session, name, removed=True)
        if row.kind != SQL_SOURCE:
            raise InvalidInput(f"source {name!r} is a {row.kind} source; only a sql source has a URL and a password to "
                               "update", code="invalid_parameter")
        if sql is not None:
            _check_url(sql)
        current = _source(session, row)
        keep = current.credentials if reference is None and not no_password else reference
        updated = Source(row.name, SQL_SOURCE, url=sql or row.url, principal=row.principal, id=row.id,
                         credentials=keep, needs_credentials=row.needs_credentials and keep is None and not no_password,
                         removed=current.removed, datasets=current.datasets)
        if check:
            check_connects(updated.connection(), "--sql")
        if sql is not None:
            _check_moved(session, engine, updated)
        row.url = updated.url
        row.credentials = None if keep is None else keep.stored()
        row.needs_credentials = updated.needs_credentials
        return _source(session, row)


def get_source(engine: Engine, name: str) -> Source:
    """The source named ``name`` that takes attaches (404 ``source_not_found`` otherwise, removed ones included)."""
    with transaction(engine) as session:
        row = session.execute(select(AttachSource).where(AttachSource.name == name)).scalar_one_or_none()
        if row is None or row.removed_at is not None:
            raise NotFound(f"no source named {name!r}; the operator registers sources with `marginalia source add`",
                           code="source_not_found")
        return _source(session, row)


def list_sources(engine: Engine) -> list[Source]:
    """Every source, the removed ones that still serve datasets too."""
    with transaction(engine) as session:
        rows = session.execute(select(AttachSource).order_by(AttachSource.name)).scalars().all()
        through = _datasets_by_source(session)
        return [_source(session, r, through) for r in rows]


def remove_source(engine: Engine, name: str) -> Source:
    """Stop new attaches through source ``name``: deleted when no dataset reads through it, else kept and marked
    removed, serving those datasets (module docstring)."""
    with serialized_transaction(engine) as session:
        row = _row(session, name, removed=False)
        source = _source(session, row)
        if source.datasets:
            row.removed_at = utcnow()
        else:
            session.delete(row)
    return source


def check_connects(connection: SourceConnection, option: str) -> None:
    """422 ``unreachable_database`` unless the database accepts a connection within :data:`CONNECT_SECONDS` with the
    password the reference names (:func:`connect_failure`)."""
    reason = connect_failure(connection)
    if reason is not None:
        raise InvalidInput(f"{option} {safe_url(connection.url)}: {reason}; nothing was stored (--no-check registers "
                           "it anyway)", code="unreachable_database")


def connect_failure(connection: SourceConnection) -> str | None:
    """Why the database of ``connection`` does not accept a connection within :data:`CONNECT_SECONDS` (None: it
    does), in our words: never a driver's message, a host, a port, a role or a secret."""
    try:
        url = connection.connect_url()
    except CredentialsUnavailable:
        return "its password cannot be read by this process (see `marginalia source list`)"
    try:
        if sqlite_file_missing(url):
            return "no such database file"
        parsed = make_url(url)
        if parsed.get_backend_name() == "postgresql":  # libpq's own bound on connecting
            url = parsed.update_query_dict({"connect_timeout": str(CONNECT_SECONDS)}).render_as_string(
                hide_password=False)
        database = make_engine(url)
    except (ArgumentError, DatabaseUnavailable):
        return "its URL cannot be opened by this server (a driver is missing?)"
    try:
        with database.connect() as open_connection:
            open_connection.execute(text("SELECT 1"))
    except DBAPIError:
        return "the database does not accept a connection (check the URL, the password and that it answers)"
    finally:
        database.dispose()
    return None


def _row(session: Session, name: str, *, removed: bool) -> AttachSource:
    """Source ``name``'s row (a removed one too when ``removed``), or 404."""
    row = session.execute(select(AttachSource).where(AttachSource.name == name)).scalar_one_or_none()
    if row is None or (row.removed_at is not None and not removed):
        raise NotFound(f"no source named {name!r}", code="source_not_found")
    return row


def datasets_through(session: Session, source_id: int) -> list[Dataset]:
    """The datasets whose location names the source ``source_id`` (attached through a ``sql`` source)."""
    return _datasets_by_source(session).get(source_id, [])


def _datasets_by_source(session: Session) -> dict[int, list[Dataset]]:
    """Every SQL dataset attached through a source, by the source's id (one scan of the datasets' locations)."""
    found: dict[int, list[Dataset]] = {}
    for dataset in session.execute(select(Dataset).where(Dataset.engine == "sql").order_by(Dataset.id)).scalars():
        location = json.loads(dataset.location) if dataset.location else None
        if isinstance(location, dict) and isinstance(location.get("source"), int):
            found.setdefault(location["source"], []).append(dataset)
    return found


def _check_moved(session: Session, engine: Engine, moved: Source) -> None:
    """A new URL of ``moved`` still reaches each of its datasets' tables, and none of them is a table another dataset
    reads (one location is one dataset: :mod:`service.data.attach.locations`)."""
    from service.data.attach.locations import dataset_claims
    from service.data.engines import claims as claiming
    from service.data.engines.sql_engine import listed_table

    mine = datasets_through(session, int(moved.id or 0))
    if not mine:
        return
    ids = {d.id for d in mine}
    held = [(other, dataset_claims(engine, other))
            for other in session.execute(select(Dataset).order_by(Dataset.id)).scalars() if other.id not in ids]
    connect = moved.connection().connect_url()
    for dataset in mine:
        location = json.loads(str(dataset.location))
        listed_table(connect, location["table"], f"--sql {safe_url(str(moved.url))}: dataset {dataset.name!r}")
        claim = claiming.sql_claim(str(moved.url), location["table"], location.get("schema"))
        for other, claims in held:
            if any(claim.overlaps(c) for c in claims):
                raise Conflict(f"--sql {safe_url(str(moved.url))}: dataset {dataset.name!r} would read the table "
                               f"dataset {other.name!r} reads (one location is one dataset); nothing was changed",
                               code="already_attached")


def _source(session: Session, row: AttachSource, through: dict[int, list[Dataset]] | None = None) -> Source:
    """``row`` as a :class:`Source`; ``through``: :func:`_datasets_by_source`, when the caller has it already."""
    if through is None:
        through = _datasets_by_source(session) if row.kind == SQL_SOURCE else {}
    datasets = tuple(d.name for d in through.get(row.id, []))
    reference = None if row.credentials is None else CredentialReference.parse(row.credentials)
    return Source(row.name, row.kind, root=row.root, url=row.url, principal=row.principal, id=row.id,
                  credentials=reference, needs_credentials=bool(row.needs_credentials),
                  removed=row.removed_at is not None, datasets=datasets)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or name != name.strip():
        raise InvalidInput(f"source name must be 1–200 characters without '/', control characters or surrounding "
                           f"spaces, got {name!r}", code="invalid_name")


def _folder(root: Path) -> str:
    real = Path(os.path.realpath(Path(root).expanduser()))
    if not real.is_dir():
        raise InvalidInput(f"--parquet-root {root}: no such folder", code="missing_file")
    if real == Path(real.anchor):
        raise InvalidInput(f"--parquet-root {root}: the file system's root is not a source; name the folder that "
                           "holds the tables", code="invalid_parameter")
    if GLOB_CHARACTERS & set(str(real)):
        raise InvalidInput(f"--parquet-root {root}: its path {real} holds one of {''.join(sorted(GLOB_CHARACTERS))}, "
                           "which DuckDB reads as a glob; choose a folder whose path has none",
                           code="invalid_parameter")
    return str(real)


def _check_url(url: str) -> None:
    """``url`` holds no password (:func:`~service.data.credentials.refuse_password`) and is one this service can
    open; the refusal is ours, since SQLAlchemy's message may quote the URL."""
    refuse_password(url, "--sql")
    try:
        make_engine(url).dispose()
    except DatabaseUnavailable:
        raise InvalidInput(f"--sql {safe_url(url)}: not a database URL this service can open (a SQLAlchemy URL whose "
                           "driver is installed, e.g. postgresql://user@host/database or sqlite:////path/to.db)",
                           code="invalid_parameter") from None
