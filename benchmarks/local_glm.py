"""The public-moment GLM (protocol ``glm``, issue 20) at the estimator level: the device's randomizer, vectorised, on
every simulated participant, then the server's aggregate and the moment equation over the public rows.

Two experiments (each with every ``--randomizers``: ``l2ball``, pure epsilon; ``gaussian``, delta = n^-1.1):

* ``synthetic``: the Sec. 6 design of Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021): p = 10, Gaussian features with a
  diagonal covariance (entries uniform on [0, 1]), logistic labels, w* = (1, ..., 1) / sqrt(p), as many public
  unlabeled rows as participants; the squared relative l2 error of the coefficients (the fitted intercept, whose true
  value is 0, is left out) against n, and its fitted log-log slope. Issue 20's targets: slope <= -0.9 at epsilon 2
  and 10, error <= 0.01 at n = 290k, epsilon 2.
* ``acs``: ACSemployment (target ``ESR``, the 16 other columns as numbers) from the shared data: half the training rows
  public (features only), half participants; test AUC at each epsilon beside the non-private logistic regression
  (scikit-learn, on all training rows, no penalty) and the majority class. Targets: >= 0.80 at epsilon 1, >= 0.82 at 2.

    .venv/bin/python -m benchmarks.local_glm --trials 10        # a few minutes on 2 busy cores
    .venv/bin/python -m benchmarks.local_glm --parts acs --randomizers l2ball --trials 10

Writes ``benchmarks/results/local_glm.json`` and ``.png`` (``--json`` and ``--plot`` to change). A trial whose moment
equation has no solution (the noise put the moment outside what the link can produce) is counted, not averaged.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmarks import harness
from estimators.base import EstimatorError
from estimators.local.accuracy import loglog_slope, squared_relative_error
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.moment import PublicMomentGLM
from estimators.local.glm.synthetic import make_problem
from workloads.local.protocols import RoundState
from workloads.local.protocols.glm import GLM_RANDOMIZERS, GlmSpec, public_feature_map

PARTS = ("synthetic", "acs")
STATE = RoundState(0)
BATCH = 50_000


def campaign_spec(public_rows: np.ndarray, epsilon: float, randomizer: str, n: int, whiten: bool = False) -> GlmSpec:
    """The spec the service would build from these public rows (standardised, or whitened with ``whiten``; features
    in their own units)."""
    center, matrix = public_feature_map(public_rows, whiten)
    delta = 0.0 if GLM_RANDOMIZERS[randomizer].pure else float(n) ** -1.1
    return GlmSpec(public_rows.shape[1], epsilon, delta, tuple(center), tuple(map(tuple, matrix)),
                   randomizer=randomizer)


def fit(spec: GlmSpec, public_rows: np.ndarray, x: np.ndarray, y: np.ndarray,
        rng: np.random.Generator) -> PublicMomentGLM | None:
    """Every participant's report through the device's randomizer, the server's aggregate, the logistic fit."""
    aggregate = ReportAggregate.for_round(spec, 0, STATE)
    for start in range(0, x.shape[0], BATCH):
        aggregate.add(spec.randomize(0, STATE, {"x": x[start:start + BATCH], "y": y[start:start + BATCH]}, rng))
    try:
        return PublicMomentGLM("logistic").fit(aggregate, spec, public_rows)
    except EstimatorError:
        return None


def synthetic(args: argparse.Namespace, rng: np.random.Generator, log) -> dict:  # noqa: ANN001
    rows = []
    for randomizer in args.randomizers:
        for epsilon in args.epsilons:
            for n in args.n:
                errors, ratios = [], []
                for _ in range(args.trials):
                    problem = make_problem("gaussian-diagonal", "logistic", n, n, 10, rng)
                    spec = campaign_spec(problem.public_rows, epsilon, randomizer, n, not args.standardise)
                    model = fit(spec, problem.public_rows, problem.features, problem.labels, rng)
                    if model is not None:
                        errors.append(squared_relative_error(model.coef_, problem.coef))
                        # the stated squared error (trace of the coefficients' covariance) over the truth's norm
                        ratios.append(float(np.trace(model.covariance_[1:, 1:]) / (problem.coef @ problem.coef)))
                rows.append({"randomizer": randomizer, "epsilon": epsilon, "n": n, "trials": args.trials,
                             "answered": len(errors),
                             "mean_error": float(np.mean(errors)) if errors else None,
                             "median_error": float(np.median(errors)) if errors else None,
                             "stated_error": float(np.mean(ratios)) if ratios else None})
                log(f"synthetic {randomizer} eps={epsilon:g} n={n}: mean squared relative error "
                    f"{rows[-1]['mean_error']} (stated {rows[-1]['stated_error']}; {len(errors)}/{args.trials})")
    slopes = []
    for randomizer in args.randomizers:
        for epsilon in args.epsilons:
            mine = [r for r in rows if (r["randomizer"], r["epsilon"]) == (randomizer, epsilon)]
            slopes.append({"randomizer": randomizer, "epsilon": epsilon,
                           "slope": loglog_slope([r["n"] for r in mine], [r["mean_error"] for r in mine])})
    return {"rows": rows, "slopes": slopes}


def _acs(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = harness.DATA / "acs"
    train, test = (pd.read_csv(folder / f"ACSemployment_{part}.csv") for part in ("train", "test"))
    if args.acs_rows is not None:
        train = train.iloc[:args.acs_rows]
    return train, test


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores))


