"""the web console (issue 32): who looked at exact figures (the append-only ``exact_views`` table), and a job's
request to stop (``jobs.cancel_requested_at``)

The web console shows a steward a release's answers beside the table's exact marginal (its quality view). Exact
counts of a sensitive table are what the service exists to protect, so every such look is recorded here, before the
page is answered: the dataset, the release, the key and its label, the marginal's columns and when. Auditors read
it beside the ledger (the console's ledger page, or ``SELECT * FROM exact_views``). Triggers refuse UPDATE and
DELETE, as on the ledger.

``jobs.cancel_requested_at``: when the job's owner (or a steward) asked a running release to stop from the console;
the job's thread reads it with its progress and stops the release at its next safe point, as Ctrl-C would
(docs/privacy.md 6.5). NULL for every existing job. A downgrade drops the table and the column.

Revision ID: 0017_console
Revises: 0016_source_credentials
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_console"
down_revision = "0016_source_credentials"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER exact_views_no_update BEFORE UPDATE ON exact_views
       BEGIN SELECT RAISE(ABORT, 'the record of exact views is append-only'); END""",
    """CREATE TRIGGER exact_views_no_delete BEFORE DELETE ON exact_views
       BEGIN SELECT RAISE(ABORT, 'the record of exact views is append-only'); END""",
]

POSTGRES_TRIGGERS = [
    """CREATE FUNCTION exact_views_append_only() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'the record of exact views is append-only'; END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER exact_views_append_only BEFORE UPDATE OR DELETE ON exact_views
       FOR EACH ROW EXECUTE FUNCTION exact_views_append_only()""",
    """CREATE TRIGGER exact_views_no_truncate BEFORE TRUNCATE ON exact_views
       FOR EACH STATEMENT EXECUTE FUNCTION exact_views_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "exact_views",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("release_id", sa.Integer(), sa.ForeignKey("releases.id"), nullable=True),
        sa.Column("api_key_id", sa.Integer(), sa.ForeignKey("api_keys.id"), nullable=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("attributes_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_exact_views_dataset_id", "exact_views", ["dataset_id"])
    for statement in SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS:
        op.execute(statement)
    with op.batch_alter_table("jobs") as jobs:
        jobs.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as jobs:
        jobs.drop_column("cancel_requested_at")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER exact_views_no_truncate ON exact_views")
        op.execute("DROP TRIGGER exact_views_append_only ON exact_views")
        op.execute("DROP FUNCTION exact_views_append_only()")
    op.drop_index("ix_exact_views_dataset_id", table_name="exact_views")
    op.drop_table("exact_views")
