"""Migration 0005: public tables and the collections' schema, the append-only reports, their constraints, the
participant and gateway roles, and the auditor's views of local spend, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from alembic import command
from db.engine import make_engine, transaction
from db.migrate import alembic_config, upgrade_to_head
from db.models import Base
from db.public_rows import create_public_rows, public_rows_table_name
from tests.support.collections_rows import UNIT, make_campaign, make_key

VIEWS = ("local_ledger", "participant_campaign_spend", "participant_local_spend", "campaign_local_guarantee")
NEW_TABLES = ("public_tables", "campaigns", "campaign_rounds", "participants", "local_cap_default", "reports")


def _report(connection, campaign: int, round_index: int, participant: int, epsilon_units: int = UNIT,  # noqa: ANN001
            delta_units: int = 0) -> None:
    connection.execute(text(
        "INSERT INTO reports (campaign_id, round_index, participant_id, epsilon_units, delta_units, payload) "
        "VALUES (:c, :r, :p, :e, :d, :b)"), {"c": campaign, "r": round_index, "p": participant, "e": epsilon_units,
                                            "d": delta_units, "b": b"\x00" * 8})


def _participant(connection, pseudonym: str, cap_epsilon_units: int | None = None) -> int:  # noqa: ANN001
    connection.execute(text("INSERT INTO participants (namespace, pseudonym, cap_epsilon_units, created_at) "
                            "VALUES ('t', :p, :c, CURRENT_TIMESTAMP)"), {"p": pseudonym, "c": cap_epsilon_units})
    return int(connection.execute(text("SELECT id FROM participants WHERE pseudonym = :p"),
                                  {"p": pseudonym}).scalar_one())


def test_reports_are_append_only(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0)])
    with engine.begin() as connection:
        _report(connection, campaign, 0, _participant(connection, "a"))
    for statement in ("UPDATE reports SET epsilon_units = 1", "DELETE FROM reports"):
        with pytest.raises(DBAPIError, match="append-only"):
            with engine.begin() as connection:
                connection.execute(text(statement))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT epsilon_units FROM reports")).scalar_one() == UNIT


def test_one_report_per_participant_per_round_is_a_constraint(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0), ("all", 1.0, 0.0)])
    with engine.begin() as connection:
        participant = _participant(connection, "a")
        _report(connection, campaign, 0, participant)
        _report(connection, campaign, 1, participant)  # another round: allowed
    with pytest.raises(IntegrityError):
        with engine.begin() as connection:
            _report(connection, campaign, 0, participant)
    with pytest.raises(IntegrityError):  # a report names an existing round
        with engine.begin() as connection:
            _report(connection, campaign, 2, participant)


@pytest.mark.parametrize("column, value", [("epsilon_units", 0), ("delta_units", 10**18), ("delta_units", -1),
                                           ("status", "'paused'")])
def test_campaign_checks_refuse_bad_parameters(engine, column: str, value: object) -> None:  # noqa: ANN001
    values = {"epsilon_units": UNIT, "delta_units": 0, "status": "'open'", column: value}
    with pytest.raises(IntegrityError):
        with engine.begin() as connection:
            connection.execute(text(
                "INSERT INTO campaigns (name, protocol, spec_json, features_json, transform_json, epsilon_units, "
                f"delta_units, status, principal, created_at) VALUES ('c', 'ldp-avg', '{{}}', '[]', '{{}}', "
                f"{values['epsilon_units']}, {values['delta_units']}, {values['status']}, 'x', CURRENT_TIMESTAMP)"))


def test_an_open_round_has_a_published_state(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0), ("all", 1.0, 0.0)])
    with pytest.raises(IntegrityError):
        with engine.begin() as connection:
            connection.execute(text("UPDATE campaign_rounds SET status = 'open' WHERE campaign_id = :c AND "
                                    "round_index = 1"), {"c": campaign})


def test_api_keys_take_the_participant_and_gateway_roles_only(engine) -> None:  # noqa: ANN001
    assert make_key(engine, "participant", "p") != make_key(engine, "gateway", "g")
    with pytest.raises(IntegrityError):
        make_key(engine, "superuser", "s")


def test_views_show_spend_per_participant_campaign_and_cap(engine) -> None:  # noqa: ANN001
    first = make_campaign(engine, "first", [("all", 1.0, 1e-6), ("all", 0.5, 0.0)])
    second = make_campaign(engine, "second", [("all", 2.0, 0.0)])
    with engine.begin() as connection:
        alice = _participant(connection, "alice")
        bob = _participant(connection, "bob", cap_epsilon_units=3 * UNIT)
        _participant(connection, "carol")  # never reported
        _report(connection, first, 0, alice, UNIT, 10**12)
        _report(connection, first, 1, alice, UNIT // 2)
        _report(connection, second, 0, alice, 2 * UNIT)
        _report(connection, first, 0, bob, UNIT, 10**12)
    with engine.connect() as connection:
        total = {r.pseudonym: r for r in connection.execute(text("SELECT * FROM participant_local_spend")).all()}
        per = {(r.pseudonym, r.campaign): r for r in connection.execute(
            text("SELECT * FROM participant_campaign_spend")).all()}
        guarantee = {r.campaign: r for r in connection.execute(text("SELECT * FROM campaign_local_guarantee")).all()}
        ledger = connection.execute(text("SELECT COUNT(*), SUM(epsilon_units) FROM local_ledger")).one()
    assert int(total["alice"].epsilon_units) == 3.5 * UNIT and int(total["alice"].campaigns) == 2
    assert int(total["alice"].delta_units) == 10**12 and abs(float(total["alice"].delta) - 1e-6) < 1e-18
    assert int(total["alice"].cap_epsilon_units) == 10 * UNIT  # the default written by the migration
    assert int(total["bob"].cap_epsilon_units) == 3 * UNIT and abs(float(total["bob"].epsilon_remaining) - 2) < 1e-9
    assert int(total["carol"].reports) == 0 and int(total["carol"].epsilon_units) == 0
    assert int(per[("alice", "first")].epsilon_units) == 1.5 * UNIT and int(per[("alice", "first")].reports) == 2
    assert int(guarantee["first"].epsilon_units) == 1.5 * UNIT and int(guarantee["first"].rounds) == 2
    assert int(guarantee["first"].max_epsilon_spent_units) == 1.5 * UNIT
    assert int(guarantee["first"].participants) == 2 and int(guarantee["first"].reports) == 3
    assert int(guarantee["second"].max_epsilon_spent_units) == 2 * UNIT
    assert int(ledger[0]) == 4 and int(ledger[1]) == 4.5 * UNIT


def test_models_match_migrations_with_the_collections(engine) -> None:  # noqa: ANN001
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        names = set(inspect(connection).get_view_names())
    assert set(VIEWS) <= names


def test_migration_0005_downgrades_and_upgrades_again(database_url: str) -> None:
    """Down to 0004: the new tables, views, public row tables and keys of the new roles go; the old role check is
    back; up again gives the schema the models describe."""
    engine = make_engine(database_url)
    config = alembic_config(database_url)
    upgrade_to_head(engine)
    make_key(engine, "analyst", "a")
    participant_key = make_key(engine, "participant", "p")
    make_campaign(engine, "c", [("all", 1.0, 0.0)])
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO participants (namespace, pseudonym, api_key_id, created_at) "
                                "VALUES ('key', :k, :k, CURRENT_TIMESTAMP)"), {"k": participant_key})
        create_public_rows(connection, public_rows_table_name(1), [[1.0, 2.0]])
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
    with engine.connect() as connection:
        inspector = inspect(connection)
        assert not any(inspector.has_table(t) for t in (*NEW_TABLES, public_rows_table_name(1)))
        assert not set(VIEWS) & set(inspector.get_view_names())
        roles = connection.execute(text("SELECT role FROM api_keys")).scalars().all()
    assert roles == ["analyst"]
    with pytest.raises(IntegrityError):
        make_key(engine, "participant", "p2")
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        cap = connection.execute(text("SELECT epsilon_units, delta_units FROM local_cap_default")).one()
    assert tuple(int(v) for v in cap) == (10 * UNIT, 10**14)
    engine.dispose()


def test_public_rows_round_trip_in_order(engine) -> None:  # noqa: ANN001
    from db.public_rows import read_public_rows

    values = [[float(i), i / 3.0, -1e300] for i in range(25)]
    with transaction(engine) as session:
        create_public_rows(session.connection(), "public_rows_7", values)
    with engine.connect() as connection:
        assert read_public_rows(connection, "public_rows_7", 3).tolist() == values
        assert read_public_rows(connection, "public_rows_7", 3, offset=20, limit=3).tolist() == values[20:23]
        assert read_public_rows(connection, "public_rows_7", 3, offset=30).shape == (0, 3)


def test_migration_0005_keeps_keys_and_what_refers_to_them(database_url: str) -> None:
    """The role check is widened in place (SQLite rebuilds api_keys): existing keys, and the idempotency records and
    jobs that refer to them, survive the upgrade."""
    engine = make_engine(database_url)
    config = alembic_config(database_url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0004")
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO api_keys (id, name, role, key_hash, created_at) VALUES "
                                "(5, 'ann', 'analyst', :h, CURRENT_TIMESTAMP)"), {"h": "a" * 64})
        connection.execute(text("INSERT INTO idempotency_keys (api_key_id, key, request_hash, state, created_at) "
                                "VALUES (5, 'k', :h, 'done', CURRENT_TIMESTAMP)"), {"h": "b" * 64})
        connection.execute(text(
            "INSERT INTO jobs (api_key_id, dataset, kind, state, progress_done, progress_total, progress_message, "
            "fit_done, fit_total, created_at) VALUES (5, 'd', 'fit', 'done', 0, 0, '', 0, 0, CURRENT_TIMESTAMP)"))
    upgrade_to_head(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT name, role FROM api_keys WHERE id = 5")).one() == ("ann", "analyst")
        assert connection.execute(text("SELECT COUNT(*) FROM idempotency_keys WHERE api_key_id = 5")).scalar_one() == 1
        assert connection.execute(text("SELECT COUNT(*) FROM jobs WHERE api_key_id = 5")).scalar_one() == 1
    make_key(engine, "participant", "p")
    engine.dispose()
