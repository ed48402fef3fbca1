"""Quick in-process benchmark of the residual plan (issue 9): ResidualPlanner on all 2-way marginals against a direct
Gaussian release of the same marginals at the same rho, both answered without a graphical model.

For each table, epsilon (delta 1e-5, rho = ``service.privacy.conversions.cdp_rho(epsilon, delta)`` as an exact
Fraction) and trial:

* ``residual`` (``--losses``, default ``sum_var`` and ``max_var``; ``max_var_floor`` on request):
  ``estimators.residual.planner.plan_residuals``
  over all 2-way marginals (weight 1), ``measure_residuals`` with a seeded numpy Gaussian sampler, then
  (a) the unbiased answers (``NoisyResiduals.marginal``) and (b) the non-negative consistent answers
  (``nonnegative_marginals`` with its defaults);
* ``direct``: every 2-way marginal plus i.i.d. Gaussian noise, rho split equally (``sigma^2 = 105 / (2 rho)`` on
  Adult), answered (raw) by the noisy marginals themselves, (a) by least squares (``residuals_from_marginals``) and
  (b) by the same non-negativity step.

Error (the issue's metric): for each of the marginals, sum over cells of |answer - truth| / N; averaged over the
marginals. Times: plan, measure, unbiased answers of every workload marginal, non-negativity solve plus answers
(wall seconds, this process; cvxpy is imported before the clock starts and its import time is reported apart).
Exact counts come from pandas ``groupby(...).size()`` and are not timed (in the service they are SQL's job).
Noise is continuous (numpy ``Generator.normal``) for both; the service's direct release uses the discrete Gaussian,
whose variance is within a hair of sigma^2 at these scales. Trial ``t`` uses seed ``t`` for both mechanisms.

    .venv/bin/python -m benchmarks.residual_quick                       # adult, epsilon 0.1 and 1, 3 trials
    .venv/bin/python -m benchmarks.residual_quick --tables adult acs-income --trials 5
    .venv/bin/python -m benchmarks.residual_quick --one-way-weight 100 --threshold 2 --json .../levers.json

Levers (issue 9): ``--one-way-weight w`` adds the 1-way marginals to the plan's workload with weight ``w``;
``--threshold c`` zeroes the interactions indistinguishable from noise (``drop_insignificant``) before the
non-negativity step. The non-negative column then measures the lever; the unbiased column stays the plan's own.

Writes ``benchmarks/results/residual_quick.json`` and ``.png``. AIM's medians from ``results/marginals.json``
(same metric, rho floored to the accountant's grid, ``adult_train.csv`` for its "adult") are printed beside ours
when that file has the table: run ``--tables adult-train`` for the same rows.
"""

from __future__ import annotations

import argparse
import itertools
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
from benchmarks.harness import DATA, RESULTS, machine
from estimators.residual.measure import measure_residuals
from estimators.residual.nonnegative import nonnegative_marginals
from estimators.residual.planner import LOSSES, plan_residuals
from estimators.residual.reconstruct import NoisyMarginal, drop_insignificant, residuals_from_marginals
from service.privacy.conversions import cdp_rho
from workloads.domain import Domain

TABLES = {
    "adult": ("adult/adult.csv", "adult/adult-domain.json"),
    "adult-train": ("adult/adult_train.csv", "adult/adult-domain.json"),
    "acs-income": ("acs/ACSincome-LIN_train.csv", "acs/ACSincome-LIN-domain.json"),
    "titanic": ("titanic/titanic.csv", "titanic/titanic-domain.json"),
}
AIM_NAMES = {"adult-train": "adult", "acs-income": "acs-income"}  # our table -> its name in marginals.json
DELTA = 1e-5


def exact_counts(frame: pd.DataFrame, domain: Domain, cliques: list[tuple[str, ...]]) -> dict:
    """Every requested marginal as a dense array (axes in domain order), from pandas group sizes."""
    out = {}
    for clique in cliques:
        sizes = frame.groupby(list(clique)).size()
        array = np.zeros(domain.shape(clique))
        index = sizes.index if len(clique) > 1 else [(v,) for v in sizes.index]
        array[tuple(np.array(list(index)).T)] = sizes.to_numpy()
        out[clique] = array
    return out


