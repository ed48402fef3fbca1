"""the parametric bootstrap of graphical-model releases, computed once and kept (issue 29)

One new table, ``release_bootstraps``: per release, the replicate models of its parametric bootstrap
(service/releases/bootstrap.py) and how they were made. Nothing else changes; a downgrade drops the table.

Revision ID: 0013_release_bootstraps
Revises: 0012_budget_audit
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_release_bootstraps"
down_revision = "0012_budget_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "release_bootstraps",
        sa.Column("release_id", sa.Integer(), sa.ForeignKey("releases.id"), primary_key=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("details_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("release_bootstraps")
