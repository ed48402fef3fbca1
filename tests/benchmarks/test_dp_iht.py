"""The DP-IHT benchmarks (issue 10): the Sec. 7.2 run on a small slice of adult, its reference optimum, and the
synthetic-problem hook for ``python -m benchmarks.sparse --method dp-iht``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks import dp_iht as bench_dp_iht
from benchmarks.harness import BenchError
from estimators.local.sparse.iht import hard_threshold
from estimators.local.sparse.synthetic import sparse_linear_data
from service.mechanisms.dp_iht import COUNT_SHARE
from service.privacy import conversions
from service.privacy.cost import floor_to_grid


def _small(data_dir: Path, **changes: object) -> bench_dp_iht.DPIHTBench:
    settings = {"train": data_dir / "adult" / "adult_train.csv", "domain": data_dir / "adult" / "adult-domain.json",
                "designs": bench_dp_iht.ADULT_DESIGNS[:2], "sparsities": (3, 5), "epsilons": (1.0, 4.0),
                "sparsity": 3, "iterations": 10, "trials": 2, "max_train": 800} | changes
    return bench_dp_iht.DPIHTBench(**settings)  # type: ignore[arg-type]


def test_sec72_bench_records_the_gap_of_real_releases_and_plots(data_dir: Path, tmp_path: Path) -> None:
    config = _small(data_dir)
    result = bench_dp_iht.run_dp_iht_bench(config)
    points = config.points()
    assert len(points) == 2 + 2 + 2 and len(result["records"]) == len(points) * 2
    for record in result["records"]:
        assert record["optimality_gap"] == pytest.approx(record["private_loss"] - record["optimal_loss"])
        assert record["seconds"] > 0 and record["p"] in (23, 45)
        # every model is a real release, charged the rho (epsilon, delta) converts to
        assert record["rho"] == float(floor_to_grid(conversions.cdp_rho(record["epsilon"], 1e-3)))
    assert [r["p"] for r in result["references"] if r["sparsity"] == 3] == [23, 45]
    assert all(r["converged"] for r in result["references"])
    assert [p["epsilon"] for p in result["summary"]["epsilon"]] == [1.0, 4.0]
    assert all(p["trials"] == 2 for sweep in result["summary"].values() for p in sweep)
    # the same seed gives the same releases, hence the same gaps
    again = bench_dp_iht.run_dp_iht_bench(config)
    assert [r["optimality_gap"] for r in again["records"]] == [r["optimality_gap"] for r in result["records"]]
    png = tmp_path / "gap.png"
    bench_dp_iht.plot_dp_iht_bench(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the noiseless baseline: the same iteration without noise, so a gap of the private run above it is privacy's
    assert all(r["noiseless_gap"] == pytest.approx(r["noiseless_loss"] - r["loss"]) for r in result["references"])
    # a stored result's configuration reads back, and its references can be recomputed (deterministic)
    assert bench_dp_iht.config_from_json(json.loads(json.dumps(result["config"]))) == config
    stored = tmp_path / "result.json"
    stored.write_text(json.dumps({**result, "references": [
        {k: v for k, v in r.items() if not k.startswith("noiseless")} for r in result["references"]]}))
    restored = bench_dp_iht.add_noiseless(stored)
    assert [r["noiseless_loss"] for r in restored["references"]] == [r["noiseless_loss"] for r in result["references"]]


def test_reference_is_a_fixed_point_of_plain_iht() -> None:
    """On a small logistic problem the polished reference equals plain IHT run to its stopping rule: the same
    support and the same loss (to 1e-9, far below any gap the benchmark reports), and one more IHT step from it moves
    it by less than the tolerance."""
    rng = np.random.default_rng(5)
    Z = np.column_stack([np.ones(400), rng.normal(size=(400, 11))])
    y = np.where(Z @ np.r_[0.2, 1.5, -1.0, 0.5, np.zeros(8)] + rng.logistic(size=400) > 0, 1.0, -1.0)
    found = bench_dp_iht.sparse_logistic_optimum(Z, y, 4, 1e-3)
    assert found.converged and np.count_nonzero(found.theta) == 4
    step = 1.0 / (float(np.linalg.eigvalsh(Z.T @ Z / 400)[-1]) / 4.0 + 1e-3)
    theta = np.zeros(12)
    for _ in range(200_000):
        _, gradient = bench_dp_iht._loss_and_gradient(theta, Z, y, 1e-3)
        updated = hard_threshold(theta - step * gradient, 4)
        done = np.linalg.norm(updated - theta) <= 1e-12 * np.linalg.norm(theta)
        theta = updated
        if done:
            break
    assert set(np.flatnonzero(theta)) == set(np.flatnonzero(found.theta))
    assert found.loss == pytest.approx(bench_dp_iht.logistic_loss(theta, Z, y, 1e-3), abs=1e-9)
    _, gradient = bench_dp_iht._loss_and_gradient(found.theta, Z, y, 1e-3)
    assert np.linalg.norm(hard_threshold(found.theta - step * gradient, 4) - found.theta) <= 1e-6 * np.linalg.norm(
        found.theta)


def test_synthetic_relative_error_goes_through_the_release_path() -> None:
    """n = 3000 rows of Sec. 7.1's model (p = 20, s* = 3), epsilon 20, step 0.5, 40 iterations. Tolerance: the noise
    part as in tests/service/regression/test_dp_iht.py (six sd of the accumulated noise per coordinate, times
    sqrt(s*) and the label bound b that maps coefficients back), plus the rounding of y to 1001 codes (at most
    b/1000 per row, moving the least-squares solution on the support by at most sqrt(s*) b/1000 / lambda_min, with
    lambda_min >= 1/2 for +-1 designs of this size), plus the label noise's own least-squares error (C = 0.05
    uniform, sd C/sqrt(3 n) per coordinate: 6 sd times sqrt(s*)). Far below the error of a wrong answer (1)."""
    data = sparse_linear_data(3000, 20, 3, np.random.default_rng(8))
    error = bench_dp_iht.synthetic_relative_error(data, 20.0, 1e-5, 3, iterations=40, step=0.5, seed=1)
    rho = floor_to_grid(conversions.cdp_rho(20.0, 1e-5))
    rho_iteration = float(rho * (1 - COUNT_SHARE) / 40)
    sigma = 2 * math.sqrt(20) / math.sqrt(2 * rho_iteration)  # default clip 2B, B = sqrt(20)
    b = data.label_bound
    noise = 6 * 0.5 * sigma / 3000 / math.sqrt(1 - 0.25) * math.sqrt(3) * b
    rounding = math.sqrt(3) * b / 1000 / 0.5
    label = 6 * 0.05 / math.sqrt(3 * 3000) * math.sqrt(3)
    assert error < noise + rounding + label < 0.5


def test_bad_settings_are_refused_before_any_work(data_dir: Path) -> None:
    with pytest.raises(BenchError, match="sparsity 50 exceeds the 45 coefficients"):
        bench_dp_iht.run_dp_iht_bench(_small(data_dir, sparsities=(3, 50)))
    with pytest.raises(BenchError, match="iterations"):
        bench_dp_iht.run_dp_iht_bench(_small(data_dir, iterations=0))
    with pytest.raises(BenchError, match="epsilons"):
        bench_dp_iht.run_dp_iht_bench(_small(data_dir, epsilons=(0.0,)))
    with pytest.raises(BenchError, match="sweep_design must be one of"):
        bench_dp_iht.run_dp_iht_bench(_small(data_dir, sweep_design="nope"))
    with pytest.raises(BenchError, match="sweeps must be among"):
        bench_dp_iht.run_dp_iht_bench(_small(data_dir, sweeps=("q",)))


def test_sweeps_can_be_chosen_and_run_on_another_design(data_dir: Path) -> None:
    config = _small(data_dir, sweeps=("epsilon",), sweep_design="adult-10", trials=1)
    assert [(sweep, design.name, e) for sweep, design, _, e in config.points()] == [
        ("epsilon", "adult-10", 1.0), ("epsilon", "adult-10", 4.0)]


def test_cli_bench_dp_iht_writes_json_and_refuses_bad_numbers(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "dp_iht.json"
    args = ["--train", str(data_dir / "adult" / "adult_train.csv"), "--domain",
            str(data_dir / "adult" / "adult-domain.json"), "--json", str(out), "--trials", "1", "--iterations", "5",
            "--max-train", "800", "--sparsities", "2", "--epsilons", "2", "--sparsity", "2", "--quiet"]
    result = CliRunner().invoke(bench_dp_iht.app, args)
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    assert len(body["records"]) == 4 + 1 + 1 and set(body["summary"]) == {"p", "sparsity", "epsilon"}
    bad = CliRunner().invoke(bench_dp_iht.app, [*args[:-5], "--epsilons", "x", "--force"])
    assert bad.exit_code == 2 and "--epsilons must be comma-separated numbers" in " ".join(bad.output.split())
