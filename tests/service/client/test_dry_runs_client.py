"""Dry runs over HTTP and through the client (issue 29, section 1): ``POST .../plan`` spends and stores nothing, not
even a job or an idempotency key when the request asks for them, and quotes exactly what the release then charges.
Who may call each plan route is the role matrix's (tests/support/roles.py, walked by test_api_roles.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.client import Client, MarginaliaError
from tests.support.apihelpers import bearer
from tests.support.campaign_keys import new_key
from tests.support.dry_runs import TINY, WORKLOAD, charge_row, load_tiny, snapshot


def _record(client: Client) -> list[httpx.Request]:
    seen: list[httpx.Request] = []
    client._http.event_hooks["request"] = [seen.append]
    return seen


def test_a_plan_asked_in_the_background_and_with_a_key_is_answered_at_once_and_stores_nothing(
        engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    _, steward = new_key(engine, "steward", "steward")
    http = TestClient(create_app(engine))
    headers = {**bearer(steward), "Prefer": "respond-async", "Idempotency-Key": "plan-1"}
    body = {"mechanism": "gaussian", "workload": WORKLOAD, "epsilon": 1.0, "delta": 1e-6}
    before = snapshot(engine)
    answer = http.post(f"/datasets/{TINY}/releases/marginals/plan", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    assert plan["dry_run"] and plan["fits"] and plan["fixes_anchor"] and "first zCDP release" in plan["budget"]["note"]
    assert snapshot(engine) == before  # no ledger row, release, job or idempotency key
    release = http.post(f"/datasets/{TINY}/releases/marginals", json=body, headers=bearer(steward))
    assert release.status_code == 201, release.text
    assert plan["ledger"] == charge_row(engine, release.json()["release_id"])  # the exact units
    assert plan["budget"] == release.json()["budget"] and plan["cost"] == release.json()["cost"]


def test_a_plan_that_does_not_fit_answers_the_releases_refusal(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path, epsilon="0.3", delta="1e-5")
    _, steward = new_key(engine, "steward", "steward")
    http = TestClient(create_app(engine))
    body = {"mechanism": "laplace", "workload": WORKLOAD, "epsilon": 0.5}
    plan = http.post(f"/datasets/{TINY}/releases/marginals/plan", json=body, headers=bearer(steward)).json()
    refused = http.post(f"/datasets/{TINY}/releases/marginals", json=body, headers=bearer(steward))
    assert refused.status_code == 409 and not plan["fits"]
    assert plan["refusal"] == {"error": "budget_exceeded", "message": refused.json()["message"]}
    bad = http.post(f"/datasets/{TINY}/releases/marginals/plan", json={**body, "workload": [["nope"]]},
                    headers=bearer(steward))
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_workload"  # the release's own refusal


def test_the_client_plans_a_release_and_a_fit_in_one_plain_request(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    app = create_app(engine)
    (_, steward), (_, analyst) = new_key(engine, "steward", "steward"), new_key(engine, "analyst", "analyst")
    mg = Client("http://testserver", steward, http=TestClient(app))
    seen = _record(mg)
    before = snapshot(engine)
    plan = mg.plan_release(TINY, "residual", WORKLOAD, delta=1e-6, target_error=0.3)
    assert [(r.method, r.url.path) for r in seen] == [("POST", f"/datasets/{TINY}/releases/marginals/plan")]
    assert "prefer" not in seen[0].headers and "idempotency-key" not in seen[0].headers
    assert plan["target"]["expected_error"] <= 0.3 and plan["accuracy"]["worst"]["expected_l1_normalised"] <= 0.3
    assert plan["accuracy"]["rows"] == 240 and len(plan["accuracy"]["marginals"]) == len(WORKLOAD)
    released = mg.release_marginals(TINY, "residual", WORKLOAD, epsilon=plan["target"]["epsilon"], delta=1e-6)
    assert released["cost"] == plan["cost"] and released["budget"] == plan["budget"]

    fits = Client("http://testserver", analyst, http=TestClient(app))
    fit_plan = fits.plan_fit(TINY, "s", ["a", "b"], method="objpert", epsilon=0.5, delta=1e-6, task="logistic")
    assert fit_plan["answered_by"] is None and fit_plan["fits"] and fit_plan["release"]["mechanism"] == "objpert"
    assert "forecasts no accuracy" in fit_plan["release"]["accuracy_note"]
    fitted = fits.fit_logistic(TINY, "s", ["a", "b"], method="objpert", epsilon=0.5, delta=1e-6)
    assert fitted.cost == fit_plan["cost"]
    assert fits.plan_fit(TINY, "s", ["a", "b"], method="objpert", epsilon=0.5, delta=1e-6,
                         task="logistic")["answered_by"] == fitted.release_id  # now a stored release answers, free
    assert len(snapshot(engine)["releases"]) == len(before["releases"]) + 2  # the two real releases only
    with pytest.raises(TypeError, match="no seed"):
        fits.plan_fit(TINY, "y", seed=1)
    with pytest.raises(MarginaliaError) as refused:  # an analyst plans no marginal release: stewards release
        fits.plan_release(TINY, "laplace", WORKLOAD, epsilon=0.1)
    assert refused.value.status == 403
