"""gateway keys bound to the campaigns a steward names, with quotas of reports (issue 18, finding 7)

Two new tables, nothing else changed: ``gateway_scopes`` (which campaigns a gateway key may submit to, and how many
reports per campaign and per round) and ``gateway_usage`` (the reports each gateway key has had accepted per round,
filled here from the reports already stored). Gateways that reported before this revision get no scope: a steward
must grant one (``marginalia keys scope``) before they submit again.

Revision ID: 0008_gateway_scopes
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_gateway_scopes"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_scopes",
        sa.Column("api_key_id", sa.Integer(), sa.ForeignKey("api_keys.id"), primary_key=True),
        sa.Column("campaign_id", sa.Integer(), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("max_reports", sa.BigInteger(), nullable=False),
        sa.Column("max_reports_per_round", sa.BigInteger(), nullable=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("max_reports > 0", name="ck_gateway_scope_reports"),
        sa.CheckConstraint("max_reports_per_round IS NULL OR max_reports_per_round > 0",
                           name="ck_gateway_scope_round_reports"),
    )
    op.create_table(
        "gateway_usage",
        sa.Column("api_key_id", sa.Integer(), sa.ForeignKey("api_keys.id"), primary_key=True),
        sa.Column("campaign_id", sa.Integer(), primary_key=True),
        sa.Column("round_index", sa.Integer(), primary_key=True),
        sa.Column("reports", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("reports >= 0", name="ck_gateway_usage_reports"),
        sa.ForeignKeyConstraint(["campaign_id", "round_index"],
                                ["campaign_rounds.campaign_id", "campaign_rounds.round_index"],
                                name="fk_gateway_usage_round"),
    )
    op.execute("INSERT INTO gateway_usage (api_key_id, campaign_id, round_index, reports) "
               "SELECT r.submitted_by, r.campaign_id, r.round_index, COUNT(*) FROM reports r "
               "JOIN api_keys k ON k.id = r.submitted_by WHERE k.role = 'gateway' "
               "GROUP BY r.submitted_by, r.campaign_id, r.round_index")


def downgrade() -> None:
    op.drop_table("gateway_usage")
    op.drop_table("gateway_scopes")
