"""A marginals campaign on the command line (issue 33): create it with a stated domain, simulate participants from a
CSV, plan it, and answer with the same ``marginal`` and ``synth`` commands a release answers with (``--campaign``)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from service.cli import app
from tests.support.cli import run, runner


def test_a_marginals_campaign_on_the_command_line(engine, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate, and answering from it
    rng = np.random.default_rng(0)
    people = tmp_path / "people.csv"
    with people.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b"])
        writer.writerows(zip(rng.integers(0, 3, 3_000), rng.integers(0, 2, 3_000), strict=True))
    created = run("campaign", "create", "survey", "--protocol", "marginals", "--features", "a,b", "--epsilon", "2",
                  "--domain", "a=3;b=2", "--way", "1")
    assert created["spec"]["sets"] == [[0], [1]] and created["spec"]["sizes"] == [3, 2]
    assert run("simulate", "survey", "--csv", str(people), "--seed", "1", "--quiet")["reports"] == {"0": 3_000}
    answer = run("marginal", "--campaign", "survey", "a")
    assert answer["campaign"] == "survey" and len(answer["counts"]) == 3 and answer["error_basis"] == "measurement"
    pair = run("marginal", "--campaign", "survey", "a", "b")
    assert not pair["coverage"]["measured"]  # never measured together: the model's independence, said so
    out = tmp_path / "rows.csv"
    wrote = run("synth", "--campaign", "survey", "--rows", "10", "--out", str(out))
    assert wrote["rows"] == 10 and out.read_text().splitlines()[0] == "a,b"
    plan = run("campaign", "plan", "--protocol", "marginals", "--features", "a,b", "--epsilon", "2", "--domain",
               "a=3;b=2", "--participants", "3000")
    assert set(plan["marginal_errors"]) == {"a", "b", "a x b"}  # the planned split: both, and their pair
    assert plan["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    human = runner.invoke(app, ["marginal", "--campaign", "survey", "a"])
    assert human.exit_code == 0 and "from campaign 'survey'" in human.output
    refused = runner.invoke(app, ["marginal", "survey", "a", "--json"])
    assert refused.exit_code == 2 and "not a release id" in refused.output
