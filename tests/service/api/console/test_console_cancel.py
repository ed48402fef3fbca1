"""A release started from the console and cancelled from its job page stops at its next safe point: the job fails as
``interrupted`` by the console's Cancel, and the ledger keeps exactly the charge of the steps that drew noise (the
rest refunded), as on Ctrl-C (docs/privacy.md 6.5)."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from service.accounting import accountant
from service.api import create_app, jobs
from service.releases import answers
from tests.support.apihelpers import World
from tests.support.console import SECRET, csrf_of, sign_in


def test_a_cancelled_release_keeps_only_what_drew_noise(world: World) -> None:
    client = TestClient(create_app(world.engine, console_secret=SECRET), raise_server_exceptions=False)
    assert sign_in(client, world.keys["steward"]) == 303
    token = csrf_of(client)
    before = accountant.ledger_rows(world.engine, world.dataset)
    started = client.post(f"/console/datasets/{world.dataset}/release", follow_redirects=False, data={
        "csrf_token": token, "workload": "all-2way", "mechanism": "aim", "aim": "epsilon", "epsilon": "0.5",
        "delta": "1e-7"})
    job_page = started.headers["location"]
    job_id = int(job_page.rsplit("/", 1)[1])
    running = client.get(job_page).text
    assert "Cancel the release" in running
    assert client.post(f"{job_page}/cancel", data={"csrf_token": token}, follow_redirects=False).status_code == 303
    deadline = time.monotonic() + 300
    while jobs.get(world.engine, job_id).state == "running":
        assert time.monotonic() < deadline, "the cancelled release did not stop"
        time.sleep(0.1)
    job = jobs.get(world.engine, job_id)
    assert job.state == "failed" and job.response["error"] == "interrupted", job.response
    assert "a Cancel from the console" in job.response["message"]
    rows = accountant.ledger_rows(world.engine, world.dataset)[len(before):]
    release_id = rows[0]["release_id"]
    assert [r["entry"] for r in rows] == ["charge", "refund"] and rows[1]["release_id"] == release_id
    kept = rows[0]["rho"] + rows[1]["rho"]
    assert 0 <= kept < rows[0]["rho"]  # a refund of what drew no noise
    assert answers.get_release(world.engine, release_id).status in ("failed_before_noise", "failed_after_noise")
    ended = client.get(job_page).text
    assert "Cancel the release" not in ended and "a Cancel from the console" in ended
    assert client.post(f"{job_page}/cancel", data={"csrf_token": token}).status_code == 409
