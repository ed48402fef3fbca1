"""SIGTERM drains a real server (issue 31, point 1): an AIM release running as a background job when the signal
arrives stops at its next safe point, its job says how, the ledger keeps exactly what was drawn, and the server exits
by itself (it used to exit under the job, leaving the release ``pending`` and the job ``running``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from service.access import auth
from service.accounting import accountant
from service.api.server import background_server, serve_command
from service.client import Client
from service.data import datasets
from tests.support.backends import ON_SQLITE
from tests.support.ledger import net_charge, release_rows

RELEASE = {"mechanism": "aim", "workload": "all-2way", "epsilon": 1.0, "delta": 1e-6}


@pytest.mark.slow  # a real two-worker server, an AIM release on adult
@ON_SQLITE
def test_sigterm_lets_a_running_job_reach_a_safe_point_then_exits(engine, tmp_path: Path, data_dir: Path) -> None:  # noqa: ANN001
    folder = data_dir / "adult"
    datasets.load_coded_csv(engine, "adult", folder / "adult.csv", folder / "adult-domain.json", ())
    accountant.set_budget(engine, "adult", 4.0, 1e-5)
    _, key = auth.create_key(engine, "steward", "drain")
    log = tmp_path / "server.log"
    serving = lambda port: serve_command(port, 2, log_level="info")  # noqa: E731 - the drain is logged at info
    with background_server(os.environ["MARGINALIA_DATABASE_URL"], log, serving) as server:
        with Client(server.url, key, retries=0) as client:
            started = client._request("POST", "/datasets/adult/releases/marginals", json=RELEASE,  # noqa: SLF001
                                      headers={"Prefer": "respond-async"})
            job_id = started["job_id"]
            deadline = time.monotonic() + 600
            job = client.job(job_id)
            while job["state"] == "running" and "round" not in str(job.get("progress", {}).get("message", "")):
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
                job = client.job(job_id)
            assert job["state"] == "running", f"the release ended before the signal: {job}"
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            status = server.process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit after SIGTERM:\n{server.log_tail()}")
    assert status != -signal.SIGKILL, server.log_tail()
    assert "draining" in log.read_text()

    with engine.connect() as connection:
        state, answer_status, answer = connection.execute(
            text("SELECT state, response_status, response_json FROM jobs WHERE id = :j"), {"j": job_id}).one()
    assert state == "failed" and answer_status == 503 and '"interrupted"' in answer, (state, answer)
    (release_id, release_status), = release_rows(engine)
    assert release_status in ("failed_before_noise", "failed_after_noise")
    with engine.connect() as connection:
        reserved = connection.execute(text("SELECT rho_units FROM ledger_entries WHERE release_id = :r AND entry = "
                                           "'charge'"), {"r": release_id}).scalar_one()
    kept = net_charge(engine, release_id)[2]
    if release_status == "failed_before_noise":
        assert kept == 0  # refunded whole
    else:  # only the rounds whose noise was drawn stay charged (docs/privacy.md 6.5)
        assert 0 < kept <= reserved
    assert "interrupted by SIGTERM" in answer
