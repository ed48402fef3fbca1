"""idempotency claims record their runner and a heartbeat (issue 31, point 3)

A claim left ``pending`` used to be marked ``request_interrupted`` by any server that started, even while another
live server still ran its request (which then completed and was charged, while its retry had been told to start
over). Claims now carry the same runner columns as releases and jobs (service/runners.py): a server marks
a claim interrupted only when its runner is provably gone. Rows claimed before this migration have no runner: they
count as elsewhere, their creation time as their last sign of life.

Revision ID: 0014_claim_runners
Revises: 0013_release_bootstraps
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_claim_runners"
down_revision = "0013_release_bootstraps"
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
        op.add_column("idempotency_keys", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        for name, _ in reversed(RUNNER_COLUMNS):
            batch.drop_column(name)
