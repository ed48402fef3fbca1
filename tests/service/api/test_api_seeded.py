"""Issue 11, finding 1: a seed chosen by a caller makes a release's noise known, so no HTTP route and no client call
takes a seed, and a release made with one (in-process: tests, benchmarks) can be neither obtained nor reused through
the API. Every route of the app is called by every kind of caller against seeded releases of every kind (marginals,
Gram matrix, objective-perturbation model); a route added without a probe here fails the first test. Requests sent to
run in the background (``Prefer: respond-async``) obey the same rules: no seed, and their job answers 409."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.accounting import accountant
from service.api import create_app
from service.client import Client
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.apihelpers import add_collections, bearer, finished_job, make_keys
from tests.support.datasets import load_titanic

CALLERS = ("steward", "scoped_steward", "analyst", "auditor", "revoked", "no_key")
PAIR = [["Pclass", "Survived"]]
ASYNC = {"Prefer": "respond-async"}


@dataclass
class Seeded:
    engine: object
    keys: dict[str, str]
    marginal: int  # a seeded Laplace release of PAIR, stronger than the unseeded one
    unseeded: int
    gram: int
    model: int
    job: int = 0  # a background fit that named the seeded marginal release (refused)
    participant_key: int = 0

    @property
    def ids(self) -> set[int]:
        return {self.marginal, self.gram, self.model}


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Seeded]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('seeded') / 'api.db'}")
    upgrade_to_head(engine)
    load_titanic(engine, data_dir)
    accountant.set_budget(engine, "titanic", 1000, 1e-3)
    keys, ids = make_keys(engine)
    add_collections(engine, marginals_campaign="survey")
    world = Seeded(
        engine, keys,
        marginal=release_engine.release_marginals(engine, "titanic", "laplace", PAIR, epsilon=5, seed=7).release_id,
        unseeded=release_engine.release_marginals(engine, "titanic", "laplace", PAIR, epsilon=1).release_id,
        gram=fit_regression(engine, "titanic", "linear", "Fare", ["Pclass", "Sex"], method="adassp", epsilon=1,
                            delta=1e-5, seed=3).release_id,
        model=fit_regression(engine, "titanic", "logistic", "Sex", ["Pclass", "Fare"], method="objpert", epsilon=1,
                             delta=1e-5, seed=4).release_id,
    )
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    accepted = client.post("/datasets/titanic/fit/logistic", headers={**bearer(keys["analyst"]), **ASYNC}, json={
        "target": "Sex", "features": ["Pclass"], "method": "dd-ssp", "release": world.marginal,
        "allow_unmeasured": True})
    assert accepted.status_code == 202, accepted.text
    world.job = accepted.json()["job_id"]
    world.participant_key = ids["participant"]
    finished_job(client, keys["analyst"], world.job)
    yield world
    engine.dispose()


def probes(world: Seeded) -> dict[tuple[str, str], list[tuple[str, dict[str, object] | None]]]:
    """Concrete requests for every route: every way a request could name or reach a seeded release."""
    ids = sorted(world.ids)
    fit_new = {"target": "Fare", "features": ["Pclass", "Sex"], "method": "adassp", "epsilon": 1, "delta": 1e-5}
    objpert_new = {"target": "Sex", "features": ["Pclass", "Fare"], "method": "objpert", "epsilon": 1, "delta": 1e-5}
    ddssp_reuse = {"target": "Survived", "features": ["Pclass"], "method": "dd-ssp", "epsilon": 5, "delta": 1e-5}
    routes = {
        ("GET", "/health"): [("/health", None)],
        ("GET", "/health/ready"): [("/health/ready", None)],  # service routes: no release is named or read
        ("GET", "/metrics"): [("/metrics", None)],
        ("GET", "/datasets"): [("/datasets", None)],
        ("POST", "/datasets"): [("/datasets", {"name": "other", "csv": "a\n0\n", "domain": {"a": 2}})],
        # attaching and migrating touch no release (and take no seed)
        ("POST", "/datasets/attach"): [("/datasets/attach", {"name": "attached", "source": "nowhere",
                                                             "parquet": ["t.parquet"],
                                                             "bins": {"columns": {"a": {"values": ["0"]}}}})],
        ("POST", "/datasets/{name}/migrate"): [("/datasets/titanic/migrate", {"engine": "duckdb"})],
        ("GET", "/datasets/{name}"): [("/datasets/titanic", None)],
        ("GET", "/datasets/{name}/budget"): [("/datasets/titanic/budget", None)],
        ("PUT", "/datasets/{name}/budget"): [("/datasets/titanic/budget", {"epsilon": 1000, "delta": 1e-3})],
        ("POST", "/datasets/{name}/releases/marginals"): [
            ("/datasets/titanic/releases/marginals", {"mechanism": "laplace", "workload": PAIR, "epsilon": 0.1})],
        ("GET", "/datasets/{name}/ledger"): [("/datasets/titanic/ledger", None)],
        ("POST", "/datasets/{name}/fit/linear"): [("/datasets/titanic/fit/linear", fit_new),
                                                  ("/datasets/titanic/fit/linear", ddssp_reuse | {"target": "Pclass",
                                                   "features": ["Survived"]}),
                                                  *[("/datasets/titanic/fit/linear", {"target": "Fare", "features":
                                                     ["Pclass", "Sex"], "method": "adassp", "release": i})
                                                    for i in ids]],
        ("POST", "/datasets/{name}/fit/logistic"): [("/datasets/titanic/fit/logistic", objpert_new),
                                                    *[("/datasets/titanic/fit/logistic", {"target": "Sex",
                                                       "features": ["Pclass", "Fare"], "method": "objpert",
                                                       "release": i}) for i in ids],
                                                    ("/datasets/titanic/fit/logistic", {"target": "Sex",
                                                     "features": ["Pclass"], "method": "dd-ssp",
                                                     "release": world.marginal})],
        ("GET", "/releases"): [("/releases", None), ("/releases?dataset=titanic", None)],
        ("GET", "/releases/{release_id}"): [(f"/releases/{i}", None) for i in ids],
        ("POST", "/releases/{release_id}/marginal"): [(f"/releases/{world.marginal}/marginal",
                                                       {"attributes": ["Pclass", "Survived"]})],
        ("POST", "/releases/{release_id}/synthetic"): [(f"/releases/{world.marginal}/synthetic", {"rows": 3})],
        ("GET", "/jobs/{job_id}"): [(f"/jobs/{world.job}", None)],
        # the collections touch no release (and take no seed: the schema test below covers their bodies)
        ("GET", "/public-tables"): [("/public-tables", None)],
        ("POST", "/public-tables"): [("/public-tables", {"name": "p", "csv": "a\n1\n"})],
        ("GET", "/public-tables/{name}"): [("/public-tables/households", None)],
        ("GET", "/public-tables/{name}/rows"): [("/public-tables/households/rows", None)],
        ("POST", "/campaigns"): [("/campaigns", {"name": "c", "protocol": "ldp-avg", "features": ["v"], "epsilon": 1,
                                                "options": {"lower": 0, "upper": 1}})],
        ("GET", "/campaigns"): [("/campaigns", None)],
        ("POST", "/campaigns/plan"): [("/campaigns/plan", {"protocol": "glm", "features": ["income", "age"],
                                                           "target": "y", "public": "households", "epsilon": 1,
                                                           "participants": 1000})],
        ("GET", "/campaigns/{name}"): [("/campaigns/average", None)],
        ("POST", "/campaigns/{name}/close"): [("/campaigns/closing/close", None)],
        ("POST", "/campaigns/{name}/rounds/{index}/close"): [("/campaigns/closing/rounds/0/close", None)],
        ("GET", "/campaigns/{name}/state"): [("/campaigns/average/state", None)],
        ("POST", "/campaigns/{name}/reports"): [("/campaigns/average/reports", {"round": 0, "report": {"value": 1}})],
        ("POST", "/campaigns/{name}/fit"): [("/campaigns/average/fit", {"model": "mean"})],
        ("POST", "/campaigns/{name}/marginal"): [("/campaigns/survey/marginal", {"attributes": ["a"]})],
        ("POST", "/campaigns/{name}/synthetic"): [("/campaigns/survey/synthetic", {"rows": 3})],
        ("GET", "/local-caps/default"): [("/local-caps/default", None)],
        ("PUT", "/local-caps/default"): [("/local-caps/default", {"epsilon": 10, "delta": 1e-4})],
        ("PUT", "/local-caps/participant"): [("/local-caps/participant", {"epsilon": 10, "delta": 0,
                                                                          "key_id": world.participant_key})],
    }
    for route in ("/datasets/{name}/releases/marginals", "/datasets/{name}/fit/linear",
                  "/datasets/{name}/fit/logistic"):
        # a dry run is probed as the request it plans (naming a seeded release, or one a seeded release would answer)
        routes[("POST", f"{route}/plan")] = [(f"{url}/plan", body) for url, body in routes[("POST", route)]]
    return routes


def test_every_route_has_a_probe(seeded: Seeded) -> None:
    paths = create_app(seeded.engine).openapi()["paths"]
    served = {(method.upper(), path) for path, operations in paths.items() for method in operations}
    assert served == set(probes(seeded))


def _check_no_seeded_content(world: Seeded, method: str, url: str, status: int, body: object) -> str | None:
    """Why a successful answer would leak a seeded release (None when it does not)."""
    if isinstance(body, dict) and "job_id" in body:  # a background request: its answer is the job's result
        return _check_no_seeded_content(world, method, url, body.get("status_code") or 0, body.get("result"))
    if isinstance(body, dict) and body.get("answered_by") in world.ids:  # a fit's dry run naming its answerer
        return f"{method} {url} would answer from seeded release {body['answered_by']}"
    releases_shown = body if isinstance(body, list) else [body] if isinstance(body, dict) else []
    for shown in releases_shown:
        if not isinstance(shown, dict) or "release_id" not in shown:
            continue
        if shown["release_id"] in world.ids:
            if "kind" not in shown:  # an answer (marginal, synthetic rows, a fit) from a seeded release
                return f"{method} {url} answered from seeded release {shown['release_id']}"
            if shown.get("seeded") is not True or shown.get("details") != {}:
                return f"{method} {url} showed seeded release {shown['release_id']} without hiding its details"
    return None


def test_no_caller_obtains_a_seeded_release_by_any_route(seeded: Seeded) -> None:
    client = TestClient(create_app(seeded.engine), raise_server_exceptions=False)
    keys = {**seeded.keys, "no_key": None}
    leaks, refused = [], []
    for (method, _route), requests in probes(seeded).items():
        for url, body in requests:
            for caller in CALLERS:
                response = client.request(method, url, json=body, headers=bearer(keys[caller]))
                if response.status_code >= 400:
                    assert response.status_code in (401, 403, 404, 409, 422), response.text
                    if response.json()["error"] == "seeded_release":
                        refused.append((method, url, caller))
                    continue
                # /metrics answers Prometheus text: counts of releases by mechanism, no release's content
                body = response.json() if response.headers["content-type"].startswith("application/json") else None
                reason = _check_no_seeded_content(seeded, method, url, response.status_code, body)
                if reason:
                    leaks.append(f"{caller}: {reason}")
    assert not leaks, "\n".join(leaks)
    # the answering routes and fits naming a seeded release were refused as such, for every role allowed to call them
    for caller in ("steward", "analyst"):
        refused_urls = {url for _, url, who in refused if who == caller}
        assert {f"/releases/{seeded.marginal}/marginal", f"/releases/{seeded.marginal}/synthetic",
                "/datasets/titanic/fit/linear", "/datasets/titanic/fit/logistic", "/datasets/titanic/fit/linear/plan",
                "/datasets/titanic/fit/logistic/plan"} <= refused_urls


def test_fits_without_a_release_never_reuse_a_seeded_one(seeded: Seeded) -> None:
    client = TestClient(create_app(seeded.engine), raise_server_exceptions=False)
    analyst = bearer(seeded.keys["analyst"])
    gram = client.post("/datasets/titanic/fit/linear", headers=analyst, json={
        "target": "Fare", "features": ["Pclass", "Sex"], "method": "adassp", "epsilon": 1, "delta": 1e-5}).json()
    assert gram["release_id"] not in seeded.ids  # a new release, or an unseeded one an earlier test made
    model = client.post("/datasets/titanic/fit/logistic", headers=analyst, json={
        "target": "Sex", "features": ["Pclass", "Fare"], "method": "objpert", "epsilon": 1, "delta": 1e-5}).json()
    assert model["release_id"] not in seeded.ids
    for answer in (gram, model):
        assert answers.get_release(seeded.engine, answer["release_id"]).seeded is False
    ddssp = client.post("/datasets/titanic/fit/linear", headers=analyst, json={
        "target": "Pclass", "features": ["Survived"], "method": "dd-ssp", "epsilon": 5, "delta": 1e-5}).json()
    # the seeded marginal release is the stronger one; the unseeded one answers
    assert ddssp["release_id"] == seeded.unseeded and ddssp["reused"] is True


def test_no_request_takes_a_seed(seeded: Seeded) -> None:
    schema = create_app(seeded.engine).openapi()
    properties = {name for component in schema["components"]["schemas"].values()
                  for name in (component.get("properties") or {})}
    assert "seed" not in properties
    client = TestClient(create_app(seeded.engine), raise_server_exceptions=False)
    steward = bearer(seeded.keys["steward"])
    for url, body in [
        ("/datasets/titanic/releases/marginals", {"mechanism": "laplace", "workload": PAIR, "epsilon": 0.1}),
        ("/datasets/titanic/fit/linear", {"target": "Fare", "features": ["Sex"], "method": "adassp", "epsilon": 1,
                                          "delta": 1e-5}),
        (f"/releases/{seeded.unseeded}/synthetic", {"rows": 3}),
    ]:
        response = client.post(url, headers=steward, json={**body, "seed": 12345})
        assert response.status_code == 422 and response.json()["fields"] == ["body.seed"], response.text
    for name, method in inspect.getmembers(Client, inspect.isfunction):
        assert "seed" not in inspect.signature(method).parameters, name
    with pytest.raises(TypeError, match="seed"):
        Client("http://testserver", "key").fit_linear("titanic", "Fare", seed=1)


def test_background_requests_take_no_seed_and_their_jobs_refuse_seeded_releases(seeded: Seeded) -> None:
    """``Prefer: respond-async`` changes when the answer comes, not what is allowed: a body with a seed is refused
    (422) before any job exists, and a job naming a seeded release ends with the synchronous refusal (409)."""
    client = TestClient(create_app(seeded.engine), raise_server_exceptions=False)
    steward = {**bearer(seeded.keys["steward"]), **ASYNC}
    with seeded.engine.connect() as connection:
        jobs_before = connection.execute(text("SELECT COUNT(*) FROM jobs")).scalar_one()
    for url, body in [
        ("/datasets/titanic/releases/marginals", {"mechanism": "laplace", "workload": PAIR, "epsilon": 0.1}),
        ("/datasets/titanic/fit/linear", {"target": "Fare", "features": ["Sex"], "method": "adassp", "epsilon": 1,
                                          "delta": 1e-5}),
        # the routes that spend nothing but run in the background too (they read every row)
        ("/datasets/attach", {"name": "attached", "source": "nowhere", "parquet": ["t.parquet"],
                              "bins": {"columns": {"a": {"values": ["0"]}}}}),
        ("/datasets/titanic/migrate", {"engine": "duckdb"}),
    ]:
        response = client.post(url, headers=steward, json={**body, "seed": 12345})
        assert response.status_code == 422 and response.json()["fields"] == ["body.seed"], response.text
    with seeded.engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM jobs")).scalar_one() == jobs_before
    for release_id, body in [(seeded.gram, {"target": "Fare", "features": ["Pclass", "Sex"], "method": "adassp"}),
                             (seeded.model, {"target": "Sex", "features": ["Pclass", "Fare"], "method": "objpert"})]:
        task = "linear" if body["method"] == "adassp" else "logistic"
        accepted = client.post(f"/datasets/titanic/fit/{task}", headers=steward, json={**body, "release": release_id})
        assert accepted.status_code == 202, accepted.text
        job = finished_job(client, seeded.keys["steward"], accepted.json()["job_id"])
        assert (job["state"], job["status_code"], job["result"]["error"]) == ("failed", 409, "seeded_release")
    job = finished_job(client, seeded.keys["analyst"], seeded.job)  # the fixture's dd-ssp job (the analyst's)
    assert (job["state"], job["status_code"], job["result"]["error"]) == ("failed", 409, "seeded_release")
