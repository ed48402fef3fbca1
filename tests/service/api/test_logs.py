"""The server's logs (issue 31, point 5): timestamped, structured on request, an access log without keys or bodies,
one line per charge and per refund, levels from one setting (service/observability/logs.py)."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.accounting import accountant
from service.api import create_app
from service.api.server import background_server, serve_command
from service.observability import logs
from tests.support.apihelpers import bearer, build_world
from tests.support.backends import ON_SQLITE


@pytest.fixture
def json_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """Every ``marginalia.*`` record of the test as JSON lines, in this process."""
    monkeypatch.setenv(logs.FORMAT_VARIABLE, "json")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("marginalia")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(previous)


def _records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_access_and_ledger_lines_say_who_did_what_and_nothing_private(json_lines, tmp_path: Path,  # noqa: ANN001
                                                                       data_dir: Path) -> None:
    world = build_world(f"sqlite:///{tmp_path / 'logs.db'}", data_dir)
    client = TestClient(create_app(world.engine))
    steward = world.keys["steward"]
    json_lines.truncate(0)
    json_lines.seek(0)
    made = client.post("/datasets/titanic/releases/marginals", headers=bearer(steward),
                       json={"mechanism": "laplace", "workload": [["Sex", "Survived"]], "epsilon": 0.25})
    assert made.status_code == 201, made.text
    too_much = client.post("/datasets/titanic/releases/marginals", headers=bearer(steward),
                           json={"mechanism": "laplace", "workload": [["Sex"]], "epsilon": 100})
    assert too_much.status_code == 409  # refused: no charge, so no ledger line
    answer = client.post(f"/releases/{made.json()['release_id']}/marginal", headers=bearer(world.keys["analyst"]),
                         json={"attributes": ["Sex", "Survived"]})
    assert answer.status_code == 200
    client.get("/datasets/titanic/ledger?secret-looking=query", headers=bearer(world.keys["auditor"]))
    client.get("/no/such/route/Jane-Doe")

    records = _records(json_lines)
    assert all({"time", "level", "logger", "message"} <= set(r) and str(r["time"]).endswith("Z") for r in records)
    access = [r for r in records if r["logger"] == "marginalia.access"]
    assert [(r["method"], r["route"], r["status"]) for r in access] == [
        ("POST", "/datasets/{name}/releases/marginals", 201), ("POST", "/datasets/{name}/releases/marginals", 409),
        ("POST", "/releases/{release_id}/marginal", 200), ("GET", "/datasets/{name}/ledger", 200),
        ("GET", "(no route)", 404)]
    assert [r["role"] for r in access] == ["steward", "steward", "analyst", "auditor", None]
    assert access[0]["key_id"] == world.key_ids["steward"] and all(r["ms"] >= 0 for r in access)

    charges = [r for r in records if r["logger"] == "marginalia.ledger"]
    row = accountant.ledger_rows(world.engine, "titanic")[-1]
    assert len(charges) == 1 and charges[0]["kind"] == "charge" and charges[0]["dataset"] == "titanic"
    assert charges[0]["mechanism"] == "laplace" and charges[0]["epsilon"] == 0.25 and charges[0]["rho"] == 0
    assert charges[0]["release_id"] == made.json()["release_id"] and charges[0]["principal"] == row["principal"]

    refund = accountant.refund(world.engine, int(charges[0]["entry"]), "a test refund")
    refunds = [r for r in _records(json_lines) if r["logger"] == "marginalia.ledger" and r["kind"] == "refund"]
    assert [(r["entry"], r["epsilon"]) for r in refunds] == [(refund.id, -0.25)]

    text = json_lines.getvalue()
    counts = answer.json()["counts"]
    for secret in (steward, world.keys["analyst"], world.keys["auditor"], "secret-looking", "Jane-Doe",
                   json.dumps(counts)):
        assert secret not in text
    world.engine.dispose()


def test_the_level_and_format_come_from_one_setting_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "WARNING")
    monkeypatch.setenv(logs.FORMAT_VARIABLE, "json")
    config = logs.logging_config()
    assert config["root"]["level"] == "WARNING" and config["loggers"]["uvicorn"]["level"] == "WARNING"
    assert config["formatters"]["marginalia"]["()"].endswith("JsonFormatter")
    assert logs.logging_config("debug")["root"]["level"] == "DEBUG"  # the command's option wins
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "loud")
    with pytest.raises(ValueError, match="MARGINALIA_LOG_LEVEL"):
        logs.logging_config()
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "info")
    monkeypatch.setenv(logs.FORMAT_VARIABLE, "yaml")
    with pytest.raises(ValueError, match="MARGINALIA_LOG_FORMAT"):
        logs.logging_config()


def test_text_lines_carry_a_utc_timestamp_the_logger_and_the_fields() -> None:
    record = logging.LogRecord("marginalia.ledger", logging.INFO, __file__, 1, "charge 3", None, None)
    record.created, record.msecs = 1_764_650_401.5, 500.0
    setattr(record, logs.FIELDS, {"dataset": "my table", "epsilon": 0.5})
    assert logs.UtcFormatter().format(record) == (
        '2025-12-02T04:40:01.500Z INFO marginalia.ledger charge 3 dataset="my table" epsilon=0.5')


@pytest.mark.slow  # a real `marginalia serve`
@ON_SQLITE
def test_a_real_server_logs_json_lines_only(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Every line the server process and its two workers write (uvicorn's start-up and shutdown included) is one JSON
    object."""
    from service.access import auth

    _, key = auth.create_key(engine, "steward", "logs")
    monkeypatch.setenv(logs.FORMAT_VARIABLE, "json")
    log = tmp_path / "server.log"
    with background_server(os.environ["MARGINALIA_DATABASE_URL"], log,
                           lambda port: serve_command(port, 2, log_level="info")) as server:
        assert httpx.get(server.url + "/datasets", headers=bearer(key), timeout=30).status_code == 200
    lines = []
    for line in filter(str.strip, log.read_text().splitlines()):
        try:
            lines.append(json.loads(line))
        except ValueError:
            pytest.fail(f"a line of the server's log is not JSON: {line!r}")
    assert any(r["logger"] == "marginalia.access" and r["route"] == "/datasets" for r in lines)
    assert any(r["logger"].startswith("uvicorn") for r in lines)
    assert key not in log.read_text()
