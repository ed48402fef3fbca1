"""The collections through HTTP: public tables, campaigns, participants' and gateways' reports (JSON and binary),
fits, caps; every refusal a JSON error naming the field or report, nothing stored."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from service.api import create_app
from service.campaigns import estimates, gateways
from service.client.device import make_report
from service.errors import ServiceError
from tests.support.campaign_keys import new_key
from workloads.local.wire import MEDIA_TYPE, encode_batch

ROLES = ("steward", "analyst", "auditor", "participant", "gateway")


@pytest.fixture
def api(engine) -> Iterator[tuple[TestClient, dict[str, dict[str, str]], dict[str, int]]]:  # noqa: ANN001
    app = create_app(engine)
    keys, ids = {}, {}
    for role in ROLES:
        ids[role], token = new_key(engine, role, role)
        keys[role] = {"Authorization": f"Bearer {token}"}
    yield TestClient(app, raise_server_exceptions=False), keys, ids


def _public_csv(rows: int = 400, seed: int = 0) -> str:
    x = np.random.default_rng(seed).normal(size=(rows, 2)) * [1.0, 3.0] + [5.0, 0.0]
    return pd.DataFrame(x, columns=["a", "b"]).to_csv(index=False)


def _count(engine: Engine, table: str = "reports") -> int:
    with engine.connect() as connection:
        return int(connection.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def test_public_tables_through_http(api) -> None:  # noqa: ANN001
    client, keys, _ = api
    created = client.post("/public-tables", json={"name": "pub", "csv": "a,b\n1,2\n3,4\n"}, headers=keys["steward"])
    assert created.status_code == 201 and created.json()["rows"] == 2
    assert [t["name"] for t in client.get("/public-tables", headers=keys["auditor"]).json()] == ["pub"]
    page = client.get("/public-tables/pub/rows", params={"offset": 1, "limit": 5}, headers=keys["analyst"]).json()
    assert page["rows"] == [[3.0, 4.0]] and page["total"] == 2 and page["complete"]
    bad = client.post("/public-tables", json={"name": "bad", "csv": "a\nx\n"}, headers=keys["steward"])
    assert bad.status_code == 422 and "the uploaded csv, line 2: column 'a' holds 'x'" in bad.json()["message"]
    assert client.get("/public-tables/bad", headers=keys["analyst"]).status_code == 404


def test_a_campaign_from_creation_to_fits(api, engine) -> None:  # noqa: ANN001
    client, keys, ids = api
    client.post("/public-tables", json={"name": "pub", "csv": _public_csv()}, headers=keys["steward"])
    body = {"name": "glm", "protocol": "stein-glm", "features": ["a", "b"], "target": "y", "public": "pub",
            "epsilon": 8, "delta": 1e-6, "options": {"gram": False, "participants": 20_001, "norm_bound": 4,
                                                     "variant": "paper"}}
    created = client.post("/campaigns", json=body, headers=keys["steward"])
    assert created.status_code == 201, created.text
    assert created.json()["rounds"][0]["expected_reports"] == 20_001
    gateways.set_scope(engine, ids["gateway"], "glm", 20_000)
    state = client.get("/campaigns/glm/state", headers=keys["participant"]).json()
    assert state["you"] == {"reported_in_round": False, "epsilon_spent": 0.0, "delta_spent": 0.0,
                            "epsilon_cap": 10.0, "delta_cap": 1e-4}
    assert "reports" not in state and state["round"] == 0
    index, fields = make_report(state, [5.5, -1.0], 1.0)
    one = {"round": index, "report": {k: v.tolist() for k, v in fields.items()}}
    sent = client.post("/campaigns/glm/reports", json=one, headers=keys["participant"])
    assert sent.status_code == 201 and sent.json()["accepted"] == 1, sent.text
    assert "round_reports" not in sent.json()  # a participant learns nothing about others' reports
    again = client.post("/campaigns/glm/reports", json=one, headers=keys["participant"])
    assert again.status_code == 409 and again.json()["error"] == "already_reported"
    assert client.get("/campaigns/glm/state", headers=keys["participant"]).json()["you"]["reported_in_round"]
    gateway_state = client.get("/campaigns/glm/state", headers=keys["gateway"]).json()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20_000, 2)) * [1.0, 3.0] + [5.0, 0.0]
    # The devices' noise is unseeded, so the data keep the fits far from their edges: E[y x'] (about 0.2 per entry)
    # is five times the noise of the average report (sigma_xy / sqrt(n) = 5.2 / 141 = 0.037), and the signal is weak
    # enough that the logistic constant exists (sd of <x', w_ols> about 0.2; no root beyond about 0.35).
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(x - [5.0, 0.0]) @ [1.0, -0.3]))).astype(float)
    index, fields = make_report(gateway_state, x, y)
    binary = encode_batch(fields, index, pseudonyms=[f"p{i}" for i in range(20_000)])
    sent = client.post("/campaigns/glm/reports", content=binary, headers={**keys["gateway"],
                                                                        "Content-Type": MEDIA_TYPE})
    assert sent.status_code == 201 and sent.json()["round_status"] == "closed", sent.text
    for model in ("linear", "logistic", "probit", "poisson"):
        fit = client.post("/campaigns/glm/fit", json={"model": model}, headers=keys["analyst"])
        try:  # the devices' noise is unseeded: the route must give exactly what the service gives on these reports
            expected = estimates.fit_campaign(engine, "glm", model).to_json()
        except ServiceError as error:  # a link without a root on these reports (rare here): the same clear error
            assert (fit.status_code, fit.json()["error"]) == (error.status, error.code) == (422, "no_root")
            continue
        assert fit.status_code == 200, fit.text
        assert fit.json() == expected and set(expected["coefficients"]) == {"a", "b", "(intercept)"}
        assert expected["cost"]["epsilon"] == 0
    shown = client.get("/campaigns/glm", headers=keys["auditor"]).json()
    assert shown["status"] == "closed" and shown["reports"] == 20_001


@pytest.mark.parametrize("change, status, fragment", [
    ({"epsilon": 0}, 422, "epsilon"),
    ({"delta": 1}, 422, "delta"),
    ({"features": ["a", "zz"]}, 422, "has no column 'zz'"),
    ({"public": "nope"}, 404, "no public table named 'nope'"),
    ({"options": {"norm": "l7", "variant": "paper"}}, 422, "option norm must be one of"),
    ({"options": {"norm": "l1"}}, 422, "option norm applies to variant=paper"),
    ({"seed": 3}, 422, "seed"),
])
def test_bad_campaigns_are_refused_naming_the_parameter(api, engine, change: dict, status: int,  # noqa: ANN001
                                                        fragment: str) -> None:
    client, keys, _ = api
    client.post("/public-tables", json={"name": "pub", "csv": _public_csv()}, headers=keys["steward"])
    body = {"name": "c", "protocol": "stein-glm", "features": ["a", "b"], "target": "y", "public": "pub",
            "epsilon": 1, "delta": 1e-6, **change}
    response = client.post("/campaigns", json=body, headers=keys["steward"])
    assert response.status_code == status and fragment in response.text, response.text
    assert _count(engine, "campaigns") == 0


def test_bad_reports_name_the_field_and_index_and_store_nothing(api, engine) -> None:  # noqa: ANN001
    client, keys, ids = api
    client.post("/campaigns", json={"name": "avg", "protocol": "ldp-avg", "features": ["v"], "epsilon": 1,
                                    "options": {"lower": 0, "upper": 1}}, headers=keys["steward"])
    gateways.set_scope(engine, ids["gateway"], "avg", 100)
    cases = [
        ({"round": 0, "reports": {"value": [0.5, 1e12]}, "pseudonyms": ["a", "b"]}, 422, "report 1: field 'value'"),
        ({"round": 0, "reports": {"value": [0.5, 0.25]}, "pseudonyms": ["a"]}, 422, "needs 2 pseudonyms"),
        ({"round": 1, "reports": {"value": [0.5]}, "pseudonyms": ["a"]}, 422, "round must be an integer in [0, 0]"),
        ({"round": 0, "reports": {"value": [0.5]}, "pseudonyms": ["a"], "seed": 1}, 422, "seed"),
    ]
    for body, status, fragment in cases:
        response = client.post("/campaigns/avg/reports", json=body, headers=keys["gateway"])
        assert response.status_code == status and fragment in response.json()["message"], response.text
    broken = client.post("/campaigns/avg/reports", content=b"MGLB\x01junk", headers={**keys["gateway"],
                                                                                   "Content-Type": MEDIA_TYPE})
    assert broken.status_code == 422 and broken.json()["error"] == "invalid_batch"
    as_participant = client.post("/campaigns/avg/reports", content=encode_batch({"value": [0.1]}, 0, ["x"]),
                                 headers={**keys["participant"], "Content-Type": MEDIA_TYPE})
    assert as_participant.status_code == 422
    batch_as_participant = client.post("/campaigns/avg/reports", json={"round": 0, "report": {"value": [0.1, 0.2]}},
                                       headers=keys["participant"])
    assert batch_as_participant.status_code == 422 and "shape" in batch_as_participant.json()["message"]
    assert _count(engine) == 0 and _count(engine, "participants") == 0
    client.post("/campaigns/avg/close", headers=keys["steward"])
    closed = client.post("/campaigns/avg/reports", json={"round": 0, "report": {"value": 0.5}},
                         headers=keys["participant"])
    assert closed.status_code == 409 and closed.json()["error"] == "round_closed"


def test_caps_through_http(api) -> None:  # noqa: ANN001
    client, keys, ids = api
    assert client.put("/local-caps/default", json={"epsilon": 2, "delta": 0}, headers=keys["steward"]).json() == {
        "epsilon": 2.0, "delta": 0.0}
    assert client.get("/local-caps/default", headers=keys["auditor"]).json()["epsilon"] == 2.0
    override = client.put("/local-caps/participant", json={"epsilon": 5, "delta": 0, "key_id": ids["participant"]},
                          headers=keys["steward"])
    assert override.status_code == 200
    state = client.get("/campaigns/none/state", headers=keys["participant"])
    assert state.status_code == 404
    negative = client.put("/local-caps/default", json={"epsilon": -1, "delta": 0}, headers=keys["steward"])
    assert negative.status_code == 422
