"""Free answers on the command line (issue 29, sections 4 and 7): a coded table whose domain file labels its codes
answers with the labels (``--codes`` for the codes), every answer says what it cost (nothing: which release paid),
and ``dataset list`` says when a table counts privacy units, not rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from service.cli import app
from service.data.attach.tables import attach_parquet
from tests.support.backends import ON_SQLITE
from tests.support.binned import raw_frame, write_spec
from tests.support.cli import run, runner

FREE = {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}


def _coded_table(folder: Path) -> None:
    rng = np.random.default_rng(5)
    pd.DataFrame({"sex": rng.integers(0, 2, 400), "age": rng.integers(0, 4, 400)}).to_csv(folder / "t.csv",
                                                                                           index=False)
    (folder / "domain.json").write_text(json.dumps({"sex": {"size": 2, "kind": "categorical",
                                                            "labels": ["female", "male"]}, "age": 4}))
    run("dataset", "load", "people", "--csv", str(folder / "t.csv"), "--domain", str(folder / "domain.json"))
    run("budget", "set", "people", "--epsilon", "10")


@ON_SQLITE
def test_a_labelled_domain_answers_with_its_labels_and_a_cost(engine, tmp_path: Path) -> None:  # noqa: ANN001, ARG001
    _coded_table(tmp_path)
    assert run("dataset", "show", "people")["labels"] == {"sex": ["female", "male"]}
    release = run("release", "marginals", "people", "--mechanism", "laplace", "--workload", "all-2way",
                  "--epsilon", "5")["release_id"]
    answer = run("marginal", str(release), "sex", "age")
    assert answer["labels"] == {"sex": ["female", "male"]} and answer["cost"] == FREE  # main: no labels, no cost
    coded = run("marginal", str(release), "sex", "--codes")
    assert coded["labels"] == {} and coded["cost"] == FREE
    human = runner.invoke(app, ["marginal", str(release), "sex"])
    assert human.exit_code == 0 and "female" in human.output
    assert f"cost 0: post-processing of release {release}" in " ".join(human.output.split())
    assert "female" not in runner.invoke(app, ["marginal", str(release), "sex", "--codes"]).output
    out = tmp_path / "rows.csv"
    written = run("synth", str(release), "--rows", "20", "--out", str(out))
    assert written["cost"] == FREE and set(pd.read_csv(out)["sex"]) <= {"female", "male"}
    run("synth", str(release), "--rows", "20", "--out", str(out), "--codes", "--force")
    assert set(pd.read_csv(out)["sex"]) <= {0, 1}


@ON_SQLITE
def test_dataset_list_says_what_a_table_counts(engine, tmp_path: Path) -> None:  # noqa: ANN001
    _coded_table(tmp_path)
    frame = raw_frame(50, seed=1).assign(person=np.arange(50) // 2)
    frame.to_parquet(tmp_path / "p.parquet")
    attach_parquet(engine, "visits", [str(tmp_path / "p.parquet")], write_spec(tmp_path), privacy_unit="person")
    listed = {d["name"]: d for d in run("dataset", "list")}
    assert listed["visits"]["privacy_unit"] == "person" and listed["visits"]["rows"] == 25
    assert listed["people"]["privacy_unit"] is None
    human = " ".join(runner.invoke(app, ["dataset", "list"], env={"COLUMNS": "200"}).output.split())
    assert "privacy units" in human and "25 units of 'person'" in human and "400 rows" in human
