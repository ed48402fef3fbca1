"""the auditor's recomputation of the composed epsilon, exact in plain SQL on SQLite and PostgreSQL (issue 29)

One new view, ``budget_audit``: per dataset, the composed epsilon the ledger stores (``epsilon_spent_units``, the last
row's ``epsilon_spent_after_units``) beside ``epsilon_recomputed_units``, the same figure recomputed from the
ledger's sums and the anchor by the rule of docs/privacy.md 6.3-6.4, ``C + ceil(alpha R) + t`` (``min(E, C + t)``
while R = 0 after the anchor; E before it), and ``agrees`` (1 when they are equal).

``alpha R`` in ledger units is ``alpha_units * R / 10^9``, about 2e20 for a README release on adult: beyond SQLite's
64-bit integers, where the plain product silently becomes a REAL. The view splits both factors at 10^9
(``alpha_units = a1 10^9 + a0``, ``R = r1 10^9 + r0``), so that
``ceil(alpha_units R / 10^9) = a1 R + a0 r1 + ceil(a0 r0 / 10^9)`` with every product below 10^18, and integer
division (truncating, exact for these non-negative values) on both engines. Nothing else changes; a downgrade
drops the view.

Revision ID: 0012_budget_audit
Revises: 0011_source_scopes
Create Date: 2026-12-01
"""

from alembic import op

revision = "0012_budget_audit"
down_revision = "0011_source_scopes"
branch_labels = None
depends_on = None

BUDGET_AUDIT_VIEW = """
CREATE VIEW budget_audit AS
SELECT v.dataset,
       v.epsilon_spent_units,
       v.epsilon_recomputed_units,
       CASE WHEN v.epsilon_recomputed_units = v.epsilon_spent_units THEN 1 ELSE 0 END AS agrees
FROM (
    SELECT s.dataset,
           s.epsilon_spent_units,
           CASE
               WHEN s.a IS NULL THEN s.e
               WHEN s.r = 0 THEN CASE WHEN s.e < s.c + s.t THEN s.e ELSE s.c + s.t END
               ELSE s.c + s.t + (s.a / 1000000000) * s.r + (s.a % 1000000000) * (s.r / 1000000000)
                    + ((s.a % 1000000000) * (s.r % 1000000000) + 999999999) / 1000000000
           END AS epsilon_recomputed_units
    FROM (
        SELECT dataset,
               CAST(epsilon_spent_units AS BIGINT) AS epsilon_spent_units,
               CAST(epsilon_pure_spent_units AS BIGINT) AS e,
               CAST(epsilon_priced_spent_units AS BIGINT) AS c,
               CAST(rho_spent_units AS BIGINT) AS r,
               CAST(anchor_alpha_units AS BIGINT) AS a,
               CAST(COALESCE(anchor_offset_units, 0) AS BIGINT) AS t
        FROM budget_remaining
    ) s
) v
"""


def upgrade() -> None:
    op.execute(BUDGET_AUDIT_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW budget_audit")
