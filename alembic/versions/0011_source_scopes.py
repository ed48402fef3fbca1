"""attach sources in a steward key's scope (issue 27, finding 2)

One new column, nothing else changed: ``api_keys.source_scope_json``, the JSON list of the attach sources a steward
key may attach tables through (``marginalia keys create --role steward ... --source NAME``); NULL is every source.
A steward key scoped to datasets before this revision could attach through every source, and so read any table of
them under one of its own names: it now attaches through none (``[]``) until the operator creates a key that names
its sources. Unscoped steward keys keep every source. A downgrade drops the column.

Revision ID: 0011_source_scopes
Revises: 0010_attach_sources
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_source_scopes"
down_revision = "0010_attach_sources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("source_scope_json", sa.Text(), nullable=True))
    op.execute("UPDATE api_keys SET source_scope_json = '[]' WHERE scope_json IS NOT NULL")


def downgrade() -> None:
    op.drop_column("api_keys", "source_scope_json")
