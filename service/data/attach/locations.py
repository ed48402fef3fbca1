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

from collections.abc import Callable, Mapping

from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from db.engine import transaction
from db.models import Dataset
from service.data.engines.claims import Claim
from service.data.engines.registry import read_location
from service.errors import Conflict


def dataset_claims(engine: Engine, dataset: Dataset) -> set[Claim]:
    """What the stored ``dataset`` reads (module docstring; each location says it:
    :meth:`~service.data.engines.record.Location.claims`); ``engine`` is the service database."""
    return read_location(dataset.engine, dataset.location).claims(engine, dataset.data_table)


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
