"""seeded campaigns are marked; a ledger charge can name the campaign it paid for (issue 18, finding 3)

* ``campaigns.seeded``: the campaign received reports randomized with a caller-chosen seed (the in-process simulator
  of tests and benchmarks; ``marginalia simulate --seed`` only under ``MARGINALIA_UNSAFE_SEEDED_RELEASES=1``).
  Whoever knows the seed can regenerate and subtract that noise, so such a campaign answers nothing over HTTP
  (``409 seeded_campaign``). Campaigns made before this migration received no seeded report through a route (no route
  takes a seed); any seeded simulation they saw is unknown to the database, so they stay unmarked.
* ``ledger_entries.campaign_id``: the campaign a ``campaign-simulation`` charge paid for (a stored dataset's rows
  played through a campaign are charged to that dataset's budget, docs/privacy.md 8.7.7). No foreign key, as for
  ``reports.campaign_id``: SQLite cannot add one to an existing table without rebuilding it, and rebuilding the
  append-only ledger would drop its triggers.

Revision ID: 0007_seeded_campaigns
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_seeded_campaigns"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("campaigns", sa.Column("seeded", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("ledger_entries", sa.Column("campaign_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("ledger_entries", "campaign_id")
    op.drop_column("campaigns", "seeded")
