"""Engines and sessions for SQLite (the embedded default) and PostgreSQL.

``MARGINALIA_DATABASE_URL`` selects the database; without it, ``sqlite:///marginalia.db`` in the
working directory. ``postgres://`` and ``postgresql://`` URLs (as hosting providers print them) mean
the psycopg 3 driver, the one installed. A database that cannot be opened raises
:class:`DatabaseUnavailable` with a one-line reason and the URL without its password.

SQLite runs in WAL mode with a generous busy timeout, and every write transaction that must
serialise with others (the accountant's check-and-charge) starts with ``BEGIN IMMEDIATE`` so two
writers never both read the old balance.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session

DEFAULT_URL = "sqlite:///marginalia.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000
URL_EXAMPLES = "sqlite:///marginalia.db or postgresql+psycopg://user@host/database"


class DatabaseUnavailable(RuntimeError):
    """The database cannot be opened: a bad URL, an unknown driver, a server that does not answer, a
    file that cannot be created. The message names the URL (without password) and the reason."""


def database_url() -> str:
    return os.environ.get("MARGINALIA_DATABASE_URL", DEFAULT_URL)


def normalized_url(url: str) -> str:
    """``url`` with the PostgreSQL driver made explicit (``postgres://`` and ``postgresql://`` mean psycopg 3)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def safe_url(url: str) -> str:
    """``url`` for messages: the password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def _parsed(url: str) -> URL | None:
    """``url`` parsed (the PostgreSQL driver made explicit), or None when SQLAlchemy cannot read it."""
    try:
        return make_url(normalized_url(url))
    except ArgumentError:
        return None


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password (in its authority or as a ``password`` query parameter)."""
    parsed = _parsed(url)
    if parsed is None:
        return "@" in url and ":" in url.split("://", 1)[-1].split("@", 1)[0]
    return bool(parsed.password) or "password" in parsed.query


def without_password(url: str) -> str:
    """``url`` with its password (authority and ``password`` query parameter) removed."""
    parsed = _parsed(url)
    if parsed is None:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1@", url)
    parsed = parsed._replace(password=None).difference_update_query(["password"])  # set() reads None as "keep"
    return parsed.render_as_string(hide_password=False)


def sqlite_file_missing(url: str) -> bool:
    """Whether ``url`` names a SQLite database file that does not exist (connecting would create an empty one)."""
    parsed = _parsed(url)
    return parsed is not None and parsed.get_backend_name() == "sqlite" and parsed.database not in (
        None, "", ":memory:") and not os.path.isfile(parsed.database)


def with_password(url: str, password: str | None) -> str:
    """The URL a driver is given: ``url`` with ``password`` set (``url`` itself for None). Never store, log or
    show what this returns."""
    if password is None:
        return url
    parsed = _parsed(url)
    if parsed is None:
        raise ValueError("not a database URL")
    return parsed.set(password=password).render_as_string(hide_password=False)


def unavailable(url: str, exc: BaseException) -> DatabaseUnavailable:
    """A :class:`DatabaseUnavailable` for ``exc`` raised while opening ``url``: its first line only."""
    if isinstance(exc, ArgumentError | NoSuchModuleError | ImportError):
        return DatabaseUnavailable(
            f"MARGINALIA_DATABASE_URL={safe_url(url)!r} is not a database URL this service can open "
            f"({str(exc).splitlines()[0]}); use e.g. {URL_EXAMPLES}")
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = ""
    if url.startswith("sqlite") and "unable to open" in reason:
        hint = " (does the file's folder exist, and may this user write there?)"
    return DatabaseUnavailable(f"cannot open the database {safe_url(url)} (MARGINALIA_DATABASE_URL): {reason}{hint}")


#: What opening an unreachable or misnamed database raises, turned into :class:`DatabaseUnavailable`.
OPEN_ERRORS = (ArgumentError, NoSuchModuleError, DBAPIError)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str | None = None) -> Engine:
    """A new engine for ``url`` (default :func:`database_url`); nothing is connected yet. A URL that
    cannot be parsed, or names a driver that is not installed, raises :class:`DatabaseUnavailable`."""
    url = normalized_url(url or database_url())
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
            _configure_sqlite(engine)
        else:
            engine = create_engine(url, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise unavailable(url, exc) from None
    return engine


def _configure_sqlite(engine: Engine) -> None:
    # The pysqlite driver's own transaction handling is switched off so that we can issue
    # BEGIN / BEGIN IMMEDIATE ourselves (SQLAlchemy docs, "Serializable isolation / Savepoints").
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):  # type: ignore[no-untyped-def]
        mode = connection.info.pop("sqlite_begin", "BEGIN")
        connection.exec_driver_sql(mode)


@contextmanager
def serialized_transaction(engine: Engine) -> Iterator[Session]:
    """A write transaction that excludes every other writer of the database from its start.

    On SQLite this is ``BEGIN IMMEDIATE`` (the database write lock is taken before the first
    read); on PostgreSQL callers lock the rows they read with ``SELECT ... FOR UPDATE``.
    Commits on success, rolls back on any exception.
    """
    with engine.connect() as connection:
        if is_sqlite(engine):
            connection.info["sqlite_begin"] = "BEGIN IMMEDIATE"
        with Session(bind=connection, expire_on_commit=False) as session:
            with session.begin():
                yield session


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """An ordinary transaction: commit on success, roll back on exception."""
    with Session(engine, expire_on_commit=False) as session:
        with session.begin():
            yield session
