"""``--dry-run`` on the charging commands (issue 29, section 1): ``release marginals`` and ``fit`` print what they
would charge, spend and store nothing, and exit as the command itself would (status 2 when it would be refused);
``--target-error`` solves for epsilon and only plans."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from service.cli import app
from tests.support.backends import ON_SQLITE
from tests.support.dry_runs import TINY, charge_row, load_tiny, snapshot

runner = CliRunner()
RELEASE = ["release", "marginals", TINY, "--mechanism", "gaussian", "--workload", "all-2way", "--epsilon", "1",
           "--delta", "1e-6", "--quiet"]


def test_a_dry_run_prints_the_charge_its_release_then_makes(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    before = snapshot(engine)
    shown = runner.invoke(app, [*RELEASE, "--dry-run"])
    assert shown.exit_code == 0, shown.output
    assert "dry run (nothing was spent)" in shown.stdout and "first zCDP release" in shown.stdout
    assert "expected accuracy over N = 240 rows" in shown.stdout and "it fits the budget" in shown.stdout
    plan = json.loads(runner.invoke(app, [*RELEASE, "--dry-run", "--json"]).stdout)
    assert snapshot(engine) == before
    done = runner.invoke(app, [*RELEASE, "--json"])
    assert done.exit_code == 0, done.output
    release = json.loads(done.stdout)
    assert plan["ledger"] == charge_row(engine, release["release_id"]) and plan["budget"] == release["budget"]


@ON_SQLITE
def test_a_dry_run_that_would_be_refused_exits_as_the_release_would(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path, epsilon="0.3", delta="1e-5")
    before = snapshot(engine)
    planned = runner.invoke(app, [*RELEASE, "--dry-run", "--json"])
    refused = runner.invoke(app, [*RELEASE, "--json"])
    assert planned.exit_code == refused.exit_code == 2
    assert json.loads(planned.stdout)["refusal"] == json.loads(refused.stdout)  # {"error": "budget_exceeded", ...}
    human = runner.invoke(app, [*RELEASE, "--dry-run"])
    assert human.exit_code == 2 and "it does not fit (budget_exceeded)" in human.stdout
    assert snapshot(engine) == before


@ON_SQLITE
def test_target_error_solves_for_epsilon_and_only_plans(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    before = snapshot(engine)
    laplace = ["release", "marginals", TINY, "--mechanism", "laplace", "--workload", "all-1way", "--quiet"]
    plan = runner.invoke(app, [*laplace, "--target-error", "0.1", "--dry-run", "--json"])
    assert plan.exit_code == 0, plan.output
    target = json.loads(plan.stdout)["target"]
    assert target["expected_error"] <= 0.1 and json.loads(plan.stdout)["cost"]["epsilon"] == target["epsilon"]
    alone = runner.invoke(app, [*laplace, "--target-error", "0.1"])
    assert alone.exit_code == 2 and "--target-error only plans: add --dry-run" in alone.output
    gaussian = runner.invoke(app, ["release", "marginals", TINY, "--mechanism", "gaussian", "--target-error", "0.1",
                                   "--dry-run"])
    assert gaussian.exit_code == 2 and "give delta" in gaussian.output
    assert snapshot(engine) == before


@ON_SQLITE
def test_a_fits_dry_run_names_the_release_that_would_answer_or_the_new_ones_charge(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    fit = ["fit", "linear", TINY, "--target", "y", "--features", "a,b", "--method", "adassp", "--epsilon", "1",
           "--delta", "1e-6", "--quiet"]
    before = snapshot(engine)
    plan = json.loads(runner.invoke(app, [*fit, "--dry-run", "--json"]).stdout)
    assert plan["answered_by"] is None and plan["fits"] and plan["release"]["mechanism"] == "adassp"
    assert snapshot(engine) == before
    done = json.loads(runner.invoke(app, [*fit, "--json"]).stdout)
    assert plan["release"]["ledger"] == charge_row(engine, done["release_id"])
    again = runner.invoke(app, [*fit, "--dry-run"])
    assert again.exit_code == 0 and f"release {done['release_id']} (adassp) already answers" in again.stdout
