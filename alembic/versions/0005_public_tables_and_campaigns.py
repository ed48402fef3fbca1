"""public tables and local-DP collections: campaigns, rounds, participants, append-only reports (the local ledger),
the default per-participant cap, the participant and gateway roles, and the auditor's views of local spend

* ``api_keys.role`` may also be ``participant`` (one person) or ``gateway`` (a relay submitting for pseudonyms).
* ``reports`` is append-only like ``ledger_entries`` (triggers refuse UPDATE, DELETE and, on PostgreSQL, TRUNCATE);
  one report per participant per round is the unique constraint ``uq_report_one_per_round``.
* ``local_cap_default`` holds one row, written here: epsilon 10, delta 1e-4 (stewards change it).
* Views: ``local_ledger`` (one row per report with its spend), ``participant_campaign_spend`` (per participant and
  campaign), ``participant_local_spend`` (per participant across campaigns, with the cap in force) and
  ``campaign_local_guarantee`` (each campaign's stated local (epsilon, delta) beside the most any participant spent).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

OLD_ROLES = "role IN ('steward', 'analyst', 'auditor')"
NEW_ROLES = "role IN ('steward', 'analyst', 'auditor', 'participant', 'gateway')"
DELTA_SCALE = 10**18
DEFAULT_CAP_EPSILON_UNITS = 10 * 10**12
DEFAULT_CAP_DELTA_UNITS = 10**14  # 1e-4

LOCAL_LEDGER_VIEW = """
CREATE VIEW local_ledger AS
SELECT r.id AS report_id,
       c.name AS campaign,
       r.campaign_id,
       r.round_index,
       r.participant_id,
       p.namespace,
       p.pseudonym,
       r.epsilon_units,
       r.delta_units,
       r.epsilon_units / 1e12 AS epsilon,
       r.delta_units / 1e18 AS delta,
       r.submitted_by,
       r.created_at
FROM reports r
JOIN campaigns c ON c.id = r.campaign_id
JOIN participants p ON p.id = r.participant_id
"""

PARTICIPANT_CAMPAIGN_SPEND_VIEW = """
CREATE VIEW participant_campaign_spend AS
SELECT r.participant_id,
       p.namespace,
       p.pseudonym,
       r.campaign_id,
       c.name AS campaign,
       COUNT(*) AS reports,
       SUM(r.epsilon_units) AS epsilon_units,
       SUM(r.delta_units) AS delta_units,
       SUM(r.epsilon_units) / 1e12 AS epsilon,
       SUM(r.delta_units) / 1e18 AS delta
FROM reports r
JOIN participants p ON p.id = r.participant_id
JOIN campaigns c ON c.id = r.campaign_id
GROUP BY r.participant_id, p.namespace, p.pseudonym, r.campaign_id, c.name
"""

PARTICIPANT_LOCAL_SPEND_VIEW = """
CREATE VIEW participant_local_spend AS
SELECT s.participant_id,
       s.namespace,
       s.pseudonym,
       s.campaigns,
       s.reports,
       s.epsilon_units,
       s.delta_units,
       s.cap_epsilon_units,
       s.cap_delta_units,
       s.epsilon_units / 1e12 AS epsilon,
       s.delta_units / 1e18 AS delta,
       s.cap_epsilon_units / 1e12 AS cap_epsilon,
       s.cap_delta_units / 1e18 AS cap_delta,
       (s.cap_epsilon_units - s.epsilon_units) / 1e12 AS epsilon_remaining,
       (s.cap_delta_units - s.delta_units) / 1e18 AS delta_remaining
FROM (
    SELECT p.id AS participant_id,
           p.namespace,
           p.pseudonym,
           COUNT(DISTINCT r.campaign_id) AS campaigns,
           COUNT(r.id) AS reports,
           COALESCE(SUM(r.epsilon_units), 0) AS epsilon_units,
           COALESCE(SUM(r.delta_units), 0) AS delta_units,
           COALESCE(p.cap_epsilon_units, d.epsilon_units) AS cap_epsilon_units,
           COALESCE(p.cap_delta_units, d.delta_units) AS cap_delta_units
    FROM participants p
    CROSS JOIN local_cap_default d
    LEFT JOIN reports r ON r.participant_id = p.id
    GROUP BY p.id, p.namespace, p.pseudonym, p.cap_epsilon_units, p.cap_delta_units, d.epsilon_units, d.delta_units
) s
"""

CAMPAIGN_LOCAL_GUARANTEE_VIEW = """
CREATE VIEW campaign_local_guarantee AS
SELECT c.id AS campaign_id,
       c.name AS campaign,
       c.protocol,
       c.status,
       (SELECT COUNT(*) FROM campaign_rounds cr WHERE cr.campaign_id = c.id) AS rounds,
       c.epsilon_units,
       c.delta_units,
       c.epsilon_units / 1e12 AS epsilon,
       c.delta_units / 1e18 AS delta,
       COALESCE(s.participants, 0) AS participants,
       COALESCE(s.reports, 0) AS reports,
       COALESCE(s.max_epsilon_units, 0) AS max_epsilon_spent_units,
       COALESCE(s.max_delta_units, 0) AS max_delta_spent_units,
       COALESCE(s.max_epsilon_units, 0) / 1e12 AS max_epsilon_spent,
       COALESCE(s.max_delta_units, 0) / 1e18 AS max_delta_spent
