"""Issue 18, careless input over HTTP: numbers are JSON numbers on every route (``true`` was charged as epsilon 1,
``"0.01"`` as 0.01), an epsilon below the ledger's unit is refused before any noise (it was a 500 after noise, its
charge standing), the cost a response shows is the cost the ledger charged, huge counts and public values are
refused naming the option or column, and upload errors read as sentences."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.accounting.accountant import ledger_rows
from service.releases import answers
from tests.support.apihelpers import World, bearer

TINY = {"csv": "a,b\n0,1\n1,0\n2,1\n1,1\n", "domain": {"a": 3, "b": 2}}


def steward(world: World) -> dict[str, str]:
    return bearer(world.keys["steward"])


def tiny_dataset(client: TestClient, world: World, budget: float = 1.0) -> str:
    name = f"tiny-{uuid.uuid4().hex[:8]}"
    assert client.post("/datasets", headers=steward(world), json={"name": name, **TINY}).status_code == 201
    assert client.put(f"/datasets/{name}/budget", headers=steward(world), json={"epsilon": budget}).status_code == 200
    return name


def charges(world: World, dataset: str) -> list[dict[str, object]]:
    return [row for row in ledger_rows(world.engine, dataset) if row["entry"] == "charge"]


# ------------------------------------------------------------------------------------- epsilon and the ledger's unit
@pytest.mark.parametrize("epsilon", [5e-324, 1e-16, 1e-13])
def test_laplace_below_the_ledger_unit_is_refused_before_anything_is_charged(
        client: TestClient, world: World, epsilon: float) -> None:
    """5e-324 was a 500 after the noise was drawn (its charge standing); 1e-16 and 1e-13 were charged 1e-12 while
    the response said 1e-16 and 1e-13."""
    name = tiny_dataset(client, world)
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "workload": [["a"]], "epsilon": epsilon})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_parameter"
    assert "epsilon" in body["message"] and "below the accountant's resolution of 1e-12" in body["message"]
    assert charges(world, name) == [] and answers.list_releases(world.engine, name) == []


def test_a_laplace_scale_too_large_to_store_is_refused_before_anything_is_charged(
        client: TestClient, world: World) -> None:
    """The smallest epsilon split by weights 1e6 apart gives marginal a the share 1e-18: noise of scale 1e18, whose
    draws overflow 64 bits (with 5,000 such marginals, always): a 500 after the noise, its charge standing."""
    name = tiny_dataset(client, world)
    workload = [{"attributes": ["a"], "weight": 1}, {"attributes": ["b"], "weight": 1e6}]
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "workload": workload, "epsilon": 1e-12})
    assert response.status_code == 422, response.text
    assert response.json()["message"].startswith("marginal a gets epsilon 1e-18"), response.text
    assert charges(world, name) == [] and answers.list_releases(world.engine, name) == []


@pytest.mark.parametrize("epsilon, charged", [(1.5e-12, 1e-12), (0.123456789012345, 0.123456789012)])
def test_the_cost_a_release_shows_is_the_cost_the_ledger_charged(
        client: TestClient, world: World, epsilon: float, charged: float) -> None:
    """An epsilon off the ledger's grid is rounded DOWN to it (more noise, never less) and that one number is what
    the mechanism is calibrated to, what the ledger charges and what the response shows."""
    name = tiny_dataset(client, world)
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "workload": [["a"]], "epsilon": epsilon})
    assert response.status_code == 201, response.text
    (row,) = charges(world, name)
    assert response.json()["cost"]["epsilon"] == row["epsilon"] == charged
    assert response.json()["budget"]["epsilon_spent_after"] == row["epsilon_spent_after"] == charged


# -------------------------------------------------------------------------------------- JSON numbers on every route
def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _leaves(schema: dict[str, Any], components: dict[str, Any],
            path: tuple[object, ...] = ()) -> Iterator[tuple[tuple[object, ...], str]]:
    """``(path, type)`` of every number, integer and boolean a request body's schema holds, through references,
    unions, objects, maps (step ``"*"``) and arrays (step ``0``)."""
    schema = _resolve(schema, components)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            yield from _leaves(branch, components, path)
    kind = schema.get("type")
    if kind in ("number", "integer", "boolean"):
        yield path, kind
    for name, sub in schema.get("properties", {}).items():
        yield from _leaves(sub, components, (*path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _leaves(schema["additionalProperties"], components, (*path, "*"))
    if kind == "array" and isinstance(schema.get("items"), dict):
        yield from _leaves(schema["items"], components, (*path, 0))


def _body(path: tuple[object, ...], value: object) -> object:
    for step in reversed(path):
        value = [value] if step == 0 else {("a" if step == "*" else step): value}
    return value


def _named(fields: list[str], path: tuple[object, ...]) -> list[str]:
    """The error fields that name ``path``: its property names in order, among the field's dotted parts."""
    wanted = [step for step in path if isinstance(step, str) and step != "*"]
    named = []
    for field in fields:
        parts = iter(field.split("."))
        if all(any(part == step for part in parts) for step in wanted):
            named.append(field)
    return named


def _request_bodies(client: TestClient) -> Iterator[tuple[str, str, dict[str, Any]]]:
    spec = client.get("/openapi.json").json()
    for route, methods in spec["paths"].items():
        for method, operation in methods.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                yield method, route, content["application/json"]["schema"]


WRONG = {"number": [True, "0.01"], "integer": [True, "3"], "boolean": ["true", 1]}


