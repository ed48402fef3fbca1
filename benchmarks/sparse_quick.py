"""Quick in-process reproduction of the sparse-regression experiments (issue 10), with the pure estimators only.

Sections (all by default; ``--only`` picks some):

* ``sec71`` -- Sec. 7.1 of Wang & Xu, "On sparse linear regression in the local differential privacy model"
  (ICML 2019): ``x`` uniform in ``{-1, +1}^p``, ``theta*`` with ``s = 10`` non-zeros uniform in ``[0, 1]`` (rescaled to
  unit norm, see ``estimators/local/sparse/synthetic.py``), noise uniform in ``[-0.05, 0.05]``; relative error
  ``||theta - theta*|| / ||theta*||`` at ``p in {100, 400}``, ``n in {10000, 40000}``, ``eps = 1``, ``delta = 1e-3``,
  ``T = ceil(ln(n / p))``. Methods: Label-LDP-IHT (Alg. 2) with the paper's settings (``eta = 0.2``, random normal
  start) and with ``eta = 1`` from 0; the label-private Lasso (Sec. 5); LDP-IHT (Alg. 1, private features too: the
  price of private features) with the worst-case residual bound (unbiased) and with residuals clipped at 1; and
  non-private IHT on the true labels as the floor.
* ``sweeps`` -- Label-LDP-IHT and the Lasso at ``p = 100``, ``n = 40000`` over epsilon and over the sparsity.
* ``bernstein`` -- the Local Bernstein Mechanism (Wang, Gaboardi & Xu 2018, Alg. 2) and its 1-bit variant (Alg. 3),
  squared loss on ``[-1, 1]^p``, ``p in {1, 2}``: excess empirical risk (loss scaled to ``[0, 1]``) vs ``n``.
* ``drerm`` -- DR-ERM-LDP (Alg. 4), squared loss over the unit l1 ball, ``p = 5000``, ``n in {20000, 200000}``,
  spiky rows ``x = +-e_j``: relative excess risk ``(L(w) - L*) / (L(0) - L*)`` with private reports (``m in {20,
  60}``) and with exact projected statistics (``m in {20, 60, 200}``: the projection's own loss).
* ``dpiht`` -- DP-IHT (Alg. 3, central model), sparsity-constrained logistic regression with ``l2 = 1e-3`` on Adult
  (20,000 rows; the paper uses Covertype, which we do not have): optimality gap against a long (2000-step)
  non-private IHT run, over the sparsity ``k`` and ``eps in {0.05, 0.2, 1}`` (``delta = 1e-3``, charged
  ``rho = cdp_rho(eps, delta)`` as the release engine does), beside the gap of the same 200 steps without noise.

Run from the repository root (about 8 minutes on 2 shared cores with 3 trials)::

    .venv/bin/python -m benchmarks.sparse_quick                   # everything, 3 trials
    .venv/bin/python -m benchmarks.sparse_quick --only sec71 --trials 5   # reruns one section, keeps the others
    .venv/bin/python -m benchmarks.sparse_quick --replot                  # tables and plot from the JSON

Writes ``benchmarks/results/sparse_quick.json`` (every trial and the means) and ``sparse_quick.png``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.harness import DATA, machine
from benchmarks.measure import engine_rho
from estimators.central.dp_iht import DPIHTLogisticRegression
from estimators.local.accuracy import relative_error
from estimators.local.sparse.bernstein import LocalBernsteinLinearRegression, assign_grid_points
from estimators.local.sparse.dr_erm import DRERMLinearRegression
from estimators.local.sparse.iht import LDPIHTRegression, SimulatedIHTParticipants, label_iht
from estimators.local.sparse.lasso import LabelPrivateLasso
from estimators.local.sparse.synthetic import sparse_linear_data
from workloads.local.randomizers.bernstein import (
    bernstein_grid,
    one_bit_report,
    public_laplace_strings,
    randomize_grid_losses,
)
from workloads.local.randomizers.gaussian_label import randomize_labels
from workloads.local.randomizers.iht_gradient import worst_case_residual_bound
from workloads.local.randomizers.random_projection_statistics import (
    projected_statistics_report,
    random_projection,
)

DELTA = 1e-3


def rng_for(*key: int) -> np.random.Generator:
    return np.random.default_rng(list(key))


def mean_by(rows: list[dict], keys: tuple[str, ...], value: str) -> dict[tuple, float]:
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row[value])
    return {k: statistics.fmean(v) for k, v in groups.items()}


# --------------------------------------------------------------------------------------------------- Sec. 7.1
def label_methods(data, s: int, eps: float, rounds: int, rng: np.random.Generator) -> dict[str, float]:  # noqa: ANN001
    bound = math.sqrt(s) + data.noise_bound  # |y| <= ||theta||_1 + C <= sqrt(s) ||theta||_2 + C, ||theta||_2 <= 1
    noisy = randomize_labels(data.y, bound, eps, DELTA, rng)
    p = data.X.shape[1]
    start = rng.normal(size=p)  # Sec. 7.1: "a random normal Gaussian vector as the initial point"
    lasso = LabelPrivateLasso(eps, DELTA, bound).fit(data.X, noisy)
    return {
        "label_iht_paper": relative_error(
            label_iht(data.X, noisy, s, rounds, 0.2, theta0=start).theta, data.theta_star
        ),
        "label_iht": relative_error(label_iht(data.X, noisy, s, rounds, 1.0).theta, data.theta_star),
        "lasso": relative_error(lasso.coef_, data.theta_star),
    }


def run_sec71(trials: int, seed: int) -> list[dict]:
    rows = []
    s, eps = 10, 1.0
    for p in (100, 400):
        for n in (10_000, 40_000):
            rounds = math.ceil(math.log(n / p))
            for trial in range(trials):
                started = time.perf_counter()
                rng = rng_for(seed, 71, p, n, trial)
                data = sparse_linear_data(n, p, s, rng)
                errors = label_methods(data, s, eps, rounds, rng)
                errors["iht_nonprivate"] = relative_error(
                    label_iht(data.X, data.y, s, rounds, 1.0).theta, data.theta_star
                )
                bound = math.sqrt(s) + data.noise_bound
                for name, residual_bound in (
                    ("ldp_iht", worst_case_residual_bound(s, 1.0, bound)),
                    ("ldp_iht_clip1", 1.0),
                ):
                    players = SimulatedIHTParticipants(data.X, data.y, rounds, eps, residual_bound, math.sqrt(p), rng)
                    model = LDPIHTRegression(sparsity=s, rounds=rounds, eta=1.0).fit(players, p)
                    errors[name] = relative_error(model.coef_, data.theta_star)
                for method, error in errors.items():
                    rows.append(
                        {"p": p, "n": n, "T": rounds, "trial": trial, "method": method, "relative_error": error}
                    )
                print(f"  sec71 p={p} n={n} trial={trial}: {time.perf_counter() - started:.1f}s", flush=True)
    return rows


def run_sweeps(trials: int, seed: int) -> list[dict]:
    rows = []
    p, n = 100, 40_000
    rounds = math.ceil(math.log(n / p))
    for s, eps in [(10, e) for e in (0.5, 1.0, 2.0, 4.0)] + [(5, 1.0), (20, 1.0)]:
        for trial in range(trials):
            rng = rng_for(seed, 72, s, int(10 * eps), trial)
            data = sparse_linear_data(n, p, s, rng)
            for method, error in label_methods(data, s, eps, rounds, rng).items():
                rows.append({"s": s, "epsilon": eps, "trial": trial, "method": method, "relative_error": error})
    return rows


# --------------------------------------------------------------------------------------------------- Bernstein
#: the numbers of participants of the Bernstein section (``--bernstein-sizes``)
BERNSTEIN_SIZES = (10_000, 100_000, 1_000_000, 3_000_000)


def run_bernstein(trials: int, seed: int, sizes: tuple[int, ...] = BERNSTEIN_SIZES) -> list[dict]:
    rows = []
    k, order, eps, chunk = 6, 2, 1.0, 250_000
    for p in (1, 2):
        truth = np.linspace(0.6, -0.4, p)
        scale = float((p + 1) ** 2)  # |<theta, x> - y| <= p + 1 on the box [-1, 1]^p with |x_j|, |y| <= 1
        thetas = -1.0 + 2.0 * bernstein_grid(k, p)
        for n in sizes:
            for trial in range(trials):
                rng = rng_for(seed, 3, p, n, trial)
                X = rng.uniform(-1, 1, size=(n, p))
                y = np.clip(X @ truth + 0.1 * rng.normal(size=n), -1, 1)

                def risk(theta: np.ndarray, X: np.ndarray = X, y: np.ndarray = y, scale: float = scale) -> float:
                    return float(np.mean((X @ theta - y) ** 2)) / scale

                best = risk(np.clip(np.linalg.lstsq(X, y, rcond=None)[0], -1, 1))  # the box does not bind here
                report_sum = np.zeros(thetas.shape[0])
                for start in range(0, n, chunk):  # Alg. 2: every participant reports all grid points
                    part = slice(start, start + chunk)
                    losses = np.clip((X[part] @ thetas.T - y[part, None]) ** 2 / scale, 0, 1)
                    report_sum += randomize_grid_losses(losses, eps, rng).sum(axis=0)
                full = LocalBernsteinLinearRegression(k, p, order, -1, 1).fit(report_sum[np.newaxis, :] / n)
                assignment = assign_grid_points(n, thetas.shape[0], rng)  # Alg. 3: one grid point, one bit each
                own = np.clip((np.einsum("ij,ij->i", X, thetas[assignment]) - y) ** 2 / scale, 0, 1)
                strings = public_laplace_strings(n, eps, rng)
                bits = one_bit_report(own, strings, eps, rng)
                one_bit = LocalBernsteinLinearRegression(k, p, order, -1, 1).fit_one_bit(bits, strings, assignment)
                for method, theta in (
                    ("bernstein", full.coef_),
                    ("bernstein_1bit", one_bit.coef_),
                    ("zero", np.zeros(p)),
                ):
                    rows.append({"p": p, "n": n, "trial": trial, "method": method, "excess_risk": risk(theta) - best})
            print(f"  bernstein p={p} n={n}", flush=True)
    return rows


# --------------------------------------------------------------------------------------------------- DR-ERM
def run_drerm(trials: int, seed: int) -> list[dict]:
    import cvxpy as cp

    from estimators.local.sparse.dr_erm import projected_least_squares, recover_from_projection

    rows = []
    p, active, eps, chunk = 5000, 10, 1.0, 2000
    w_star = np.zeros(p)
    w_star[:4] = [0.4, -0.3, 0.2, 0.1]  # in the unit l1 ball
    for n in (20_000, 200_000):
        for trial in range(trials):
            rng = rng_for(seed, 4, n, trial)
            coordinate = rng.integers(0, active, n)  # spiky rows: x = +-e_j, j among 10 active coordinates
            sign = rng.choice([-1.0, 1.0], n)
            y = sign * w_star[coordinate] + 0.05 * rng.uniform(-1, 1, n)

            def risk(
                w: np.ndarray, sign: np.ndarray = sign, coordinate: np.ndarray = coordinate, y: np.ndarray = y
            ) -> float:
                return float(np.mean((sign * w[coordinate] - y) ** 2) / 2)

            v = cp.Variable(active)  # only the active coordinates carry data; the optimum is zero elsewhere
            cp.Problem(
                cp.Minimize(cp.sum_squares(cp.multiply(sign, v[coordinate]) - y) / (2 * n)), [cp.norm1(v) <= 1]
            ).solve()
            best = risk(np.concatenate([v.value, np.zeros(p - active)]))
            baseline = risk(np.zeros(p)) - best
            phis = {m: random_projection(m, p, seed=seed + m) for m in (20, 60, 200)}
            counts = np.bincount(coordinate, minlength=active) / n
            signed = np.bincount(coordinate, weights=sign * y, minlength=active) / n
            for m, phi in phis.items():  # exact projected statistics (no privacy): u_i = sign_i Phi e_j, from counts
                if m == 200 and (n, trial) != (200_000, 0):
                    continue  # the m = 200 solve takes ~40 s: once is enough to show the projection's own loss
                gram = (phi[:, :active] * counts) @ phi[:, :active].T
                exact = recover_from_projection(phi, projected_least_squares(phi[:, :active] @ signed, gram, phi))
                excess = (risk(exact) - best) / baseline
                rows.append({"n": n, "m": m, "trial": trial, "method": "exact_stats", "relative_excess": excess})
            private_m = (20, 60)  # m = 200 would mean reports of dimension 20,300: not attempted
            sums = {m: np.zeros(m + m * (m + 1) // 2) for m in private_m}
            for start in range(0, n, chunk):  # every participant runs the real randomizer on her (dense) row
                rows_x = np.zeros((min(chunk, n - start), p))
                rows_x[np.arange(rows_x.shape[0]), coordinate[start : start + chunk]] = sign[start : start + chunk]
                for m in private_m:
                    reports = projected_statistics_report(rows_x, y[start : start + chunk], phis[m], 1.5, 1.0, eps, rng)
                    sums[m] += reports.sum(axis=0)
            for m in private_m:
                private = DRERMLinearRegression().fit(sums[m] / n, phis[m])
                excess = (risk(private.coef_) - best) / baseline
                rows.append({"n": n, "m": m, "trial": trial, "method": "private", "relative_excess": excess})
            print(f"  drerm n={n} trial={trial}", flush=True)
    return rows


# --------------------------------------------------------------------------------------------------- DP-IHT
def adult_design() -> tuple[np.ndarray, np.ndarray, float]:
    import pandas as pd

    from workloads.domain import Domain
    from workloads.encodings import DesignEncoding

    categorical = ["workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
                   "native-country", "income>50K"]  # fmt: skip
    domain = Domain.from_json((DATA / "adult" / "adult-domain.json").read_text(), categorical)
    rows = pd.read_csv(DATA / "adult" / "adult_train.csv").sample(20_000, random_state=0)  # time on 2 shared cores
    features = [c for c in domain.names if c not in ("education", "income>50K")]
    design = DesignEncoding(domain, features, "income>50K", "logistic", intercept=True)
    X, y = design.encode(rows)
    return X, y, float(design.feature_norm_bound())


DPIHT_EPSILONS = (0.05, 0.2, 1.0)


def run_dpiht(trials: int, seed: int) -> list[dict]:
    X, y, bound = adult_design()
    l2, iterations = 1e-3, 200
    eta = 4.0 / (bound * bound)  # 1 / (public smoothness bound ||x||^2 / 4): no data-dependent step size

    def loss(theta: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0.0, -y * (X @ theta))) + 0.5 * l2 * theta @ theta)

    def no_noise(sigma: float, size: int) -> np.ndarray:
        return np.zeros(size)

    def nonprivate(k: int, steps: int) -> float:
        model = DPIHTLogisticRegression(k, steps, eta, 1.0, bound, l2=l2, normalizer=float(len(y)))
        return loss(model.fit(X, y, no_noise).coef_)

    rows = []
    for k in (5, 10, 20):
        best = nonprivate(k, 10 * iterations)  # Sec. 7.2 runs (Jain et al.'s) IHT to convergence as the reference
        same_budget = nonprivate(k, iterations) - best  # the optimisation error of T = 200 steps without noise
        for eps in DPIHT_EPSILONS:
            rho = engine_rho(eps, DELTA)
            for trial in range(trials):
                noise_rng = rng_for(seed, 6, k, int(100 * eps), trial)
                noise: Callable[[float, int], np.ndarray] = lambda s, size, r=noise_rng: r.normal(0.0, s, size)  # noqa: E731
                model = DPIHTLogisticRegression(k, iterations, eta, rho, bound, l2=l2).fit(X, y, noise)
                rows.append({"k": k, "epsilon": eps, "rho": float(rho), "trial": trial, "gap": loss(model.coef_) - best,
                             "nonprivate_gap": same_budget, "reference_loss": best,
                             "zero_gap": loss(np.zeros(X.shape[1])) - best})  # fmt: skip
    return rows


# --------------------------------------------------------------------------------------------------- report
def print_tables(results: dict[str, list[dict]]) -> None:
    if results.get("sec71"):
        means = mean_by(results["sec71"], ("p", "n", "method"), "relative_error")
        methods = ["iht_nonprivate", "label_iht_paper", "label_iht", "lasso", "ldp_iht", "ldp_iht_clip1"]
        print("\nSec. 7.1, relative error (mean over trials), s = 10, eps = 1, delta = 1e-3, T = ceil(ln(n/p))")
        print(f"{'p':>5} {'n':>7} " + " ".join(f"{m:>15}" for m in methods))
        for p in (100, 400):
            for n in (10_000, 40_000):
                print(f"{p:>5} {n:>7} " + " ".join(f"{means[(p, n, m)]:>15.3f}" for m in methods))
    if results.get("sweeps"):
        means = mean_by(results["sweeps"], ("s", "epsilon", "method"), "relative_error")
        print("\nLabel privacy sweeps (p = 100, n = 40000), relative error")
        print(f"{'s':>3} {'eps':>5} {'label_iht_paper':>16} {'label_iht':>10} {'lasso':>8}")
        for s, eps in sorted({(r["s"], r["epsilon"]) for r in results["sweeps"]}):
            cells = [means[(s, eps, m)] for m in ("label_iht_paper", "label_iht", "lasso")]
            print(f"{s:>3} {eps:>5} {cells[0]:>16.3f} {cells[1]:>10.3f} {cells[2]:>8.3f}")
    if results.get("bernstein"):
        means = mean_by(results["bernstein"], ("p", "n", "method"), "excess_risk")
        print("\nLocal Bernstein mechanism (k = 6, h = 2, eps = 1), excess empirical risk (scaled loss)")
        print(f"{'p':>3} {'n':>8} {'Alg. 2':>10} {'Alg. 3 (1 bit)':>15} {'theta = 0':>10}")
        for p, n in sorted({(r["p"], r["n"]) for r in results["bernstein"]}):
            cells = [means[(p, n, m)] for m in ("bernstein", "bernstein_1bit", "zero")]
            print(f"{p:>3} {n:>8} {cells[0]:>10.5f} {cells[1]:>15.5f} {cells[2]:>10.5f}")
    if results.get("drerm"):
        means = mean_by(results["drerm"], ("n", "m", "method"), "relative_excess")
        print("\nDR-ERM-LDP (p = 5000, eps = 1, unit l1 ball), (L(w) - L*) / (L(0) - L*): 0 optimal, 1 = as w = 0")
        print(f"{'n':>8} {'m':>4} {'private':>10} {'exact projected stats':>22}")
        for n, m in sorted({(r["n"], r["m"]) for r in results["drerm"]}):
            private = means.get((n, m, "private"), float("nan"))
            print(f"{n:>8} {m:>4} {private:>10.3f} {means[(n, m, 'exact_stats')]:>22.3f}")
    if results.get("dpiht"):
        means = mean_by(results["dpiht"], ("k", "epsilon"), "gap")
        floor = mean_by(results["dpiht"], ("k",), "nonprivate_gap")
        zero = mean_by(results["dpiht"], ("k",), "zero_gap")
        print("\nDP-IHT, logistic on Adult (20000 rows, T = 200, l2 = 1e-3, delta = 1e-3), optimality gap")
        header = " ".join(f"{'eps=' + str(e):>10}" for e in DPIHT_EPSILONS)
        print(f"{'k':>3} {header} {'no noise, T=200':>16} {'theta = 0':>10}")
        for k in (5, 10, 20):
            cells = " ".join(f"{means[(k, e)]:>10.4f}" for e in DPIHT_EPSILONS)
            print(f"{k:>3} {cells} {floor[(k,)]:>16.4f} {zero[(k,)]:>10.4f}")


def plot(results: dict[str, list[dict]], path: Path) -> None:
    plt = harness.pyplot()

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
    if results.get("sec71"):
        means = mean_by(results["sec71"], ("p", "n", "method"), "relative_error")
        for method in ("label_iht_paper", "label_iht", "lasso", "ldp_iht"):
            for p, style in ((100, "-"), (400, "--")):
                ns = (10_000, 40_000)
                axes[0].plot(ns, [means[(p, n, method)] for n in ns], style, marker="o", label=f"{method} p={p}")
        axes[0].set(xscale="log", xlabel="n", ylabel="relative error", title="Sec. 7.1 (s = 10, eps = 1)")
        axes[0].legend(fontsize=6)
    if results.get("sweeps"):
        means = mean_by(results["sweeps"], ("s", "epsilon", "method"), "relative_error")
        epsilons = (0.5, 1.0, 2.0, 4.0)
        for method in ("label_iht_paper", "label_iht", "lasso"):
            axes[1].plot(epsilons, [means[(10, e, method)] for e in epsilons], marker="o", label=method)
        axes[1].set(xscale="log", xlabel="epsilon", ylabel="relative error", title="p = 100, n = 40000, s = 10")
        axes[1].legend(fontsize=7)
    if results.get("bernstein"):
        means = mean_by(results["bernstein"], ("p", "n", "method"), "excess_risk")
        ns = sorted({r["n"] for r in results["bernstein"]})
        for p in (1, 2):
            for method in ("bernstein", "bernstein_1bit"):
                axes[2].plot(ns, [max(means[(p, n, method)], 1e-7) for n in ns], marker="o", label=f"{method} p={p}")
        axes[2].set(xscale="log", yscale="log", xlabel="n", ylabel="excess empirical risk", title="Bernstein, eps = 1")
        axes[2].legend(fontsize=7)
    if results.get("drerm"):
        means = mean_by(results["drerm"], ("n", "m", "method"), "relative_excess")
        for method, marker in (("private", "o"), ("exact_stats", "s")):
            for n, color in ((20_000, "tab:blue"), (200_000, "tab:red")):
                points = sorted((m, v) for (n_, m, method_), v in means.items() if (n_, method_) == (n, method))
                if points:
                    ms, values = zip(*points, strict=True)
                    axes[3].plot(ms, values, marker=marker, color=color, ls="-" if method == "private" else ":",
                                 label=f"{method} n={n}")  # fmt: skip
        axes[3].set(
            xscale="log", xlabel="m (projected dimension)", ylabel="(L - L*) / (L(0) - L*)", title="DR-ERM, p = 5000"
        )
        axes[3].legend(fontsize=6)
    harness.save_figure(fig, path, dpi=110)


SECTIONS: dict[str, Callable[[int, int], list[dict]]] = {
    "sec71": run_sec71,
    "sweeps": run_sweeps,
    "bernstein": run_bernstein,
    "drerm": run_drerm,
    "dpiht": run_dpiht,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), default=list(SECTIONS))
    parser.add_argument("--replot", action="store_true", help="print the tables and redraw the plot from the JSON")
    parser.add_argument("--bernstein-sizes", type=int, nargs="+", default=list(BERNSTEIN_SIZES),
                        help="numbers of participants of the bernstein section")
    harness.add_outputs(parser, "sparse_quick")
    args = parser.parse_args()
    out, png = harness.outputs(args)
    if args.replot:
        saved = json.loads(out.read_text())["results"]
        print_tables(saved)
        plot(saved, png)
        return
    results: dict[str, list[dict]] = {}
    seconds: dict[str, float] = {}
    if out.exists():  # keep sections not rerun
        previous = json.loads(out.read_text())
        results = {k: v for k, v in previous.get("results", {}).items() if k not in args.only}
        seconds = {k: v for k, v in previous.get("seconds", {}).items() if k not in args.only}
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        started = time.perf_counter()
        print(f"{name} ...", flush=True)
        section = SECTIONS[name]
        if name == "bernstein":
            section = functools.partial(run_bernstein, sizes=tuple(args.bernstein_sizes))
        results[name] = section(args.trials, args.seed)
        seconds[name] = round(time.perf_counter() - started, 1)
        print(f"{name}: {seconds[name]} s", flush=True)
        out.write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "trials": args.trials,
                    "seed": args.seed,
                    "seconds": seconds,
                    "results": results,
                },
                indent=1,
            )
        )  # fmt: skip  (after every section)
    print_tables(results)
    plot(results, png)
    print(f"\nwrote {out} and {png}")


if __name__ == "__main__":
    main()
