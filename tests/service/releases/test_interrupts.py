"""Stopping a release in process, and recovery that never touches a release a live process still runs
(service/interrupts.py, service/runners.py, service/releases/recovery.py). The real program under
Ctrl-C and ``kill -9``: tests/system/test_cli_interrupts.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from db.models import Release
from service import interrupts, runners
from service.accounting import accountant
from service.interrupts import Interrupted
from service.mechanisms.base import MechanismResult
from service.mechanisms.payloads import MarginalsPayload
from service.privacy.cost import PrivacyCost
from service.releases import engine as release_engine
from service.releases.recovery import recover_interrupted
from tests.support.datasets import titanic_with_budget
from tests.support.dead_runner import dead_process
from tests.support.ledger import net_charge, release_rows

SMALL = [["Sex"], ["Pclass", "Survived"]]


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")


# the engine, in process -----------------------------------------------------------------------------
def _run(engine, titanic, runner):  # noqa: ANN001, ANN202
    return release_engine.run_release(engine, titanic, kind="marginals", mechanism="laplace",
                                cost=PrivacyCost(epsilon=Fraction(1, 10)), params={}, runner=runner, seed=1,
                                principal="test")


def test_a_stop_requested_before_the_reservation_charges_nothing(engine, titanic) -> None:  # noqa: ANN001
    interrupts.request()
    with pytest.raises(Interrupted, match="nothing was charged") as caught:
        release_engine.release_marginals(engine, "titanic", "laplace", SMALL, epsilon="0.1")
    assert caught.value.outcome is None
    assert release_rows(engine) == []


def test_a_stop_before_any_noise_refunds_the_charge(engine, titanic) -> None:  # noqa: ANN001
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202
        interrupts.request()  # Ctrl-C while counting, say
        progress(0, 2, "counted")  # the next safe point
        raise AssertionError("the progress callback should have stopped the release")

    with pytest.raises(Interrupted, match="refunded") as caught:
        _run(engine, titanic, runner)
    outcome = caught.value.outcome
    assert outcome.refunded and outcome.status == "failed_before_noise"
    assert release_rows(engine) == [(outcome.release_id, "failed_before_noise")]
    assert net_charge(engine, outcome.release_id) == (0, 0, 0)
    assert outcome.to_json()["spent"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    # the budget's own epsilon, as a completed release reports it: back where it was
    assert outcome.budget.epsilon_before == outcome.budget.epsilon_after == 0
    assert "budget epsilon spent 0 -> 0 of 100" in str(caught.value.message)


def test_a_stop_after_noise_keeps_the_charge(engine, titanic) -> None:  # noqa: ANN001
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202
        noise.discrete_laplace(10, 3)
        interrupts.request()
        progress(1, 2, "measured")
        raise AssertionError("the progress callback should have stopped the release")

    with pytest.raises(Interrupted, match="stands") as caught:
        _run(engine, titanic, runner)
    outcome = caught.value.outcome
    assert not outcome.refunded and outcome.status == "failed_after_noise"
    assert net_charge(engine, outcome.release_id) == (10**11, 0, 0)
    spent = accountant.budget_status(engine, "titanic").epsilon_spent
    assert (outcome.budget.epsilon_before, outcome.budget.epsilon_after) == (0, spent) == (0, Fraction(1, 10))
    assert "stands; budget epsilon spent 0 -> 0.1 of 100" in str(caught.value.message)
    assert outcome.to_json()["budget"]["epsilon_spent_after"] == 0.1


def test_a_stop_during_the_model_fit_is_honoured_between_iterations(engine, titanic) -> None:  # noqa: ANN001
    """The fit reports every iteration (its own progress), and each report is a safe point (MST: direct releases no
    longer fit a model at release time)."""
    seen: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, message: str) -> None:
        seen.append((done, total, message))
        if message == "fitting the model" and done == 5:
            interrupts.request()

    with pytest.raises(Interrupted, match="stands"):
        release_engine.release_marginals(engine, "titanic", "mst", SMALL, rho="0.1", progress=progress)
    fit = [s for s in seen if s[2] == "fitting the model"]
    assert [s[0] for s in fit] == [0, 1, 2, 3, 4, 5] and fit[0][1] == 1000


def test_other_failures_say_what_became_of_the_charge(engine, titanic) -> None:  # noqa: ANN001
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202, ARG001
        noise.discrete_laplace(10, 3)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError) as caught:
        _run(engine, titanic, runner)
    assert caught.value.release_failure.status == "failed_after_noise"
    assert any("charge of epsilon=0.1 stands" in note for note in caught.value.__notes__)


# runners and recovery ---------------------------------------------------------------------------------
def _reserve(engine, runner: dict[str, object] | None) -> int:  # noqa: ANN001
    release_id, _ = accountant.reserve_release(engine, "titanic", "marginals", "gaussian",
                                               PrivacyCost(rho=Fraction(1, 10)), {}, "test", runner=runner)
    return release_id


def _set(engine, release_id: int, **values: object) -> None:  # noqa: ANN001
    with engine.begin() as connection:
        connection.execute(Release.__table__.update().where(Release.__table__.c.id == release_id).values(**values))


def test_recovery_marks_only_releases_whose_runner_is_provably_gone(engine, titanic) -> None:  # noqa: ANN001
    here = runners.process_table()
    old = datetime.now(UTC) - timedelta(seconds=runners.LEASE_SECONDS + 60)
    dead_pid, dead_started = dead_process()
    live = _reserve(engine, runners.current().columns())  # this very process: alive
    dead = _reserve(engine, {"runner_host": here, "runner_pid": dead_pid, "runner_started": dead_started,
                             "heartbeat_at": datetime.now(UTC)})
    reused = _reserve(engine, {"runner_host": here, "runner_pid": os.getpid(), "runner_started": 1,
                               "heartbeat_at": datetime.now(UTC)})  # our pid, but another process's start time
    live_elsewhere = _reserve(engine, {"runner_host": "another-host", "runner_pid": 1, "runner_started": 1,
                                       "heartbeat_at": datetime.now(UTC)})
    silent_elsewhere = _reserve(engine, {"runner_host": "another-host", "runner_pid": 1, "runner_started": 1,
                                         "heartbeat_at": old})
    live_but_silent = _reserve(engine, {**runners.current().columns(), "heartbeat_at": old})  # stopped, not dead
    unknown_recent = _reserve(engine, None)
    unknown_old = _reserve(engine, None)
    _set(engine, unknown_old, created_at=old)

    recovered = recover_interrupted(engine)
    assert sorted(f.release_id for f in recovered) == sorted([dead, reused, silent_elsewhere, unknown_old])
    assert all(f.status == "failed_after_noise" and f.cost == PrivacyCost(rho=Fraction(1, 10)) for f in recovered)
    status = dict(release_rows(engine))
    assert {i: status[i] for i in (live, live_elsewhere, live_but_silent, unknown_recent)} == dict.fromkeys(
        (live, live_elsewhere, live_but_silent, unknown_recent), "pending")
    assert recover_interrupted(engine) == []  # nothing twice
    # the charges of recovered releases stand
    assert accountant.budget_status(engine, "titanic").rho_spent == Fraction(8, 10)


class _StoredAs(MarginalsPayload):
    """A marginal payload whose stored bytes are given (the test never reads them back)."""

    def __init__(self, stored: bytes) -> None:
        super().__init__()
        self.stored = stored

    def to_bytes(self) -> bytes:
        return self.stored


def test_a_release_recovered_while_it_ran_is_not_stored_as_complete(engine, titanic) -> None:  # noqa: ANN001
    """A runner stopped longer than the lease (SIGSTOP, a suspended laptop) may come back after another
    host recovered its release: it must not turn the failed release into a complete one."""
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202, ARG001
        noise.discrete_laplace(10, 3)
        with engine.begin() as connection:
            connection.execute(text("UPDATE releases SET status = 'failed_after_noise' WHERE status = 'pending'"))
        return MechanismResult(PrivacyCost(epsilon=Fraction(1, 10)), _StoredAs(b"payload"))

    with pytest.raises(Exception, match="recovery") as caught:
        release_engine.run_release(engine, titanic, kind="marginals", mechanism="laplace",
                             cost=PrivacyCost(epsilon=Fraction(1, 10)), params={}, runner=runner, seed=1,
                             principal="test")
    assert caught.value.release_failure.status == "failed_after_noise"
    assert [s for _, s in release_rows(engine)] == ["failed_after_noise"]


def test_recovery_in_one_server_worker_never_fails_a_live_sibling_workers_release(engine, titanic) -> None:  # noqa: ANN001
    """``marginalia serve --workers N``: every worker (and the parent at start) recovers, and each release records
    the pid of the worker that runs it; a live sibling's pending release is left alone, a dead one's is failed."""
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        runner = {"runner_host": runners.process_table(), "runner_pid": sibling.pid,
                  "runner_started": runners.start_ticks(sibling.pid), "heartbeat_at": datetime.now(UTC)}
        release_id = _reserve(engine, runner)
        assert recover_interrupted(engine) == [] and dict(release_rows(engine))[release_id] == "pending"
    finally:
        sibling.kill()
        sibling.wait()
    assert [f.release_id for f in recover_interrupted(engine)] == [release_id]
