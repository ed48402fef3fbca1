"""``python -m benchmarks.stein_glm_clipping``: what the public-gram ``stein-glm``'s norm bound costs, per public
quantile of ``||W x||`` (``--option norm_quantile``): the bias clipping adds, and the noise a larger bound adds.

In process (the estimator and the device's randomizer, not the service): for each table (the README's synthetic
Gaussian population, ACSemployment ``ESR``, Adult ``income>50K``; half the training rows public, half participants,
as :mod:`benchmarks.stein_glm_real` splits them) and each quantile ``q``,

* **bias** (no noise): the reports replaced by their exact values ``clip(y - 1/2) (1, clip(W x))``; the logistic
  model fitted from them beside the one fitted with the largest quantile that has a root (``ref_quantile``):
  ``relative_change`` ``||w_q - w_ref|| / ||w_ref||``, ``norm_ratio`` ``||w_q|| / ||w_ref||`` (clipping lengthens the
  Stein coefficients: the OLS on clipped features is steeper than on the features themselves), test ``auc`` and
  ``mean_probability`` (the base rate is ``positive_rate_test``);
* **private**: ``trials`` runs of the l2-ball randomizer at each ``epsilon`` (seeded), median test AUC.

Features are standardized and whitened with the public half's statistics, labels centred at 1/2 with bound 1/2: the
product's defaults (:func:`service.campaigns.protocols.stein_glm._build_public_gram`).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from benchmarks import harness
from benchmarks.harness import DATA, Force, JsonOut, PlotOut
from estimators.base import EstimatorError
from estimators.central.metrics import auc
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm.public_gram import InterceptSteinGLM, PublicGramOLS, public_whitening, quantile_norm_bound
from service.cli.common import QuietFlag
from workloads.local.protocols import RoundState, SteinGlmSpec
from workloads.local.protocols.stein_glm import augmented_moment

QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
TABLES = {"acs": ("acs/ACSemployment_train.csv", "acs/ACSemployment_test.csv", "ESR"),
          "adult": ("adult/adult_train.csv", "adult/adult_test.csv", "income>50K")}
STATE = RoundState(0, {})


def _synthetic() -> tuple[np.ndarray, ...]:
    """The README's population: three Gaussian features, logistic labels with w* = (0.8, -0.5, 0.4)."""
    x = np.random.default_rng(0).normal(size=(105_000, 3))
    y = (np.random.default_rng(1).random(len(x)) < 1 / (1 + np.exp(-(x @ [0.8, -0.5, 0.4])))).astype(float)
    return x[:5000], x[5000:100_000], y[5000:100_000], x[100_000:], y[100_000:]


def load(name: str, seed: int) -> tuple[np.ndarray, ...]:
    """(public rows, participants' rows, their labels, test rows, test labels), standardized with public statistics."""
    if name == "synthetic":
        return _synthetic()
    train_name, test_name, target = TABLES[name]
    train, test = pd.read_csv(DATA / train_name), pd.read_csv(DATA / test_name)
    features = [c for c in train.columns if c != target]
    order = np.random.default_rng(seed).permutation(len(train))
    x, y = train[features].to_numpy(float), (train[target] == 1).to_numpy(float)
    half = len(order) // 2
    public, private, labels = x[order[:half]], x[order[half:]], y[order[half:]]
    center, scale = public.mean(axis=0), public.std(axis=0)
    scale[scale == 0] = 1.0
    return ((public - center) / scale, (private - center) / scale, labels,
            (test[features].to_numpy(float) - center) / scale, (test[target] == 1).to_numpy(float))


def _fit(public: np.ndarray, x: np.ndarray, y: np.ndarray, quantile: float, whitening: np.ndarray,
         epsilon: float | None, rng: np.random.Generator | None) -> InterceptSteinGLM:
    """The logistic model from exact (``epsilon=None``) or l2-ball-randomized reports."""
    spec = SteinGlmSpec(dimension=public.shape[1], norm_bound=quantile_norm_bound(public, quantile, whitening),
                        label_bound=0.5, epsilon=epsilon or 1.0, delta=0.0, variant="public-gram",
                        randomizer="l2ball", norm_quantile=quantile, label_center=0.5,
                        whitening=tuple(whitening.ravel().tolist()))
    aggregate = ReportAggregate.for_round(spec, 0, STATE)
    if epsilon is None:
        exact = augmented_moment(x @ whitening.T, y, spec.norm_bound, 0.5, 0.5)
        aggregate.count, aggregate.sums["xy"] = len(exact), exact.sum(axis=0)
    else:
        aggregate.add(spec.randomize(0, STATE, {"x": x, "y": y}, rng=rng))
    return InterceptSteinGLM("logistic").fit(PublicGramOLS().fit(aggregate, spec, public), public)


