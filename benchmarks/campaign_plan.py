"""``campaign plan`` against measured campaigns: predicted vs measured error over a few n and epsilon for each
planned protocol (issue 20 section 3: within a factor of 2).

Each case plans a campaign with :func:`service.campaigns.planning.plan_campaign` (the protocol's closed form), then runs
``--trials`` campaigns of it through the real collections path (a temporary SQLite database, the simulator's real
randomizers, ``campaign fit``) and measures ``sqrt(mean ||w - w_ref||^2) / ||w_ref||`` against the plan's own
reference, the metric the plan predicts:

* ``stein-glm`` (the defaults: variant public-gram, PrivUnit2, delta 0), ``stein-glm/l2ball`` (its l2-ball option),
  ``stein-glm/paper`` (Alg. 1: pooled ``X^T X``) and ``stein-glm/paper,gram=false``: three Gaussian features with
  unequal scales, logistic labels; a public table of 10,000 rows holding the target; the reference is the non-private
  OLS on it (model ``linear``, the private OLS, measured on the devices' standardized features);
* ``label-ldp`` (model ``iht``) and ``ldp-iht`` (model ``iht``): Sec. 7.1's design (``x`` uniform in ``{-1, +1}^p``,
  ``y = <x, theta*> + U[-0.05, 0.05]``) with ``theta*`` the planner's assumed spread profile (the public table holds no
  target), ``p = 20``, ``s = 3``, the label bound ``||theta*||_1 + 0.05``.

    python -m benchmarks.campaign_plan --trials 10 --json benchmarks/results/campaign_plan.json \
        --plot benchmarks/results/campaign_plan.png
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from service.cli.common import QuietFlag, column_list

STEIN_W = np.array([1.0, -0.5, 0.7])
STEIN_SCALES = np.array([1.0, 0.5, 2.0])
PUBLIC_ROWS = 10_000
SPARSE_P, SPARSE_S = 20, 3


@dataclass(frozen=True)
class Case:
    """A planned protocol: its campaign (protocol, model, options), its rows and its default grid."""

    protocol: str
    model: str
    options: dict[str, Any]
    ns: tuple[int, ...]
    epsilons: tuple[float, ...]
    delta: float


def _stein_rows(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    standard = rng.normal(size=(n, 3))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-standard @ STEIN_W))).astype(float)
    return standard * STEIN_SCALES, y


def _theta() -> np.ndarray:
    from estimators.local.sparse.planning import spread_profile

    return spread_profile(SPARSE_P, SPARSE_S, 1.0)


def _sparse_rows(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.choice([-1.0, 1.0], size=(n, SPARSE_P))
    return x, x @ _theta() + rng.uniform(-0.05, 0.05, n)


SPARSE_OPTIONS = {"sparsity": SPARSE_S, "label_bound": float(np.abs(_theta()).sum()) + 0.05}
CASES: dict[str, Case] = {
    "stein-glm": Case("stein-glm", "linear", {}, (5_000, 20_000), (2.0, 8.0), 0.0),
    "stein-glm/l2ball": Case("stein-glm", "linear", {"randomizer": "l2ball"}, (5_000, 20_000), (2.0, 8.0), 0.0),
    "stein-glm/paper": Case("stein-glm", "linear", {"variant": "paper"}, (5_000, 20_000), (2.0, 8.0), 1e-6),
    "stein-glm/paper,gram=false": Case("stein-glm", "linear", {"variant": "paper", "gram": False}, (5_000, 20_000),
                                       (2.0, 8.0), 1e-6),
    "label-ldp": Case("label-ldp", "iht", {**SPARSE_OPTIONS, "standardize": False}, (5_000, 20_000), (0.5, 2.0), 0.0),
    "ldp-iht": Case("ldp-iht", "iht", SPARSE_OPTIONS, (20_000, 80_000), (1.0, 4.0), 0.0),
}


def _setup(name: str, engine: Any, folder: Path, seed: int, largest: int) -> tuple[list[str], str | None, Callable]:
    """The case's feature names, public table (loaded) and row maker ``rows(n, rng) -> (x, y)``."""
    from service.campaigns.public_tables import load_public_csv

    rng = np.random.default_rng(harness.trial_seed(seed, 999))
    if name.startswith("stein-glm"):
        names = ["a", "b", "c"]
        x, y = _stein_rows(PUBLIC_ROWS, rng)
        pd.DataFrame(np.c_[x, y], columns=[*names, "y"]).to_csv(folder / "public.csv", index=False)
        load_public_csv(engine, "public", folder / "public.csv")
        return names, "public", _stein_rows
    names = [f"x{j}" for j in range(SPARSE_P)]
    if name == "label-ldp":
        # the participants' rows are the public table's: a table as large as the largest n, rows drawn from it
        x, _ = _sparse_rows(largest, rng)
        pd.DataFrame(x, columns=names).to_csv(folder / "public.csv", index=False)
        load_public_csv(engine, "public", folder / "public.csv")

        def rows(n: int, draw: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
            chosen = x[draw.choice(largest, size=n, replace=False)]
            return chosen, chosen @ _theta() + draw.uniform(-0.05, 0.05, n)

        return names, "public", rows
    return names, None, _sparse_rows


def _coefficients(engine: Any, campaign: str, model: str, names: list[str]) -> np.ndarray:
    from service.campaigns import campaigns, estimates

    fit = estimates.fit_campaign(engine, campaign, model)
    scale = np.asarray(campaigns.get_campaign(engine, campaign).transform.scale)
    return np.array([fit.coefficients[k] for k in names]) * scale


def _reference(engine: Any, name: str, campaign: str, public: str | None) -> np.ndarray:
    """The plan's reference: the planner's own (from the stored campaign's spec and public rows)."""
    from service.campaigns import campaigns
    from service.campaigns.protocols import CAMPAIGN_PROTOCOLS
    from service.campaigns.public_tables import get_public_table, public_matrix

    info = campaigns.get_campaign(engine, campaign)
    rows = labels = None
    if public is not None:
        table = get_public_table(engine, public)
        rows = info.transform.apply(public_matrix(engine, table, list(info.features)))
        if "y" in table.column_names:
            labels = public_matrix(engine, table, ["y"])[:, 0]
    return CAMPAIGN_PROTOCOLS.get(info.protocol).plan(info.spec, rows, labels).reference


def run_case(name: str, ns: tuple[int, ...], epsilons: tuple[float, ...], trials: int, seed: int,
             log: Callable[[str], None]) -> list[dict[str, Any]]:
    from service.campaigns import campaigns, simulate
    from service.campaigns.planning import plan_campaign

    case = CASES[name]
    records = []
    with harness.temporary_folder("marginalia-plan-bench-") as folder:
        engine = harness.temporary_database(folder / "bench.db")
        try:
            names, public, rows = _setup(name, engine, folder, seed, max(ns))
            for e_index, epsilon in enumerate(epsilons):
                for n in ns:
                    plan = plan_campaign(engine, case.protocol, names, "y", public, epsilon, case.delta,
                                         case.options, participants=n)
                    fits, reference, started = [], None, time.perf_counter()
                    for trial in range(trials):
                        campaign = f"c{e_index}-{n}-{trial}"
                        campaigns.create_campaign(engine, campaign, case.protocol, names, "y", public, epsilon,
                                                  case.delta, case.options)
                        x, y = rows(n, np.random.default_rng(harness.seed_sequence(seed, e_index, n, trial)))
                        simulate.simulate(engine, campaign, x, y, seed=harness.trial_seed(seed, e_index, n, trial, 1))
                        fits.append(_coefficients(engine, campaign, case.model, names))
                        if reference is None:
                            reference = _reference(engine, name, campaign, public)
                    errors = [float(np.linalg.norm(w - reference)) / float(np.linalg.norm(reference)) for w in fits]
                    measured = math.sqrt(float(np.mean(np.square(errors))))
                    predicted = plan.expected_relative_error
                    records.append({"case": name, "protocol": case.protocol, "model": case.model, "n": n,
                                    "epsilon": epsilon, "delta": case.delta, "trials": trials,
                                    "predicted": predicted, "measured": measured, "ratio": predicted / measured,
                                    "errors": errors, "seconds": time.perf_counter() - started})
                    log(f"{name} n={n:,} eps={epsilon:g}: predicted {predicted:.3f}, measured {measured:.3f} "
                        f"(ratio {predicted / measured:.2f})")
        finally:
            engine.dispose()
    return records


def plot_campaign_plan(result: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    records = result["records"]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    for name in dict.fromkeys(r["case"] for r in records):
        mine = [r for r in records if r["case"] == name]
        ax.scatter([r["measured"] for r in mine], [r["predicted"] for r in mine], label=name, s=30)
    values = [v for r in records for v in (r["measured"], r["predicted"]) if v > 0]
    low, high = min(values) / 1.5, max(values) * 1.5
    line = np.geomspace(low, high, 50)
    ax.plot(line, line, color="black", linewidth=1, label="predicted = measured")
    ax.plot(line, 2 * line, color="grey", linestyle="--", linewidth=1, label="factor 2")
    ax.plot(line, line / 2, color="grey", linestyle="--", linewidth=1)
    ax.set(xscale="log", yscale="log", xlabel="measured relative error (root mean square over trials)",
           ylabel="predicted (campaign plan)", title="campaign plan: predicted vs measured")
    harness.finish_axes(ax, 8)
    harness.save_figure(fig, path)


def main(
    out: JsonOut,
    cases: Annotated[str, typer.Option(help="Comma-separated cases: " + ", ".join(CASES) + ".")] = ",".join(CASES),
    n: Annotated[str | None, typer.Option("--n", help="Comma-separated participant counts (default: each case's "
                                                      "own).")] = None,
    epsilons: Annotated[str | None, typer.Option(help="Comma-separated local epsilons (default: each case's "
                                                      "own).")] = None,
    trials: Annotated[int, typer.Option(help="Campaigns per cell.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the rows and the simulated devices.")] = 0,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Predicted (campaign plan) vs measured relative error of each planned protocol."""
    chosen = tuple(column_list(cases) or ())
    unknown = [c for c in chosen if c not in CASES]
    if unknown or not chosen:
        raise BenchError(f"--cases must name some of {list(CASES)}, got {cases!r}")
    if trials < 1:
        raise BenchError(f"--trials must be at least 1, got {trials}")
    ns, eps = harness.number_list(n, "--n", int), harness.number_list(epsilons, "--epsilons", float)

    def run(log: Callable[[str], None]) -> dict[str, Any]:
        records = [r for c in chosen for r in run_case(c, ns or CASES[c].ns, eps or CASES[c].epsilons, trials, seed,
                                                       log)]
        ratios = [r["ratio"] for r in records]
        return {"config": {"cases": list(chosen), "trials": trials, "seed": seed, "n": ns, "epsilons": eps},
                "machine": harness.machine(), "records": records,
                "summary": {"cells": len(records), "ratio_min": min(ratios), "ratio_max": max(ratios),
                            "within_factor_2": all(0.5 <= v <= 2.0 for v in ratios)}}

    result = harness.run_and_write(run, plot_campaign_plan, out, plot, force, quiet)
    harness.summary_table("campaign plan: predicted vs measured relative error",
                          ("case", "n", "epsilon", "trials", "predicted", "measured", "ratio"),
                          [(r["case"], f"{r['n']:,}", f"{r['epsilon']:g}", r["trials"], f"{r['predicted']:.3f}",
                            f"{r['measured']:.3f}", f"{r['ratio']:.2f}") for r in result["records"]])
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
