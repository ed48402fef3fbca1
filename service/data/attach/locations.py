"""One location, one dataset: what a dataset reads, and the refusal of an attach of rows a dataset already reads.

A dataset's budget protects its table only while no other dataset reads the same rows: two names over one table
would give the table two budgets, and a steward scoped to one name could read, under it, the table another
dataset's budget protects (issue 27, finding 2). So an attach is refused (409 ``already_attached``) when anything it
would read is already read by a dataset. What is compared (a :class:`Claim` each):

- **a file**, by its real path (symlinks and ``..`` resolved): every file of an attached dataset's list, every file
  a stored glob matches *now* (``dataset attach --parquet 'part-*.parquet'`` keeps the glob), the Parquet file the
  service stored for a loaded or migrated dataset, and the files of a path Spark reads (``parquet.`/path```);
- **a SQL table**: its database (the backend, host and port, database name; for SQLite the file's real path; never
  the user nor the password), the schema the URL's role reads it from, and its name, as attach found it in the
  database's list of tables; the service database's own ``data_<id>`` tables count too;
- **a Spark table**, by its catalog name (case-insensitive, as Spark's catalog is; a one-part name is in the
  ``default`` database, the one the service's session uses).

What it cannot see is the same rows reached another way: a view over an attached table (or a table over attached
files), a copy of a file, one database named by two host names, a Spark table named through another catalog. The
operator's sources decide what can be reached at all (:mod:`service.data.attach.sources`).

The check runs twice: before the checking scan, so that rows a dataset already reads are refused before anything
is read (the refusal then says nothing about their values); and inside the transaction that registers the dataset,
after :func:`lock_datasets`, so that two concurrent attaches of one location cannot both pass.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import Engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

from db.engine import normalized_url, transaction
from db.models import Dataset
from service.data.engines.base import DUCKDB, SPARK, SQL
from service.errors import Conflict

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


def dataset_claims(engine: Engine, dataset: Dataset) -> set[Claim]:
    """What the stored ``dataset`` reads (module docstring); ``engine`` is the service database."""
    location = json.loads(dataset.location) if dataset.location else {}
    if dataset.engine == DUCKDB and "file" in location:
        from service.data.engines.store import data_folder

        return file_claims([str(data_folder(engine) / str(location["file"]))])
    if dataset.engine == DUCKDB:
        return file_claims([str(p) for p in location.get("parquet", [])])
    if dataset.engine == SQL and "url" in location:
        return {sql_claim(str(location["url"]), str(location["table"]), location.get("schema"))}
    if dataset.engine == SQL:
        return {sql_claim(engine.url.render_as_string(hide_password=False), dataset.data_table, None)}
    if dataset.engine == SPARK:
        return spark_claims(str(location.get("spark", "")))
    return set()


def lock_datasets(session: Session) -> None:
    """Exclude every other writer of datasets until the transaction ends: on SQLite the transaction began
    ``IMMEDIATE`` (:func:`db.engine.serialized_transaction`); on PostgreSQL ``LOCK TABLE datasets IN SHARE ROW
    EXCLUSIVE MODE``, which conflicts with itself and lets readers through."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE datasets IN SHARE ROW EXCLUSIVE MODE"))


def refuse_attached(session: Session, claims: Mapping[Claim, str], may_name: Callable[[str], bool]) -> None:
    """409 ``already_attached`` when a dataset already reads one of ``claims`` (each mapped to how the caller named
    it). The message names the dataset when ``may_name(dataset)`` (the caller's scope covers it), and otherwise
    only says that another dataset holds it."""
    if not claims:
        return
    engine = session.get_bind().engine
    for dataset in session.execute(select(Dataset).order_by(Dataset.id)).scalars():
        held = dataset_claims(engine, dataset)
        for claim, named in claims.items():
            if any(claim.overlaps(h) for h in held):
                holder = f"dataset {dataset.name!r}" if may_name(dataset.name) else \
                    "another dataset (one this key's scope does not cover)"
                raise Conflict(f"{named}: already attached as {holder}; one location is one dataset (its budget "
                               "belongs to the table, not to a name), so use that dataset; nothing was stored",
                               code="already_attached")


def check_not_attached(engine: Engine, claims: Mapping[Claim, str], may_name: Callable[[str], bool]) -> None:
    """:func:`refuse_attached` in a transaction of its own: the check before the checking scan."""
    with transaction(engine) as session:
        refuse_attached(session, claims, may_name)
