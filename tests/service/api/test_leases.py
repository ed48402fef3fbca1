"""Work of a dead server is recovered by the others, and only that (issue 31, points 2 and 3): idempotency claims carry
their runner, a server's start-up no longer interrupts another's claimed request, ``GET /jobs/{id}`` fails the job
of a dead server as it reads it, every worker sweeps periodically, and the client's polling has a deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from db.models import IdempotencyRecord, Job
from service import runners
from service.access import idempotency
from service.api import create_app, jobs
from service.api.lifespan import Sweeper
from service.api.server import prepare_database
from service.client import Client, MarginaliaError
from tests.support.apihelpers import bearer
from tests.support.backends import ON_SQLITE
from tests.support.dead_runner import gone_runner_columns


def _update(engine, table, row_id: int, **values: object) -> None:  # noqa: ANN001
    with engine.begin() as connection:
        connection.execute(table.update().where(table.c.id == row_id).values(**values))


def _claim(engine, key: str) -> idempotency.Claim:  # noqa: ANN001
    from service.access import auth

    info, _ = auth.create_key(engine, "steward", f"lease {key}")
    claimed = idempotency.claim(engine, info.id, key, "0" * 64)
    assert isinstance(claimed, idempotency.Claim)
    return claimed


def _state(engine, record_id: int) -> tuple[str, int | None]:  # noqa: ANN001
    with engine.connect() as connection:
        row = connection.execute(IdempotencyRecord.__table__.select().where(
            IdempotencyRecord.__table__.c.id == record_id)).one()
    return row.state, row.response_status


def test_a_server_start_interrupts_only_claims_whose_runner_is_gone(engine) -> None:  # noqa: ANN001
    """The restart of server A no longer marks B's running request interrupted (B then completed it and was
    charged, while its retry had been told to start over)."""
    live, dead, elsewhere_fresh, elsewhere_stale, legacy = (_claim(engine, k) for k in ("l", "d", "f", "s", "o"))
    _update(engine, IdempotencyRecord.__table__, dead.record_id, **gone_runner_columns())
    now, old = datetime.now(UTC), datetime.now(UTC) - timedelta(seconds=runners.LEASE_SECONDS + 60)
    claims = IdempotencyRecord.__table__
    _update(engine, claims, elsewhere_fresh.record_id, runner_host="another-host", heartbeat_at=now)
    _update(engine, claims, elsewhere_stale.record_id, runner_host="another-host", heartbeat_at=old)
    _update(engine, claims, legacy.record_id, runner_host=None, runner_pid=None,
            heartbeat_at=None, created_at=old)  # claimed before claims recorded their runner
    assert prepare_database(engine)["idempotency_claims_interrupted"] == 3
    assert _state(engine, live.record_id) == ("pending", None)
    assert _state(engine, elsewhere_fresh.record_id) == ("pending", None)
    for gone in (dead, elsewhere_stale, legacy):
        assert _state(engine, gone.record_id) == ("done", idempotency.INTERRUPTED_STATUS)


def test_a_claimed_request_keeps_its_lease_fresh(engine) -> None:  # noqa: ANN001
    claimed = _claim(engine, "beating")
    old = datetime.now(UTC) - timedelta(seconds=runners.LEASE_SECONDS + 60)
    _update(engine, IdempotencyRecord.__table__, claimed.record_id, runner_host="another-host", heartbeat_at=old)
    with runners.Heartbeat(engine, IdempotencyRecord.__table__, claimed.record_id, seconds=0.05):
        import time

        time.sleep(0.5)
    assert idempotency.recover_interrupted_claims(engine) == 0  # the heartbeat renewed the lease


@ON_SQLITE
def test_reading_the_job_of_a_dead_server_fails_it(engine) -> None:  # noqa: ANN001
    from service.access import auth

    info, key = auth.create_key(engine, "steward", "jobs")
    job_id = jobs.create(engine, "titanic", "release", info.id)
    client = TestClient(create_app(engine))
    assert client.get(f"/jobs/{job_id}", headers=bearer(key)).json()["state"] == "running"  # its runner: this process
    _update(engine, Job.__table__, job_id, **gone_runner_columns())
    read = client.get(f"/jobs/{job_id}", headers=bearer(key)).json()
    assert read["state"] == "failed" and read["status_code"] == 409
    assert read["result"]["error"] == "request_interrupted"


@ON_SQLITE
def test_every_worker_sweeps_the_work_of_dead_servers(engine) -> None:  # noqa: ANN001
    job_id = jobs.create(engine, "titanic", "release", None)
    _update(engine, Job.__table__, job_id, **gone_runner_columns())
    app = create_app(engine)
    sweeper = Sweeper(app, seconds=0.05)
    sweeper.start()
    try:
        import time

        deadline = time.monotonic() + 30
        while jobs.get(engine, job_id).state == "running":
            assert time.monotonic() < deadline, "the sweep never recovered the job"
            time.sleep(0.05)
    finally:
        sweeper.stop()
    assert jobs.get(engine, job_id).response_status == 409


@ON_SQLITE
def test_the_clients_polling_has_a_deadline_and_says_what_it_last_saw(engine, tmp_path: Path) -> None:  # noqa: ANN001
    from service.access import auth

    info, key = auth.create_key(engine, "steward", "deadline")
    job_id = jobs.create(engine, "titanic", "release", info.id)  # a live runner that never finishes
    _update(engine, Job.__table__, job_id, progress_done=31, progress_total=61,
            progress_message="round 31: measured age×sex")
    client = Client("http://testserver", key, http=TestClient(create_app(engine)), poll_seconds=0.05)
    with pytest.raises(MarginaliaError) as stopped:
        client.wait(client.job(job_id), deadline=0.3)
    assert stopped.value.code == "job_deadline" and stopped.value.status is None
    assert "round 31: measured age×sex (31 of 61)" in stopped.value.message and f"job {job_id}" in stopped.value.message
    assert "client.wait(client.job(" in stopped.value.message
