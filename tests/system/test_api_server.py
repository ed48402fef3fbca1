"""Guarantees against a REAL server (``marginalia serve`` in a subprocess on 127.0.0.1), on SQLite
and on PostgreSQL: concurrent clients never overspend, idempotent retries charge once, and a
server killed in the middle of a release leaves a consistent database."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.access import auth
from service.accounting import accountant
from service.client import Client, MarginaliaError
from tests.conftest import new_postgres_database
from tests.support.apihelpers import BACKENDS
from tests.support.apiserver import api_server
from tests.support.datasets import load_titanic

pytestmark = pytest.mark.slow

CLIENTS = 30
EPSILON = 0.1
BUDGET = 1.0  # room for exactly BUDGET / EPSILON = 10 releases: 1/10 is exact on the accountant's grid
RELEASE = {"mechanism": "laplace", "workload": [["Sex"]], "epsilon": EPSILON}


@dataclass
class Database:
    url: str
    engine: Engine
    steward_key: str


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path, data_dir: Path) -> Database:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'served.db'}"
    else:
        url = new_postgres_database(request)
    engine = make_engine(url)
    upgrade_to_head(engine)
    load_titanic(engine, data_dir)
    accountant.set_budget(engine, "titanic", BUDGET, 0)
    _, key = auth.create_key(engine, "steward", "server test")
    yield Database(url, engine, key)
    engine.dispose()


def run_concurrently(count: int, call: Callable[[int], object]) -> list[object]:
    """``call(i)`` for i < count, all released at once by a barrier; returns results or exceptions."""
    barrier = threading.Barrier(count, timeout=60)

    def one(i: int) -> object:
        barrier.wait()
        try:
            return call(i)
        except Exception as exc:  # noqa: BLE001 - collected and asserted on by the caller
            return exc

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count), timeout=600))


def assert_consistent(engine: Engine, allow_pending: bool = False) -> dict[str, float]:
    """Every release has exactly one charge (and a refund only if it failed before noise); the
    budget the accountant reports equals the sums of the ledger and the budget_remaining view."""
    with engine.connect() as connection:
        releases = connection.execute(text("SELECT id, status FROM releases ORDER BY id")).all()
        ledger = connection.execute(text(
            "SELECT release_id, entry, epsilon_units FROM ledger_entries WHERE entry <> 'budget'")).all()
        view = connection.execute(text(
            "SELECT epsilon_pure_spent_units, epsilon_spent_units FROM budget_remaining WHERE dataset = 'titanic'"
        )).one()
    for release_id, status in releases:
        assert status != "pending" or allow_pending, f"release {release_id} is still pending"
        mine = [entry for rid, entry, _ in ledger if rid == release_id]
        assert mine.count("charge") == 1, f"release {release_id} ({status}) has charges {mine}"
        assert mine.count("refund") == (1 if status == "failed_before_noise" else 0), (release_id, status, mine)
    assert all(rid is not None for rid, _, _ in ledger), "a charge without a release"
    status = accountant.budget_status(engine, "titanic")
    ledger_units = sum(units for _, _, units in ledger)
    assert status.epsilon_pure_spent * 10**12 == ledger_units == int(view[0])
    assert status.epsilon_spent * 10**12 == int(view[1])
    return {"spent": float(status.epsilon_pure_spent), "releases": len(releases)}


def test_concurrent_clients_never_overspend(database: Database, tmp_path: Path) -> None:
    with api_server(database.url, tmp_path / "server.log") as server:
        def release(i: int) -> object:
            with Client(server.url, database.steward_key, retries=0, timeout=300) as client:
                return client.release_marginals("titanic", **RELEASE)

        results = run_concurrently(CLIENTS, release)
        unexpected = [r for r in results if isinstance(r, Exception) and not isinstance(r, MarginaliaError)]
        assert not unexpected, unexpected
        granted = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, MarginaliaError)]
        assert len(granted) == round(BUDGET / EPSILON) and len(refused) == CLIENTS - len(granted), server.log_tail()
        for error in refused:
            assert (error.status, error.code) == (409, "budget_exceeded"), error
            remaining = re.search(r"epsilon=([-0-9.e]+) remains", error.message)
            assert remaining and abs(float(remaining.group(1))) < 1e-9, error.message  # all 10 charges are 0.1
        with Client(server.url, database.steward_key) as client:
            budget = client.budget("titanic")
            ledger = client.ledger("titanic")
    assert budget["epsilon_pure_spent"] == pytest.approx(BUDGET, abs=1e-12)
    assert sorted(ledger.loc[ledger["entry"] == "charge", "release_id"]) == sorted(r["release_id"] for r in granted)
    assert assert_consistent(database.engine)["releases"] == len(granted)


def test_concurrent_retries_with_one_key_charge_once(database: Database, tmp_path: Path) -> None:
    with api_server(database.url, tmp_path / "server.log") as server:
        def post(i: int) -> httpx.Response:
            return httpx.post(f"{server.url}/datasets/titanic/releases/marginals", json=RELEASE,
                              headers={"Authorization": f"Bearer {database.steward_key}", "Idempotency-Key": "one"},
                              timeout=300)

        responses = run_concurrently(8, post)
        assert all(isinstance(r, httpx.Response) for r in responses), responses
        statuses = sorted(r.status_code for r in responses)
        assert set(statuses) <= {201, 409} and 201 in statuses, [r.text for r in responses]
        assert all(r.json()["error"] == "idempotency_in_progress" for r in responses if r.status_code == 409)
        assert len({r.json()["release_id"] for r in responses if r.status_code == 201}) == 1
        final = post(0)
        assert final.status_code == 201 and final.headers["idempotent-replayed"] == "true"
    assert assert_consistent(database.engine) == {"spent": EPSILON, "releases": 1}


def test_killed_mid_release_leaves_a_consistent_database(database: Database, tmp_path: Path) -> None:
    marker, log = tmp_path / "noise-drawn", tmp_path / "server.log"
    outcome: dict[str, object] = {}
    with api_server(database.url, log, noise_marker=marker) as server:
        def release() -> None:
            with Client(server.url, database.steward_key, retries=0, timeout=300) as client:
                try:
                    outcome["result"] = client.release_marginals("titanic", idempotency_key="crash", **RELEASE)
                except MarginaliaError as exc:
                    outcome["error"] = exc

        caller = threading.Thread(target=release, daemon=True)
        caller.start()
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert time.monotonic() < deadline and caller.is_alive(), f"no noise drawn: {outcome}\n{server.log_tail()}"
            time.sleep(0.05)
        server.kill()
        caller.join(timeout=60)
    assert isinstance(outcome.get("error"), MarginaliaError) and outcome["error"].code == "connection_error"

    # Killed between noise and payload: the release is pending WITH its charge, nothing else.
    with database.engine.connect() as connection:
        assert connection.execute(text("SELECT status FROM releases")).scalars().all() == ["pending"]
    assert assert_consistent(database.engine, allow_pending=True) == {"spent": EPSILON, "releases": 1}

    with api_server(database.url, log) as server:  # start-up recovers the interrupted work
        with database.engine.connect() as connection:
            assert connection.execute(text("SELECT status FROM releases")).scalars().all() == ["failed_after_noise"]
        assert assert_consistent(database.engine) == {"spent": EPSILON, "releases": 1}
        with Client(server.url, database.steward_key, retries=0) as client:
            with pytest.raises(MarginaliaError) as retried:
                client.release_marginals("titanic", idempotency_key="crash", **RELEASE)
            assert (retried.value.status, retried.value.code) == (409, "request_interrupted")
            fresh = client.release_marginals("titanic", **RELEASE)
            budget = client.budget("titanic")
            assert client.release(fresh["release_id"])["status"] == "complete"
    assert budget["epsilon_pure_spent"] == pytest.approx(2 * EPSILON, abs=1e-12)
    assert assert_consistent(database.engine) == {"spent": 2 * EPSILON, "releases": 2}
