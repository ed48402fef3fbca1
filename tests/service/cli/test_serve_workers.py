"""``marginalia serve --workers N`` (issue 22): the CLI passes the count through, and uvicorn is configured with that
many worker processes, each building its app from the environment the parent set."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from service.api import server
from service.api.limits import DEFAULT_MAX_BODY_BYTES
from service.cli import app


@pytest.fixture
def served(monkeypatch) -> list[dict[str, object]]:  # noqa: ANN001
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(server, "serve", lambda url, host, port, **kwargs: calls.append(
        {"url": url, "host": host, "port": port, **kwargs}))
    return calls


def test_serve_accepts_workers_and_defaults_to_one_per_core(served, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("MARGINALIA_DATABASE_URL", "sqlite:////tmp/never-opened.db")
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--workers", "3", "--port", "8123"]).exit_code == 0
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert [c["workers"] for c in served] == [3, server.default_workers()]
    assert served[0]["port"] == 8123 and served[0]["url"] == "sqlite:////tmp/never-opened.db"
    refused = runner.invoke(app, ["serve", "--workers", "0"])
    assert refused.exit_code != 0 and "workers" in refused.output and len(served) == 2


def test_uvicorn_runs_that_many_workers_each_from_the_environment() -> None:
    url = "sqlite:////tmp/some.db"
    one = server.uvicorn_config(url, "127.0.0.1", 8000)
    assert one["workers"] == 1 and "app" not in one  # the app built in process (a test may patch it)
    four = server.uvicorn_config(url, "127.0.0.1", 8000, workers=4, max_body_bytes=1234)
    assert four["workers"] == 4 and four["factory"] is True
    assert four["app"] == "service.api.server:app_from_environment"
    environment = dict(four["env"])
    secret = environment.pop(server.SECRET_ENV)  # every worker signs the console's sessions with the same secret
    assert environment == {"MARGINALIA_DATABASE_URL": url, server.MAX_BODY_ENV: "1234"} and len(secret) >= 32
    for wrong in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="workers"):
            server.uvicorn_config(url, "127.0.0.1", 8000, workers=wrong)


def test_a_workers_app_serves_the_database_the_parent_named(monkeypatch, tmp_path) -> None:  # noqa: ANN001
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    url = f"sqlite:///{tmp_path / 'w.db'}"
    upgrade_to_head(make_engine(url))
    monkeypatch.setenv("MARGINALIA_DATABASE_URL", url)
    monkeypatch.delenv(server.MAX_BODY_ENV, raising=False)
    built = server.app_from_environment()
    assert str(built.state.engine.url) == url and built.state.max_body_bytes == DEFAULT_MAX_BODY_BYTES
    monkeypatch.setenv(server.MAX_BODY_ENV, "4096")
    assert server.app_from_environment().state.max_body_bytes == 4096
