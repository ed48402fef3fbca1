"""The migrations build exactly the schema the models describe, and the ledger is append-only."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from db.migrate import upgrade_to_head
from db.models import Base


def _ignore_views(obj, name, type_, reflected, compare_to) -> bool:  # noqa: ANN001, ARG001
    return not (type_ == "table" and name in ("privacy_ledger", "budget_remaining"))


def test_models_match_migrations(engine) -> None:  # noqa: ANN001
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"


def test_upgrade_is_idempotent(engine) -> None:  # noqa: ANN001
    upgrade_to_head(engine)
    with engine.connect() as connection:
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    assert version


def _insert_dataset_and_entry(connection) -> None:  # noqa: ANN001
    connection.execute(text(
        "INSERT INTO datasets (id, name, domain_json, data_table, row_count, source, created_at) "
        "VALUES (1, 'd', '{}', 'data_1', 0, '', CURRENT_TIMESTAMP)"))
    connection.execute(text(
        "INSERT INTO ledger_entries (id, dataset_id, entry, mechanism, epsilon_units, delta_units, rho_units, "
        "epsilon_spent_after_units, principal, note, created_at) "
        "VALUES (1, 1, 'charge', 'laplace', 100, 0, 0, 100, 'x', '', CURRENT_TIMESTAMP)"))


@pytest.mark.parametrize("statement", [
    "UPDATE ledger_entries SET epsilon_units = 0",
    "DELETE FROM ledger_entries",
])
def test_ledger_refuses_update_and_delete(engine, statement: str) -> None:  # noqa: ANN001
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)
    with pytest.raises(DBAPIError, match="append-only"):
        with engine.begin() as connection:
            connection.execute(text(statement))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT epsilon_units FROM ledger_entries")).scalar_one() == 100
