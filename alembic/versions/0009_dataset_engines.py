"""where a dataset's rows live: the engine that counts them and its location (issue 21)

Two columns on ``datasets``: ``engine`` (``sql``: the ``data_<id>`` table in this database, every dataset stored
before this revision, or a table of another SQL database; ``duckdb``: a Parquet table counted by DuckDB) and
``location`` (JSON the engine reads to find its table, NULL for a ``data_<id>`` table). Nothing else changes; a downgrade drops both columns and is refused while a
dataset lives outside this database (its rows would be lost to a service that no longer knows where they are).

Revision ID: 0009_dataset_engines
Revises: 0008_gateway_scopes
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_dataset_engines"
down_revision = "0008_gateway_scopes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("datasets", sa.Column("engine", sa.String(16), nullable=False, server_default="sql"))
    op.add_column("datasets", sa.Column("location", sa.Text(), nullable=True))


def downgrade() -> None:
    outside = op.get_bind().execute(sa.text(
        "SELECT COUNT(*) FROM datasets WHERE engine <> 'sql' OR location IS NOT NULL")).scalar_one()
    if outside:
        raise RuntimeError(f"{outside} dataset(s) live outside this database (a Parquet table, or a table of another "
                           "database); delete them before downgrading below 0009_dataset_engines")
    op.drop_column("datasets", "location")
    op.drop_column("datasets", "engine")
