"""``marginalia campaign plan`` on the command line: the error at N, the N for a target, nothing stored; the same
protocol flags as ``campaign create``."""

from __future__ import annotations

import json

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
    assert human.exit_code == 0 and "for error 0.4: about" in human.output and "participants" in human.output
    listed = runner.invoke(app, ["campaign", "list", "--json"])
    assert json.loads(listed.output) == []


def test_campaign_plan_refuses_a_protocol_without_a_planner(engine) -> None:  # noqa: ANN001
    result = runner.invoke(app, ["campaign", "plan", "--protocol", "bernstein", "--features", "a", "--target", "y",
                                 "--epsilon", "1", "--participants", "100"])
    assert result.exit_code != 0 and "no planner for protocol 'bernstein'" in result.output

