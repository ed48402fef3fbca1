"""Every route, called by every kind of caller, answers with the status of one table: the same
table that docs/api.md (and the README) show. A route added without a row here fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from tests.support.apihelpers import World, bearer
from tests.support.paths import REPO
from tests.support.roles import CALLERS, PROTOCOL_CAMPAIGNS, ROLE_TABLE, role_request

DOCS_WITH_TABLE = [REPO / "docs" / "api.md", REPO / "README.md"]

HEADINGS = ("steward", "steward scoped to another dataset", "analyst", "auditor", "participant", "gateway", "no key",
            "revoked key")

ERROR_CODES = {401: "unauthorized", 403: "forbidden"}


def render_table() -> str:
    """The table as Markdown, exactly as docs/api.md must contain it."""
    lines = ["| route | " + " | ".join(HEADINGS) + " |", "|---|" + "---|" * len(HEADINGS)]
    for (method, route), statuses in ROLE_TABLE.items():
        lines.append(f"| `{method} {route}` | " + " | ".join(str(s) for s in statuses) + " |")
    return "\n".join(lines)


def test_table_covers_every_route(world: World) -> None:
    """Every operation of the app (its OpenAPI schema lists them all; no route is hidden) has a row."""
    paths = create_app(world.engine).openapi()["paths"]
    served = {(method.upper(), path) for path, operations in paths.items() for method in operations}
    assert served == set(ROLE_TABLE)


def test_every_route_with_every_caller(world: World) -> None:
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    keys = {**world.keys, "no_key": None}
    mismatches = []
    for (method, route), expected in ROLE_TABLE.items():
        for caller, status in zip(CALLERS, expected, strict=True):
            url, body = role_request(route, caller, world)
            response = client.request(method, url, json=body, headers=bearer(keys[caller]))
            got = response.status_code
            if got != status:
                mismatches.append(f"{method} {route} as {caller}: expected {status}, got {got}: {response.text[:300]}")
            elif status in ERROR_CODES:
                assert response.json()["error"] == ERROR_CODES[status], response.text
            if status == 401:
                assert response.headers["www-authenticate"] == "Bearer"
    assert not mismatches, "\n".join(mismatches)


def test_every_protocol_with_every_caller(world: World) -> None:
    """A campaign of every protocol is created by a steward only: the ``POST /campaigns`` row of the table holds
    whatever the protocol (a valid body, so only the caller decides the status)."""
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    keys = {**world.keys, "no_key": None}
    mismatches = []
    for protocol, body in PROTOCOL_CAMPAIGNS.items():
        for caller, status in zip(CALLERS, ROLE_TABLE[("POST", "/campaigns")], strict=True):
            request = {**body, "name": f"{protocol} by {caller}", "protocol": protocol}
            if "public" in body:
                request["public"] = world.public_table
            response = client.post("/campaigns", json=request, headers=bearer(keys[caller]))
            if response.status_code != status:
                mismatches.append(f"{protocol} as {caller}: expected {status}, got {response.status_code}: "
                                  f"{response.text[:300]}")
    assert not mismatches, "\n".join(mismatches)


def test_participants_reach_only_their_campaign_routes(world: World) -> None:
    """A participant's or a gateway's key is refused on every route but a campaign's state and its report route
    (and the health check): no dataset, release, ledger, public table, aggregate or estimate."""
    for caller in ("participant", "gateway"):
        index = CALLERS.index(caller)
        allowed = {route for route, statuses in ROLE_TABLE.items() if statuses[index] < 400}
        assert allowed == {("GET", "/health"), ("GET", "/health/ready"), ("GET", "/campaigns/{name}/state"),
                           ("POST", "/campaigns/{name}/reports")}, caller


def test_scoped_steward_sees_only_its_datasets(world: World) -> None:
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    scoped = bearer(world.keys["scoped_steward"])
    assert client.get("/datasets", headers=scoped).json() == []
    assert client.get("/releases", headers=scoped).json() == []
    assert client.get("/releases", headers=scoped, params={"dataset": "titanic"}).status_code == 403


@pytest.mark.parametrize("document", DOCS_WITH_TABLE, ids=lambda p: p.name)
def test_documents_show_the_same_table(document: Path) -> None:
    assert render_table() in document.read_text(), f"{document} must contain the roles table:\n{render_table()}"
