"""attach sources: the folders, databases and Spark session stewards may attach tables from over HTTP (issue 21)

One new table, nothing else changed: ``attach_sources`` (``marginalia source add NAME --parquet-root DIR | --sql URL
| --spark``). ``POST /datasets/attach`` names a source and a path inside its folder or a table of it, never a server
path or a URL. A downgrade drops the table; datasets attached through a source keep their own location and are
unaffected.

Revision ID: 0010_attach_sources
Revises: 0009_dataset_engines
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_attach_sources"
down_revision = "0009_dataset_engines"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attach_sources",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("root", sa.Text(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("(kind = 'parquet' AND root IS NOT NULL AND url IS NULL) OR "
                           "(kind = 'sql' AND url IS NOT NULL AND root IS NULL) OR "
                           "(kind = 'spark' AND root IS NULL AND url IS NULL)", name="ck_attach_source_kind"),
        sa.UniqueConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("attach_sources")
