"""seeded releases are marked; each ledger row stores its priced epsilon; the views show what can be spent

* ``releases.seeded``: the release's noise came from a caller-chosen seed (no privacy). Existing releases are
  marked from their ``params_json`` (``"seeded": true``), which every release has carried since 0001.
* ``ledger_entries.epsilon_priced_units``: what the row's epsilon costs in the accountant's rule (docs/privacy.md
  6.3). Rows written before this migration were all priced at their epsilon, so they keep NULL (read as
  ``epsilon_units``): the ledger is append-only and its triggers refuse UPDATE.
* Objective-perturbation releases made before this migration stored solver diagnostics in their details
  (``converged``, ``gradient_norm``, ``iterations``): data-dependent, and shown by ``GET /releases/{id}``. They are
  removed here (issue 11, finding 2).
* The views: ``privacy_ledger`` gains ``epsilon_priced_units``; ``budget_remaining`` gains the priced sum, the
  budget's ``delta_reserve_units``, and its ``delta_remaining_units`` becomes what (epsilon, delta) charges can
  actually still spend, ``delta_B - delta_z - D`` once the zCDP anchor holds ``delta_z``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import importlib.util
import json
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
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
       COALESCE(l.epsilon_priced_units, l.epsilon_units) AS epsilon_priced_units,
       l.epsilon_spent_after_units,
       l.anchor_alpha_units,
       l.anchor_delta_z_units,
       l.anchor_offset_units,
       l.epsilon_units / 1e12 AS epsilon,
       l.delta_units / 1e18 AS delta,
       l.rho_units / 1e12 AS rho,
       COALESCE(l.epsilon_priced_units, l.epsilon_units) / 1e12 AS epsilon_priced,
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
       s.delta_reserve_units,
       s.epsilon_pure_spent_units,
       s.epsilon_priced_spent_units,
       s.delta_spent_units,
       s.rho_spent_units,
       s.epsilon_spent_units,
       s.anchor_alpha_units,
       s.anchor_delta_z_units,
       s.anchor_offset_units,
       s.epsilon_total_units - s.epsilon_spent_units AS epsilon_remaining_units,
       s.delta_total_units - COALESCE(s.anchor_delta_z_units, 0) - s.delta_spent_units AS delta_remaining_units,
       s.epsilon_total_units / 1e12 AS epsilon_total,
       s.delta_total_units / 1e18 AS delta_total,
       s.epsilon_spent_units / 1e12 AS epsilon_spent,
       s.delta_spent_units / 1e18 AS delta_spent,
       s.rho_spent_units / 1e12 AS rho_spent,
       (s.epsilon_total_units - s.epsilon_spent_units) / 1e12 AS epsilon_remaining,
       (s.delta_total_units - COALESCE(s.anchor_delta_z_units, 0) - s.delta_spent_units) / 1e18 AS delta_remaining
FROM (
    SELECT d.id AS dataset_id,
           d.name AS dataset,
           b.epsilon_units AS epsilon_total_units,
           b.delta_units AS delta_total_units,
           b.delta_reserve_units AS delta_reserve_units,
           COALESCE(SUM(l.epsilon_units), 0) AS epsilon_pure_spent_units,
           COALESCE(SUM(COALESCE(l.epsilon_priced_units, l.epsilon_units)), 0) AS epsilon_priced_spent_units,
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
    GROUP BY d.id, d.name, b.epsilon_units, b.delta_units, b.delta_reserve_units
) s
"""

MARK_SEEDED = {
    "sqlite": "UPDATE releases SET seeded = 1 WHERE json_extract(params_json, '$.seeded') = 1",
    "postgresql": "UPDATE releases SET seeded = true WHERE (params_json::json ->> 'seeded') = 'true'",
}


SOLVER_DIAGNOSTICS = ("converged", "gradient_norm", "iterations")


def _scrub_objpert_details() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, details_json FROM releases WHERE mechanism = 'objpert'")).all()
    for release_id, details_json in rows:
        details = json.loads(details_json or "{}")
        if any(key in details for key in SOLVER_DIAGNOSTICS):
            kept = {k: v for k, v in details.items() if k not in SOLVER_DIAGNOSTICS}
            bind.execute(sa.text("UPDATE releases SET details_json = :d WHERE id = :i"),
                         {"d": json.dumps(kept), "i": release_id})


def _initial_views() -> tuple[str, str]:
    """The views as migration 0001 created them (for the downgrade)."""
    spec = importlib.util.spec_from_file_location("migration_0001", Path(__file__).with_name("0001_initial.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PRIVACY_LEDGER_VIEW, module.BUDGET_REMAINING_VIEW


def upgrade() -> None:
    op.add_column("releases", sa.Column("seeded", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("ledger_entries", sa.Column("epsilon_priced_units", sa.BigInteger(), nullable=True))
    op.execute(MARK_SEEDED[op.get_bind().dialect.name])
    _scrub_objpert_details()
    op.execute("DROP VIEW budget_remaining")
    op.execute("DROP VIEW privacy_ledger")
    op.execute(PRIVACY_LEDGER_VIEW)
    op.execute(BUDGET_REMAINING_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW budget_remaining")
    op.execute("DROP VIEW privacy_ledger")
    op.drop_column("ledger_entries", "epsilon_priced_units")
    op.drop_column("releases", "seeded")
    for view in _initial_views():
        op.execute(view)
