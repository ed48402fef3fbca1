"""Liveness and readiness apart, and a service database that is down is 503 ``database_unavailable`` on every route
(issue 31, point 4: ``/health`` answered 200 with PostgreSQL down while the other routes answered 500).

The database-down test stops a real PostgreSQL server of its own (the session's is shared) between two requests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from db.engine import make_engine
from db.migrate import head_revision, upgrade_to_head
from service.access import auth
from service.api import create_app
from service.data.attach.sources import add_source
from service.tools.pgserver import free_port
from tests.conftest import start_test_postgres
from tests.support.apihelpers import bearer
from tests.support.backends import ON_SQLITE


def _parameters(path: str) -> str:
    """A concrete URL for an OpenAPI path: every ``{parameter}`` replaced by a value of its usual type."""
    return re.sub(r"\{[^}]+\}", lambda m: "1" if m.group(0).endswith("id}") else "x", path)


@pytest.fixture
def own_postgres():  # noqa: ANN201
    """A PostgreSQL server this test may stop (the session's serves every other test)."""
    server = start_test_postgres()
    yield server
    server.stop()


@pytest.mark.slow  # starts and stops a PostgreSQL server of its own
def test_a_database_that_goes_down_is_503_on_every_route_and_not_ready(own_postgres) -> None:  # noqa: ANN001
    engine = make_engine(own_postgres.url("postgres"))
    upgrade_to_head(engine)
    _, steward = auth.create_key(engine, "steward", "readiness test")
    client = TestClient(create_app(engine))
    assert client.get("/datasets", headers=bearer(steward)).status_code == 200
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json() == {
        "status": "ready", "checks": [{"name": "database", "ok": True, "detail": ""},
                                      {"name": "schema", "ok": True, "detail": ""}]}

    own_postgres.stop()
    assert client.get("/health").status_code == 200  # alive: a restart would not bring the database back
    ready = client.get("/health/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "not_ready"
    assert [c["name"] for c in ready.json()["checks"] if not c["ok"]] == ["database", "schema"]
    routes = [(method.upper(), path) for path, operations in client.app.openapi()["paths"].items()
              for method in operations if not path.startswith("/health")]
    assert len(routes) > 30
    for method, path in routes:
        answer = client.request(method, _parameters(path), headers=bearer(steward), json={})
        assert answer.status_code == 503, (method, path, answer.status_code, answer.text)
        assert answer.json()["error"] == "database_unavailable" and answer.headers["Retry-After"] == "5"
        shown = answer.text + ready.text
        assert str(own_postgres.port) not in shown and "127.0.0.1" not in shown and "psycopg" not in shown
    engine.dispose()


@ON_SQLITE
def test_readiness_names_each_attach_source_that_is_down(engine, tmp_path: Path,  # noqa: ANN001
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A source that is down leaves the server ready for everything else: ``degraded``, the source named, its
    address never shown."""
    folder = tmp_path / "lake"
    folder.mkdir()
    add_source(engine, "lake", parquet_root=folder)
    port = free_port()  # nothing listens there
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "s3cret")
    add_source(engine, "warehouse", sql=f"postgresql+psycopg://reader@127.0.0.1:{port}/sales",
               password_env="WAREHOUSE_PASSWORD", check=False)
    client = TestClient(create_app(engine))
    body = client.get("/health/ready").json()
    assert body["status"] == "degraded"
    checks = {c["name"]: c for c in body["checks"]}
    assert checks["database"]["ok"] and checks["schema"]["ok"] and checks["source:lake"]["ok"]
    assert not checks["source:warehouse"]["ok"] and "does not accept a connection" in checks["source:warehouse"][
        "detail"]
    folder.rmdir()
    body = client.get("/health/ready")
    assert body.status_code == 200 and not {c["name"]: c for c in body.json()["checks"]}["source:lake"]["ok"]
    assert str(port) not in body.text and "s3cret" not in body.text and "reader" not in body.text


@ON_SQLITE
def test_a_schema_behind_or_ahead_of_the_code_is_not_ready(engine) -> None:  # noqa: ANN001
    client = TestClient(create_app(engine))
    for revision in ("0011_source_scopes", "0099_from_a_newer_release"):
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})
        answer = client.get("/health/ready")
        schema = {c["name"]: c for c in answer.json()["checks"]}["schema"]
        assert answer.status_code == 503 and not schema["ok"] and revision in schema["detail"]
        assert head_revision() in schema["detail"]
