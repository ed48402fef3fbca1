"""secrets out of the tables (issue 31, point 7): sources keep a reference to their password, datasets their source

A ``sql`` attach source stored its URL with the password in it, and every dataset attached from a warehouse kept
another copy in its location: every backup of the service database held the warehouse's passwords, and a
rotation broke the datasets. From this revision the service database stores no password
(service/data/credentials.py): ``attach_sources`` gains ``credentials`` (``env:VAR`` or ``file:/path``, where the
password is), ``needs_credentials`` and ``removed_at``; a SQL dataset's location names its source (``"source"``:
the source's id) and connects with that source's URL and credentials.

What the upgrade does to existing rows:

- a source whose URL holds a password loses it and is marked ``needs_credentials``;
- a SQL dataset's location loses its URL's password and names the source whose URL (without password) is the
  same; a dataset whose URL held a password and that no source matches (attached with ``dataset attach --sql``)
  gets a source of its own, named ``<dataset> (migrated)``, marked ``needs_credentials`` and removed (it serves
  that dataset, and no steward attaches through it).

The operator then names each password's place: ``marginalia source update NAME --password-env VAR`` (``source
list`` shows which sources need it). Until then those datasets' releases fail before any noise is drawn, refunded,
with ``credentials_unavailable``. Budgets and ledgers are untouched.

A downgrade drops the three columns and the sources marked removed (older code would offer them to stewards); the
passwords are gone and are not put back: older code connects without one, and the operator re-adds them.

Revision ID: 0016_source_credentials
Revises: 0015_ledger_chain
Create Date: 2026-12-02
"""

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from db.engine import has_password, normalized_url, without_password

revision = "0016_source_credentials"
down_revision = "0015_ledger_chain"
branch_labels = None
depends_on = None

SOURCES = sa.table("attach_sources", sa.column("id"), sa.column("name"), sa.column("kind"), sa.column("url"),
                   sa.column("principal"), sa.column("created_at"), sa.column("needs_credentials"),
                   sa.column("removed_at"))
DATASETS = sa.table("datasets", sa.column("id"), sa.column("name"), sa.column("engine"), sa.column("location"))


def upgrade() -> None:
    op.add_column("attach_sources", sa.Column("credentials", sa.Text(), nullable=True))
    op.add_column("attach_sources", sa.Column("needs_credentials", sa.Boolean(), nullable=False,
                                              server_default=sa.false()))
    op.add_column("attach_sources", sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True))
    connection = op.get_bind()
    by_url: dict[str, int] = {}
    names = {row.name for row in connection.execute(sa.select(SOURCES.c.name))}
    for row in connection.execute(sa.select(SOURCES.c.id, SOURCES.c.url).where(SOURCES.c.kind == "sql")).all():
        url = without_password(row.url)
        if has_password(row.url):
            connection.execute(SOURCES.update().where(SOURCES.c.id == row.id).values(url=url, needs_credentials=True))
        by_url.setdefault(normalized_url(url), row.id)
    for row in connection.execute(sa.select(DATASETS).where(DATASETS.c.engine == "sql")).all():
        location = json.loads(row.location) if row.location else None
        if not location or "url" not in location:
            continue
        url = without_password(location["url"])
        source = by_url.get(normalized_url(url))
        if source is None and has_password(location["url"]):
            name = _free(f"{row.name} (migrated)", names)
            source = 1 + (connection.execute(sa.select(sa.func.max(SOURCES.c.id))).scalar() or 0)  # no sequence
            connection.execute(SOURCES.insert().values(  # is relied on: rows may have been written with their ids
                id=source, name=name, kind="sql", url=url, principal="migration 0016", created_at=datetime.now(UTC),
                needs_credentials=True, removed_at=datetime.now(UTC)))
        if source is None:
            continue
        location["url"] = url
        location = {**{k: v for k, v in location.items() if k != "privacy_unit"}, "source": source,
                    **({"privacy_unit": location["privacy_unit"]} if "privacy_unit" in location else {})}
        connection.execute(DATASETS.update().where(DATASETS.c.id == row.id).values(location=json.dumps(location)))
    if connection.dialect.name == "postgresql":  # the ids written above: the next source add must not reuse one
        op.execute("SELECT setval(pg_get_serial_sequence('attach_sources', 'id'), "
                   "GREATEST((SELECT MAX(id) FROM attach_sources), 1))")


def _free(name: str, taken: set[str]) -> str:
    candidate, n = name[:200], 2
    while candidate in taken:
        candidate, n = f"{name[:190]} {n}", n + 1
    taken.add(candidate)
    return candidate


def downgrade() -> None:
    op.execute(SOURCES.delete().where(SOURCES.c.removed_at.is_not(None)))
    with op.batch_alter_table("attach_sources") as batch:
        batch.drop_column("removed_at")
        batch.drop_column("needs_credentials")
        batch.drop_column("credentials")
