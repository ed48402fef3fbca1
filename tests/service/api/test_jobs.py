"""Long requests in the background (``Prefer: respond-async``): 202 and a job, its progress (the
release's steps and the model fit's iterations), its answer, idempotency, recovery, and the client
that polls it with a progress display."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from db.models import Job
from service import runners
from service.api import create_app, jobs
from service.client import Client, MarginaliaError
from service.mechanisms.progress import FIT_PHASE
from service.releases.recovery import recover_jobs
from tests.support.apihelpers import World, bearer, finished_job

ASYNC = {"Prefer": "respond-async"}
TINY = {"csv": "a,b\n0,1\n1,0\n2,1\n1,1\n", "domain": {"a": 3, "b": 2}}
GAUSSIAN = {"mechanism": "gaussian", "workload": [["Sex"], ["Pclass", "Survived"]], "rho": 0.01}
#: a release that fits a graphical model (direct releases fit none since issue 9)
MST = {"mechanism": "mst", "rho": 0.01}


def _charges(world: World) -> int:
    with world.engine.connect() as connection:
        return connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry = 'charge'")).scalar_one()


def test_a_release_in_the_background_answers_202_then_its_result(client: TestClient, world: World,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The job shows the release's steps and, apart, the fit's iterations while they happen; its final
    answer is the synchronous route's."""
    seen: list[dict[str, object]] = []
    write = jobs.JobProgress.__call__

    def recording(self: jobs.JobProgress, done: int, total: int, message: str) -> None:
        self.seconds = 0.0  # write every report, so each can be read back
        write(self, done, total, message)
        seen.append(jobs.get(self.engine, self.job_id).to_json())

    monkeypatch.setattr(jobs.JobProgress, "__call__", recording)
    before = _charges(world)
    response = client.post(f"/datasets/{world.dataset}/releases/marginals", json=MST,
                           headers={**bearer(world.keys["steward"]), **ASYNC})
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["state"] == "running" and accepted["kind"] == "release" and accepted["dataset"] == "titanic"
    assert response.headers["location"] == f"/jobs/{accepted['job_id']}"
    assert response.headers["preference-applied"] == "respond-async"
    job = finished_job(client, world.keys["steward"], accepted["job_id"])
    assert job["state"] == "done" and job["status_code"] == 201
    result = job["result"]
    assert result["status"] == "complete" and result["cost"]["rho"] == 0.01 and _charges(world) == before + 1
    # the job's answer carries the cost in the budget's own epsilon, as the synchronous answer does
    with world.engine.connect() as connection:
        spent = connection.execute(text(
            "SELECT epsilon_spent_after_units FROM ledger_entries WHERE release_id = :r AND entry = 'charge'"),
            {"r": result["release_id"]}).scalar_one() / 1e12
    budget = result["budget"]
    assert set(budget) == {"epsilon_total", "epsilon_spent_before", "epsilon_spent_after", "note"}
    assert budget["epsilon_spent_after"] == pytest.approx(spent, abs=1e-12)
    assert budget["epsilon_spent_before"] < budget["epsilon_spent_after"] <= budget["epsilon_total"]
    steps = [s["progress"] for s in seen if s["fit"] is None]
    fits = [s["fit"] for s in seen if s["fit"] is not None]
    assert steps[-1]["message"] == "fitted model" and steps[-1]["done"] == steps[-1]["total"]
    # the fit's bar starts at 1,000 planned iterations and ends where the estimator stopped (its tolerance)
    assert fits[0] == {"done": 0, "total": 1000} and fits[-1]["done"] == fits[-1]["total"] <= 1000
    assert job["fit"] is None and job["progress"]["done"] == job["progress"]["total"]


