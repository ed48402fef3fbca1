"""initial schema: datasets, budgets, releases, append-only ledger, api keys, auditor views

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PRIVACY_LEDGER_VIEW = """
CREATE VIEW privacy_ledger AS
SELECT l.id AS entry_id,
       d.name AS dataset,
       l.release_id,
       l.entry,
       l.refunds_entry_id,
       l.mechanism,
       l.principal,
       l.epsilon_units,
       l.delta_units,
       l.rho_units,
       l.epsilon_spent_after_units,
       l.anchor_alpha_units,
       l.anchor_delta_z_units,
       l.anchor_offset_units,
       l.epsilon_units / 1e12 AS epsilon,
       l.delta_units / 1e18 AS delta,
       l.rho_units / 1e12 AS rho,
       l.epsilon_spent_after_units / 1e12 AS epsilon_spent_after,
       l.note,
       l.created_at
FROM ledger_entries l JOIN datasets d ON d.id = l.dataset_id
"""

BUDGET_REMAINING_VIEW = """
CREATE VIEW budget_remaining AS
SELECT s.dataset_id,
       s.dataset,
       s.epsilon_total_units,
       s.delta_total_units,
       s.epsilon_pure_spent_units,
       s.delta_spent_units,
       s.rho_spent_units,
       s.epsilon_spent_units,
       s.anchor_alpha_units,
       s.anchor_delta_z_units,
       s.anchor_offset_units,
       s.epsilon_total_units - s.epsilon_spent_units AS epsilon_remaining_units,
       s.delta_total_units - s.delta_spent_units AS delta_remaining_units,
       s.epsilon_total_units / 1e12 AS epsilon_total,
       s.delta_total_units / 1e18 AS delta_total,
       s.epsilon_spent_units / 1e12 AS epsilon_spent,
       s.delta_spent_units / 1e18 AS delta_spent,
       s.rho_spent_units / 1e12 AS rho_spent,
       (s.epsilon_total_units - s.epsilon_spent_units) / 1e12 AS epsilon_remaining
FROM (
    SELECT d.id AS dataset_id,
           d.name AS dataset,
           b.epsilon_units AS epsilon_total_units,
           b.delta_units AS delta_total_units,
           COALESCE(SUM(l.epsilon_units), 0) AS epsilon_pure_spent_units,
           COALESCE(SUM(l.delta_units), 0) AS delta_spent_units,
           COALESCE(SUM(l.rho_units), 0) AS rho_spent_units,
           COALESCE((SELECT l2.epsilon_spent_after_units FROM ledger_entries l2
                     WHERE l2.dataset_id = d.id ORDER BY l2.id DESC LIMIT 1), 0) AS epsilon_spent_units,
           (SELECT a.anchor_alpha_units FROM ledger_entries a WHERE a.dataset_id = d.id
                AND a.anchor_alpha_units IS NOT NULL ORDER BY a.id LIMIT 1) AS anchor_alpha_units,
           (SELECT a.anchor_delta_z_units FROM ledger_entries a WHERE a.dataset_id = d.id
                AND a.anchor_alpha_units IS NOT NULL ORDER BY a.id LIMIT 1) AS anchor_delta_z_units,
           (SELECT a.anchor_offset_units FROM ledger_entries a WHERE a.dataset_id = d.id
                AND a.anchor_alpha_units IS NOT NULL ORDER BY a.id LIMIT 1) AS anchor_offset_units
    FROM datasets d
    JOIN budgets b ON b.dataset_id = d.id
    LEFT JOIN ledger_entries l ON l.dataset_id = d.id
    GROUP BY d.id, d.name, b.epsilon_units, b.delta_units
) s
"""

SQLITE_TRIGGERS = [
    """CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END""",
    """CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'the privacy ledger is append-only'); END""",
]

POSTGRES_TRIGGERS = [
    """CREATE FUNCTION ledger_append_only() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'the privacy ledger is append-only'; END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger_entries
       FOR EACH ROW EXECUTE FUNCTION ledger_append_only()""",
    """CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger_entries
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("domain_json", sa.Text(), nullable=False),
        sa.Column("data_table", sa.String(64), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("data_table"),
    )
    op.create_table(
        "budgets",
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), primary_key=True),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_reserve_units", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("epsilon_units > 0", name="ck_budget_epsilon_positive"),
        sa.CheckConstraint("delta_units >= 0", name="ck_budget_delta_nonnegative"),
    )
    op.create_table(
        "releases",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("mechanism", sa.String(40), nullable=False),
        sa.Column("params_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=True),
        sa.Column("details_json", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'complete', 'failed_before_noise', 'failed_after_noise')",
            name="ck_release_status",
        ),
    )
    op.create_index("ix_releases_dataset_id", "releases", ["dataset_id"])
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("release_id", sa.Integer(), sa.ForeignKey("releases.id"), nullable=True),
        sa.Column("entry", sa.String(10), nullable=False),
        sa.Column("refunds_entry_id", sa.Integer(), sa.ForeignKey("ledger_entries.id"), nullable=True),
        sa.Column("mechanism", sa.String(40), nullable=False),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("rho_units", sa.BigInteger(), nullable=False),
        sa.Column("epsilon_spent_after_units", sa.BigInteger(), nullable=False),
        sa.Column("anchor_alpha_units", sa.BigInteger(), nullable=True),
        sa.Column("anchor_delta_z_units", sa.BigInteger(), nullable=True),
        sa.Column("anchor_offset_units", sa.BigInteger(), nullable=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("entry IN ('charge', 'refund', 'budget')", name="ck_ledger_entry"),
    )
    op.create_index("ix_ledger_entries_dataset_id", "ledger_entries", ["dataset_id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("scope_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('steward', 'analyst', 'auditor')", name="ck_api_key_role"),
        sa.UniqueConstraint("key_hash", name="uq_api_key_hash"),
    )
    op.execute(PRIVACY_LEDGER_VIEW)
    op.execute(BUDGET_REMAINING_VIEW)
    triggers = SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS
    for statement in triggers:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP VIEW budget_remaining")
    op.execute("DROP VIEW privacy_ledger")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER ledger_no_truncate ON ledger_entries")
        op.execute("DROP TRIGGER ledger_append_only ON ledger_entries")
        op.execute("DROP FUNCTION ledger_append_only()")
    for table in ("api_keys", "ledger_entries", "releases", "budgets", "datasets"):
        op.drop_table(table)
