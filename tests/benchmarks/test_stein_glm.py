"""``python -m benchmarks.stein_glm`` and ``benchmarks.stein_glm_real`` on tiny settings: end to end through
campaigns, the simulator and ``campaign fit``; the documented JSON keys; a seed gives the same records; bad options
are clear errors that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from benchmarks import stein_glm, stein_glm_real
from benchmarks.stein_glm import SteinBench, delta_for, run_stein_bench, summarize
from benchmarks.stein_glm_real import CAMPAIGNS, PRIVATE_METHODS, SteinRealBench, run_stein_real
from estimators.local.accuracy import loglog_slope

RECORD_KEYS = {"n", "trial", "epsilon", "p", "public_n", "design", "model", "delta", "metric",
               "squared_relative_error", "no_root", "seconds", "simulate_seconds", "fit_seconds",
               "campaign_epsilon", "campaign_delta", "norm_bound", "reports", "seed"}
TIMINGS = ("seconds", "simulate_seconds", "fit_seconds")
runner = CliRunner()


def _untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMINGS} for r in records]


def test_the_command_writes_records_summary_and_plot(tmp_path: Path) -> None:
    out, plot = tmp_path / "stein.json", tmp_path / "stein.png"
    result = runner.invoke(stein_glm.app, ["--design", "bernoulli", "--n", "300,600", "--epsilon", "5",
                                 "--trials", "2", "--seed", "4", "--json", str(out), "--plot", str(plot), "--quiet"])
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    records = body["records"]
    assert [(r["n"], r["trial"]) for r in records] == [(300, 0), (300, 1), (600, 0), (600, 1)]
    for record in records:
        assert RECORD_KEYS <= set(record), RECORD_KEYS - set(record)
        assert record["metric"] == "linf" and record["reports"] == record["n"] == record["public_n"]
        assert record["campaign_epsilon"] == 5.0 and record["norm"] == "l1" and record["norm_bound"] == 1.0
        # the campaign stores its delta rounded up to its unit (1e-12): the paper's n^-1.1, not less
        assert delta_for(record["n"]) <= record["campaign_delta"] <= delta_for(record["n"]) + 1e-12
        # no root is an explicit flag with no error, never a NaN or a silently dropped trial
        assert (record["squared_relative_error"] is None) == record["no_root"]
        assert record["no_root"] or record["squared_relative_error"] > 0
    (summary,) = body["summary"]
    assert summary["public_n"] == "n" and summary["trials_total"] == 4
    assert summary["no_root_total"] == sum(r["no_root"] for r in records)
    assert [q["answered"] + q["no_root"] for q in summary["by_n"]] == [2, 2]
    assert "median_slope" in summary and "mean_slope" in summary
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_seed_gives_the_same_records_and_another_seed_others() -> None:
    config = SteinBench(design="gaussian", sizes=(400,), epsilons=(8.0,), dimensions=(3,), trials=2, seed=11)
    first, again = run_stein_bench(config), run_stein_bench(config)
    assert _untimed(first["records"]) == _untimed(again["records"])
    other = run_stein_bench(SteinBench(**{**config.__dict__, "seed": 12}))
    assert [r["seed"] for r in other["records"]] != [r["seed"] for r in first["records"]]
    assert [r["norm_bound"] for r in other["records"]] != [r["norm_bound"] for r in first["records"]]


def test_public_sizes_and_dimensions_are_axes() -> None:
    config = SteinBench(design="gaussian", sizes=(300,), epsilons=(8.0,), dimensions=(2, 3), public_sizes=(100, 200),
                        trials=1, seed=2)
    body = run_stein_bench(config)
    assert body["varied"] == "p"
    assert sorted((r["p"], r["public_n"]) for r in body["records"]) == [(2, 100), (2, 200), (3, 100), (3, 200)]
    assert len(body["summary"]) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["--epsilon", "0"], "epsilon must be a list of positive finite numbers"),
    (["--epsilon", "2,-1"], "epsilon must be a list of positive finite numbers"),
    (["--epsilon", "two"], "--epsilon must be comma-separated numbers"),
    (["--n", "1,100"], "n must be a non-empty list of integers >= 2"),
    (["--design", "uniform"], "design must be one of"),
    (["--model", "poisson"], "model must be one of"),
    (["--p", "0"], "p must be a non-empty list of integers >= 1"),
    (["--public-n", "1"], "public-n must be a non-empty list of integers >= 2"),
    (["--trials", "0"], "trials must be a positive integer"),
])
def test_bad_options_are_clear_errors_and_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "out.json"
    result = runner.invoke(stein_glm.app, ["--n", "100", "--json", str(out), *args])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert message in " ".join(result.output.split())
    assert not out.exists()


def test_summary_counts_trials_without_a_root_and_fits_the_slope() -> None:
    base = {"design": "gaussian", "model": "logistic", "p": 10, "epsilon": 2.0, "seconds": 1.0}
    records = [{**base, "n": n, "public_n": n, "trial": t, "squared_relative_error": 5.0 / n, "no_root": False}
               for n in (100, 1000, 10_000) for t in range(2)]
    records.append({**base, "n": 100, "public_n": 100, "trial": 2, "squared_relative_error": None, "no_root": True})
    records += [{**base, "n": 10**5, "public_n": 10**5, "trial": t, "squared_relative_error": None, "no_root": True}
                for t in range(2)]
    (entry,) = summarize(records)
    assert entry["no_root_total"] == 3 and entry["trials_total"] == 9
    assert [q["no_root"] for q in entry["by_n"]] == [1, 0, 0, 2]
    assert entry["n_used_for_slope"] == [100, 1000, 10_000]  # n = 1e5: no trial answered
    assert entry["median_slope"] == pytest.approx(-1.0) and entry["mean_slope"] == pytest.approx(-1.0)


def test_loglog_slope() -> None:
    assert loglog_slope([10, 100, 1000], [1.0, 0.1, 0.01]) == pytest.approx(-1.0)
    assert loglog_slope([10, 100, 1000], [3.0, 3.0 / np.sqrt(10), None]) == pytest.approx(-0.5)
    assert loglog_slope([10, 100], [1.0, None]) is None
    assert loglog_slope([10, 10], [1.0, 2.0]) is None


def _real_table(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(2400, 3)).astype(float)
    score = (x - 2.0) @ np.array([1.0, -0.8, 0.5])
    y = (rng.random(len(x)) < 1 / (1 + np.exp(-score))).astype(int)
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(label=y)
    frame.iloc[:2000].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[2000:].to_csv(tmp_path / "test.csv", index=False)
    return tmp_path / "train.csv", tmp_path / "test.csv"


def test_the_real_data_command_end_to_end(tmp_path: Path) -> None:
    train, test = _real_table(tmp_path)
    out, plot = tmp_path / "real.json", tmp_path / "real.png"
    result = runner.invoke(stein_glm_real.app, ["--train", str(train), "--test", str(test), "--target",
                                 "label", "--epsilon", "1000", "--trials", "1", "--seed", "1", "--json", str(out),
                                 "--plot", str(plot), "--quiet"])
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    assert body["data"]["public_rows"] == body["data"]["participants"] == 1000 and body["data"]["test_rows"] == 400
    by_method = {r["method"]: r for r in body["records"]}
    assert set(by_method) == {*PRIVATE_METHODS, "logreg", "majority"}
    assert by_method["logreg"]["accuracy"] > 0.7 and by_method["logreg"]["auc"] > 0.75
    for method, (kind, _, _) in PRIVATE_METHODS.items():
        record = by_method[method]
        delta = pytest.approx(1000**-1.1) if CAMPAIGNS[kind][1] else 0.0  # the pure public-gram campaigns: 0
        assert record["campaign_epsilon"] == 1000.0 and record["campaign_delta"] == delta
        assert record["no_root"] or 0 <= record["accuracy"] <= 1
    # the Stein coefficients are c > 0 times the OLS ones: same sign rule, same ranking
    stein, ols = by_method["stein-logistic/public-cov"], by_method["ols-linear/public-cov"]
    assert not stein["no_root"]
    assert stein["accuracy"] == ols["accuracy"] and stein["auc"] == pytest.approx(ols["auc"])
    # at epsilon 1000 the noise is small: the private direction ranks the test rows about as well as the reference
    assert stein["auc"] > by_method["logreg"]["auc"] - 0.1
    # the default variant estimates its intercept: its mean predicted probability is near the test base rate
    default = by_method["public-gram/logistic"]
    assert default["auc"] > by_method["logreg"]["auc"] - 0.1
    assert abs(default["mean_probability"] - body["data"]["positive_rate_test"]) < 0.05
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_real_data_bench_refuses_bad_input(tmp_path: Path) -> None:
    train, test = _real_table(tmp_path)
    config = SteinRealBench(train=train, test=test, target="nope", epsilons=(1.0,), trials=1)
    with pytest.raises(ValueError, match="has no column 'nope'"):
        run_stein_real(config)
    with pytest.raises(ValueError, match="epsilon must be a list of positive finite numbers"):
        run_stein_real(SteinRealBench(train=train, test=test, target="label", epsilons=(0.0,)))
    out = tmp_path / "x.json"
    result = runner.invoke(stein_glm_real.app, ["--train", str(tmp_path / "missing.csv"), "--test",
                                 str(test), "--target", "label", "--json", str(out)])
    # the console wraps a long path mid-word: compare the message with its line breaks removed
    assert result.exit_code == 2 and "missing.csv" in result.output.replace("\n", "") and not out.exists()
