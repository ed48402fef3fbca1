"""the ledger's hash chain (issue 31, point 8): ``ledger_hashes``, one link per entry, append-only

Each dataset's entries, oldest first, are chained: ``entry_hash = SHA-256(previous_hash | canonical(entry))``
(db/ledger_chain.py), so that an edited entry breaks the chain and a published head reveals a rolled-back ledger (an
older backup restored). The links of the entries written before this migration are computed here, in id order per
dataset, exactly as the accountant computes them for new ones; nothing of the ledger changes. A downgrade drops the
table.

Revision ID: 0015_ledger_chain
Revises: 0014_claim_runners
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

from db import ledger_chain

revision = "0015_ledger_chain"
down_revision = "0014_claim_runners"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER ledger_hashes_no_update BEFORE UPDATE ON ledger_hashes
       BEGIN SELECT RAISE(ABORT, 'the ledger''s hash chain is append-only'); END""",
    """CREATE TRIGGER ledger_hashes_no_delete BEFORE DELETE ON ledger_hashes
       BEGIN SELECT RAISE(ABORT, 'the ledger''s hash chain is append-only'); END""",
]
POSTGRES_TRIGGERS = [  # the ledger's own function (migration 0001) raises
    """CREATE TRIGGER ledger_hashes_append_only BEFORE UPDATE OR DELETE ON ledger_hashes
       FOR EACH ROW EXECUTE FUNCTION ledger_append_only()""",
    """CREATE TRIGGER ledger_hashes_no_truncate BEFORE TRUNCATE ON ledger_hashes
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "ledger_hashes",
        sa.Column("entry_id", sa.Integer(), sa.ForeignKey("ledger_entries.id"), primary_key=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("previous_hash", sa.String(64), nullable=False),
        sa.Column("entry_hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_ledger_hashes_dataset_id", "ledger_hashes", ["dataset_id"])
    connection = op.get_bind()
    entries = sa.table("ledger_entries", *(sa.column(name) for name in ledger_chain.HASHED_COLUMNS))
    hashes = sa.table("ledger_hashes", sa.column("entry_id"), sa.column("dataset_id"), sa.column("previous_hash"),
                      sa.column("entry_hash"))
    previous: dict[int, str] = {}
    for entry in connection.execute(sa.select(entries).order_by(entries.c.id)):
        before = previous.get(entry.dataset_id, ledger_chain.GENESIS)
        digest = ledger_chain.entry_hash(before, entry)
        connection.execute(hashes.insert().values(entry_id=entry.id, dataset_id=entry.dataset_id,
                                                  previous_hash=before, entry_hash=digest))
        previous[entry.dataset_id] = digest
    for statement in SQLITE_TRIGGERS if connection.dialect.name == "sqlite" else POSTGRES_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER ledger_hashes_no_truncate ON ledger_hashes")
        op.execute("DROP TRIGGER ledger_hashes_append_only ON ledger_hashes")
    op.drop_index("ix_ledger_hashes_dataset_id", "ledger_hashes")
    op.drop_table("ledger_hashes")