FROM campaigns c
LEFT JOIN (
    SELECT per.campaign_id,
           COUNT(*) AS participants,
           SUM(per.reports) AS reports,
           MAX(per.epsilon_units) AS max_epsilon_units,
           MAX(per.delta_units) AS max_delta_units
    FROM (SELECT campaign_id, participant_id, COUNT(*) AS reports, SUM(epsilon_units) AS epsilon_units,
                 SUM(delta_units) AS delta_units
          FROM reports GROUP BY campaign_id, participant_id) per
    GROUP BY per.campaign_id
) s ON s.campaign_id = c.id
"""

VIEWS = {
    "local_ledger": LOCAL_LEDGER_VIEW,
    "participant_campaign_spend": PARTICIPANT_CAMPAIGN_SPEND_VIEW,
    "participant_local_spend": PARTICIPANT_LOCAL_SPEND_VIEW,
    "campaign_local_guarantee": CAMPAIGN_LOCAL_GUARANTEE_VIEW,
}

SQLITE_TRIGGERS = [
    """CREATE TRIGGER reports_no_update BEFORE UPDATE ON reports
       BEGIN SELECT RAISE(ABORT, 'reports are append-only'); END""",
    """CREATE TRIGGER reports_no_delete BEFORE DELETE ON reports
       BEGIN SELECT RAISE(ABORT, 'reports are append-only'); END""",
]

POSTGRES_TRIGGERS = [
    """CREATE FUNCTION reports_append_only() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'reports are append-only'; END; $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER reports_append_only BEFORE UPDATE OR DELETE ON reports
       FOR EACH ROW EXECUTE FUNCTION reports_append_only()""",
    """CREATE TRIGGER reports_no_truncate BEFORE TRUNCATE ON reports
       FOR EACH STATEMENT EXECUTE FUNCTION reports_append_only()""",
]


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _set_role_check(old: str, new: str) -> None:
    """Replace the role CHECK of api_keys. PostgreSQL alters it in place. SQLite cannot alter a constraint, and
    rebuilding api_keys would break the foreign keys of idempotency_keys and jobs inside a transaction; the table's
    stored definition is edited instead, the procedure SQLite documents for changing CHECK constraints ("ALTER TABLE",
    section "Making Other Kinds Of Table Schema Changes"): sound here because every existing row satisfies both
    checks (the downgrade first deletes the keys of the new roles)."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        op.drop_constraint("ck_api_key_role", "api_keys", type_="check")
        op.create_check_constraint("ck_api_key_role", "api_keys", new)
        return
    sql = bind.execute(sa.text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'api_keys'")).scalar_one()
    if old not in sql:
        raise RuntimeError(f"api_keys has no check {old!r}: {sql}")
    version = bind.execute(sa.text("PRAGMA schema_version")).scalar_one()
    bind.execute(sa.text("PRAGMA writable_schema = ON"))
    bind.execute(sa.text("UPDATE sqlite_master SET sql = :sql WHERE type = 'table' AND name = 'api_keys'"),
                 {"sql": sql.replace(old, new)})
    bind.execute(sa.text(f"PRAGMA schema_version = {int(version) + 1}"))
    bind.execute(sa.text("PRAGMA writable_schema = OFF"))


def upgrade() -> None:
    _set_role_check(OLD_ROLES, NEW_ROLES)
    op.create_table(
        "public_tables",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("columns_json", sa.Text(), nullable=False),
        sa.Column("row_table", sa.String(64), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        _timestamp("created_at"),
        sa.CheckConstraint("row_count >= 0", name="ck_public_table_rows"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("row_table"),
    )
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("protocol", sa.String(40), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("features_json", sa.Text(), nullable=False),
        sa.Column("target", sa.String(200), nullable=True),
        sa.Column("public_table_id", sa.Integer(), sa.ForeignKey("public_tables.id"), nullable=True),
        sa.Column("transform_json", sa.Text(), nullable=False),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        _timestamp("created_at"),
        _timestamp("closed_at", nullable=True),
        sa.CheckConstraint("status IN ('open', 'closed')", name="ck_campaign_status"),
        sa.CheckConstraint("epsilon_units > 0", name="ck_campaign_epsilon_positive"),
        sa.CheckConstraint(f"delta_units >= 0 AND delta_units < {DELTA_SCALE}", name="ck_campaign_delta_range"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "campaign_rounds",
        sa.Column("campaign_id", sa.Integer(), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("round_index", sa.Integer(), primary_key=True),
        sa.Column("group_name", sa.String(200), nullable=False),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("expected_reports", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("state_json", sa.Text(), nullable=True),
        sa.Column("report_count", sa.BigInteger(), nullable=False),
        sa.Column("aggregate_json", sa.Text(), nullable=True),
        _timestamp("opened_at", nullable=True),
        _timestamp("closed_at", nullable=True),
        sa.CheckConstraint("status IN ('pending', 'open', 'closed')", name="ck_round_status"),
        sa.CheckConstraint("status = 'pending' OR state_json IS NOT NULL", name="ck_round_state_published"),
        sa.CheckConstraint("round_index >= 0", name="ck_round_index"),
        sa.CheckConstraint("epsilon_units > 0", name="ck_round_epsilon_positive"),
        sa.CheckConstraint(f"delta_units >= 0 AND delta_units < {DELTA_SCALE}", name="ck_round_delta_range"),
        sa.CheckConstraint("report_count >= 0", name="ck_round_report_count"),
        sa.CheckConstraint("expected_reports IS NULL OR expected_reports > 0", name="ck_round_expected"),
    )
    op.create_table(
        "participants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("pseudonym", sa.String(200), nullable=False),
        sa.Column("api_key_id", sa.Integer(), sa.ForeignKey("api_keys.id"), nullable=True),
        sa.Column("cap_epsilon_units", sa.BigInteger(), nullable=True),
        sa.Column("cap_delta_units", sa.BigInteger(), nullable=True),
        _timestamp("created_at"),
        sa.UniqueConstraint("namespace", "pseudonym", name="uq_participant_pseudonym"),
        sa.UniqueConstraint("api_key_id"),
        sa.CheckConstraint("cap_epsilon_units IS NULL OR cap_epsilon_units >= 0", name="ck_participant_cap_epsilon"),
        sa.CheckConstraint("cap_delta_units IS NULL OR cap_delta_units >= 0", name="ck_participant_cap_delta"),
    )
    cap = op.create_table(
        "local_cap_default",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        _timestamp("updated_at"),
        sa.CheckConstraint("id = 1", name="ck_local_cap_single_row"),
        sa.CheckConstraint("epsilon_units >= 0 AND delta_units >= 0", name="ck_local_cap_nonnegative"),
    )
    op.execute(cap.insert().values(id=1, epsilon_units=DEFAULT_CAP_EPSILON_UNITS, delta_units=DEFAULT_CAP_DELTA_UNITS,
                                   principal="migration 0005", updated_at=sa.func.current_timestamp()))
    op.create_table(
        "reports",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("round_index", sa.Integer(), nullable=False),
        sa.Column("participant_id", sa.Integer(), sa.ForeignKey("participants.id"), nullable=False),
        sa.Column("epsilon_units", sa.BigInteger(), nullable=False),
        sa.Column("delta_units", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("submitted_by", sa.Integer(), sa.ForeignKey("api_keys.id"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.current_timestamp()),
        sa.UniqueConstraint("campaign_id", "round_index", "participant_id", name="uq_report_one_per_round"),
        sa.ForeignKeyConstraint(["campaign_id", "round_index"],
                                ["campaign_rounds.campaign_id", "campaign_rounds.round_index"],
                                name="fk_report_round"),
        sa.CheckConstraint("epsilon_units > 0 AND delta_units >= 0", name="ck_report_spend"),
    )
    op.create_index("ix_reports_participant", "reports", ["participant_id", "campaign_id"])
    triggers = SQLITE_TRIGGERS if op.get_bind().dialect.name == "sqlite" else POSTGRES_TRIGGERS
    for statement in triggers:
        op.execute(statement)
    for view in VIEWS.values():
        op.execute(view)


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER reports_no_truncate ON reports")
        op.execute("DROP TRIGGER reports_append_only ON reports")
        op.execute("DROP FUNCTION reports_append_only()")
    for table in ("reports", "local_cap_default", "participants", "campaign_rounds", "campaigns", "public_tables"):
        op.drop_table(table)
    # public_rows_<id> tables are data, created by `marginalia public load`: drop them with their metadata
    bind = op.get_bind()
    for name in sa.inspect(bind).get_table_names():
        if name.startswith("public_rows_"):
            op.drop_table(name)
    # keys of the new roles cannot stay under the old constraint: they go, with what refers to them
    for table in ("idempotency_keys", "jobs"):
        op.execute(f"DELETE FROM {table} WHERE api_key_id IN "
                   "(SELECT id FROM api_keys WHERE role IN ('participant', 'gateway'))")
    op.execute("DELETE FROM api_keys WHERE role IN ('participant', 'gateway')")
    _set_role_check(NEW_ROLES, OLD_ROLES)
