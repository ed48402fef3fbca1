"""``python -m benchmarks.regression`` on titanic: one trial, two epsilons, every method, through the real release
path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.regression import RegressionBench, app, run_regression_bench, summarize
from service.mechanisms import registry

CATEGORICAL = "Sex,Embarked,Cabin,Pclass,Survived"
EPSILONS = (0.5, 2.0)
ALL_METHODS = "ols,adassp,dd-ssp,aim-synth,objpert,logreg"


def _run(tmp_path: Path, data_dir: Path, task: str, target: str, features: str) -> tuple[dict, Path]:
    titanic = data_dir / "titanic"
    out, plot = tmp_path / f"{task}.json", tmp_path / f"{task}.png"
    result = CliRunner().invoke(app, [
        "--train", str(titanic / "titanic.csv"), "--test", str(titanic / "titanic.csv"),
        "--domain", str(titanic / "titanic-domain.json"), "--target", target, "--task", task,
        "--categorical", CATEGORICAL, "--features", features, "--methods", ALL_METHODS,
        "--epsilons", ",".join(map(str, EPSILONS)), "--delta", "1e-5", "--trials", "1", "--seed", "3",
        "--json", str(out), "--plot", str(plot), "--quiet",
    ])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert result.stdout.startswith("wrote ")
    return written, plot


def _check(body: dict, plot: Path, metric: str, private: list[str], reference: str, skipped: list[str]) -> None:
    assert body["benchmark"] == "regression" and body["metric"] == metric
    assert body["skipped_methods"] == skipped
    assert body["data"]["train_rows_used"] == body["data"]["test_rows"] == 1304
    records = body["records"]
    (ref,) = [r for r in records if r["method"] == reference]
    assert ref["epsilon"] is None and math.isfinite(ref[metric])
    by_key = {(r["method"], r["epsilon"], r["trial"]): r for r in records if r["method"] != reference}
    assert set(by_key) == {(m, e, 0) for m in private for e in EPSILONS}
    for (method, epsilon, _), record in by_key.items():
        assert "error" not in record, record
        value = record[metric]
        assert (0.0 <= value <= 1.0) if metric == "auc" else value >= 0.0
        assert record["seconds"] >= record["release_seconds"] >= 0.0
        if method == "objpert":
            assert record["cost"] == {"epsilon": epsilon, "delta": 1e-5, "rho": 0.0}
        else:  # zCDP releases are charged the rho (epsilon, delta) converts to
            expected = registry.get("gaussian").cost(str(epsilon), "1e-5", None)
            assert record["cost"] == expected.to_json()
    for epsilon in EPSILONS:  # the service's rule: residual for a linear DD-SSP on a narrow design, else AIM; one
        dd_ssp, synth = by_key[("dd-ssp", epsilon, 0)], by_key[("aim-synth", epsilon, 0)]  # release per mechanism
        assert synth["mechanism"] == "aim"
        assert dd_ssp["mechanism"] == ("residual" if metric == "mse" else "aim")
        assert (dd_ssp["release_id"] == synth["release_id"]) == (dd_ssp["mechanism"] == synth["mechanism"])
    for method in private:
        for epsilon in EPSILONS:
            entry = body["summary"][method][repr(epsilon)]
            assert entry["trials"] == 1 and entry["median"] == by_key[(method, epsilon, 0)][metric]
    assert body["summary"][reference]["none"]["median"] == ref[metric]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


@pytest.mark.slow
def test_bench_linear_and_logistic_on_titanic(tmp_path: Path, data_dir: Path) -> None:
    linear, plot = _run(tmp_path, data_dir, "linear", "Fare", "Pclass,Sex,SibSp,Embarked")
    _check(linear, plot, "mse", ["adassp", "dd-ssp", "aim-synth"], "ols", ["objpert", "logreg"])
    logistic, plot = _run(tmp_path, data_dir, "logistic", "Sex", "Pclass,SibSp,Embarked,Fare")
    _check(logistic, plot, "auc", ["dd-ssp", "aim-synth", "objpert"], "logreg", ["ols", "adassp"])
    assert 0.5 <= logistic["data"]["majority_rate"] <= 1.0
    for record in logistic["records"]:  # labels' accuracy beside the AUC; a calibrated DD-SSP's surrogate's too
        assert 0.0 <= record["accuracy"] <= 1.0
        assert ("accuracy_uncalibrated" in record) == (record["method"] == "dd-ssp")
    assert set(logistic["summary_accuracy"]) == {"dd-ssp", "aim-synth", "objpert", "logreg"}


def test_bench_without_marginal_methods_is_quick_and_complete(tmp_path: Path, data_dir: Path) -> None:
    """The same protocol with the methods that need no graphical model (fast enough for every test run)."""
    titanic = data_dir / "titanic"
    config = RegressionBench(
        train=titanic / "titanic.csv", test=titanic / "titanic.csv", domain=titanic / "titanic-domain.json",
        target="Sex", task="logistic", features=("Pclass", "SibSp", "Embarked", "Fare"),
        categorical=tuple(CATEGORICAL.split(",")), methods=("logreg", "objpert", "ols"), epsilons=EPSILONS,
        trials=2, seed=1,
    )
    body = run_regression_bench(config)
    assert body["skipped_methods"] == ["ols"]
    assert sorted((r["epsilon"], r["trial"]) for r in body["records"] if r["method"] == "objpert") == [
        (e, t) for e in EPSILONS for t in (0, 1)]
    assert len({r["release_id"] for r in body["records"] if r["method"] == "objpert"}) == 4
    assert body["summary"] == summarize(body["records"], "auc")
    with pytest.raises(ValueError, match="methods"):
        run_regression_bench(RegressionBench(**{**config.__dict__, "methods": ("nope",)}))
    with pytest.raises(ValueError, match="epsilons"):
        run_regression_bench(RegressionBench(**{**config.__dict__, "epsilons": (0.0,)}))