def run_clipping(tables: tuple[str, ...], epsilons: tuple[float, ...], trials: int, seed: int,
                 log: Any = lambda message: None) -> dict[str, Any]:
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    for table in tables:
        public, x, y, x_test, y_test = load(table, seed)
        whitening = public_whitening(public)
        exact: dict[float, InterceptSteinGLM | None] = {}
        for quantile in QUANTILES:
            try:
                exact[quantile] = _fit(public, x, y, quantile, whitening, None, None)
            except EstimatorError:
                exact[quantile] = None
        reference_q = max(q for q, model in exact.items() if model is not None)
        reference = exact[reference_q].coef_  # type: ignore[union-attr]
        for quantile in QUANTILES:
            record: dict[str, Any] = {"table": table, "quantile": quantile, "ref_quantile": reference_q,
                                      "norm_bound": quantile_norm_bound(public, quantile, whitening),
                                      "positive_rate_test": float(y_test.mean())}
            model = exact[quantile]
            if model is None:
                record["no_root"] = True
            else:
                scores = model.model_.decision_function(x_test)
                record.update({
                    "no_root": False,
                    "relative_change": float(np.linalg.norm(model.coef_ - reference) / np.linalg.norm(reference)),
                    "norm_ratio": float(np.linalg.norm(model.coef_) / np.linalg.norm(reference)),
                    "auc": auc(y_test, scores), "mean_probability": float(np.mean(model.model_.predict_mean(x_test)))})
            for e_index, epsilon in enumerate(epsilons):
                aucs = []
                for trial in range(trials):
                    rng = np.random.default_rng(harness.trial_seed(seed, e_index, trial))
                    try:
                        fitted = _fit(public, x, y, quantile, whitening, epsilon, rng)
                    except EstimatorError:
                        continue
                    aucs.append(auc(y_test, fitted.model_.decision_function(x_test)))
                record[f"private_auc_eps{epsilon:g}"] = statistics.median(aucs) if aucs else None
                record[f"private_answered_eps{epsilon:g}"] = len(aucs)
            records.append(record)
            log(f"{table} q={quantile}: " + ", ".join(f"{k} {v:.3f}" for k, v in record.items()
                                                      if isinstance(v, float) and k != "quantile"))
    return {"benchmark": "stein-glm-clipping", "config": {"tables": list(tables), "epsilons": list(epsilons),
                                                           "trials": trials, "seed": seed},
            "records": records, "seconds_total": time.perf_counter() - started}


def plot_clipping(result: dict[str, Any], path: Path) -> None:
    """Per table: the coefficient norm ratio (bias) and the private AUC against the quantile."""
    plt = harness.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for index, table in enumerate(result["config"]["tables"]):
        rows = [r for r in result["records"] if r["table"] == table]
        answered = [r for r in rows if not r["no_root"]]
        axes[0].plot([r["quantile"] for r in answered], [r["norm_ratio"] for r in answered], marker="o",
                     color=f"C{index}", label=table)
        for e_index, epsilon in enumerate(result["config"]["epsilons"]):
            points = [(r["quantile"], r[f"private_auc_eps{epsilon:g}"]) for r in rows
                      if r[f"private_auc_eps{epsilon:g}"] is not None]
            axes[1].plot([p[0] for p in points], [p[1] for p in points], marker="o", color=f"C{index}",
                         linestyle=("-", "--", ":")[e_index % 3], label=f"{table}, epsilon {epsilon:g}")
    axes[0].axhline(1.0, color="0.6", linestyle="--")
    axes[0].set_ylabel("||w_q|| / ||w_ref|| (no noise: the clipping bias)")
    axes[1].set_ylabel("test AUC, l2-ball reports (median over trials)")
    for ax in axes:
        ax.set_xlabel("public quantile q of ||W x|| (the norm bound)")
        harness.finish_axes(ax, 7)
    harness.save_figure(fig, path)


def main(
    out: JsonOut,
    tables: Annotated[str, typer.Option(help="Comma-separated: synthetic, acs, adult.")] = "synthetic,acs,adult",
    epsilon: Annotated[str, typer.Option(help="Comma-separated epsilons of the private runs.")] = "1,2",
    trials: Annotated[int, typer.Option(help="Private trials per quantile and epsilon.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the split and the randomizer.")] = 2021,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """The bias and the noise of the public-gram stein-glm's norm bound, per public quantile."""
    names = tuple(t.strip() for t in tables.split(",") if t.strip())
    unknown = [t for t in names if t != "synthetic" and t not in TABLES]
    if unknown:
        raise harness.BenchError(f"unknown table {unknown[0]!r} (known: synthetic, {', '.join(TABLES)})")
    epsilons = harness.number_list(epsilon, "--epsilon", float) or (2.0,)
    harness.run_and_write(lambda log: run_clipping(names, epsilons, trials, seed, log), plot_clipping, out, plot,
                          force, quiet)
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