def acs(args: argparse.Namespace, rng: np.random.Generator, log) -> dict:  # noqa: ANN001
    from sklearn.linear_model import LogisticRegression

    train, test = _acs(args)
    features = [c for c in train.columns if c != "ESR"]
    x_all, y_all = train[features].to_numpy(float), train["ESR"].to_numpy(float)
    x_test, y_test = test[features].to_numpy(float), test["ESR"].to_numpy(float)
    center, spread = x_all.mean(axis=0), x_all.std(axis=0)
    reference = LogisticRegression(C=np.inf, max_iter=5000).fit((x_all - center) / spread, y_all)
    baselines = {"non-private": _auc(y_test, reference.decision_function((x_test - center) / spread)),
                 "majority": 0.5}
    log(f"acs: non-private AUC {baselines['non-private']:.4f}, majority 0.5 ({len(train)} training rows)")
    rows = []
    for randomizer in args.randomizers:
        for epsilon in args.acs_epsilons:
            aucs = []
            for _ in range(args.trials):
                order = rng.permutation(len(train))
                public, people = order[: len(order) // 2], order[len(order) // 2:]
                spec = campaign_spec(x_all[public], epsilon, randomizer, len(people), not args.standardise)
                model = fit(spec, x_all[public], x_all[people], y_all[people], rng)
                if model is not None:
                    aucs.append(_auc(y_test, x_test @ model.coef_ + model.intercept_))
            rows.append({"randomizer": randomizer, "epsilon": epsilon, "trials": args.trials, "answered": len(aucs),
                         "mean_auc": float(np.mean(aucs)) if aucs else None,
                         "min_auc": float(np.min(aucs)) if aucs else None})
            log(f"acs {randomizer} eps={epsilon:g}: mean test AUC {rows[-1]['mean_auc']} "
                f"(min {rows[-1]['min_auc']}; {len(aucs)}/{args.trials})")
    return {"rows": rows, "baselines": baselines, "participants": len(train) - len(train) // 2,
            "public_rows": len(train) // 2}


def plot(payload: dict, args: argparse.Namespace) -> None:
    plt = harness.pyplot()
    parts = [p for p in PARTS if p in payload]
    fig, axes = plt.subplots(1, len(parts), figsize=(5.5 * len(parts), 4), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        result = payload[part]
        if part == "synthetic":
            for randomizer in args.randomizers:
                for epsilon in args.epsilons:
                    mine = [r for r in result["rows"] if (r["randomizer"], r["epsilon"]) == (randomizer, epsilon)
                            and r["mean_error"] is not None]
                    ax.plot([r["n"] for r in mine], [r["mean_error"] for r in mine], marker="o",
                            label=f"{randomizer} eps={epsilon:g}")
            ax.set_xscale("log")
            ax.axhline(0.01, color="grey", linestyle=":", label="target at 290k, eps 2")
            ax.set_yscale("log")
            ax.set_xlabel("participants n")
            ax.set_ylabel("mean squared relative error")
            ax.set_title("Sec. 6 design, p = 10, logistic")
        else:
            for randomizer in args.randomizers:
                mine = [r for r in result["rows"] if r["randomizer"] == randomizer and r["mean_auc"] is not None]
                ax.plot([r["epsilon"] for r in mine], [r["mean_auc"] for r in mine], marker="o",
                        label=f"glm {randomizer}")
            for name, value in result["baselines"].items():
                ax.axhline(value, linestyle="--" if name == "non-private" else ":", color="grey", label=name)
            if any(r["mean_auc"] is not None for r in result["rows"]):
                ax.set_xscale("log", base=2)
            ax.set_xlabel("epsilon")
            ax.set_ylabel("test AUC")
            ax.set_title(f"ACSemployment (ESR), {result['participants']:,} participants")
        harness.finish_axes(ax, 7)
    harness.save_figure(fig, harness.outputs(args)[1], dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--randomizers", nargs="+", default=list(GLM_RANDOMIZERS), choices=list(GLM_RANDOMIZERS))
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000, 100_000, 290_000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 10.0])
    parser.add_argument("--acs-epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--standardise", action="store_true",
                        help="the campaigns' option whiten=false (the default map whitens: Sigma_pub^-1/2)")
    parser.add_argument("--acs-rows", type=int, default=None, help="use only the first rows of the training set")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quiet", action="store_true")
    harness.add_outputs(parser, "local_glm")
    args = parser.parse_args()
    if args.trials < 1 or min(args.n) < 100:
        raise SystemExit("--trials must be at least 1 and every --n at least 100")
    log = harness.logger(args.quiet)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    payload: dict = {"args": {k: str(v) if hasattr(v, "suffix") else v for k, v in vars(args).items()},
                     "machine": harness.machine()}
    if "synthetic" in args.parts:
        payload["synthetic"] = synthetic(args, rng, log)
    if "acs" in args.parts:
        payload["acs"] = acs(args, rng, log)
    payload["seconds"] = time.perf_counter() - started
    json_path = harness.outputs(args)[0]
    json_path.parent.mkdir(parents=True, exist_ok=True)
    harness.write_json(json_path, payload)
    for s in payload.get("synthetic", {}).get("slopes", []):
        print(f"synthetic {s['randomizer']} eps={s['epsilon']:g}: log-log slope "
              f"{'n/a' if s['slope'] is None else format(s['slope'], '+.2f')}")
    for r in payload.get("acs", {}).get("rows", []):
        print(f"acs {r['randomizer']} eps={r['epsilon']:g}: test AUC {r['mean_auc']}")
    plot(payload, args)


if __name__ == "__main__":
    main()
