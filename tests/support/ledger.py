"""Reading the ledger and the releases table with plain SQL, as an auditor would (shared by the tests)."""

from __future__ import annotations

from sqlalchemy import text


def release_rows(engine) -> list[tuple]:  # noqa: ANN001
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text("SELECT id, status FROM releases ORDER BY id"))]


def net_charge(engine, release_id: int) -> tuple[int, int, int]:  # noqa: ANN001
    with engine.connect() as connection:
        row = connection.execute(text(
            "SELECT COALESCE(SUM(epsilon_units), 0), COALESCE(SUM(delta_units), 0), COALESCE(SUM(rho_units), 0) "
            "FROM ledger_entries WHERE release_id = :r"), {"r": release_id}).one()
    return int(row[0]), int(row[1]), int(row[2])


def spent_after(engine, release_id: int) -> float:  # noqa: ANN001
    """The budget's composed epsilon after the release's last ledger row (its charge, or the refund of it)."""
    with engine.connect() as connection:
        return connection.execute(text(
            "SELECT epsilon_spent_after_units FROM ledger_entries WHERE release_id = :r ORDER BY id DESC LIMIT 1"),
            {"r": release_id}).scalar_one() / 1e12


def budget_audit(engine, dataset: str) -> tuple[int, int, int]:  # noqa: ANN001
    """(stored, recomputed, agrees) of the ``budget_audit`` view (migration 0012): the composed epsilon the ledger
    stores beside the one plain SQL recomputes from its sums and anchor."""
    with engine.connect() as connection:
        row = connection.execute(text("SELECT epsilon_spent_units, epsilon_recomputed_units, agrees FROM budget_audit "
                                      "WHERE dataset = :d"), {"d": dataset}).one()
    return int(row[0]), int(row[1]), int(row[2])