def test_every_number_of_every_request_body_is_a_json_number(client: TestClient, world: World) -> None:
    """Walks the OpenAPI schema: each number, integer and flag of each route's body, sent as a boolean or a string
    (a number for a flag), is a 422 naming that field. Pydantic's lax default read them as 1, 0.01, 3 and true."""
    components = client.get("/openapi.json").json()["components"]["schemas"]
    checked = set()
    campaign = _campaign({})  # the reports route loads its campaign (and the caller's scope) before the body
    assert client.post("/campaigns", headers=steward(world), json=campaign).status_code == 201
    for method, route, schema in _request_bodies(client):
        name = campaign["name"] if route.startswith("/campaigns/{name}") else "anything"
        url = route.replace("{name}", name).replace("{index}", "0").replace("{release_id}", "1")
        role = "participant" if route.endswith("/reports") else "steward"
        for path, kind in _leaves(schema, components):
            for value in WRONG[kind]:
                response = client.request(method.upper(), url, headers=bearer(world.keys[role]),
                                          json=_body(path, value))
                label = f"{method.upper()} {route} {path} = {value!r}"
                assert response.status_code == 422, (label, response.text)
                body = response.json()
                if "fields" in body:  # the schema's answer: every offending field, each with its message
                    named = _named(body["fields"], path)
                    assert any(f"{field}: Input should be a valid" in body["message"] for field in named), (label,
                                                                                                             body)
                else:  # the reports route parses its body itself and names the first offending field
                    assert body["message"].startswith(".".join(str(s) for s in path)), (label, body)
                checked.add((route, path))
    routes = {route for route, _ in checked}
    assert {"/datasets/{name}/releases/marginals", "/datasets/{name}/budget", "/campaigns", "/datasets",
            "/local-caps/default", "/campaigns/{name}/reports", "/datasets/attach"} <= routes, routes
    assert ("/campaigns", ("epsilon",)) in checked and ("/datasets/{name}/releases/marginals", ("epsilon",)) in checked


@pytest.mark.parametrize("epsilon", [True, "0.01"])
def test_a_boolean_or_a_string_epsilon_is_refused_and_nothing_is_charged(
        client: TestClient, world: World, epsilon: object) -> None:
    name = tiny_dataset(client, world)
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "workload": [["a"]], "epsilon": epsilon})
    assert response.status_code == 422 and response.json()["fields"] == ["body.epsilon"], response.text
    assert charges(world, name) == []
    campaign = {"name": f"c-{uuid.uuid4().hex[:8]}", "protocol": "ldp-avg", "features": ["v"], "epsilon": epsilon,
                "options": {"lower": 0, "upper": 1}}
    response = client.post("/campaigns", headers=steward(world), json=campaign)
    assert response.status_code == 422 and response.json()["fields"] == ["body.epsilon"], response.text
    assert client.get(f"/campaigns/{campaign['name']}", headers=steward(world)).status_code == 404


def _campaign(options: dict[str, object]) -> dict[str, object]:
    return {"name": f"c-{uuid.uuid4().hex[:8]}", "protocol": "ldp-avg", "features": ["v"], "epsilon": 1,
            "options": {"lower": 0, "upper": 1, **options}}


@pytest.mark.parametrize("options, fragment", [
    ({"participants": "1000"}, "option participants must be a positive integer, got the string '1000'"),
    ({"participants": True}, "option participants must be a positive integer, got True"),
    ({"upper": "1"}, "option upper must be a number, got the string '1'"),
    ({"participants": 1e30}, "option participants must be a positive integer, got 1e+30"),
    ({"participants": 10**30}, "option participants must be at most 2^53"),
])
def test_campaign_options_are_json_values_and_counts_are_bounded(
        client: TestClient, world: World, options: dict[str, object], fragment: str) -> None:
    """``participants = 10**30`` was a 500 (OverflowError in the database driver); strings were read as numbers."""
    body = _campaign(options)
    response = client.post("/campaigns", headers=steward(world), json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_parameter" and fragment in response.json()["message"]
    assert client.get(f"/campaigns/{body['name']}", headers=steward(world)).status_code == 404


def test_json_integers_still_fill_number_fields(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=2)
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "workload": [{"attributes": ["a"], "weight": 2}],
                                 "epsilon": 1})
    assert response.status_code == 201 and response.json()["cost"]["epsilon"] == 1.0
    response = client.post("/campaigns", headers=steward(world), json=_campaign({"participants": 10}))
    assert response.status_code == 201, response.text


# ------------------------------------------------------------------------------------------- public values and uploads
def test_a_public_table_too_large_for_its_statistics_is_refused_naming_the_column(
        client: TestClient, world: World) -> None:
    name = f"p-{uuid.uuid4().hex[:8]}"
    csv = "small,big\n1,2\n2,1e308\n3,4\n"
    response = client.post("/public-tables", headers=steward(world), json={"name": name, "csv": csv})
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert "column 'big' holds 1e+308 (data row 2)" in message and "too large" in message
    assert client.get(f"/public-tables/{name}", headers=steward(world)).status_code == 404


def test_upload_errors_name_the_uploaded_files_in_plain_words(client: TestClient, world: World) -> None:
    """The server's temporary paths are replaced by what the caller sent; that used to read "columns do not match
    the domain the uploaded domain" and "domain file the domain names column ..."."""
    response = client.post("/datasets", headers=steward(world),
                           json={"name": f"d-{uuid.uuid4().hex[:8]}", "csv": "a,b\n0,1\n", "domain": {"a": 2, "c": 2}})
    assert response.status_code == 422, response.text
    dataset = response.json()["message"]
    assert dataset.startswith("the uploaded csv: its columns do not match those of the uploaded domain"), dataset
    response = client.post("/public-tables", headers=steward(world),
                           json={"name": f"p-{uuid.uuid4().hex[:8]}", "csv": "a,b\n0,1\n", "domain": {"c": 2}})
    assert response.status_code == 422, response.text
    public = response.json()["message"]
    assert public.startswith("the uploaded domain names column 'c', which the uploaded csv lacks"), public
