"""benchmarks/regression_method_choice.py: auto's picks as the rule makes them, its table, and the stored results
remade whenever the rule changes (the docs quote them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import regression_method_choice as bench
from tests.support.paths import REPO

STORED = REPO / "benchmarks" / "results" / "regression_method_choice.json"


def test_a_run_records_the_rules_pick_and_its_table(data_dir: Path) -> None:
    result = bench.run(data_dir, (1.0,), 1, 1e-5, ("titanic",))
    (row,) = result["designs"]
    assert row["design"] == "titanic"
    titanic = next(d for d in bench.DESIGNS if d.name == "titanic")
    assert row["auto"]["1.0"] == bench.auto_pick(titanic, data_dir, 1.0, 1e-5)
    summary = row["result"]["summary"]
    assert {"adassp", "dd-ssp", "ols"} <= set(summary)
    table = bench.markdown(result).splitlines()
    assert len(table) == 3 and table[2].startswith("| titanic | 1 | ")
    assert f"| {row['auto']['1.0']['method']} (" in table[2]


def test_the_stored_results_hold_the_picks_the_rule_makes_today(data_dir: Path) -> None:
    stored = json.loads(STORED.read_text())
    designs = {d.name: d for d in bench.DESIGNS}
    assert [row["design"] for row in stored["designs"]] == list(designs)
    for row in stored["designs"]:
        for epsilon, pick in row["auto"].items():
            today = bench.auto_pick(designs[row["design"]], data_dir, float(epsilon), stored["delta"])
            assert {k: pick[k] for k in ("method", "rule", "reason")} == {k: today[k] for k in ("method", "rule",
                                                                                               "reason")}
            assert pick["figures"] == pytest.approx(today["figures"], rel=1e-9)
