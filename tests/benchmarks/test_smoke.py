"""Every benchmark runs as documented (``python -m benchmarks.NAME``, from the repository root, in a fresh process) on
tiny sizes and writes its JSON, and its plot where it draws one, at the paths ``--json`` and ``--plot`` name. Also:
every module of the package is covered here, the package is not in the wheel, and nothing shipped imports it.

Each case is seconds; the ones that start a database server, an HTTP server or fresh JAX processes are ``slow``.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import benchmarks

REPO = Path(__file__).resolve().parents[2]
#: Modules of the package that are not benchmarks.
SUPPORT = {"harness", "measure"}
Args = Callable[[Path, Path], list[str]]


def _stein_real_table(folder: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(2400, 3)).astype(float)
    y = (rng.random(len(x)) < 1 / (1 + np.exp(-(x - 2.0) @ np.array([1.0, -0.8, 0.5])))).astype(int)
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(label=y)
    frame.iloc[:2000].to_csv(folder / "train.csv", index=False)
    frame.iloc[2000:].to_csv(folder / "test.csv", index=False)
    return folder / "train.csv", folder / "test.csv"


def _stein_real(tmp: Path, data: Path) -> list[str]:
    train, test = _stein_real_table(tmp)
    return ["--train", str(train), "--test", str(test), "--target", "label", "--epsilon", "5", "--trials", "1",
            "--quiet"]


def _small_taxi(tmp: Path, data: Path) -> list[str]:
    folder = tmp / "taxi"
    folder.mkdir()
    pd.read_csv(data / "nist_taxi" / "nist-taxi.csv", nrows=3000).to_csv(folder / "nist-taxi.csv", index=False)
    shutil.copy(data / "nist_taxi" / "nist-taxi-domain.json", folder / "nist-taxi-domain.json")
    return ["--repeats", "1", "--data", str(folder)]


def _sparse_quick_replot(tmp: Path, data: Path) -> list[str]:
    stored = tmp / "sparse_quick.json"
    shutil.copy(REPO / "benchmarks" / "results" / "sparse_quick.json", stored)
    return ["--replot", "--json", str(stored)]


TITANIC = "titanic/titanic"
#: name -> (arguments on tiny sizes, draws a plot); ``--json`` and ``--plot`` are added by the test.
FAST: dict[str, tuple[Args, bool]] = {
    "local_marginals": (lambda tmp, data: ["--tables", "adult", "--epsilons", "2", "--trials", "1", "--aim-trials", "1",
                                           "--way", "1", "--rows", "3000", "--throughput", "2000", "--batch", "1000"],
                        True),
    "wire_throughput": (lambda tmp, data: ["--sizes", "200", "--repeats", "1"], True),
    "console_pages": (lambda tmp, data: ["--requests", "2", "--releases", "3", "--entries", "10"], False),
    "load_memory": (lambda tmp, data: ["--sizes", "2000", "--folder", str(tmp / "tables"), "--quiet"], True),
    "dp_iht_engine": (lambda tmp, data: ["--rows", "3000", "--iterations", "3", "--folder", str(tmp / "tables"),
                                         "--quiet"], True),
    "engines": (lambda tmp, data: ["--rows", "3000", "--sqlite-rows", "3000", "--repeats", "1", "--folder",
                                   str(tmp / "tables"), "--quiet"], True),
    # delta = n^-1.1 must stay under the default per-participant cap (1e-4): n >= 5,000
    "simulate_throughput": (lambda tmp, data: ["--n", "20000", "--batches", "5000"], True),
    "residual_quick": (lambda tmp, data: ["--tables", "titanic", "--epsilons", "1", "--trials", "1", "--losses",
                                          "sum_var"], True),
    "ddssp_residual_quick": (lambda tmp, data: ["--runs", "adult-linear-no-intercept", "--epsilons", "1",
                                                "--target-weights", "0", "--ridge-factors", "1", "--trials", "1"],
                             True),
    "stein_glm_quick": (lambda tmp, data: ["--n", "2000", "4000", "--epsilons", "5", "--reps", "1", "--settings",
                                           "alg2"], True),
    "local_glm": (lambda tmp, data: ["--n", "1000", "2000", "--epsilons", "5", "--trials", "1", "--randomizers",
                                     "l2ball", "--acs-epsilons", "4", "--acs-rows", "2000", "--quiet"], True),
    "accuracy_forecast": (lambda tmp, data: ["--tables", "titanic", "--mechanisms", "laplace", "residual", "mst",
                                             "--epsilons", "1", "--trials", "1", "--proxies", "mst:1"], True),
    "residual_service": (lambda tmp, data: ["--parts", "accuracy", "--tables", "titanic", "--mechanisms", "gaussian",
                                            "--epsilons", "1", "--trials", "1"], True),
    "regression": (lambda tmp, data: [
        "--train", str(data / f"{TITANIC}.csv"), "--test", str(data / f"{TITANIC}.csv"), "--domain",
        str(data / f"{TITANIC}-domain.json"), "--target", "Fare", "--task", "linear", "--categorical",
        "Sex,Embarked,Cabin,Pclass,Survived", "--features", "Pclass,Sex,SibSp", "--methods", "ols,adassp",
        "--epsilons", "1", "--trials", "1", "--quiet"], True),
    "stein_glm": (lambda tmp, data: ["--design", "bernoulli", "--n", "300", "--epsilon", "5", "--trials", "1",
                                     "--quiet"], True),
    "stein_glm_real": (_stein_real, True),
    "sparse": (lambda tmp, data: ["--method", "ldp-iht,linear-ssp", "--p", "5", "--n", "600", "--s", "2", "--trials",
                                  "1", "--epsilon", "2", "--quiet"], True),
    "dp_iht": (lambda tmp, data: [
        "--train", str(data / "adult" / "adult_train.csv"), "--domain", str(data / "adult" / "adult-domain.json"),
        "--sweeps", "epsilon", "--sweep-design", "adult-10", "--epsilons", "2", "--sparsity", "2", "--trials", "1",
        "--iterations", "5", "--max-train", "800", "--quiet"], True),
    "sparse_quick": (_sparse_quick_replot, True),  # redraws the committed results; the slow case below runs one
    "campaign_plan": (lambda tmp, data: ["--cases", "stein-glm,ldp-iht", "--n", "600", "--epsilons", "4",
                                         "--trials", "1", "--quiet"], True),
    "stein_glm_clipping": (lambda tmp, data: ["--tables", "synthetic", "--epsilon", "2", "--trials", "1", "--quiet"],
                           True),
    "objpert_memory": (lambda tmp, data: ["--rows", "3000", "--source-rows", "300", "--workdir", str(tmp),
                                          "--quiet"], True),
    "mechanism_choice": (lambda tmp, data: ["--tables", "titanic", "--epsilons", "1", "--trials", "1",
                                            "--mechanisms", "gaussian", "residual", "aim"], True),
    "regression_method_choice": (lambda tmp, data: ["--only", "titanic", "--epsilons", "1", "--trials", "1"], True),
    "error_bar_coverage": (lambda tmp, data: ["--table", "titanic", "--target", "Fare", "--features", "Pclass,Sex",
                                              "--methods", "dd-ssp/gaussian,adassp/adassp", "--trials", "2",
                                              "--quiet"], True),
}
SLOW: dict[str, tuple[Args, bool]] = {
    "fit_tolerance": (lambda tmp, data: ["--cases", "titanic-laplace", "--tols", "1e-3", "--iters", "60"], True),
    "aim_profile": (lambda tmp, data: ["--tables", "titanic", "--mechanisms", "mst", "--epsilons", "1", "--trials",
                                       "1", "--iters", "20"], True),
    "marginals": (lambda tmp, data: ["--tables", "titanic", "--mechanisms", "laplace", "--epsilons", "1", "--trials",
                                     "1", "--iters", "20"], True),
    "body_edge": (lambda tmp, data: ["--megabytes", "1"], True),  # six marginalia serve processes
    "counting": (_small_taxi, True),
    "sparse_quick": (lambda tmp, data: ["--only", "bernstein", "--trials", "1", "--bernstein-sizes", "2000"], True),
    # starts a local-mode Spark (seconds to a minute on a busy machine)
    "spark_engine": (lambda tmp, data: ["--rows", "2000,4000", "--folder", str(tmp / "tables"), "--quiet"], True),
}
#: Benchmarks checked by their own tests below: they write something else than one JSON, or (``api_load``) their
#: smoke run is the one with both backends (a second run on SQLite alone took another minute of the suite)
OTHER = {"regression_compare", "regression_suite", "api_load"}


def run(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.NAME ARGS`` from the repository root, this checkout's code first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def check_writes(name: str, case: tuple[Args, bool], tmp_path: Path, data_dir: Path) -> None:
    make_args, plots = case
    args = make_args(tmp_path, data_dir)
    out, png = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    if "--json" in args:  # the case names its own JSON (a replot of stored results)
        out = Path(args[args.index("--json") + 1])
    else:
        args += ["--json", str(out)]
    done = run(name, *args, "--plot", str(png))
    assert done.returncode == 0, done.stderr[-3000:]
    assert isinstance(json.loads(out.read_text()), dict)
    assert png.exists() == plots and (not plots or png.stat().st_size > 1000)


@pytest.mark.parametrize("name", sorted(FAST))
def test_each_quick_benchmark_writes_its_json_and_plot(name: str, tmp_path: Path, data_dir: Path) -> None:
    check_writes(name, FAST[name], tmp_path, data_dir)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_each_slow_benchmark_writes_its_json_and_plot(name: str, tmp_path: Path, data_dir: Path) -> None:
    check_writes(name, SLOW[name], tmp_path, data_dir)


@pytest.mark.slow
@pytest.mark.postgres
def test_api_load_measures_both_backends_with_postgresql(postgres_server, tmp_path: Path) -> None:  # noqa: ANN001
    """``--postgresql`` (its own throwaway server; the fixture only skips where PostgreSQL cannot start) adds a
    ``postgresql`` entry beside ``sqlite``, each with its HTTP runs and the in-process baseline."""
    out, png = tmp_path / "api_load.json", tmp_path / "api_load.png"
    done = run("api_load", "--clients", "2", "--requests-per-client", "2", "--workers", "1", "--postgresql",
               "--releases", "1", "--json", str(out), "--plot", str(png))
    assert done.returncode == 0, done.stderr[-3000:]
    backends = json.loads(out.read_text())["backends"]
    assert sorted(backends) == ["postgresql", "sqlite"]
    for result in backends.values():
        assert result["http"]["workers=1"]["all"]["requests"] == 4 and result["in_process"]["all"]["requests"] == 4
    assert png.stat().st_size > 1000


def test_engines_compares_duckdbs_counting_shapes(tmp_path: Path) -> None:
    """``--grouping-rows``: the DuckDB engine's three counting shapes, each checked against numpy by the benchmark
    (it stops otherwise), recorded with how many marginals each counted."""
    out = tmp_path / "engines.json"
    done = run("engines", "--rows", "3000", "--sqlite-rows", "", "--grouping-rows", "3000", "--repeats", "2",
               "--folder", str(tmp_path / "tables"), "--quiet", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    shapes = {r["variant"]: r for r in json.loads(out.read_text())["records"] if r["variant"].startswith("duckdb-")}
    assert sorted(shapes) == ["duckdb-cover-each", "duckdb-cover-sets", "duckdb-pair-sets"]
    assert shapes["duckdb-pair-sets"]["marginals"] == 105
    assert shapes["duckdb-cover-sets"]["marginals"] == shapes["duckdb-cover-each"]["marginals"] < 105
    assert all(r["task"] == "count" and r["seconds"] > 0 for r in shapes.values())


@pytest.mark.slow  # about 15 s: two AIM releases in fresh processes
def test_engines_times_aim_in_a_process_of_its_own(tmp_path: Path) -> None:
    """``--aim-rows``: AIM all-2way on the DuckDB table, released through the service in a child process, recorded
    with its counting share, peak memory and rounds; the summary compares the largest size with the smallest."""
    out = tmp_path / "engines.json"
    done = run("engines", "--rows", "2000,3000", "--sqlite-rows", "", "--release-rows", "2000", "--aim-rows",
               "2000,3000", "--repeats", "1", "--folder", str(tmp_path / "tables"), "--quiet", "--json", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    body = json.loads(out.read_text())
    aims = [r for r in body["records"] if r["task"] == "aim"]
    assert [r["rows"] for r in aims] == [2000, 3000]
    for record in aims:
        assert record["mechanism"] == "aim" and record["workload"] == "all-2way"
        assert 0 < record["counting_seconds"] < record["seconds"] and record["oracle_calls"] >= 1
        assert 50 < record["peak_rss_mb"] <= record["ru_maxrss_mb"]
        assert record["rounds"] >= 1 and record["fit_iterations"] >= 1
        # the initial fit and one per round, then the final fit, whose iterations are the release's
        assert record["round_fits"] == record["rounds"] + 1 and record["round_fit_iterations"] >= record["rounds"]
        assert record["final_fit_iterations"] == record["fit_iterations"]
        assert 0 < record["round_fit_seconds"] + record["final_fit_seconds"] < record["seconds"]
    ratio = body["summary"][-1]
    assert ratio["rows"] == [2000, 3000]
    assert ratio["aim_largest_over_smallest"] == aims[1]["seconds"] / aims[0]["seconds"]
    assert ratio["rounds_ratio"] == aims[1]["rounds"] / aims[0]["rounds"]
    per_round = [(r["seconds"] - r["final_fit_seconds"]) / r["rounds"] for r in aims]
    assert ratio["seconds_per_round"] == per_round and ratio["per_round_ratio"] == per_round[1] / per_round[0]
    assert out.with_suffix(".png").stat().st_size > 1000


def test_the_regression_suite_writes_one_json_and_plot_per_run(tmp_path: Path, data_dir: Path) -> None:
    done = run("regression_suite", "1", "1", "--out-dir", str(tmp_path), "--data", str(data_dir), "--only",
               "^adult-linear-no-intercept$", "--epsilons", "1", "--trials", "1", "--max-train", "300",
               "--linear-methods", "ols,adassp")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adult-linear-no-intercept.json",
                                                          "adult-linear-no-intercept.png"]
    body = json.loads((tmp_path / "adult-linear-no-intercept.json").read_text())
    assert body["config"]["marginal_options"] == {"rounds": 14} and body["config"]["epsilons"] == [1.0]
    again = run("regression_suite", "--out-dir", str(tmp_path), "--data", str(data_dir), "--only",
                "^adult-linear-no-intercept$", "--resume")
    assert again.returncode == 0 and "exists, skipped" in again.stdout


def test_regression_compare_prints_the_runs_side_by_side(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    stored = REPO / "benchmarks" / "results" / "regression" / "adult-linear-no-intercept.json"
    shutil.copy(stored, old / stored.name)
    shutil.copy(stored, new / stored.name)
    done = run("regression_compare", "--old", str(old), "--new", str(new))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "#### adult-linear-no-intercept" in done.stdout


def test_every_benchmark_module_has_a_smoke_case() -> None:
    modules = {m.name for m in pkgutil.iter_modules(benchmarks.__path__)} - SUPPORT
    assert modules == set(FAST) | set(SLOW) | OTHER


def test_the_deprecated_out_is_an_alias_of_json(tmp_path: Path) -> None:
    out = tmp_path / "wire.json"
    done = run("wire_throughput", "--sizes", "100", "--repeats", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--out is deprecated" in done.stderr and out.exists() and out.with_suffix(".png").exists()


def test_the_benchmarks_are_not_in_the_wheel_and_nothing_shipped_imports_them() -> None:
    from setuptools import find_packages

    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(str(REPO), include=found["include"], exclude=found.get("exclude", ()))
    assert "service" in packages and not [p for p in packages if p.split(".")[0] in ("benchmarks", "tests")]
    importers = []
    for top in ("service", "estimators", "workloads", "db"):
        for path in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
                    importers.append(str(path.relative_to(REPO)))
    assert importers == []
