"""The migrations build exactly the schema the models describe, and the ledger is append-only."""

from __future__ import annotations

import json

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from alembic import command
from db.engine import make_engine
from db.migrate import alembic_config, at_head, head_revision, upgrade_to_head
from db.models import Base
from service.data.attach.sources import add_source


def _ignore_views(obj, name, type_, reflected, compare_to) -> bool:  # noqa: ANN001, ARG001
    return not (type_ == "table" and name in ("privacy_ledger", "budget_remaining", "budget_audit"))


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


def test_migrations_form_one_chain(database_url: str) -> None:
    """Migrations written on parallel branches are chained, never left as two heads (upgrade_to_head needs one)."""
    assert len(ScriptDirectory.from_config(alembic_config(database_url)).get_heads()) == 1


def test_the_fast_check_knows_alembics_head(database_url: str) -> None:
    """upgrade_to_head skips Alembic for a database at the head it reads from the migration files: that head must be
    Alembic's own, and only a database at it skips (a fresh one, an older one, one at an unknown revision do not)."""
    assert head_revision() == ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    engine, config = _migrated_to(database_url, "0011_source_scopes")
    try:
        assert not at_head(engine)
        upgrade_to_head(engine)
        assert at_head(engine)
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = 'from-the-future'"))
        assert not at_head(engine)
    finally:
        engine.dispose()


def test_a_fresh_database_is_not_at_head(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        assert not at_head(engine)  # no alembic_version table: the upgrade goes through Alembic
        upgrade_to_head(engine)
        assert at_head(engine)
    finally:
        engine.dispose()


def _insert_dataset_and_entry(connection) -> None:  # noqa: ANN001
    connection.execute(text(
        "INSERT INTO datasets (id, name, domain_json, data_table, row_count, source, created_at) "
        "VALUES (1, 'd', '{}', 'data_1', 0, '', CURRENT_TIMESTAMP)"))
    connection.execute(text(
        "INSERT INTO ledger_entries (id, dataset_id, entry, mechanism, epsilon_units, delta_units, rho_units, "
        "epsilon_spent_after_units, principal, note, created_at) "
        "VALUES (1, 1, 'charge', 'laplace', 100, 0, 0, 100, 'x', '', CURRENT_TIMESTAMP)"))


def _migrated_to(database_url: str, revision: str) -> tuple[Engine, Config]:
    """An engine on ``database_url`` upgraded to ``revision`` only, and the Alembic config to go on from there."""
    engine = make_engine(database_url)
    config = alembic_config(database_url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    return engine, config


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


def test_migration_0003_marks_seeded_releases_scrubs_diagnostics_and_prices_old_rows(database_url: str) -> None:
    """Issue 11: releases seeded before 0003 are marked seeded (so they are never reused), objective-perturbation
    details lose their solver diagnostics, and old ledger rows (priced NULL) count at their epsilon in the views."""
    engine, _ = _migrated_to(database_url, "0002")
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)  # a charge of 1e-10 epsilon written before 0003
        connection.execute(text("INSERT INTO budgets (dataset_id, epsilon_units, delta_units, delta_reserve_units, "
                                "updated_at) VALUES (1, 1000, 0, 0, CURRENT_TIMESTAMP)"))
        for release_id, mechanism, params, details in [
            (1, "laplace", '{"seeded": true}', '{"model_cliques": [["a"]]}'),
            (2, "laplace", '{"seeded": false}', "{}"),
            (3, "objpert", '{"seeded": false}', '{"converged": true, "gradient_norm": 1e-10, "iterations": 7, '
                                                '"noise_std": 2.0}'),
        ]:
            connection.execute(text(
                "INSERT INTO releases (id, dataset_id, kind, mechanism, params_json, status, details_json, principal, "
                "created_at) VALUES (:i, 1, 'marginals', :m, :p, 'complete', :d, 'x', CURRENT_TIMESTAMP)"),
                {"i": release_id, "m": mechanism, "p": params, "d": details})
    upgrade_to_head(engine)
    with engine.connect() as connection:
        seeded = dict(connection.execute(text("SELECT id, seeded FROM releases")).all())
        details = connection.execute(text("SELECT details_json FROM releases WHERE id = 3")).scalar_one()
        view = connection.execute(text("SELECT epsilon_priced_spent_units, delta_remaining_units FROM "
                                       "budget_remaining")).one()
        priced = connection.execute(text("SELECT epsilon_priced_units FROM privacy_ledger")).scalar_one()
    assert {k: bool(v) for k, v in seeded.items()} == {1: True, 2: False, 3: False}
    assert json.loads(details) == {"noise_std": 2.0}
    assert int(priced) == 100 and int(view[0]) == 100 and int(view[1]) == 0
    engine.dispose()


def test_migration_0004_adds_runners_and_jobs_on_top_of_0003(database_url: str) -> None:
    """Issue 12 after issue 11: a 0003 database (seeded flags, priced ledger) gains the runner columns and the jobs
    table; its pending release keeps its seeded flag and has no runner (recovery then goes by its age), and a
    downgrade to 0003 and back gives the schema the models describe."""
    engine, config = _migrated_to(database_url, "0003")
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)
        connection.execute(text(
            "INSERT INTO releases (id, dataset_id, kind, mechanism, params_json, seeded, status, details_json, "
            "principal, created_at) VALUES (1, 1, 'marginals', 'laplace', '{}', :s, 'pending', '{}', 'x', "
            "CURRENT_TIMESTAMP)"), {"s": True})
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0004")
    with engine.connect() as connection:
        row = connection.execute(text("SELECT seeded, runner_host, runner_pid, runner_started, heartbeat_at "
                                      "FROM releases WHERE id = 1")).one()
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        jobs = connection.execute(text("SELECT COUNT(*) FROM jobs")).scalar_one()
    assert bool(row[0]) and tuple(row[1:]) == (None, None, None, None)
    assert version >= "0004" and jobs == 0
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0003")
    with engine.connect() as connection:
        columns = {c["name"] for c in inspect(connection).get_columns("releases")}
        assert "seeded" in columns and "runner_pid" not in columns and not inspect(connection).has_table("jobs")
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        assert bool(connection.execute(text("SELECT seeded FROM releases WHERE id = 1")).scalar_one())
    engine.dispose()


