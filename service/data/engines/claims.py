"""What a dataset reads, as comparable values (:class:`Claim`): a file by its real path, a SQL table by its database,
schema and name, a Spark table by its catalog name. Each engine's location says what it claims
(:meth:`service.data.engines.record.Location.claims`); :mod:`service.data.attach.locations` refuses an attach of
what a dataset already claims (one location, one dataset), and says why the comparison is made this way.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from db.engine import normalized_url

GLOB_CHARACTERS = set("*?[")
#: The port a URL without one reaches, per backend (so ``host/db`` and ``host:5432/db`` are one database).
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521}
#: A path Spark reads: ``format.`PATH```.
SPARK_PATH = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\.`(?P<path>[^`]+)`\s*$")
FILE, SQL_TABLE, SPARK_TABLE = "file", "sql", "spark"


@dataclass(frozen=True)
class Claim:
    """One thing a dataset reads: a file (``key`` its real path), a SQL table (``key`` its database, ``schema``,
    ``table``) or a Spark table (``key`` its qualified name)."""

    kind: str
    key: str
    table: str = ""
    schema: str | None = None  # None: a SQL table stored without it (the service's own tables): any schema

    def overlaps(self, other: Claim) -> bool:
        if (self.kind, self.key, self.table) != (other.kind, other.key, other.table):
            return False
        return self.schema is None or other.schema is None or self.schema == other.schema


def file_claims(paths: Iterable[str]) -> set[Claim]:
    """The files ``paths`` (files, globs or folders) name now, by real path; a path that names nothing (a file that
    disappeared, a glob that matches nothing, a name the system refuses) claims nothing."""
    claims: set[Claim] = set()
    for path in paths:
        try:
            matches = glob.glob(path, recursive=True) if GLOB_CHARACTERS & set(path) else [path]
            for match in matches:
                claims.update(Claim(FILE, os.path.realpath(f)) for f in _files(match))
        except OSError:
            continue
    return claims


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        return [os.path.join(folder, f) for folder, _, names in os.walk(path) for f in names]
    return [path] if os.path.isfile(path) else []


def database_key(url: str) -> str:
    """Which database ``url`` reaches, without its user or password (module docstring)."""
    try:
        parsed = make_url(normalized_url(url))
    except ArgumentError:
        return url
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ":memory:"
        return f"sqlite:{database if database == ':memory:' else os.path.realpath(database)}"
    host = (parsed.host or str(parsed.query.get("host", ""))).lower()
    port = parsed.port or DEFAULT_PORTS.get(backend, "")
    return f"{backend}://{host}:{port}/{parsed.database or ''}"


def sql_claim(url: str, table: str, schema: str | None) -> Claim:
    return Claim(SQL_TABLE, database_key(url), table, schema)


def spark_claims(table: str) -> set[Claim]:
    """A Spark table by its qualified name, or the files of a path Spark reads (``parquet.`/path```)."""
    path = SPARK_PATH.match(table)
    if path is not None:
        return file_claims([path.group("path")])
    parts = [p.strip("`").lower() for p in table.strip().split(".")]
    if parts[0] == "spark_catalog" and len(parts) == 3:
        parts = parts[1:]
    return {Claim(SPARK_TABLE, ".".join(["default", *parts] if len(parts) == 1 else parts))}
