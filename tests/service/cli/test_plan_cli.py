"""``marginalia campaign plan`` on the command line: the error at N, the N for a target, nothing stored; the same
protocol flags as ``campaign create``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from service.cli import app

runner = CliRunner()
ARGS = ["campaign", "plan", "--protocol", "ldp-iht", "--features", ",".join(f"x{j}" for j in range(100)),
        "--target", "y", "--epsilon", "1", "--option", "sparsity=10", "--option", "label_bound=3.21"]


def test_campaign_plan_predicts_and_stores_nothing(engine) -> None:  # noqa: ANN001
    result = runner.invoke(app, [*ARGS, "--participants", "640000", "--target-error", "0.4", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["protocol"] == "ldp-iht" and plan["participants"] == 640_000
    assert 0.2 < plan["expected_relative_error"] < 0.8 and len(plan["standard_errors"]) == 100
    assert 400_000 <= plan["participants_needed"] <= 800_000 and plan["cost"]["epsilon"] == 0.0
    human = runner.invoke(app, [*ARGS, "--target-error", "0.4"])
    assert human.exit_code == 0 and "for a relative error of 0.4: about" in human.output
    assert "participants" in human.output
    listed = runner.invoke(app, ["campaign", "list", "--json"])
    assert json.loads(listed.output) == []


def test_campaign_plan_refuses_a_protocol_without_a_planner(engine) -> None:  # noqa: ANN001
    result = runner.invoke(app, ["campaign", "plan", "--protocol", "bernstein", "--features", "a", "--target", "y",
                                 "--epsilon", "1", "--participants", "100"])
    assert result.exit_code != 0 and "no planner for protocol 'bernstein'" in result.output


def test_campaign_plan_takes_campaign_creates_protocol_flags(engine) -> None:  # noqa: ANN001
    """Issue 29 section 6: plan refused --label-bound, --norm-bound, --lower and --upper, which create takes; both
    commands take every declared option, --participants included (the campaign's planned participants, predicted
    at). ldp-avg and linear-ssp have planners."""
    average = runner.invoke(app, ["campaign", "plan", "--protocol", "ldp-avg", "--features", "v", "--epsilon", "1",
                                  "--lower", "0", "--upper", "10", "--participants", "400", "--json"])
    assert average.exit_code == 0, average.output
    plan = json.loads(average.output)
    assert plan["participants"] == 400 and plan["expected_error"] == pytest.approx(0.75, rel=0.01)
    regression = runner.invoke(app, ["campaign", "plan", "--protocol", "linear-ssp", "--features", "a,b", "--target",
                                     "y", "--epsilon", "1", "--norm-bound", "2", "--label-bound", "3",
                                     "--feature-bounds", "a=-1:1;b=-1:1", "--participants", "1000"])
    assert regression.exit_code != 0 and "needs a public table" in " ".join(regression.output.split())  # flags taken
    created = runner.invoke(app, ["campaign", "create", "avg", "--protocol", "ldp-avg", "--features", "v",
                                  "--epsilon", "1", "--lower", "0", "--upper", "10", "--participants", "400", "--json"])
    assert created.exit_code == 0, created.output
    assert json.loads(created.output)["rounds"][0]["expected_reports"] == 400
