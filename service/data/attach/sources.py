"""Attach sources: the places the operator lets stewards attach tables from over HTTP (``marginalia source add``).

A route that took a server path or a database URL would let any steward key probe the server's files and network,
and would send database passwords over the wire. So the operator, who has the server's shell, names the places
once, and ``POST /datasets/attach`` names a source and what to read *inside* it
(:mod:`service.data.attach.through_source`). A steward key attaches only through the sources its scope names
(``keys create --source NAME``; :mod:`service.access.auth`), since an attach reads the table and answers whether
its values fit the spec (docs/privacy.md 1.2). The kinds of source:

- ``parquet``: a folder of the server (kept as its real path); stewards attach Parquet files or globs inside it;
- ``sql``: a SQLAlchemy URL, password included, kept in the service database and never shown (``source list``
  masks the password) nor sent; stewards attach a table of that database (give the URL a read-only role that
  reads only what stewards may attach);
- ``spark``: the service's Spark session (``MARGINALIA_SPARK_REMOTE``, or local mode); stewards attach a table of
  its catalog (never a path Spark reads).

A dataset attached through a source keeps its own copy of the location (the files it read, the URL, the table),
exactly as ``marginalia dataset attach`` stores it. Removing a source therefore stops *new* attaches through it and
leaves the datasets attached through it counting where they live: the service has no command that deletes a
dataset, so refusing the removal while one exists would make a source that was once used permanent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, select

from db.engine import DatabaseUnavailable, make_engine, safe_url, serialized_transaction, transaction
from db.models import SOURCE_KINDS, AttachSource
from service.errors import Conflict, InvalidInput, NotFound

PARQUET, SQL_SOURCE, SPARK_SOURCE = SOURCE_KINDS
#: What DuckDB reads as a glob in a path: a folder holding one could make a file name match another file.
GLOB_CHARACTERS = set("*?[")
_NAME = re.compile(r"^[^\x00-\x1f\x7f/]{1,200}$")


@dataclass(frozen=True)
class Source:
    """A registered source. ``root`` (a real folder path) and ``url`` (with its password) stay on the server."""

    name: str
    kind: str
    root: str | None = None
    url: str | None = None
    principal: str = "cli"

    def where(self) -> str:
        """Where the source reads, for the operator: the folder, the URL without its password, or the session."""
        if self.kind == PARQUET:
            return str(self.root)
        if self.kind == SQL_SOURCE:
            return safe_url(str(self.url))
        remote = os.environ.get("MARGINALIA_SPARK_REMOTE")
        return f"Spark Connect at {remote}" if remote else "Spark in local mode"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "where": self.where(), "principal": self.principal}


def add_source(engine: Engine, name: str, *, parquet_root: Path | None = None, sql: str | None = None,
               spark: bool = False, principal: str = "cli") -> Source:
    """Register source ``name``: exactly one of a folder (``parquet_root``, which must exist), a database URL
    (``sql``, which must be a URL this service can open; the database itself is reached only at attach time) or
    the Spark session (``spark``)."""
    _check_name(name)
    if sum([parquet_root is not None, sql is not None, bool(spark)]) != 1:
        raise InvalidInput("give exactly one of --parquet-root DIR, --sql URL or --spark", code="invalid_parameter")
    if parquet_root is not None:
        source = Source(name, PARQUET, root=_folder(parquet_root), principal=principal)
    elif sql is not None:
        _check_url(sql)
        source = Source(name, SQL_SOURCE, url=sql, principal=principal)
    else:
        source = Source(name, SPARK_SOURCE, principal=principal)
    with serialized_transaction(engine) as session:
        if session.execute(select(AttachSource.id).where(AttachSource.name == name)).first() is not None:
            raise Conflict(f"a source named {name!r} already exists; remove it first or choose another name",
                           code="duplicate_source")
        session.add(AttachSource(name=name, kind=source.kind, root=source.root, url=source.url, principal=principal))
    return source


def get_source(engine: Engine, name: str) -> Source:
    """The source named ``name`` (404 ``source_not_found`` otherwise)."""
    with transaction(engine) as session:
        row = session.execute(select(AttachSource).where(AttachSource.name == name)).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no source named {name!r}; the operator registers sources with `marginalia source add`",
                           code="source_not_found")
        return _source(row)


def list_sources(engine: Engine) -> list[Source]:
    with transaction(engine) as session:
        return [_source(r) for r in session.execute(select(AttachSource).order_by(AttachSource.name)).scalars()]


def remove_source(engine: Engine, name: str) -> Source:
    """Forget source ``name``: no new attach through it; datasets attached through it keep counting (module
    docstring)."""
    with serialized_transaction(engine) as session:
        row = session.execute(select(AttachSource).where(AttachSource.name == name)).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no source named {name!r}", code="source_not_found")
        source = _source(row)
        session.delete(row)
    return source


def _source(row: AttachSource) -> Source:
    return Source(row.name, row.kind, root=row.root, url=row.url, principal=row.principal)


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
    """``url`` is one this service can open (the database is reached only at attach time); the refusal is ours, since
    SQLAlchemy's message may quote the URL with its password."""
    try:
        make_engine(url).dispose()
    except DatabaseUnavailable:
        raise InvalidInput(f"--sql {safe_url(url)}: not a database URL this service can open (a SQLAlchemy URL whose "
                           "driver is installed, e.g. postgresql://user@host/database or sqlite:////path/to.db)",
                           code="invalid_parameter") from None
