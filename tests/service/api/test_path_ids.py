"""Ids in paths are ASCII decimals up to 2^31-1 (the ids' INTEGER columns: 32 bits on PostgreSQL), else the path
names nothing: 404 (issue 27, finding 4). On main ``/campaigns/%D9%A3`` was campaign 3 (``str.isdigit`` takes the
Arabic-Indic three), ``/campaigns/%C2%B2`` and a 26-digit id were 500s (on PostgreSQL any id past 2^31-1), and
``/releases/3_0`` was release 30 (pydantic's lax integers). Ids in bodies past 2^31-1 are a 422 naming the field,
never an overflow in the database. Every path parameter of every operation of the OpenAPI document is tried, with a
valid body and a key the route admits, so only the path decides the answer."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from db.ids import MAX_ID
from service.access import auth
from service.api import create_app
from service.campaigns import campaigns
from service.errors import NotFound
from tests.support.apihelpers import World, bearer, snapshot
from tests.support.roles import CALLERS, ROLE_TABLE, role_request

#: Texts that name no row: digits that are not ASCII (they name campaign 1 or fail ``int()`` on main), what pydantic
#: reads as 1 (' 1', '+1', '1.0', '1_0' is 10), 0, and ids past the INTEGER columns (32 and 64 bits).
NOT_IDS = ["\u0661", "\u00b9", " 1", "+1", "1.0", "1_0", "0", "2147483648", "9223372036854775808",
           "99999999999999999999999999"]


def _operations() -> list[tuple[str, str, dict[str, object]]]:
    document = create_app(None).openapi()  # type: ignore[arg-type]  # the document touches no database
    return [(method.upper(), path, operation) for path, operations in document["paths"].items()
            for method, operation in operations.items()]


def _admitted(method: str, route: str) -> str:
    statuses = dict(zip(CALLERS, ROLE_TABLE[(method, route)], strict=True))
    return next(c for c in ("steward", "analyst", "participant", "gateway") if statuses[c] < 400)


def test_every_path_parameter_refuses_what_is_not_an_id(client: TestClient, world: World) -> None:
    """Each path parameter in turn gets each text of NOT_IDS (the other parameters and the body stay valid): 404,
    never a 5xx, never the row the text would have been read as; nothing is stored."""
    before = snapshot(world.engine)
    failures = []
    for method, route, operation in _operations():
        parameters = [p for p in operation.get("parameters", []) if p["in"] == "path"]  # type: ignore[union-attr]
        caller = _admitted(method, route)
        url, body = role_request(route, caller, world)
        valid = dict(zip(route.strip("/").split("/"), url.strip("/").split("/"), strict=True))
        for parameter in parameters:
            segment = "{" + parameter["name"] + "}"
            for text in NOT_IDS:
                if text == "0" and parameter["schema"].get("minimum") == 0:
                    continue  # round 0 exists
                parts = [quote(text, safe="") if part == segment else valid[part]
                         for part in route.strip("/").split("/")]
                response = client.request(method, "/" + "/".join(parts), json=body, headers=bearer(world.keys[caller]))
                if response.status_code != 404:
                    failures.append(f"{method} {route} with {parameter['name']}={text!r}: {response.status_code} "
                                    f"{response.text[:200]}")
    assert not failures, "\n".join(failures)
    assert snapshot(world.engine) == before


def test_a_campaign_is_named_or_numbered_in_ascii(engine: Engine) -> None:
    """The name-or-id lookup behind every campaign route: a name first, then ASCII decimals up to 2^31-1."""
    first = campaigns.create_campaign(engine, "first", "ldp-avg", "v", None, None, 1, 0, {"lower": 0, "upper": 1})
    named = campaigns.create_campaign(engine, str(first.id + 5), "ldp-avg", "v", None, None, 1, 0,
                                      {"lower": 0, "upper": 1})
    assert campaigns.get_campaign(engine, str(first.id)).name == "first"
    assert campaigns.get_campaign(engine, first.id).name == "first"
    assert campaigns.get_campaign(engine, f"00{first.id}").name == "first"
    assert campaigns.get_campaign(engine, named.name).id == named.id  # a name that looks like an id is a name
    for text in ["\u0661", "\u00b9", f" {first.id}", f"+{first.id}", "99999999999999999999999999", "-1", "0"]:
        with pytest.raises(NotFound, match="no campaign named"):
            campaigns.get_campaign(engine, text)
    with pytest.raises(NotFound):
        campaigns.close_campaign(engine, "99999999999999999999999999")


@pytest.mark.parametrize("field, value", [("key_id", 2**31), ("key_id", 10**30), ("gateway_id", 2**64)])
def test_an_id_in_a_body_past_the_id_range_is_422_naming_it(client: TestClient, world: World, field: str,
                                                        value: int) -> None:
    """``PUT /local-caps/participant`` with a 26-digit ``key_id`` was a 500 (SQLite's OverflowError; on PostgreSQL
    any id past 2^31-1: ``integer out of range``)."""
    body = {"epsilon": 1.0, "delta": 0.0, field: value, **({"pseudonym": "p"} if field == "gateway_id" else {})}
    before = snapshot(world.engine)
    response = client.put("/local-caps/participant", json=body, headers=bearer(world.keys["steward"]))
    assert (response.status_code, response.json()["error"]) == (422, "invalid_request"), response.text
    assert response.json()["fields"] == [f"body.{field}"]
    assert snapshot(world.engine) == before


def test_a_page_offset_past_64_bits_is_422_naming_it(client: TestClient, world: World) -> None:
    response = client.get(f"/public-tables/{world.public_table}/rows", params={"offset": 10**30},
                          headers=bearer(world.keys["analyst"]))
    assert (response.status_code, response.json()["fields"]) == (422, ["query.offset"]), response.text


def test_a_key_id_in_the_id_range_that_names_no_key_is_404(client: TestClient, world: World) -> None:
    """The largest id is a valid id, on every backend: it names no key, so the answer is the route's own 404."""
    info, _ = auth.create_key(world.engine, "participant", "p")
    response = client.put("/local-caps/participant", json={"epsilon": 1.0, "delta": 0.0, "key_id": MAX_ID},
                          headers=bearer(world.keys["steward"]))
    assert response.status_code == 404 and info.id != MAX_ID, response.text
    assert client.get(f"/releases/{MAX_ID}", headers=bearer(world.keys["analyst"])).status_code == 404
    assert client.get(f"/campaigns/{MAX_ID}", headers=bearer(world.keys["analyst"])).status_code == 404
