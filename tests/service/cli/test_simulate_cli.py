"""Issue 18, finding 3 and the simulator's smaller items, on the command line: ``simulate --table`` is charged to the
dataset's budget (and refused past it, nothing submitted); ``--seed`` needs the test-only switch and marks the
campaign seeded; Ctrl-C stops at the next batch with exit status 130, saying what was stored; a closed campaign is
refused (exit 2) naming it and its status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from service import interrupts
from service.accounting import accountant
from service.campaigns import campaigns
from service.cli import app
from service.cli import campaigns as cli_campaigns
from service.releases.engine import UNSAFE_SEEDED_RELEASES_ENV
from tests.support.datasets import titanic_with_budget

runner = CliRunner()


def invoke(*args: str) -> tuple[int, dict]:
    result = runner.invoke(app, [*args, "--json"])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)


def _reports(engine, name: str) -> int:  # noqa: ANN001
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT COUNT(*) FROM reports r JOIN campaigns c ON c.id = r.campaign_id "
                                           "WHERE c.name = :n"), {"n": name}).scalar_one())


@pytest.fixture
def stop_requests() -> Iterator[None]:
    interrupts.clear()
    yield
    interrupts.clear()


def test_simulating_a_stored_table_is_charged_and_refused_past_the_budget(engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "3", "1e-6")
    campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 2, 0, {"lower": 0, "upper": 10})
    status, first = invoke("simulate", "fare", "--table", "titanic", "--rows", "200", "--quiet")
    assert status == 0 and first["reports"] == {"0": 200} and first["cost"]["epsilon"] == 2.0, first
    charges = [r for r in accountant.ledger_rows(engine, "titanic") if r["entry"] == "charge"]
    assert [(r["mechanism"], r["epsilon"]) for r in charges] == [("campaign-simulation", 2.0)]
    assert "campaign 'fare'" in charges[0]["note"]
    status, refused = invoke("simulate", "fare", "--table", "titanic", "--rows", "200", "--quiet")
    assert status == 2 and refused["error"] == "budget_exceeded" and "dataset 'titanic'" in refused["message"]
    assert _reports(engine, "fare") == 200
    assert float(accountant.budget_status(engine, "titanic").epsilon_spent) == 2.0


def test_seed_needs_the_unsafe_switch_and_marks_the_campaign_seeded(engine, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv(UNSAFE_SEEDED_RELEASES_ENV, raising=False)
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0, {"lower": 0, "upper": 1})
    status, refused = invoke("simulate", "avg", "--design", "gaussian", "--n", "50", "--p", "1", "--seed", "7",
                             "--quiet")
    assert status == 2 and UNSAFE_SEEDED_RELEASES_ENV in refused["message"], refused
    assert _reports(engine, "avg") == 0 and campaigns.get_campaign(engine, "avg").seeded is False
    monkeypatch.setenv(UNSAFE_SEEDED_RELEASES_ENV, "1")
    status, done = invoke("simulate", "avg", "--design", "gaussian", "--n", "50", "--p", "1", "--seed", "7",
                          "--quiet")
    assert status == 0 and done["stored"] == 50 and campaigns.get_campaign(engine, "avg").seeded is True
    assert invoke("campaign", "fit", "avg", "--model", "mean")[0] == 0  # tests and benchmarks may read it
    monkeypatch.delenv(UNSAFE_SEEDED_RELEASES_ENV)
    status, fit = invoke("campaign", "fit", "avg", "--model", "mean")
    assert status == 2 and fit["error"] == "seeded_campaign"


def test_ctrl_c_stops_at_the_next_batch_with_status_130(engine, tmp_path: Path, monkeypatch,  # noqa: ANN001
                                                        stop_requests: None) -> None:  # noqa: ARG001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0, {"lower": 0, "upper": 1})
    pd.DataFrame({"v": np.linspace(0, 1, 45_000)}).to_csv(tmp_path / "people.csv", index=False)

    def ctrl_c(self, done: int, total: int, message: str = "") -> None:  # noqa: ANN001, ARG001
        interrupts.request()  # the command line's SIGINT handler only records the request

    monkeypatch.setattr(cli_campaigns.ProgressBars, "__call__", ctrl_c)
    status, stopped = invoke("simulate", "avg", "--csv", str(tmp_path / "people.csv"))
    assert status == interrupts.EXIT_STATUS and stopped["error"] == "interrupted", stopped
    assert "20,000 simulated reports were stored in campaign 'avg'" in stopped["message"]
    assert "25,000 were never randomized" in stopped["message"]
    assert _reports(engine, "avg") == 20_000


def test_a_closed_campaign_is_refused_naming_it_and_its_status(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0, {"lower": 0, "upper": 1})
    campaigns.close_campaign(engine, "avg")
    status, refused = invoke("simulate", "avg", "--design", "gaussian", "--n", "100", "--p", "1", "--quiet")
    assert status == 2 and refused["error"] == "campaign_closed", refused
    assert "campaign 'avg' is closed" in refused["message"] and _reports(engine, "avg") == 0
