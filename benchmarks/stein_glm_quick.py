"""Quick in-process benchmark of the Stein-lemma GLM estimators (no service): error against n, fitted log-log slope.

The setting of Sec. 6 of Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in non-interactive local
differential privacy with public data" (ALT 2021): p = 10, w* = (1, ..., 1) / sqrt(p), epsilon in {2, 3, 5, 10},
delta = n^-1.1, as many public unlabeled rows as private ones, logistic labels, and

* ``alg1``: Gaussian features with a diagonal covariance (entries uniform on [0, 1]), reports clipped to Alg. 1's
  l2 bound ``r = sqrt(5 ||Sigma_m|| p log(n / zeta))`` (zeta = 0.1, from the public rows), squared relative l2 error;
* ``alg2``: Bernoulli features ``+-1/p``, l1 bound ``r = 1``, squared relative l-infinity error.

Every participant's report goes through the real randomizer (:meth:`SteinGlmSpec.randomize`, analytic Gaussian
calibration) and the server's :class:`ReportAggregate` (in batches), then :class:`PrivateOLS` and :class:`SteinGLM`.
Variants: the covariance source of ``X^T X`` (``pooled`` = Remark 11 as in the paper's experiments, ``private`` =
Remark 11 off, ``public``) and ``public/no-gram`` (participants send only ``x y``, ``gram=False``).

A repetition whose scale equation has no root (``NoRootError``: the estimate is noise-dominated and the logistic
constant does not exist) is counted as a failure; the error is averaged (and its median taken) over the others and
slopes are fitted to those means and medians (only n with at least half the repetitions answered). Writes
``benchmarks/results/stein_glm_quick.json`` and ``.png`` (``--json`` and ``--plot`` to change).

    .venv/bin/python -m benchmarks.stein_glm_quick --reps 10        # about 8 minutes on 2 busy cores
    .venv/bin/python -m benchmarks.stein_glm_quick --settings alg2 --epsilons 5 10 --n 290000 1000000 3000000 \
        --reps 5 --json benchmarks/results/stein_glm_quick_large_n.json    # where the 1/n regime starts
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from estimators.local.accuracy import loglog_slope, squared_relative_error
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.scale import NoRootError
from estimators.local.glm.stein import PrivateOLS, SteinGLM
from estimators.local.glm.synthetic import make_problem, paper_metric, paper_report_bounds
from workloads.local.protocols import SteinGlmSpec

#: setting name -> design of Sec. 6 (its report bounds and error norm: ``paper_report_bounds``, ``paper_metric``)
SETTINGS = {"alg1": "gaussian-diagonal", "alg2": "bernoulli"}
VARIANTS = ("pooled", "private", "public", "public/no-gram")
BATCH = 50_000
ZETA = 0.1


def aggregate_reports(spec: SteinGlmSpec, features: np.ndarray, labels: np.ndarray,
                      rng: np.random.Generator) -> ReportAggregate:
    state = spec.initial_state()
    aggregate = ReportAggregate.for_round(spec, 0, state)
    for start in range(0, features.shape[0], BATCH):
        stop = start + BATCH
        aggregate.add(spec.randomize(0, state, {"x": features[start:stop], "y": labels[start:stop]}, rng))
    return aggregate


def one_repetition(design: str, n: int, epsilon: float, rng: np.random.Generator) -> tuple[dict, float]:
    problem = make_problem(design, "logistic", n, n, 10, rng)
    bounds = paper_report_bounds(design, problem.public_rows, n, ZETA)
    errors: dict[str, float | None] = {}
    seconds = 0.0
    for gram in (True, False):
        spec = SteinGlmSpec(10, bounds["norm_bound"], 1.0, epsilon, n**-1.1, norm=bounds["norm"], gram=gram)
        aggregate = aggregate_reports(spec, problem.features, problem.labels, rng)
        for variant in VARIANTS:
            if variant.endswith("no-gram") == gram:
                continue
            started = time.perf_counter()
            ols = PrivateOLS(variant.split("/")[0]).fit(aggregate, spec, problem.public_rows)
            try:
                coef = SteinGLM("logistic").fit(ols, problem.public_rows).coef_
                errors[variant] = squared_relative_error(coef, problem.coef, paper_metric(design))
            except NoRootError:
                errors[variant] = None
            seconds += time.perf_counter() - started
    return errors, seconds / len(VARIANTS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 30_000, 100_000, 290_000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 3.0, 5.0, 10.0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    harness.add_outputs(parser, "stein_glm_quick")
    parser.add_argument("--replot", action="store_true", help="redraw the plot from the JSON in --json, run nothing")
    args = parser.parse_args()
    if args.replot:
        stored = json.loads(args.json.read_text())
        args.settings, args.epsilons = stored["args"]["settings"], stored["args"]["epsilons"]
        plot(stored["rows"], args)
        return

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    rows = []
    estimate_seconds = []
    for name in args.settings:
        for epsilon in args.epsilons:
            for n in args.n:
                runs = []
                for _ in range(args.reps):
                    errors, seconds = one_repetition(SETTINGS[name], n, epsilon, rng)
                    runs.append(errors)
                    estimate_seconds.append(seconds)
                for variant in VARIANTS:
                    values = [r[variant] for r in runs if r[variant] is not None]
                    rows.append({"setting": name, "variant": variant, "epsilon": epsilon, "n": n,
                                 "answered": len(values), "reps": args.reps,
                                 "mean_error": float(np.mean(values)) if values else None,
                                 "median_error": float(np.median(values)) if values else None})
                print(f"{name} eps={epsilon:g} n={n}: " + ", ".join(
                    f"{r['variant']} {r['mean_error']:.3g} ({r['answered']}/{r['reps']})" if r["mean_error"] is not None
                    else f"{r['variant']} - (0/{r['reps']})" for r in rows[-len(VARIANTS):]), flush=True)
    slopes = []
    for name in args.settings:
        for variant in VARIANTS:
            for epsilon in args.epsilons:
                mine = [r for r in rows if (r["setting"], r["variant"], r["epsilon"]) == (name, variant, epsilon)]
                usable = [r for r in mine if r["answered"] * 2 >= r["reps"]]
                ns = [r["n"] for r in usable]
                slopes.append({"setting": name, "variant": variant, "epsilon": epsilon,
                               "slope": loglog_slope(ns, [r["mean_error"] for r in usable]),
                               "median_slope": loglog_slope(ns, [r["median_error"] for r in usable]), "n_used": ns})
    payload = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "seconds": time.perf_counter() - started,
               "mean_estimate_seconds": float(np.mean(estimate_seconds)),
               "rows": rows, "slopes": slopes}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2))
    print("\nfitted slope of log(squared relative error) against log(n), of the mean and of the median:")
    for s in slopes:
        text = " ".join(f"{s[key]:+.2f}" if s[key] is not None else "  n/a" for key in ("slope", "median_slope"))
        print(f"  {s['setting']} {s['variant']:15s} eps={s['epsilon']:<4g} {text}  (n used: {s['n_used']})")
    print(f"estimation from an aggregate (OLS + root finding): {payload['mean_estimate_seconds'] * 1e3:.1f} ms mean; "
          f"total {payload['seconds']:.0f} s")
    plot(rows, args)


def plot(rows: list[dict], args: argparse.Namespace) -> None:
    plt = harness.pyplot()

    fig, axes = plt.subplots(len(args.settings), len(VARIANTS), figsize=(4 * len(VARIANTS), 3.5 * len(args.settings)),
                             squeeze=False)
    for i, name in enumerate(args.settings):
        for j, variant in enumerate(VARIANTS):
            ax = axes[i][j]
            for epsilon in args.epsilons:
                mine = [r for r in rows if (r["setting"], r["variant"], r["epsilon"]) == (name, variant, epsilon)
                        and r["median_error"] is not None]
                ax.loglog([r["n"] for r in mine], [r["median_error"] for r in mine], marker="o",
                          label=f"eps={epsilon:g}")
            ax.set_title(f"{name} {variant}")
            ax.set_xlabel("n")
            ax.set_ylabel("median squared relative error")
            ax.legend(fontsize=7)
    harness.save_figure(fig, harness.outputs(args)[1], dpi=110)


if __name__ == "__main__":
    main()