def test_migration_0006_adds_release_models_on_top_of_0005(database_url: str) -> None:
    """Issue 9: a 0005 database with a complete release gains the (empty) release_models table; a stored model row
    refers to its release; a downgrade to 0005 and back gives the schema the models describe."""
    engine, config = _migrated_to(database_url, "0005")
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)
        connection.execute(text(
            "INSERT INTO releases (id, dataset_id, kind, mechanism, params_json, seeded, status, details_json, "
            "principal, created_at) VALUES (1, 1, 'marginals', 'gaussian', '{}', :s, 'complete', '{}', 'x', "
            "CURRENT_TIMESTAMP)"), {"s": False})
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
    with engine.begin() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0006"
        assert connection.execute(text("SELECT COUNT(*) FROM release_models")).scalar_one() == 0
        connection.execute(text("INSERT INTO release_models (release_id, payload, details_json, created_at) "
                                "VALUES (1, :p, '{}', CURRENT_TIMESTAMP)"), {"p": b"model"})
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0005")
    with engine.connect() as connection:
        assert not inspect(connection).has_table("release_models")
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0007_marks_no_old_campaign_seeded_and_links_simulation_charges(database_url: str) -> None:
    """Issue 18, finding 3: a 0006 database with a campaign and a ledger charge gains ``campaigns.seeded`` (false for
    the old campaign) and ``ledger_entries.campaign_id`` (NULL for the old charge); a downgrade to 0006 and back gives
    the schema the models describe."""
    engine, config = _migrated_to(database_url, "0006")
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)
        connection.execute(text(
            "INSERT INTO campaigns (id, name, protocol, spec_json, features_json, transform_json, epsilon_units, "
            "delta_units, status, principal, created_at) VALUES (1, 'c', 'ldp-avg', '{}', '[]', '{}', 1, 0, 'open', "
            "'x', CURRENT_TIMESTAMP)"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007_seeded_campaigns")
    with engine.begin() as connection:
        assert connection.execute(text("SELECT seeded FROM campaigns")).scalar_one() in (False, 0)
        assert connection.execute(text("SELECT campaign_id FROM ledger_entries")).scalar_one() is None
        connection.execute(text(
            "INSERT INTO ledger_entries (id, dataset_id, campaign_id, entry, mechanism, epsilon_units, delta_units, "
            "rho_units, epsilon_spent_after_units, principal, note, created_at) VALUES (2, 1, 1, 'charge', "
            "'campaign-simulation', 100, 0, 0, 200, 'x', '', CURRENT_TIMESTAMP)"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
    with engine.connect() as connection:
        assert "seeded" not in {c["name"] for c in inspect(connection).get_columns("campaigns")}
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries")).scalar_one() == 2
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0008_adds_gateway_scopes_and_counts_what_gateways_sent(database_url: str) -> None:
    """Issue 18: a database before 0008 with a gateway's reports (and a participant's) gains gateway_scopes (empty:
    every gateway needs a steward's scope before it submits again) and gateway_usage counting each gateway's reports
    per round, as the reports table does; a downgrade to 0006 removes both and an upgrade gives the models' schema."""
    engine, config = _migrated_to(database_url, "0006")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO api_keys (id, name, role, key_hash, created_at) VALUES (1, 'g', 'gateway', :h1, "
            "CURRENT_TIMESTAMP), (2, 'p', 'participant', :h2, CURRENT_TIMESTAMP)"), {"h1": "1" * 64, "h2": "2" * 64})
        connection.execute(text(
            "INSERT INTO campaigns (id, name, protocol, spec_json, features_json, transform_json, epsilon_units, "
            "delta_units, status, principal, created_at) VALUES (1, 'c', 'ldp-avg', '{}', '[]', '{}', 1000, 0, "
            "'open', 'x', CURRENT_TIMESTAMP)"))
        connection.execute(text(
            "INSERT INTO campaign_rounds (campaign_id, round_index, group_name, epsilon_units, delta_units, status, "
            "state_json, report_count) VALUES (1, 0, 'all', 500, 0, 'closed', '{}', 4), "
            "(1, 1, 'all', 500, 0, 'open', '{}', 1)"))
        connection.execute(text(
            "INSERT INTO participants (id, namespace, pseudonym, created_at) VALUES (1, 'gateway:1', 'a', "
            "CURRENT_TIMESTAMP), (2, 'gateway:1', 'b', CURRENT_TIMESTAMP), (3, 'gateway:1', 'c', CURRENT_TIMESTAMP), "
            "(4, 'key', '2', CURRENT_TIMESTAMP)"))
        connection.execute(text(
            "INSERT INTO reports (campaign_id, round_index, participant_id, epsilon_units, delta_units, payload, "
            "submitted_by) VALUES (1, 0, 1, 500, 0, :p, 1), (1, 0, 2, 500, 0, :p, 1), (1, 0, 3, 500, 0, :p, 1), "
            "(1, 0, 4, 500, 0, :p, 2), (1, 1, 1, 500, 0, :p, 1)"), {"p": b"\x00" * 8})
    upgrade_to_head(engine)
    with engine.begin() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM gateway_scopes")).scalar_one() == 0
        usage = connection.execute(text("SELECT api_key_id, campaign_id, round_index, reports FROM gateway_usage "
                                        "ORDER BY round_index")).all()
        assert [tuple(row) for row in usage] == [(1, 1, 0, 3), (1, 1, 1, 1)]
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
    with engine.connect() as connection:
        assert not inspect(connection).has_table("gateway_scopes")
        assert not inspect(connection).has_table("gateway_usage")
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0009_records_where_each_dataset_lives(database_url: str) -> None:
    """Issue 21: a 0008 database's datasets gain ``engine`` = 'sql' (their data_<id> tables) and a NULL ``location``;
    a downgrade is refused while a dataset lives outside the database, then removes both columns; an upgrade gives
    the schema the models describe."""
    engine, config = _migrated_to(database_url, "0008_gateway_scopes")
    with engine.begin() as connection:
        _insert_dataset_and_entry(connection)
    upgrade_to_head(engine)
    with engine.begin() as connection:
        assert tuple(connection.execute(text("SELECT engine, location FROM datasets")).one()) == ("sql", None)
        connection.execute(text(
            "INSERT INTO datasets (id, name, domain_json, data_table, row_count, source, created_at, engine, location) "
            "VALUES (2, 'p', '{}', 'data_2', 0, '', CURRENT_TIMESTAMP, 'duckdb', '{\"file\": \"data_2-x.parquet\"}')"))
    with engine.begin() as connection, pytest.raises(RuntimeError, match="outside this database"):
        config.attributes["connection"] = connection
        command.downgrade(config, "0008_gateway_scopes")
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM datasets WHERE id = 2"))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0008_gateway_scopes")
    with engine.connect() as connection:
        assert {"engine", "location"}.isdisjoint(c["name"] for c in inspect(connection).get_columns("datasets"))
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0011_gives_keys_scoped_to_datasets_no_source(database_url: str) -> None:
    """Issue 27, finding 2: a 0010 database's steward key scoped to datasets attached through every source; after
    0011 it attaches through none (``[]``) and an unscoped key keeps every source (NULL); a downgrade to 0010 drops
    the column and an upgrade gives the schema the models describe."""
    engine, config = _migrated_to(database_url, "0010_attach_sources")
    with engine.begin() as connection:
        for key_id, role, scope in [(1, "steward", '["adult"]'), (2, "steward", None), (3, "analyst", None)]:
            connection.execute(text("INSERT INTO api_keys (id, name, role, key_hash, scope_json, created_at) VALUES "
                                    "(:i, 'k', :r, :h, :s, CURRENT_TIMESTAMP)"),
                               {"i": key_id, "r": role, "h": f"{key_id:064d}", "s": scope})
    upgrade_to_head(engine)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT id, source_scope_json FROM api_keys ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [(1, "[]"), (2, None), (3, None)]
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0010_attach_sources")
    with engine.connect() as connection:
        assert "source_scope_json" not in {c["name"] for c in inspect(connection).get_columns("api_keys")}
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0016_takes_every_password_out_and_links_datasets_to_their_source(database_url: str) -> None:
    """Issue 31, point 7: a 0015 database kept warehouse passwords in ``attach_sources.url`` and in SQL datasets'
    locations. After 0016 neither holds one; a source that lost its password ``needs_credentials``; a dataset names
    the source with its URL, or, attached directly, a removed source of its own that needs the password too; a
    dataset without a password is left as it was. A downgrade drops the columns and the removed sources."""
    engine, config = _migrated_to(database_url, "0015_ledger_chain")
    spec = {"columns": {"a": {"values": ["x", "y"]}}}
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO attach_sources (id, name, kind, url, principal, created_at) VALUES "
            "(1, 'wh', 'sql', 'postgresql://reader:pw-one@db/wh', 'cli', CURRENT_TIMESTAMP)"))
        for dataset_id, name, location in [
                (1, "through", {"url": "postgresql://reader:pw-one@db/wh", "table": "t", "schema": "public",
                                "spec": spec, "privacy_unit": "pid"}),
                (2, "direct", {"url": "postgresql://other:pw-two@db2/x", "table": "u", "schema": "public",
                               "spec": spec}),
                (3, "plain", {"url": "sqlite:////srv/x.db", "table": "v", "schema": "main", "spec": spec})]:
            connection.execute(text(
                "INSERT INTO datasets (id, name, domain_json, data_table, row_count, source, created_at, engine, "
                "location) VALUES (:i, :n, '{}', :t, 1, '', CURRENT_TIMESTAMP, 'sql', :l)"),
                {"i": dataset_id, "n": name, "t": f"data_{dataset_id}", "l": json.dumps(location)})
    upgrade_to_head(engine)
    with engine.connect() as connection:
        sources = connection.execute(text(
            "SELECT id, name, url, credentials, needs_credentials, removed_at IS NOT NULL FROM attach_sources "
            "ORDER BY id")).all()
        locations = {n: json.loads(loc) for n, loc in connection.execute(text("SELECT name, location FROM datasets"))}
    assert [tuple(s)[1:] for s in sources] == [
        ("wh", "postgresql+psycopg://reader@db/wh", None, True, False),
        ("direct (migrated)", "postgresql+psycopg://other@db2/x", None, True, True)]
    assert "pw-" not in json.dumps(locations) + repr(sources)
    assert list(locations["through"]) == ["url", "table", "schema", "spec", "source", "privacy_unit"]
    assert (locations["through"]["source"], locations["direct"]["source"]) == (sources[0].id, sources[1].id)
    assert locations["plain"] == {"url": "sqlite:////srv/x.db", "table": "v", "schema": "main", "spec": spec}
    assert add_source(engine, "later", sql="sqlite:////srv/y.db", check=False).id == 3  # ids go on after the new one
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0015_ledger_chain")
    with engine.connect() as connection:
        names = connection.execute(text("SELECT name FROM attach_sources ORDER BY id")).scalars().all()
        assert "credentials" not in {c["name"] for c in inspect(connection).get_columns("attach_sources")}
    assert names == ["wh", "later"]
    upgrade_to_head(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": _ignore_views, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()
