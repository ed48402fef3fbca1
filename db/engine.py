"""Engines and sessions for SQLite (the embedded default) and PostgreSQL.

``MARGINALIA_DATABASE_URL`` selects the database; without it, ``sqlite:///marginalia.db`` in the
working directory. SQLite runs in WAL mode with a generous busy timeout, and every write
transaction that must serialise with others (the accountant's check-and-charge) starts with
``BEGIN IMMEDIATE`` so two writers never both read the old balance.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_URL = "sqlite:///marginalia.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000


def database_url() -> str:
    return os.environ.get("MARGINALIA_DATABASE_URL", DEFAULT_URL)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str | None = None) -> Engine:
    """A new engine for ``url`` (default :func:`database_url`)."""
    url = url or database_url()
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        _configure_sqlite(engine)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    return engine


@lru_cache(maxsize=8)
def cached_engine(url: str) -> Engine:
    """One engine per URL per process (engines own connection pools)."""
    return make_engine(url)


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


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


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
