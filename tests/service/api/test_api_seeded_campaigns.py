"""Issue 18, finding 3: a campaign that received reports of a seeded simulation (in process: tests, benchmarks) answers
nothing over HTTP. Every route of the collections' campaigns is called by every kind of caller against seeded
campaigns: the state, the reports and the fits are ``409 seeded_campaign``; listing, showing and closing show
``"seeded": true`` and no published state. A campaign route added without a probe here fails the first test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from fastapi.testclient import TestClient

from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.api import create_app
from service.campaigns import campaigns, simulate
from tests.support.apihelpers import bearer, make_keys

CALLERS = ("steward", "scoped_steward", "analyst", "auditor", "participant", "gateway", "revoked", "no_key")
SEEDED = ("seeded-avg", "seeded-two", "seeded-closing", "seeded-marginals")


@dataclass
class World:
    engine: object
    keys: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('seeded-campaigns') / 'api.db'}")
    upgrade_to_head(engine)
    keys, _ = make_keys(engine)
    rng = np.random.default_rng(0)
    for name in ("seeded-avg", "seeded-closing", "plain"):
        campaigns.create_campaign(engine, name, "ldp-avg", ["v"], None, None, 1.0, 0.0, {"lower": 0, "upper": 1})
        simulate.simulate(engine, name, rng.random((40, 1)), seed=None if name == "plain" else 3)
    # two rounds: round 1's public state is computed from round 0's seeded reports
    campaigns.create_campaign(engine, "seeded-two", "stein-glm-2round", ["a", "b"], "y", None, 2, 1e-5,
                              {"norm_bound": 3})
    x = rng.normal(size=(400, 2))
    simulate.simulate(engine, "seeded-two", x, (x @ [1.0, -1.0] > 0).astype(float), seed=4)
    assert campaigns.get_campaign(engine, "seeded-two").rounds[1].state is not None
    # a marginals campaign: its marginals and synthetic rows come from its seeded reports
    campaigns.create_campaign(engine, "seeded-marginals", "marginals", ["a", "b"], None, None, 1.0, 0.0,
                              {"domain": {"a": 3, "b": 2}, "way": 1})
    simulate.simulate(engine, "seeded-marginals", np.stack([np.arange(60) % 3, np.arange(60) % 2], axis=1), seed=5)
    yield World(engine, keys)
    engine.dispose()


def probes() -> dict[tuple[str, str], list[tuple[str, dict[str, object] | None]]]:
    """Concrete requests for every campaign route, naming seeded campaigns."""
    return {
        ("POST", "/campaigns"): [("/campaigns", {"name": "new", "protocol": "ldp-avg", "features": ["v"],
                                                 "epsilon": 1, "options": {"lower": 0, "upper": 1}})],
        ("GET", "/campaigns"): [("/campaigns", None)],
        ("POST", "/campaigns/plan"): [("/campaigns/plan", {"protocol": "ldp-iht", "features": ["v"], "target": "y",
                                                           "epsilon": 1, "participants": 1000})],
        ("GET", "/campaigns/{name}"): [(f"/campaigns/{name}", None) for name in SEEDED],
        ("POST", "/campaigns/{name}/close"): [("/campaigns/seeded-closing/close", None)],
        ("POST", "/campaigns/{name}/rounds/{index}/close"): [("/campaigns/seeded-two/rounds/1/close", None)],
        ("GET", "/campaigns/{name}/state"): [(f"/campaigns/{name}/state", None) for name in SEEDED],
        ("POST", "/campaigns/{name}/reports"): [
            ("/campaigns/seeded-avg/reports", {"round": 0, "report": {"value": 0.5}}),
            ("/campaigns/seeded-avg/reports", {"round": 0, "reports": {"value": [0.5]}, "pseudonyms": ["p"]})],
        ("POST", "/campaigns/{name}/fit"): [("/campaigns/seeded-avg/fit", {"model": "mean"}),
                                            ("/campaigns/seeded-two/fit", {"model": "linear"})],
        ("POST", "/campaigns/{name}/marginal"): [("/campaigns/seeded-marginals/marginal", {"attributes": ["a"]})],
        ("POST", "/campaigns/{name}/synthetic"): [("/campaigns/seeded-marginals/synthetic", {"rows": 3})],
    }


def test_every_campaign_route_has_a_probe(world: World) -> None:
    paths = create_app(world.engine).openapi()["paths"]
    served = {(method.upper(), path) for path, operations in paths.items() for method in operations
              if path.startswith("/campaigns")}
    assert served == set(probes())


def _leak(body: object) -> str | None:
    """Why a successful answer would show something of a seeded campaign's reports (None when it does not)."""
    shown = body if isinstance(body, list) else [body]
    for campaign in shown:
        if not isinstance(campaign, dict) or campaign.get("name", campaign.get("campaign")) not in SEEDED:
            continue
        if campaign.get("seeded") is not True:
            return f"seeded campaign {campaign.get('name', campaign.get('campaign'))} shown without 'seeded': true"
        if "rounds" not in campaign or any(r.get("state") is not None for r in campaign["rounds"]):
            return f"seeded campaign {campaign.get('name')} shown with a published state or as an answer: {campaign}"
    return None


def test_no_caller_reads_a_seeded_campaign_by_any_route(world: World) -> None:
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    keys = {**world.keys, "no_key": None}
    leaks, refused = [], set()
    for (method, _route), requests in probes().items():
        for url, body in requests:
            for caller in CALLERS:
                response = client.request(method, url, json=body, headers=bearer(keys[caller]))
                if response.status_code >= 400:
                    assert response.status_code in (401, 403, 404, 409, 422), response.text
                    if response.json()["error"] == "seeded_campaign":
                        refused.add((method, url, caller))
                    continue
                reason = _leak(response.json())
                if reason:
                    leaks.append(f"{caller} {method} {url}: {reason}")
    assert not leaks, "\n".join(leaks)
    for caller in ("steward", "analyst"):
        assert {("GET", f"/campaigns/{name}/state", caller) for name in SEEDED} <= refused
        assert {("POST", "/campaigns/seeded-avg/fit", caller), ("POST", "/campaigns/seeded-two/fit", caller)} <= refused
        assert {("POST", "/campaigns/seeded-marginals/marginal", caller),
                ("POST", "/campaigns/seeded-marginals/synthetic", caller)} <= refused
    assert {("GET", "/campaigns/seeded-avg/state", "participant"),
            ("POST", "/campaigns/seeded-avg/reports", "participant")} <= refused
    listed = client.get("/campaigns", headers=bearer(world.keys["analyst"])).json()
    assert {c["name"] for c in listed if c.get("seeded")} == set(SEEDED)


def test_an_unseeded_campaign_still_answers(world: World) -> None:
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    analyst = bearer(world.keys["analyst"])
    assert client.post("/campaigns/plain/fit", headers=analyst, json={"model": "mean"}).status_code == 200
    state = client.get("/campaigns/plain/state", headers=analyst).json()
    assert state["state"] is not None and "seeded" not in client.get("/campaigns/plain", headers=analyst).json()


def test_in_process_callers_still_fit_a_seeded_campaign(world: World) -> None:
    """Benchmarks fit their seeded campaigns in process (``estimates.fit_campaign``): only HTTP refuses."""
    from service.campaigns.estimates import fit_campaign

    assert fit_campaign(world.engine, "seeded-avg", "mean").reports == 40

