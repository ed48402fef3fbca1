"""Stopping a release: Ctrl-C at any moment, ``kill -9`` then any command, and recovery that never
touches a release a live process still runs (service/releases/interrupts.py, service/releases/runners.py,
service/releases/recovery.py).

The slow tests drive the real ``marginalia`` program in subprocesses: the interrupt must be honoured
the same way whatever the process is doing when it arrives (importing JAX, reserving, counting,
drawing noise, fitting the model, storing), and what the command prints must agree with the ledger.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from db.models import Release
from service.accounting import accountant
from service.data import datasets
from service.mechanisms.base import MechanismResult
from service.privacy.cost import PrivacyCost
from service.releases import engine as release_engine
from service.releases import interrupts, runners
from service.releases.interrupts import Interrupted
from service.releases.recovery import recover_interrupted

MARGINALIA = str(Path(sys.executable).with_name("marginalia"))
SMALL = [["Sex"], ["Pclass", "Survived"]]


@pytest.fixture(autouse=True)
def no_pending_request():  # noqa: ANN201
    interrupts.clear()
    yield
    interrupts.clear()


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    datasets.load_coded_csv(engine, "titanic", data_dir / "titanic/titanic.csv",
                            data_dir / "titanic/titanic-domain.json", categorical=("Sex", "Embarked"))
    accountant.set_budget(engine, "titanic", "100", "1e-5")
    return datasets.get_dataset(engine, "titanic")


def _release_rows(engine) -> list[tuple]:  # noqa: ANN001
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text("SELECT id, status FROM releases ORDER BY id"))]


def _net_charge(engine, release_id: int) -> tuple[int, int, int]:  # noqa: ANN001
    with engine.connect() as connection:
        row = connection.execute(text(
            "SELECT COALESCE(SUM(epsilon_units), 0), COALESCE(SUM(delta_units), 0), COALESCE(SUM(rho_units), 0) "
            "FROM ledger_entries WHERE release_id = :r"), {"r": release_id}).one()
    return int(row[0]), int(row[1]), int(row[2])


def _spent_after(engine, release_id: int) -> float:  # noqa: ANN001
    """The budget's composed epsilon after the release's last ledger row (its charge, or the refund of it)."""
    with engine.connect() as connection:
        return connection.execute(text(
            "SELECT epsilon_spent_after_units FROM ledger_entries WHERE release_id = :r ORDER BY id DESC LIMIT 1"),
            {"r": release_id}).scalar_one() / 1e12


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
    assert _release_rows(engine) == []


def test_a_stop_before_any_noise_refunds_the_charge(engine, titanic) -> None:  # noqa: ANN001
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202
        interrupts.request()  # Ctrl-C while counting, say
        progress(0, 2, "counted")  # the next safe point
        raise AssertionError("the progress callback should have stopped the release")

    with pytest.raises(Interrupted, match="refunded") as caught:
        _run(engine, titanic, runner)
    outcome = caught.value.outcome
    assert outcome.refunded and outcome.status == "failed_before_noise"
    assert _release_rows(engine) == [(outcome.release_id, "failed_before_noise")]
    assert _net_charge(engine, outcome.release_id) == (0, 0, 0)
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
    assert _net_charge(engine, outcome.release_id) == (10**11, 0, 0)
    spent = accountant.budget_status(engine, "titanic").epsilon_spent
    assert (outcome.budget.epsilon_before, outcome.budget.epsilon_after) == (0, spent) == (0, Fraction(1, 10))
    assert "stands; budget epsilon spent 0 -> 0.1 of 100" in str(caught.value.message)
    assert outcome.to_json()["budget"]["epsilon_spent_after"] == 0.1


def test_a_stop_during_the_model_fit_is_honoured_between_iterations(engine, titanic) -> None:  # noqa: ANN001
    """The fit reports every iteration (its own progress), and each report is a safe point."""
    seen: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, message: str) -> None:
        seen.append((done, total, message))
        if message == "fitting the model" and done == 5:
            interrupts.request()

    with pytest.raises(Interrupted, match="stands"):
        release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.1", progress=progress)
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
def _dead_process() -> tuple[int, int | None]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    started = runners.start_ticks(child.pid)
    child.wait()
    return child.pid, started


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
    dead_pid, dead_started = _dead_process()
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
    status = dict(_release_rows(engine))
    assert {i: status[i] for i in (live, live_elsewhere, live_but_silent, unknown_recent)} == dict.fromkeys(
        (live, live_elsewhere, live_but_silent, unknown_recent), "pending")
    assert recover_interrupted(engine) == []  # nothing twice
    # the charges of recovered releases stand
    assert accountant.budget_status(engine, "titanic").rho_spent == Fraction(8, 10)


def test_a_release_recovered_while_it_ran_is_not_stored_as_complete(engine, titanic) -> None:  # noqa: ANN001
    """A runner stopped longer than the lease (SIGSTOP, a suspended laptop) may come back after another
    host recovered its release: it must not turn the failed release into a complete one."""
    def runner(oracle, noise, progress):  # noqa: ANN001, ANN202, ARG001
        noise.discrete_laplace(10, 3)
        with engine.begin() as connection:
            connection.execute(text("UPDATE releases SET status = 'failed_after_noise' WHERE status = 'pending'"))
        return MechanismResult([], None, PrivacyCost(epsilon=Fraction(1, 10)))  # type: ignore[arg-type]

    with pytest.raises(Exception, match="recovery") as caught:
        release_engine.run_release(engine, titanic, kind="marginals", mechanism="laplace",
                             cost=PrivacyCost(epsilon=Fraction(1, 10)), params={}, runner=runner, seed=1,
                             principal="test", encode_payload=lambda result: b"payload")
    assert caught.value.release_failure.status == "failed_after_noise"
    assert [s for _, s in _release_rows(engine)] == ["failed_after_noise"]


# the real program --------------------------------------------------------------------------------------
@pytest.fixture
def cli_database(tmp_path: Path, data_dir: Path) -> dict[str, str]:
    """A SQLite database with titanic and a budget, and the environment of a command using it."""
    env = {**os.environ, "MARGINALIA_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}", "COLUMNS": "200"}
    env.pop("MARGINALIA_DEBUG", None)
    folder = data_dir / "titanic"
    for args in (["dataset", "load", "titanic", "--csv", str(folder / "titanic.csv"), "--domain",
                  str(folder / "titanic-domain.json"), "--quiet"],
                 ["budget", "set", "titanic", "--epsilon", "1000", "--delta", "1e-5"]):
        subprocess.run([MARGINALIA, *args], env=env, check=True, capture_output=True)
    return env


RELEASE = ["release", "marginals", "titanic", "--mechanism", "aim", "--workload", "all-2way", "--epsilon", "1",
           "--delta", "1e-6", "--json"]


def _engine_of(env: dict[str, str]):  # noqa: ANN202
    from db.engine import make_engine

    return make_engine(env["MARGINALIA_DATABASE_URL"])


def _units(cost: dict[str, float]) -> tuple[int, int, int]:
    return PrivacyCost(*(Fraction(str(cost[k])) for k in ("epsilon", "delta", "rho"))).as_units()


@pytest.mark.slow
def test_ctrl_c_at_random_moments_agrees_with_the_ledger(cli_database: dict[str, str]) -> None:
    """SIGINT a real AIM release at random moments (start-up, JAX import, reservation, counting, noise,
    fitting, storing, after the end): every run ends with status 0 (complete) or 130 (interrupted),
    prints one JSON outcome, and the ledger and the releases table say exactly that. Python's own
    start-up (before any line of ours runs, ~0.1 s) is not ours to handle, so delays start at 0.25 s."""
    engine = _engine_of(cli_database)
    started = time.monotonic()  # one run without interrupt: how long a run takes on this machine now
    subprocess.run([MARGINALIA, *RELEASE], env=cli_database, check=True, capture_output=True)
    longest = time.monotonic() - started + 0.5
    rng = random.Random(20261123)
    outcomes: list[str] = []
    for _ in range(int(os.environ.get("MARGINALIA_INTERRUPT_RUNS", "12"))):
        before = {i for i, _ in _release_rows(engine)}
        process = subprocess.Popen([MARGINALIA, *RELEASE], env=cli_database, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.25, longest))
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
        assert process.returncode in (0, interrupts.EXIT_STATUS), (process.returncode, out, err)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        answer = json.loads(out)
        new = {i: s for i, s in _release_rows(engine) if i not in before}
        if process.returncode == 0:
            assert new == {answer["release_id"]: "complete"} and answer["status"] == "complete"
            assert _net_charge(engine, answer["release_id"]) == _units(answer["cost"])
            assert answer["budget"]["epsilon_spent_after"] == pytest.approx(_spent_after(engine, answer["release_id"]))
            outcomes.append("complete")
        elif "release" not in answer:
            assert answer["error"] == "interrupted" and "nothing was charged" in answer["message"]
            assert new == {}
            outcomes.append("nothing charged")
        else:
            release = answer["release"]
            assert answer["error"] == "interrupted" and new == {release["release_id"]: release["status"]}
            assert _net_charge(engine, release["release_id"]) == _units(release["spent"])
            assert release["refunded"] == (release["status"] == "failed_before_noise")
            # the same cost report as a completed release's: the budget's epsilon before -> after
            budget = release["budget"]
            assert budget["epsilon_spent_after"] == pytest.approx(_spent_after(engine, release["release_id"]))
            assert f"-> {budget['epsilon_spent_after']:.6g} of" in answer["message"]
            if release["refunded"]:
                assert budget["epsilon_spent_after"] == pytest.approx(budget["epsilon_spent_before"])
            outcomes.append(release["status"])
    assert "pending" not in dict(_release_rows(engine)).values()
    print("outcomes:", {o: outcomes.count(o) for o in sorted(set(outcomes))})  # noqa: T201
    engine.dispose()


def _wait_for_pending(engine, seconds: float = 120) -> int:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pending = [i for i, s in _release_rows(engine) if s == "pending"]
        if pending:
            return pending[0]
        time.sleep(0.05)
    raise AssertionError("no release became pending")


@pytest.mark.slow
def test_kill_9_then_any_command_recovers_but_never_a_live_release(cli_database: dict[str, str]) -> None:
    engine = _engine_of(cli_database)
    process = subprocess.Popen([MARGINALIA, *RELEASE], env=cli_database, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    release_id = _wait_for_pending(engine)
    # another command while the release runs: it must leave the live release alone
    during = subprocess.run([MARGINALIA, "init", "--json"], env=cli_database, capture_output=True, text=True)
    assert json.loads(during.stdout)["recovered_releases"] == []
    assert dict(_release_rows(engine))[release_id] == "pending"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert dict(_release_rows(engine))[release_id] == "pending"
    after = subprocess.run([MARGINALIA, "init", "--json"], env=cli_database, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    (recovered,) = json.loads(after.stdout)["recovered_releases"]
    assert recovered["release_id"] == release_id and recovered["status"] == "failed_after_noise"
    assert f"recovered release {release_id}" in after.stderr and "stands" in after.stderr
    assert dict(_release_rows(engine))[release_id] == "failed_after_noise"
    assert _net_charge(engine, release_id) == _units(recovered["charged"]) != (0, 0, 0)
    # any other command would have done it too, and nothing is recovered twice
    again = subprocess.run([MARGINALIA, "ledger", "titanic", "--json"], env=cli_database, capture_output=True,
                           text=True)
    assert again.returncode == 0 and "recovered" not in again.stderr
    engine.dispose()
