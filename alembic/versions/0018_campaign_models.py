"""the graphical model of a marginals campaign (issue 33): ``campaign_models``

A ``marginals`` campaign answers every marginal and synthetic rows from one graphical model fitted to its reports'
per-set frequency estimates (service/campaigns/marginal_answers.py). The first answer after the campaign's reports
changed fits it and stores it here, keyed by the campaign and the number of reports it was fitted to, so every later
answer -- in any process -- reads the same model until more reports arrive. A model is post-processing of the stored
aggregate: it reads no report and costs nothing. A downgrade drops the table.

Revision ID: 0018_campaign_models
Revises: 0017_console
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_campaign_models"
down_revision = "0017_console"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaign_models",
        sa.Column("campaign_id", sa.Integer(), sa.ForeignKey("campaigns.id"), primary_key=True),
        sa.Column("reports", sa.BigInteger(), primary_key=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("details_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("campaign_models")
