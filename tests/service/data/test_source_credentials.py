"""Secrets out of the tables (issue 31, point 7): a ``sql`` source keeps a reference to its password (an environment
variable or a file), never the password; datasets attached through it connect through the source; ``source update``
rotates the password or moves the database without touching a budget; ``source add`` connects first.

The warehouse is a database of the session's throwaway PostgreSQL whose role must give its password (a
``scram-sha-256`` line of ``pg_hba.conf`` for that role only), so that a wrong or missing password is really
refused; the service database is SQLite."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, inspect, select, text
from typer.testing import CliRunner

from db.engine import has_password, make_engine, with_password, without_password
from db.models import AttachSource
from service.cli import app
from service.data import datasets
from service.data.attach.sources import add_source, get_source, list_sources, remove_source, update_source
from service.data.credentials import CredentialReference, CredentialsUnavailable, SourceConnection
from service.data.oracle import TableCountOracle
from service.errors import Conflict, InvalidInput, NotFound
from service.tools.pgserver import PostgresServer
from tests.support.binned import SPEC, expected_counts, raw_frame, sql_table, write_spec

runner = CliRunner()
ON_SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


# the reference and the URL ------------------------------------------------------------------------------------------
def test_a_reference_reads_its_secret_at_each_call_and_says_which_variable_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WH_PASSWORD", raising=False)
    reference = CredentialReference.from_options("WH_PASSWORD", None)
    assert reference is not None and CredentialReference.parse(reference.stored()) == reference
    with pytest.raises(CredentialsUnavailable, match="environment variable WH_PASSWORD, which is not set") as caught:
        reference.secret("wh")
    assert caught.value.status == 503 and caught.value.code == "credentials_unavailable"
    monkeypatch.setenv("WH_PASSWORD", "p@ss:w/rd")
    assert reference.secret("wh") == "p@ss:w/rd"
    secret = tmp_path / "secret"
    secret.write_text("first\n")
    in_file = CredentialReference.from_options(None, secret)
    assert in_file is not None and in_file.stored() == f"file:{secret.resolve()}"
    assert in_file.secret("wh") == "first"
    secret.write_text("second\r\n")  # read again at each connection: a rotation needs no restart
    assert in_file.secret("wh") == "second"
    for bad in ["", "\n", "two\nlines\n", "x" * 5000]:
        secret.write_text(bad)
        with pytest.raises(CredentialsUnavailable, match="does not hold one password") as caught:
            in_file.secret("wh")
        assert str(secret) not in caught.value.message and (not bad.strip() or bad[:3] not in caught.value.message)
    secret.unlink()
    with pytest.raises(CredentialsUnavailable, match="cannot be read") as caught:
        in_file.secret("wh")
    assert str(tmp_path) not in caught.value.message
    for options, fragment in [(("1BAD", None), "not an environment variable's name"),
                              ((None, tmp_path / "missing"), "no such file"),
                              (("A", tmp_path), "at most one of")]:
        with pytest.raises(InvalidInput, match=fragment):
            CredentialReference.from_options(*options)


def test_a_password_is_found_and_taken_out_of_a_url_and_put_back_for_the_driver_only() -> None:
    for url, stripped in [("postgresql://reader:s3cret@db:5432/wh", "postgresql+psycopg://reader@db:5432/wh"),
                          ("postgresql+psycopg://reader@db/wh?password=s3cret&sslmode=require",
                           "postgresql+psycopg://reader@db/wh?sslmode=require")]:
        assert has_password(url) and without_password(url) == stripped and not has_password(stripped)
    assert not has_password("sqlite:////tmp/x.db") and not has_password("postgresql://reader@db/wh")
    given = with_password("postgresql://reader@db/wh", "p@ss:w/rd")
    assert given != "postgresql://reader@db/wh" and "p@ss" not in given  # quoted for the URL
    assert create_engine(given).url.password == "p@ss:w/rd"
    assert with_password("sqlite:////tmp/x.db", None) == "sqlite:////tmp/x.db"


@ON_SQLITE
def test_a_url_holding_a_password_is_refused_wherever_it_would_be_stored(engine: Engine, tmp_path: Path) -> None:
    url = "postgresql://reader:s3cret@127.0.0.1:9/wh"
    with pytest.raises(InvalidInput) as caught:
        add_source(engine, "wh", sql=url, check=False)
    assert caught.value.code == "password_in_url" and "--password-env" in caught.value.message
    assert "s3cret" not in caught.value.message and list_sources(engine) == []
    result = runner.invoke(app, ["dataset", "attach", "people", "--sql", url, "--table", "people", "--spec",
                                 str(write_spec(tmp_path)), "--json"])
    assert result.exit_code == 2 and json.loads(result.stdout)["error"] == "password_in_url"
    assert "s3cret" not in result.output and datasets.list_datasets(engine) == []


# the real thing: a warehouse that asks for its password ---------------------------------------------------------------
@dataclass
class Warehouse:
    """A database of the session's server, role ``role`` (password ``password``, scram) reading table ``people``
    (``frame``'s rows)."""

    server: PostgresServer
    database: str
    role: str
    password: str
    frame: object

    def url(self, database: str | None = None) -> str:
        """The role's URL, without its password."""
        return f"postgresql+psycopg://{self.role}@127.0.0.1:{self.server.port}/{database or self.database}"

    def admin(self, statement: str) -> None:
        admin = create_engine(self.server.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.execute(text(statement))
        finally:
            admin.dispose()

    def rotate(self, password: str) -> None:
        self.admin(f"ALTER ROLE {self.role} PASSWORD '{password}'")
        self.password = password


@pytest.fixture
def warehouse(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[Warehouse]:
    from tests.conftest import new_postgres_database

    role = f"reader_{uuid.uuid4().hex[:8]}"
    hba = postgres_server.directory / "data" / "pg_hba.conf"
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    url = new_postgres_database(request)
    database = url.rsplit("/", 1)[1]
    found = Warehouse(postgres_server, database, role, "first-secret", raw_frame(120, 5))
    found.admin(f"CREATE ROLE {role} LOGIN PASSWORD 'first-secret'")
    found.admin("SELECT pg_reload_conf()")
    owner = make_engine(url)
    sql_table(owner, found.frame, "people")
    with owner.begin() as connection:
        connection.execute(text(f"GRANT SELECT ON people TO {role}"))
    owner.dispose()
    yield found
    hba.write_text("".join(line for line in hba.read_text().splitlines(keepends=True) if role not in line))
    found.admin("SELECT pg_reload_conf()")


def _counts_match(engine: Engine, name: str, frame: object) -> None:
    with TableCountOracle(engine, datasets.get_dataset(engine, name)) as oracle:
        np.testing.assert_array_equal(oracle.counts(("age", "work")), expected_counts(frame, ("age", "work")))


def _stored_text(engine: Engine) -> str:
    """Every value of every table of the service database, as text (what a backup holds)."""
    found = []
    with engine.connect() as connection:
        for table in inspect(connection).get_table_names():
            found += [repr(tuple(row)) for row in connection.execute(text(f'SELECT * FROM "{table}"'))]
    return "\n".join(found)


def _cli(*args: str, status: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == status, result.output
    return json.loads(result.stdout)


@ON_SQLITE
@pytest.mark.postgres
def test_a_warehouse_password_lives_in_a_file_and_rotates_without_touching_the_budget(
        engine: Engine, warehouse: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "warehouse-password"
    secret.write_text("wrong\n")
    refused = _cli("source", "add", "wh", "--sql", warehouse.url(), "--password-file", str(secret), status=2)
    assert refused["error"] == "unreachable_database" and list_sources(engine) == []  # add connects first
    secret.write_text(warehouse.password + "\n")
    added = _cli("source", "add", "wh", "--sql", warehouse.url(), "--password-file", str(secret))
    assert added["password"] == f"file {secret.resolve()}"
    _cli("dataset", "attach", "people", "--source", "wh", "--table", "people", "--spec", str(write_spec(tmp_path)))
    _cli("budget", "set", "people", "--epsilon", "2")
    _counts_match(engine, "people", warehouse.frame)
    _cli("release", "marginals", "people", "--mechanism", "laplace", "--workload", "all-1way", "--epsilon", "0.5")
    stored = _stored_text(engine)
    assert warehouse.password not in stored and warehouse.url() in stored  # the reference and the URL, no secret

    warehouse.rotate("second-secret")  # the database's password changes: releases fail before any noise, refunded
    failed = runner.invoke(app, ["release", "marginals", "people", "--mechanism", "laplace", "--workload", "all-1way",
                                 "--epsilon", "0.5", "--json"])
    assert failed.exit_code != 0 and "second-secret" not in failed.output and "first-secret" not in failed.output
    assert _cli("budget", "show", "people")["epsilon_spent"] == pytest.approx(0.5)
    secret.write_text("second-secret\n")  # the file is read at each connection: no update, no restart
    _counts_match(engine, "people", warehouse.frame)

    warehouse.rotate("third-secret")
    monkeypatch.setenv("WH_PASSWORD", "third-secret")
    updated = _cli("source", "update", "wh", "--password-env", "WH_PASSWORD")
    assert (updated["password"], updated["datasets"]) == ("environment variable WH_PASSWORD", ["people"])
    _cli("release", "marginals", "people", "--mechanism", "laplace", "--workload", "all-1way", "--epsilon", "0.5")
    assert _cli("budget", "show", "people")["epsilon_spent"] == pytest.approx(1.0)
    assert _cli("ledger", "people", "--verify")["ok"] is True
    assert "third-secret" not in _stored_text(engine) and "second-secret" not in _stored_text(engine)
    monkeypatch.delenv("WH_PASSWORD")
    with pytest.raises(CredentialsUnavailable, match="WH_PASSWORD"):
        _counts_match(engine, "people", warehouse.frame)
    missing = _cli("release", "marginals", "people", "--mechanism", "laplace", "--workload", "all-1way", "--epsilon",
                   "0.5", status=2)
    assert missing["error"] == "credentials_unavailable" and "WH_PASSWORD" in missing["message"], missing
    assert _cli("budget", "show", "people")["epsilon_spent"] == pytest.approx(1.0)  # refunded: no noise was drawn


@ON_SQLITE
@pytest.mark.postgres
def test_update_moves_a_source_only_where_its_datasets_tables_are_and_changes_nothing_otherwise(
        engine: Engine, warehouse: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    from tests.conftest import new_postgres_database

    monkeypatch.setenv("WH_PASSWORD", warehouse.password)
    add_source(engine, "wh", sql=warehouse.url(), password_env="WH_PASSWORD")
    _cli("dataset", "attach", "people", "--source", "wh", "--table", "people", "--spec", str(write_spec(tmp_path)))
    empty = new_postgres_database(request).rsplit("/", 1)[1]  # the role may connect, no table people there
    warehouse.admin(f'GRANT CONNECT ON DATABASE "{empty}" TO {warehouse.role}')
    before = get_source(engine, "wh")
    refused = _cli("source", "update", "wh", "--sql", warehouse.url(empty), status=2)
    assert refused["error"] == "missing_table" and "people" in refused["message"]
    assert get_source(engine, "wh") == before
    moved = warehouse.url().replace("127.0.0.1", "localhost")  # the same database under another host name
    _cli("source", "update", "wh", "--sql", moved)
    assert get_source(engine, "wh").url == moved
    _counts_match(engine, "people", warehouse.frame)
    with pytest.raises(InvalidInput, match="password_in_url|holds a password") as caught:
        update_source(engine, "wh", sql=moved.replace("@", ":x@"))
    assert caught.value.code == "password_in_url"


@ON_SQLITE
def test_a_removed_source_still_serves_its_datasets_and_takes_no_new_attach(
        engine: Engine, tmp_path: Path) -> None:
    foreign = tmp_path / "warehouse.db"
    sql_table(make_engine(f"sqlite:///{foreign}"), raw_frame(40, 1), "people")
    add_source(engine, "wh", sql=f"sqlite:///{foreign}")
    add_source(engine, "unused", sql=f"sqlite:///{foreign}")
    from service.data.attach.through_source import attach_from_source

    attach_from_source(engine, "people", "wh", table="people", bins=SPEC)
    assert remove_source(engine, "unused").datasets == ()
    assert remove_source(engine, "wh").datasets == ("people",)
    assert [(s.name, s.removed, s.datasets) for s in list_sources(engine)] == [("wh", True, ("people",))]
    with pytest.raises(NotFound):
        get_source(engine, "wh")
    with pytest.raises(NotFound):
        attach_from_source(engine, "again", "wh", table="people", bins=SPEC)
    with pytest.raises(Conflict, match="removed source still serving datasets"):
        add_source(engine, "wh", sql=f"sqlite:///{foreign}")
    with pytest.raises(NotFound):
        remove_source(engine, "wh")
    _counts_match(engine, "people", raw_frame(40, 1))
    update_source(engine, "wh", no_password=True)  # a removed source is still the operator's to update
    with engine.connect() as connection:
        assert connection.execute(select(AttachSource.name)).scalars().all() == ["wh"]


@ON_SQLITE
def test_a_source_that_needs_its_password_named_fails_clearly_and_readiness_says_so(
        engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from service.api.app import create_app

    connection = SourceConnection("wh", "postgresql+psycopg://reader@127.0.0.1:9/wh", None, needs_credentials=True)
    with pytest.raises(CredentialsUnavailable, match="source update wh --password-env"):
        connection.connect_url()
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    add_source(engine, "wh", sql="postgresql+psycopg://reader@127.0.0.1:9/wh", password_env="NOT_SET_ANYWHERE",
               check=False)
    with pytest.raises(InvalidInput, match="cannot be read by this process"):
        update_source(engine, "wh", sql="postgresql+psycopg://reader@127.0.0.1:9/other")
    checks = {c["name"]: c for c in TestClient(create_app(engine)).get("/health/ready").json()["checks"]}
    assert not checks["source:wh"]["ok"] and "password cannot be read" in checks["source:wh"]["detail"]
