"""``GET /metrics`` (issue 31, point 6): request latency by route, releases and refunds by mechanism, jobs by state,
engine query time, spent budget per dataset; nothing derived from data; every worker's counts in one scrape."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.accounting import accountant
from service.api import create_app
from service.api.server import background_server, serve_command
from tests.support.apihelpers import bearer, build_world
from tests.support.backends import ON_SQLITE


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: dict, name: str, **labels: str) -> float:  # noqa: ANN001
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_what_the_service_did_and_show_nothing_of_the_data(tmp_path: Path, data_dir: Path) -> None:
    world = build_world(f"sqlite:///{tmp_path / 'metrics.db'}", data_dir)
    client = TestClient(create_app(world.engine))
    auditor = bearer(world.keys["auditor"])
    before = _samples(client.get("/metrics", headers=auditor).text)
    made = client.post("/datasets/titanic/releases/marginals", headers=bearer(world.keys["steward"]),
                       json={"mechanism": "laplace", "workload": [["Sex", "Survived"]], "epsilon": 0.25})
    assert made.status_code == 201
    charge = accountant.ledger_rows(world.engine, "titanic")[-1]
    accountant.refund(world.engine, int(charge["entry_id"]), "a test refund")
    client.post(f"/releases/{made.json()['release_id']}/marginal", headers=bearer(world.keys["analyst"]),
                         json={"attributes": ["Sex", "Survived"]}).json()

    scraped = client.get("/metrics", headers=auditor)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    after = _samples(scraped.text)
    route = "/datasets/{name}/releases/marginals"
    assert _value(after, "marginalia_request_seconds_count", method="POST", route=route, status="201") == (
        _value(before, "marginalia_request_seconds_count", method="POST", route=route, status="201") + 1)
    assert _value(after, "marginalia_releases_total", mechanism="laplace", status="complete") == (
        _value(before, "marginalia_releases_total", mechanism="laplace", status="complete") + 1)
    assert _value(after, "marginalia_refunds_total", mechanism="laplace") == (
        _value(before, "marginalia_refunds_total", mechanism="laplace") + 1)
    status = accountant.budget_status(world.engine, "titanic")
    assert _value(after, "marginalia_budget_epsilon_spent", dataset="titanic") == pytest.approx(
        float(status.epsilon_spent))
    assert _value(after, "marginalia_budget_epsilon_total", dataset="titanic") == 5.0
    assert _value(after, "marginalia_jobs", state="done") >= 1
    assert _value(after, "marginalia_engine_seconds_count", engine="duckdb", operation="count_marginals") >= 1
    # what a metric may be labelled by: nothing that holds a value or a count of a table
    families = text_string_to_metric_families(scraped.text)
    labels = {key for family in families for sample in family.samples for key in sample.labels}
    assert labels <= {"method", "route", "status", "engine", "operation", "mechanism", "state", "dataset", "le"}
    assert world.keys["auditor"] not in scraped.text
    world.engine.dispose()


@pytest.mark.slow  # a real `marginalia serve --workers 2`
@ON_SQLITE
def test_one_scrape_adds_up_every_workers_requests(engine, tmp_path: Path) -> None:  # noqa: ANN001
    from service.access import auth

    _, key = auth.create_key(engine, "auditor", "metrics")
    with background_server(os.environ["MARGINALIA_DATABASE_URL"], tmp_path / "server.log",
                           lambda port: serve_command(port, 2)) as server:
        for _ in range(12):  # fresh connections, spread over both workers by the kernel
            assert httpx.get(server.url + "/datasets", headers=bearer(key), timeout=30).status_code == 200
        scrapes = [_samples(httpx.get(server.url + "/metrics", headers=bearer(key), timeout=30).text)
                   for _ in range(4)]
    for samples in scrapes:  # whichever worker answered, it counted all twelve
        assert _value(samples, "marginalia_request_seconds_count", method="GET", route="/datasets",
                      status="200") == 12
