"""``python -m benchmarks.sparse`` (Sec. 7.1 of Wang & Xu 2019 through campaigns): its documented records, its errors,
and the central DP-IHT beside a local protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks import sparse
from benchmarks.harness import BenchError

runner = CliRunner()


def test_bench_sparse_writes_its_documented_records(tmp_path: Path) -> None:
    out, plot = tmp_path / "bench.json", tmp_path / "bench.png"
    result = runner.invoke(sparse.app, ["--json", str(out), "--plot", str(plot), "--p", "5",
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
    again = runner.invoke(sparse.app, ["--json", str(out), "--p", "5", "--n", "600", "--s", "2"])
    assert again.exit_code == 2 and "exists" in again.output
    bad = runner.invoke(sparse.app, ["--json", str(tmp_path / "x.json"), "--method", "nope"])
    assert bad.exit_code == 2 and "method must be among" in bad.output and not (tmp_path / "x.json").exists()


def test_bench_sparse_runs_the_central_dp_iht_beside_a_local_protocol(tmp_path: Path) -> None:
    """``--method dp-iht`` is a charged central release on the cell's rows: at a large epsilon it recovers theta*."""
    out = tmp_path / "central.json"
    result = runner.invoke(sparse.app, ["--json", str(out), "--method", "dp-iht,label-ldp-iht", "--p", "5",
                                 "--n", "2000", "--s", "2", "--trials", "1", "--epsilon", "20", "--seed", "4",
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    records = {r["method"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"dp-iht", "label-ldp-iht"} and records["dp-iht"]["family"] == "central"
    # at epsilon 20 the release's noise is small next to the signal; a fit that ignored the data would be near 1
    assert records["dp-iht"]["relative_error"] < 0.2


def test_bench_sparse_iht_variant_is_checked_and_reaches_the_campaign(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="--iht-variant must be default or paper"):
        sparse.check_config(sparse.SparseBench(iht_variant="fast"))
    out = tmp_path / "paper.json"
    result = runner.invoke(sparse.app, ["--json", str(out), "--method", "ldp-iht", "--p", "5", "--n", "2000", "--s",
                                        "2", "--trials", "1", "--iht-variant", "paper", "--quiet"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["config"]["iht_variant"] == "paper"
    assert written["records"][0]["rounds_used"] == 6  # T = ceil(ln(2000 / 5)), not the default 1


def test_bench_sparse_runs_the_coordinate_randomizer_beside_the_l2_ball(tmp_path: Path) -> None:
    """``--method ldp-iht-coordinate``: its own campaign with ``randomizer=coordinate`` on the same rows."""
    out = tmp_path / "coordinate.json"
    result = runner.invoke(sparse.app, ["--json", str(out), "--method", "ldp-iht,ldp-iht-coordinate", "--p", "5",
                                        "--n", "20000", "--s", "2", "--trials", "1", "--epsilon", "8", "--quiet"])
    assert result.exit_code == 0, result.output
    records = {r["method"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"ldp-iht", "ldp-iht-coordinate"}
    assert records["ldp-iht-coordinate"]["family"] == "ldp-iht-coordinate"
    assert records["ldp-iht-coordinate"]["reports"] == 20000 and records["ldp-iht-coordinate"]["rounds_used"] == 1
    assert records["ldp-iht-coordinate"]["relative_error"] < 0.3  # at epsilon 8 the reports carry the signal


def test_bench_sparse_drerm_radius_is_public_and_checked(tmp_path: Path) -> None:
    """DR-ERM's l1 radius: 1 by default (the design's public norm of theta*), sqrt(s) with --drerm-radius sparsity."""
    with pytest.raises(BenchError, match="--drerm-radius must be one of"):
        sparse.check_config(sparse.SparseBench(methods=("dr-erm",), drerm_radius="data"))
    radii = {}
    for choice in ("norm", "sparsity"):
        out = tmp_path / f"{choice}.json"
        result = runner.invoke(sparse.app, ["--json", str(out), "--method", "dr-erm", "--p", "30", "--n", "400",
                                            "--s", "4", "--trials", "1", "--drerm-radius", choice, "--quiet"])
        assert result.exit_code == 0, result.output
        radii[choice] = json.loads(out.read_text())["records"][0]["radius"]
    assert radii == {"norm": 1.0, "sparsity": 2.0}


@pytest.mark.slow  # two campaigns of 3,000 simulated participants: about 10 s on a shared machine
def test_bench_sparse_runs_linear_ssp_beside_bernstein(tmp_path: Path) -> None:
    """``--method linear-ssp,bernstein``: one campaign each on the same rows; at epsilon 4 and p = 1 the sufficient
    statistics recover theta* (a fit that ignored the data would have relative error about 1)."""
    out = tmp_path / "ssp.json"
    result = runner.invoke(sparse.app, ["--json", str(out), "--method", "linear-ssp,bernstein", "--p", "1",
                                 "--n", "3000", "--s", "1", "--trials", "1", "--epsilon", "4", "--seed", "5",
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    records = {r["method"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"linear-ssp", "bernstein"} and records["linear-ssp"]["family"] == "linear-ssp"
    assert records["linear-ssp"]["reports"] == 3000 and records["linear-ssp"]["ridge"] >= 0
    assert records["linear-ssp"]["relative_error"] < 0.2
