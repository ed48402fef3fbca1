"""who runs a pending release (runner and heartbeat), and background jobs of the API

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

RUNNER_COLUMNS = (
    ("runner_host", sa.String(200)),
    ("runner_pid", sa.Integer()),
    ("runner_started", sa.BigInteger()),
    ("heartbeat_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    for name, kind in RUNNER_COLUMNS:  # plain ADD COLUMN: SQLite need not rebuild the table
        op.add_column("releases", sa.Column(name, kind, nullable=True))
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("api_key_id", sa.Integer(), sa.ForeignKey("api_keys.id"), nullable=True),
        sa.Column("dataset", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("progress_done", sa.Integer(), nullable=False),
        sa.Column("progress_total", sa.Integer(), nullable=False),
        sa.Column("progress_message", sa.Text(), nullable=False),
        sa.Column("fit_done", sa.Integer(), nullable=False),
        sa.Column("fit_total", sa.Integer(), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_json", sa.Text(), nullable=True),
        *(sa.Column(name, kind, nullable=True) for name, kind in RUNNER_COLUMNS),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('running', 'done', 'failed')", name="ck_job_state"),
    )


def downgrade() -> None:
    op.drop_table("jobs")
    with op.batch_alter_table("releases") as batch:
        for name, _ in reversed(RUNNER_COLUMNS):
            batch.drop_column(name)