def test_background_requests_keep_idempotency(client: TestClient, world: World) -> None:
    headers = {**bearer(world.keys["steward"]), **ASYNC, "Idempotency-Key": f"k-{uuid.uuid4()}"}
    before = _charges(world)
    first = client.post(f"/datasets/{world.dataset}/releases/marginals", json=GAUSSIAN, headers=headers)
    again = client.post(f"/datasets/{world.dataset}/releases/marginals", json=GAUSSIAN, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json()["job_id"] == first.json()["job_id"] and again.headers["idempotent-replayed"] == "true"
    assert finished_job(client, world.keys["steward"], first.json()["job_id"])["state"] == "done"
    replay = client.post(f"/datasets/{world.dataset}/releases/marginals", json=GAUSSIAN, headers=headers)
    assert replay.json()["job_id"] == first.json()["job_id"]
    assert _charges(world) == before + 1


def test_a_refused_background_request_frees_its_key(client: TestClient, world: World) -> None:
    name = f"tiny-{uuid.uuid4().hex[:8]}"
    steward = bearer(world.keys["steward"])
    assert client.post("/datasets", headers=steward, json={"name": name, **TINY}).status_code == 201
    client.put(f"/datasets/{name}/budget", headers=steward, json={"epsilon": 0.1})
    body = {"mechanism": "laplace", "workload": [["a"]], "epsilon": 0.5}
    headers = {**steward, **ASYNC, "Idempotency-Key": "too-much"}
    refused = finished_job(client, world.keys["steward"], client.post(f"/datasets/{name}/releases/marginals", json=body,
                                                   headers=headers).json()["job_id"])
    assert refused["state"] == "failed" and refused["status_code"] == 409
    assert refused["result"]["error"] == "budget_exceeded"
    client.put(f"/datasets/{name}/budget", headers=steward, json={"epsilon": 1.0})
    retried = client.post(f"/datasets/{name}/releases/marginals", json=body, headers=headers)
    assert retried.status_code == 202 and retried.json()["job_id"] != refused["job_id"]  # a new job, not a replay
    assert finished_job(client, world.keys["steward"], retried.json()["job_id"])["state"] == "done"


#: who made a job: every role that can own one (a scoped steward's job is of a dataset in its scope)
OWNERS = {"steward": "titanic", "scoped_steward": "elsewhere", "analyst": "titanic", "auditor": "titanic"}
CALLERS = ("steward", "scoped_steward", "analyst", "auditor", "participant", "gateway", "revoked", None)


def _expected(owner: str, caller: str | None) -> int:
    """A job is its owner's and the stewards' whose scope covers its dataset; to every other key it does not exist."""
    if caller in (None, "revoked"):
        return 401
    if caller in ("participant", "gateway"):
        return 403  # the route is not theirs at all
    if caller == owner or (caller == "steward") or (caller == "scoped_steward" and OWNERS[owner] == "elsewhere"):
        return 200
    return 404


def test_a_job_is_read_by_its_owner_and_stewards_only(client: TestClient, world: World) -> None:
    """Issue 18: an auditor read an analyst's fit by its sequential id. Every role against every other's job: the
    owner and stewards 200, others 404 exactly as for a job that does not exist (no existence leak)."""
    mismatches = []
    for owner, dataset in OWNERS.items():
        job_id = jobs.create(world.engine, dataset, "fit", world.key_ids[owner])
        jobs.finish(world.engine, job_id, "done", 200, {"coef": [1.0]})
        for caller in CALLERS:
            response = client.get(f"/jobs/{job_id}", headers=bearer(world.keys.get(caller) if caller else None))
            if response.status_code != _expected(owner, caller):
                mismatches.append(f"{caller} on {owner}'s job: {response.status_code} {response.text[:200]}")
            elif response.status_code == 404:
                missing = client.get("/jobs/999999", headers=bearer(world.keys[caller])).json()
                assert response.json() == {**missing, "message": f"no job with id {job_id}"}
    assert not mismatches, "\n".join(mismatches)
    in_process = jobs.create(world.engine, "titanic", "release")  # made by a command: no key owns it
    jobs.finish(world.engine, in_process, "done", 201, {})
    assert client.get(f"/jobs/{in_process}", headers=bearer(world.keys["steward"])).status_code == 200
    assert client.get(f"/jobs/{in_process}", headers=bearer(world.keys["analyst"])).status_code == 404
    missing = client.get("/jobs/999999", headers=bearer(world.keys["steward"]))
    assert missing.status_code == 404 and missing.json()["error"] == "job_not_found"


def test_the_jobs_of_a_dead_server_fail_as_interrupted(world: World) -> None:
    job_id = jobs.create(world.engine, "titanic", "release")
    with world.engine.begin() as connection:  # its runner: a process that has exited
        connection.execute(Job.__table__.update().where(Job.__table__.c.id == job_id).values(
            runner_host=runners.process_table(), runner_pid=2**22 + 12345, heartbeat_at=datetime.now(UTC)))
    live = jobs.create(world.engine, "titanic", "release")  # this process: alive
    assert recover_jobs(world.engine) >= 1
    dead = jobs.get(world.engine, job_id)
    assert dead.state == "failed" and dead.response_status == 409 and dead.response["error"] == "request_interrupted"
    assert jobs.get(world.engine, live).state == "running"
    jobs.finish(world.engine, live, "done", 200, {})


def test_the_client_follows_a_background_release_and_shows_its_progress(world: World) -> None:
    reports: list[dict[str, object]] = []
    steward = Client("http://testserver", world.keys["steward"], http=TestClient(create_app(world.engine)),
                     poll_seconds=0.05)
    release = steward.release_marginals("titanic", progress=reports.append, **GAUSSIAN)
    assert release["status"] == "complete" and release["cost"]["rho"] == 0.01
    assert release["budget"]["epsilon_spent_after"] > release["budget"]["epsilon_spent_before"]
    assert reports[0]["state"] == "running" and reports[-1]["state"] == "done"
    assert reports[-1]["result"] == release
    with pytest.raises(MarginaliaError) as refused:  # the job's error is raised like a synchronous one
        steward.release_marginals("titanic", "laplace", [["Sex"]], epsilon=100)  # past the budget (5)
    assert (refused.value.status, refused.value.code) == (409, "budget_exceeded")


def test_the_progress_line(capsys: pytest.CaptureFixture[str]) -> None:
    from service.client.http import _ProgressLine

    line = _ProgressLine()
    job = {"job_id": 3, "kind": "release", "dataset": "adult", "state": "running",
           "progress": {"done": 36, "total": 37, "message": "fitting the final model"}, "fit": None}
    line(job)
    line({**job, "fit": {"done": 420, "total": 1000}})
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("job 3 (release of adult): 36/37 fitting the final model")
    assert f"{FIT_PHASE} 420/1000" in err[1]
