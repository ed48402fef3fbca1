"""The sparse-regression campaigns on the command line (create, simulate, campaign fit) and ``marginalia bench
sparse`` (its documented records, its errors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from service.cli import app

runner = CliRunner()


def run(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.slow
def test_ldp_iht_and_label_ldp_on_the_command_line(engine, tmp_path: Path,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate: tests only
    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 1.0], size=(3000, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=x @ [0.6, 0.0, -0.8])
    frame.to_csv(tmp_path / "people.csv", index=False)
    created = run("campaign", "create", "iht", "--protocol", "ldp-iht", "--features", "a,b,c", "--target", "y",
                  "--epsilon", "2", "--participants", "3000", "--option", "sparsity=2", "--option", "rounds=3")
    assert created["spec"]["steps"] == 3 and [r["expected_reports"] for r in created["rounds"]] == [1000] * 3
    assert run("simulate", "iht", "--csv", str(tmp_path / "people.csv"), "--seed", "1", "--quiet")["reports"] == {
        "0": 1000, "1": 1000, "2": 1000}
    fit = run("campaign", "fit", "iht", "--model", "iht")
    assert list(fit["coefficients"]) == ["a", "b", "c", "(intercept)"] and fit["details"]["rounds_used"] == 3
    assert fit["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}

    frame[["a", "b", "c"]].to_csv(tmp_path / "public.csv", index=False)
    run("public", "load", "pub", "--csv", str(tmp_path / "public.csv"))
    run("campaign", "create", "labels", "--protocol", "label-ldp", "--features", "a,b,c", "--target", "y",
        "--public", "pub", "--epsilon", "2", "--delta", "1e-6", "--option", "sparsity=2", "--option",
        "standardize=false")
    run("simulate", "labels", "--csv", str(tmp_path / "people.csv"), "--seed", "2", "--quiet")
    for model in ("iht", "lasso"):
        assert run("campaign", "fit", "labels", "--model", model)["model"] == model

    bad = runner.invoke(app, ["campaign", "create", "bad", "--protocol", "ldp-iht", "--features", "a,b,c",
                              "--target", "y", "--epsilon", "1", "--option", "sparsity=2", "--option", "eta=0",
                              "--option", "rounds=2"])
    assert bad.exit_code == 2 and "option eta must be a finite positive number" in bad.output
    assert "Traceback" not in bad.output


def test_bench_sparse_writes_its_documented_records(tmp_path: Path) -> None:
    out, plot = tmp_path / "bench.json", tmp_path / "bench.png"
    result = runner.invoke(app, ["bench", "sparse", "--json", str(out), "--plot", str(plot), "--p", "5",
                                 "--n", "600", "--s", "2", "--trials", "2", "--epsilon", "2,4", "--seed", "3",
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert plot.stat().st_size > 0
    records = written["records"]
    assert len(records) == 3 * 2 * 2  # (method, p, n, epsilon, trial): 3 methods, 2 epsilons, 2 trials
    assert {(r["method"], r["epsilon"], r["trial"]) for r in records} == {
        (m, e, t) for m in ("ldp-iht", "label-ldp-iht", "lasso") for e in (2.0, 4.0) for t in (0, 1)}
    for record in records:
        assert {"relative_error", "seconds", "collect_seconds", "fit_seconds", "reports", "p", "n"} <= set(record)
        assert record["relative_error"] >= 0 and record["seconds"] > 0 and record["reports"] == 600
    # label-ldp-iht and the lasso answer from one collection: one collection time per (cell, family)
    for e in (2.0, 4.0):
        pair = [r for r in records if r["family"] == "label-ldp" and r["epsilon"] == e and r["trial"] == 0]
        assert pair[0]["collect_seconds"] == pair[1]["collect_seconds"]
    assert len(written["summary"]) == 3 * 2 and all(s["trials"] == 2 for s in written["summary"])
    again = runner.invoke(app, ["bench", "sparse", "--json", str(out), "--p", "5", "--n", "600", "--s", "2"])
    assert again.exit_code == 2 and "exists" in again.output
    bad = runner.invoke(app, ["bench", "sparse", "--json", str(tmp_path / "x.json"), "--method", "nope"])
    assert bad.exit_code == 2 and "method must be among" in bad.output and not (tmp_path / "x.json").exists()


def test_bench_sparse_runs_the_central_dp_iht_beside_a_local_protocol(tmp_path: Path) -> None:
    """``--method dp-iht`` is a charged central release on the cell's rows: at a large epsilon it recovers theta*."""
    out = tmp_path / "central.json"
    result = runner.invoke(app, ["bench", "sparse", "--json", str(out), "--method", "dp-iht,label-ldp-iht", "--p", "5",
                                 "--n", "2000", "--s", "2", "--trials", "1", "--epsilon", "20", "--seed", "4",
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    records = {r["method"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"dp-iht", "label-ldp-iht"} and records["dp-iht"]["family"] == "central"
    # at epsilon 20 the release's noise is small next to the signal; a fit that ignored the data would be near 1
    assert records["dp-iht"]["relative_error"] < 0.2