def workload_error(answer: object, truth: dict, pairs: list, rows: int) -> float:
    return sum(float(np.abs(answer(p) - truth[p]).sum()) for p in pairs) / rows / len(pairs)


def run_residual(domain: Domain, truth: dict, pairs: list, rho: Fraction, loss: str, seed: int, rows: int,
                 one_way_weight: float = 0.0, threshold: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    singles = [((a,), one_way_weight) for a in domain.names] if one_way_weight > 0 else []
    plan = plan_residuals(domain, [*pairs, *singles], rho, loss=loss)
    planned = time.perf_counter()
    release = measure_residuals(plan, truth.__getitem__, lambda sigma, size: rng.normal(0.0, sigma, size))
    measured = time.perf_counter()
    unbiased = {p: release.marginal(p) for p in pairs}
    answered = time.perf_counter()
    consistent = nonnegative_marginals(drop_insignificant(release, threshold))
    positive = {p: consistent.marginal(p) for p in pairs}
    finished = time.perf_counter()
    assert plan.cost() == rho
    return {
        "unbiased_error": workload_error(unbiased.__getitem__, truth, pairs, rows),
        "nonnegative_error": workload_error(positive.__getitem__, truth, pairs, rows),
        "plan_seconds": planned - start,
        "measure_seconds": measured - planned,
        "unbiased_answer_seconds": answered - measured,
        "nonnegative_seconds": finished - answered,
        "total_seconds": finished - start,
        "nonnegative_iterations": consistent.iterations,
        "nonnegative_converged": consistent.converged,
        "predicted_unbiased_rmse": math.sqrt(statistics.fmean(plan.cell_variance(p) for p in pairs)),
    }


def run_direct(domain: Domain, truth: dict, pairs: list, rho: Fraction, seed: int, rows: int) -> dict:
    rng = np.random.default_rng(seed)
    sigma2 = len(pairs) / (2 * float(rho))
    start = time.perf_counter()
    noisy = {p: truth[p] + rng.normal(0.0, math.sqrt(sigma2), truth[p].shape) for p in pairs}
    measured = time.perf_counter()
    release = residuals_from_marginals(domain, [NoisyMarginal(p, noisy[p], sigma2) for p in pairs])
    least_squares = {p: release.marginal(p) for p in pairs}
    answered = time.perf_counter()
    consistent = nonnegative_marginals(release)
    positive = {p: consistent.marginal(p) for p in pairs}
    finished = time.perf_counter()
    return {
        "raw_error": workload_error(noisy.__getitem__, truth, pairs, rows),
        "unbiased_error": workload_error(least_squares.__getitem__, truth, pairs, rows),
        "nonnegative_error": workload_error(positive.__getitem__, truth, pairs, rows),
        "measure_seconds": measured - start,
        "unbiased_answer_seconds": answered - measured,
        "nonnegative_seconds": finished - answered,
        "total_seconds": finished - start,
        "nonnegative_iterations": consistent.iterations,
    }


def aim_reference() -> dict[tuple[str, float], float]:
    path = RESULTS / "marginals.json"
    if not path.exists():
        return {}
    summary = json.loads(path.read_text()).get("summary", [])
    return {(s["table"], float(s["epsilon"])): s["median_error"] for s in summary if s["mechanism"] == "aim"}


def summarise(runs: list[dict]) -> list[dict]:
    keys = sorted({(r["table"], r["epsilon"], r["mechanism"]) for r in runs})
    out = []
    for table, epsilon, mechanism in keys:
        group = [r for r in runs if (r["table"], r["epsilon"], r["mechanism"]) == (table, epsilon, mechanism)]
        row = {"table": table, "epsilon": epsilon, "mechanism": mechanism, "trials": len(group)}
        for field in ("raw_error", "unbiased_error", "nonnegative_error", "total_seconds", "nonnegative_seconds"):
            if field in group[0]:
                row[f"median_{field}"] = statistics.median(r[field] for r in group)
        out.append(row)
    return out


def plot(summary: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    tables = sorted({s["table"] for s in summary})
    epsilons = sorted({s["epsilon"] for s in summary})
    fig, axes = plt.subplots(len(tables), len(epsilons), figsize=(4.8 * len(epsilons), 3.4 * len(tables)),
                             squeeze=False)
    for row, table in enumerate(tables):
        for col, epsilon in enumerate(epsilons):
            ax = axes[row][col]
            rows = [s for s in summary if (s["table"], s["epsilon"]) == (table, epsilon)]
            x = np.arange(len(rows))
            ax.bar(x - 0.2, [s["median_unbiased_error"] for s in rows], 0.4, label="unbiased / least squares")
            ax.bar(x + 0.2, [s["median_nonnegative_error"] for s in rows], 0.4, label="non-negative, consistent")
            if rows and rows[0].get("aim_median_error"):
                ax.axhline(rows[0]["aim_median_error"], color="k", linestyle="--", label="AIM (marginals.json)")
            ax.set_xticks(x, [s["mechanism"] for s in rows], fontsize=8)
            ax.set_title(f"{table}, epsilon {epsilon:g}")
            ax.set_ylabel("mean L1 error / N")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
    harness.save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=["adult"], choices=sorted(TABLES))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--losses", nargs="+", default=["sum_var", "max_var"], choices=list(LOSSES))
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--one-way-weight", type=float, default=0.0,
                        help="add every 1-way marginal to the plan's workload with this weight (0: pairs only)")
    parser.add_argument("--threshold", type=float, default=0.0,
                        help="drop_insignificant's threshold before the non-negativity step (0: keep everything)")
    harness.add_outputs(parser, "residual_quick")
    args = parser.parse_args()

    started = time.perf_counter()
    import cvxpy  # noqa: F401  (the max-variance plan's solver; a service process has it loaded already)

    cvxpy_import_seconds = time.perf_counter() - started
    aim = aim_reference()
    runs = []
    for table in args.tables:
        csv, domain_file = TABLES[table]
        domain = Domain.from_sizes(json.loads((DATA / domain_file).read_text()))
        frame = pd.read_csv(DATA / csv)
        pairs = list(itertools.combinations(domain.names, 2))
        truth = exact_counts(frame, domain, pairs)
        rows = len(frame)
        for epsilon in args.epsilons:
            rho = Fraction(cdp_rho(epsilon, DELTA))
            for trial in range(args.trials):
                base = {"table": table, "epsilon": epsilon, "rho": float(rho), "trial": trial, "pairs": len(pairs)}
                for loss in args.losses:
                    result = run_residual(domain, truth, pairs, rho, loss, trial, rows, args.one_way_weight,
                                          args.threshold)
                    runs.append(base | {"mechanism": f"residual-{loss}"} | result)
                direct = run_direct(domain, truth, pairs, rho, trial, rows)
                runs.append(base | {"mechanism": "direct-gaussian"} | direct)
                for r in runs[-len(args.losses) - 1:]:
                    print(
                        f"{table} eps={epsilon:g} trial={trial} {r['mechanism']:>17}: "
                        f"unbiased {r['unbiased_error']:.4f}  non-negative {r['nonnegative_error']:.4f}  "
                        f"total {r['total_seconds']:.2f} s (non-negativity {r['nonnegative_seconds']:.2f} s, "
                        f"{r['nonnegative_iterations']} iterations)",
                        flush=True,
                    )
            name = AIM_NAMES.get(table)
            if name and (name, epsilon) in aim:
                print(f"{table} eps={epsilon:g}: AIM's median error (marginals.json) {aim[(name, epsilon)]:.4f}")
    summary = summarise(runs)
    for s in summary:
        s["aim_median_error"] = aim.get((AIM_NAMES.get(s["table"], ""), s["epsilon"]))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(),
        "cvxpy_import_seconds": cvxpy_import_seconds,
        "one_way_weight": args.one_way_weight,
        "threshold": args.threshold,
        "summary": summary,
        "runs": runs,
    }
    args.json.write_text(json.dumps(payload, indent=1))
    plot(summary, harness.outputs(args)[1])
    for s in summary:
        print(json.dumps(s))


if __name__ == "__main__":
    main()
