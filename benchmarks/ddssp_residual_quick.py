"""Quick in-process study of DD-SSP from a residual release (issue 9, item 5): can the regression-weighted residual plan
beat the service's AdaSSP at small epsilon?

For every linear run of ``docs/regression-results.md`` (its configuration read from
``benchmarks/results/regression/<run>.json``: tables, target, features, categorical columns, intercept, the cap on
training rows), each epsilon (delta 1e-5, rho = ``cdp_rho(epsilon, delta)``) and trial ``t`` (seed ``t``):

1. the residual plan over the design's 1- and 2-way marginals (``DesignEncoding.required_marginals``), either plain
   (``sum_var`` over the marginals' cells) or regression-weighted: the loss is the summed variance of the entries of
   ``Z^T Z`` (``estimators.residual.regression_queries.gram_queries``) with the ``X^T y`` blocks weighted by
   ``--target-weights`` (the marginals themselves get weight 1e-6, only to fix the plan's closure);
2. measured with a seeded numpy Gaussian (the service uses its secure sampler; the law is the same);
3. ``Z^T Z`` from the unbiased reconstruction (``gram_from_marginals`` over ``NoisyResiduals.marginal``);
4. ``DDSSPLinearRegression(ridge=c * sqrt(p * v))`` for each ``c`` of ``--ridge-factors``, where ``v`` is the mean
   variance of the plan's ``X^T X`` entries and ``p`` the number of Gram columns: ``sqrt(p v)`` is the scale of the
   spectral norm of the noise added to ``X^T X`` (a public function of the plan, so the ridge costs no privacy);
5. test MSE on the run's test rows, against the stored medians of the service's AdaSSP and of DD-SSP from AIM.

The training rows are capped with ``DataFrame.sample(n=max_train, random_state=seed)``, which may differ from the
bench's own sample (it matters only for ACSincome and taxi). This is a design study, not the service path: the
service path is ``python -m benchmarks.regression`` (``docs/regression-results.md``).

    .venv/bin/python -m benchmarks.ddssp_residual_quick          # writes results/ddssp_residual_quick.json and .png
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.harness import DATA, REPO, RESULTS, machine
from estimators.central.linear import DDSSPLinearRegression
from estimators.central.metrics import mse
from estimators.central.sufficient_stats import gram_from_marginals
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import plan_residuals
from estimators.residual.reconstruct import NoisyResiduals
from estimators.residual.regression_queries import gram_queries
from service.privacy.conversions import cdp_rho
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

RUNS = ["adult-linear-no-intercept", "adult-linear-intercept", "acsincome-linear-no-intercept",
        "acsmobility-linear-no-intercept", "taxi-linear-no-intercept"]
DELTA = 1e-5


def load_run(name: str) -> tuple[dict, dict]:
    stored = json.loads((RESULTS / "regression" / f"{name}.json").read_text())
    return stored["config"], stored["summary"]


def resolve(path: str) -> Path:
    """A data path stored in a regression result: ``../shared/data/...`` (the Makefile's default, relative to the
    repository) is read from the shared data folder (``MARGINALIA_SHARED_DATA``), other relative paths from REPO."""
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate
    shared = Path("..", "shared", "data")
    if candidate.parts[:3] == shared.parts:
        return DATA.joinpath(*candidate.parts[3:])
    return (REPO / candidate).resolve()


def tables(config: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    train_path = resolve(config["train"])
    if not train_path.exists() and "nist_taxi" in config["domain"]:
        train, test = harness.taxi_split(resolve(config["domain"]).parent / "nist-taxi.csv")
    else:
        train, test = pd.read_csv(train_path), pd.read_csv(resolve(config["test"]))
    if config.get("max_train") and len(train) > config["max_train"]:
        train = train.sample(n=config["max_train"], random_state=config.get("seed", 0))
    return train, test


def reader(domain: Domain, release: NoisyResiduals):
    """``marginal(attrs)`` with axes in the order asked, from the unbiased reconstruction."""
    def marginal(attributes: tuple[str, ...]) -> np.ndarray:
        canonical = tuple(a for a in domain.names if a in attributes)
        return np.transpose(release.marginal(canonical), [canonical.index(a) for a in attributes])
    return marginal


def counter(domain: Domain, frame: pd.DataFrame):
    """Exact marginals of ``frame`` (axes in the order asked), each computed once."""
    cache: dict[tuple[str, ...], np.ndarray] = {}

    def counts(attributes: tuple[str, ...]) -> np.ndarray:
        if attributes not in cache:
            index = np.ravel_multi_index([frame[a].to_numpy() for a in attributes], domain.shape(attributes))
            cache[attributes] = np.bincount(index, minlength=domain.cells(attributes)).reshape(
                domain.shape(attributes)).astype(float)
        return cache[attributes]
    return counts


def run_one(design: DesignEncoding, counts, rho: Fraction, target_weight: float | None, ridge_factors: list[float],
            seed: int, X_test: np.ndarray, y_test: np.ndarray) -> dict[float, float]:
    domain = design.domain
    workload = design.required_marginals()
    if target_weight is None:
        plan = plan_residuals(domain, workload, rho)
    else:
        plan = plan_residuals(domain, [(c, 1e-6) for c in workload], rho,
                              queries=gram_queries(design, target_weight=target_weight))
    assert plan.cost() == rho
    rng = np.random.default_rng(seed)
    release = measure_residuals(plan, counts, lambda sigma, size: rng.normal(0.0, sigma, size))
    stats = gram_from_marginals(design, reader(domain, release))
    xtx_variance = float(np.mean(np.concatenate([plan.query_variances(q) for q in gram_queries(design)
                                                 if design.target not in q.attributes])))
    scale = math.sqrt(stats.xtx.shape[0] * xtx_variance)
    return {c: mse(y_test, DDSSPLinearRegression(ridge=c * scale).fit(stats).predict(X_test)) for c in ridge_factors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", default=RUNS, choices=RUNS)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.05, 0.1])
    parser.add_argument("--target-weights", nargs="+", type=float, default=[0.0, 1.0, 16.0, 64.0, 256.0],
                        help="0 means the plain plan over the marginals' cells")
    parser.add_argument("--ridge-factors", nargs="+", type=float, default=[1.0, 2.0, 4.0])
    parser.add_argument("--trials", type=int, default=5)
    harness.add_outputs(parser, "ddssp_residual_quick")
    args = parser.parse_args()
    rows, summary = [], []
    for name in args.runs:
        config, stored = load_run(name)
        domain = Domain.from_json(resolve(config["domain"]).read_text(), config["categorical"])
        train, test = tables(config)
        design = DesignEncoding(domain, config["features"], config["target"], "linear", bool(config["intercept"]))
        X_test, y_test = design.encode(test)
        counts = counter(domain, train)

        for epsilon in args.epsilons:
            rho = Fraction(cdp_rho(epsilon, DELTA))
            for weight in args.target_weights:
                started = time.perf_counter()
                results = [run_one(design, counts, rho, weight or None, args.ridge_factors, t, X_test, y_test)
                           for t in range(args.trials)]
                seconds = (time.perf_counter() - started) / args.trials
                for c in args.ridge_factors:
                    values = [r[c] for r in results]
                    row = {"run": name, "epsilon": epsilon, "target_weight": weight, "ridge_factor": c,
                           "median_mse": statistics.median(values), "mse": values, "seconds_per_trial": seconds,
                           "adassp_median": stored.get("adassp", {}).get(str(epsilon), {}).get("median"),
                           "ddssp_aim_median": stored.get("dd-ssp", {}).get(str(epsilon), {}).get("median")}
                    rows.append(row)
                    print(f"{name} eps={epsilon:g} weight={weight:g} ridge={c:g}: median MSE {row['median_mse']:.4f} "
                          f"(AdaSSP {row['adassp_median']:.4f}, DD-SSP/AIM {row['ddssp_aim_median']:.4f})",
                          flush=True)
        for epsilon in args.epsilons:
            group = [r for r in rows if r["run"] == name and r["epsilon"] == epsilon]
            best = min(group, key=lambda r: r["median_mse"])
            summary.append({"run": name, "epsilon": epsilon, "best": {k: best[k] for k in
                                                                      ("target_weight", "ridge_factor", "median_mse")},
                            "adassp_median": best["adassp_median"], "ddssp_aim_median": best["ddssp_aim_median"]})
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "machine": machine(),
                                    "summary": summary, "results": rows}, indent=1))
    plot(rows, harness.outputs(args)[1])
    for s in summary:
        print(json.dumps(s))


def plot(rows: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    runs = sorted({r["run"] for r in rows})
    epsilons = sorted({r["epsilon"] for r in rows})
    fig, axes = plt.subplots(len(runs), len(epsilons), figsize=(4.6 * len(epsilons), 2.8 * len(runs)), squeeze=False)
    for i, run in enumerate(runs):
        for j, epsilon in enumerate(epsilons):
            ax = axes[i][j]
            group = [r for r in rows if r["run"] == run and r["epsilon"] == epsilon]
            for c in sorted({r["ridge_factor"] for r in group}):
                line = [r for r in group if r["ridge_factor"] == c]
                ax.plot([str(int(r["target_weight"])) for r in line], [r["median_mse"] for r in line], "o-",
                        label=f"residual, ridge x{c:g}")
            ax.axhline(group[0]["adassp_median"], color="k", linestyle="--", label="AdaSSP (service)")
            ax.axhline(group[0]["ddssp_aim_median"], color="r", linestyle=":", label="DD-SSP from AIM")
            ax.set_title(f"{run}, epsilon {epsilon:g}", fontsize=8)
            ax.set_xlabel("X^T y weight (0: plain plan)", fontsize=7)
            ax.set_ylabel("test MSE", fontsize=7)
            ax.legend(fontsize=6)
    harness.save_figure(fig, path, dpi=110)


if __name__ == "__main__":
    main()
