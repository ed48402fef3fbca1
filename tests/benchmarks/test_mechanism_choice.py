"""The stored benchmark of ``--mechanism auto`` (benchmarks/results/mechanism_choice.json, docs/mechanisms.md) says
what the rule picks today: a change of the rule's thresholds fails here until the table is made again (``--replot``
recomputes the picks from the stored runs)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import mechanism_choice

RESULTS = Path(mechanism_choice.__file__).resolve().parent / "results" / "mechanism_choice.json"


def test_the_stored_picks_are_the_rules_and_cover_every_shared_table(data_dir: Path) -> None:  # noqa: ARG001
    summary = json.loads(RESULTS.read_text())["summary"]
    assert {row["table"] for row in summary} == set(mechanism_choice.TABLES)
    assert {row["epsilon"] for row in summary} == set(mechanism_choice.EPSILONS)
    for row in summary:
        assert row["complete"], row
        mechanism, options = mechanism_choice.auto_pick(row["table"], row["epsilon"])
        assert (row["auto"], options) == (mechanism, {}), row
        assert row["auto_ratio"] == row["medians"][mechanism] / row["medians"][row["best"]]
