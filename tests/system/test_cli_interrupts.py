"""Stopping the real program: Ctrl-C at any moment, ``kill -9`` then any command, and recovery that never touches
a release a live process still runs (in-process tests: tests/service/releases/test_interrupts.py).

These tests drive the real ``marginalia`` program in subprocesses: the interrupt must be honoured
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
from fractions import Fraction
from pathlib import Path

import pytest

from service import interrupts
from service.privacy.cost import PrivacyCost
from tests.support.ledger import net_charge, release_rows, spent_after

MARGINALIA = str(Path(sys.executable).with_name("marginalia"))


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
        before = {i for i, _ in release_rows(engine)}
        process = subprocess.Popen([MARGINALIA, *RELEASE], env=cli_database, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.25, longest))
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
        assert process.returncode in (0, interrupts.EXIT_STATUS), (process.returncode, out, err)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        answer = json.loads(out)
        new = {i: s for i, s in release_rows(engine) if i not in before}
        if process.returncode == 0:
            assert new == {answer["release_id"]: "complete"} and answer["status"] == "complete"
            assert net_charge(engine, answer["release_id"]) == _units(answer["cost"])
            assert answer["budget"]["epsilon_spent_after"] == pytest.approx(spent_after(engine, answer["release_id"]))
            outcomes.append("complete")
        elif "release" not in answer:
            assert answer["error"] == "interrupted" and "nothing was charged" in answer["message"]
            assert new == {}
            outcomes.append("nothing charged")
        else:
            release = answer["release"]
            assert answer["error"] == "interrupted" and new == {release["release_id"]: release["status"]}
            assert net_charge(engine, release["release_id"]) == _units(release["spent"])
            assert release["refunded"] == (release["status"] == "failed_before_noise")
            # the same cost report as a completed release's: the budget's epsilon before -> after
            budget = release["budget"]
            assert budget["epsilon_spent_after"] == pytest.approx(spent_after(engine, release["release_id"]))
            assert f"-> {budget['epsilon_spent_after']:.6g} of" in answer["message"]
            if release["refunded"]:
                assert budget["epsilon_spent_after"] == pytest.approx(budget["epsilon_spent_before"])
            outcomes.append(release["status"])
    assert "pending" not in dict(release_rows(engine)).values()
    print("outcomes:", {o: outcomes.count(o) for o in sorted(set(outcomes))})  # noqa: T201
    engine.dispose()


def _wait_for_pending(engine, seconds: float = 120) -> int:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pending = [i for i, s in release_rows(engine) if s == "pending"]
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
    # freeze the live process (SIGSTOP): it stays alive but cannot finish, however fast the release is, so the
    # check below does not depend on how long AIM runs on this machine
    process.send_signal(signal.SIGSTOP)
    # another command while the release runs: it must leave the live release alone
    during = subprocess.run([MARGINALIA, "init", "--json"], env=cli_database, capture_output=True, text=True)
    assert json.loads(during.stdout)["recovered_releases"] == []
    assert dict(release_rows(engine))[release_id] == "pending"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert dict(release_rows(engine))[release_id] == "pending"
    after = subprocess.run([MARGINALIA, "init", "--json"], env=cli_database, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    (recovered,) = json.loads(after.stdout)["recovered_releases"]
    assert recovered["release_id"] == release_id and recovered["status"] == "failed_after_noise"
    assert f"recovered release {release_id}" in after.stderr and "stands" in after.stderr
    assert dict(release_rows(engine))[release_id] == "failed_after_noise"
    assert net_charge(engine, release_id) == _units(recovered["charged"]) != (0, 0, 0)
    # any other command would have done it too, and nothing is recovered twice
    again = subprocess.run([MARGINALIA, "ledger", "titanic", "--json"], env=cli_database, capture_output=True,
                           text=True)
    assert again.returncode == 0 and "recovered" not in again.stderr
    engine.dispose()
