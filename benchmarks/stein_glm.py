"""``python -m benchmarks.stein_glm``: the synthetic experiments of Sec. 6 of Wang, Hu, Zhang, Gaboardi & Xu,
"Generalized linear models in non-interactive local differential privacy with public data" (ALT 2021; the journal
version's fuller settings), through the real collection path.

For every setting (design, model, dimension ``p``, public rows ``m``, epsilon), every ``n`` and every trial, on a
fresh temporary SQLite database:

1. a synthetic problem (:func:`estimators.local.glm.synthetic.make_problem`): ``n`` private rows with labels from the
   model's link and ``w* = (1, ..., 1) / sqrt(p)``, and ``m`` unlabeled public rows from the same design (``m = n``
   unless ``public_n`` says otherwise, as in the paper);
2. the public rows stored as a public table (:func:`service.campaigns.public_tables.store_public_table`, what
   ``marginalia public load`` stores after reading its CSV);
3. a ``stein-glm`` campaign (:func:`service.campaigns.campaigns.create_campaign`) at (epsilon, ``delta = n^-1.1``),
   ``n`` planned participants, features taken as they are (``standardize=false``: the paper's designs are centred
   already) and the paper's report bounds: Alg. 1's l2 bound ``r = sqrt(5 ||Sigma_m|| p log(n / 0.1))`` from the
   public rows for the Gaussian designs, the l1 bound 1 (Alg. 2) for the Bernoulli design, labels bounded by 1;
4. the participants played by the simulator (:func:`service.campaigns.simulate.simulate`: the device's randomizer,
   the batch submission the HTTP route calls, stored reports, the running aggregate);
5. the model fitted by :func:`service.campaigns.estimates.fit_campaign`, the code ``marginalia campaign fit`` runs
   (Remark 11's pooled ``X^T X``, the link's constant found over the public rows), and its squared relative error
   against ``w*`` (l2 for the Gaussian designs, l-infinity for the Bernoulli one, as in the paper).

A trial whose link constant does not exist (the fit's ``no_root`` error: the noisy OLS is too long for the link) is
recorded with ``no_root: true`` and no error value, and counted in the summary, never dropped silently. The summary
gives per setting and ``n`` the median and mean error over the answered trials, and per setting the least-squares
slope of log(median error) and log(mean error) against log(n) over the ``n`` where at least half the trials answered
(the paper's claim: slope -1). Seeds: one ``numpy.random.SeedSequence`` per (setting, n, trial) from ``seed``, so a
run is reproducible; the seed is the benchmark's (simulated participants are not people, campaigns take none).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from estimators.base import EstimatorError
from estimators.local.accuracy import loglog_slope, squared_relative_error
from estimators.local.glm.links import LINKS
from estimators.local.glm.synthetic import (
    SyntheticProblem,
    design_name,
    make_problem,
    paper_metric,
    paper_report_bounds,
)
from service.cli.common import QuietFlag
from service.errors import InvalidInput

#: Alg. 1's failure probability zeta in the norm bound (the quick benchmark's and the campaign builder's choice).
ZETA = 0.1
#: The cap set on each temporary database: far above any campaign here (the cap is not what is measured).
BENCH_CAP = (1000.0, 0.5)
#: Vary these (comma lists); the others are one value each.
AXES = ("epsilon", "p", "public_n")
PUBLIC_NAME, CAMPAIGN_NAME = "bench-public", "bench-stein"


def _positive_ints(name: str, values: Sequence[object], smallest: int) -> None:
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < smallest for v in values):
        raise BenchError(f"{name} must be a non-empty list of integers >= {smallest}, got {list(values)}")


@dataclass(frozen=True)
class SteinBench:
    """One run: every combination of ``epsilons`` x ``dimensions`` x ``public_sizes`` (``None`` = as many public rows
    as private) x ``sizes`` x ``trials``."""

    design: str = "gaussian"
    model: str = "logistic"
    sizes: tuple[int, ...] = (10_000, 30_000, 100_000, 290_000)
    epsilons: tuple[float, ...] = (2.0, 3.0, 5.0, 10.0)
    dimensions: tuple[int, ...] = (10,)
    public_sizes: tuple[int | None, ...] = (None,)
    trials: int = 5
    seed: int = 0

    def validate(self) -> None:
        try:
            design_name(self.design)
        except EstimatorError as error:
            raise BenchError(str(error)) from None
        bounded = sorted(name for name, link in LINKS.items() if link.labels == "bernoulli")
        if self.model not in bounded:
            raise BenchError(f"model must be one of {bounded} (links whose labels lie in [0, 1], the campaign's "
                                  f"label bound), got {self.model!r}")
        _positive_ints("n", self.sizes, 2)
        _positive_ints("p", self.dimensions, 1)
        _positive_ints("public-n", [m for m in self.public_sizes if m is not None] or [2], 2)
        if not self.public_sizes:
            raise BenchError("public-n must name at least one size (or be left out: as many as n)")
        if not self.epsilons or any(isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e)
                                    or e <= 0 for e in self.epsilons):
            raise BenchError(f"epsilon must be a list of positive finite numbers, got {list(self.epsilons)}")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise BenchError(f"trials must be a positive integer, got {self.trials!r}")

    @property
    def varied(self) -> str:
        """The axis the plot draws one line per value of (the first of :data:`AXES` with several values)."""
        lengths = {"epsilon": len(self.epsilons), "p": len(self.dimensions), "public_n": len(self.public_sizes)}
        return next((axis for axis in AXES if lengths[axis] > 1), "epsilon")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Setting:
    design: str
    model: str
    p: int
    public_n: int | None
    epsilon: float

    @property
    def metric(self) -> str:
        return paper_metric(self.design)


def delta_for(n: int) -> float:
    """The paper's ``delta = n^-1.1``."""
    return float(n) ** -1.1


def settings_of(config: SteinBench) -> list[Setting]:
    return [Setting(config.design, config.model, p, m, float(e))
            for p in config.dimensions for m in config.public_sizes for e in config.epsilons]


def _store_problem(engine: object, setting: Setting, problem: SyntheticProblem, n: int) -> tuple[list[str], Any]:
    """The public table and the campaign of one trial (steps 2 and 3); returns the feature names and the campaign."""
    from service.campaigns import caps, public_tables
    from service.campaigns.campaigns import create_campaign

    features = [f"x{j}" for j in range(setting.p)]
    caps.set_default_cap(engine, *BENCH_CAP, principal="bench")  # type: ignore[arg-type]
    public_tables.store_public_table(engine, PUBLIC_NAME,  # type: ignore[arg-type]
                                     [public_tables.PublicColumn(f, "numeric") for f in features],
                                     problem.public_rows, f"generated: {setting.design} design", principal="bench")
    options = {**paper_report_bounds(setting.design, problem.public_rows, n, ZETA), "participants": n,
               "standardize": False, "variant": "paper"}
    campaign = create_campaign(engine, CAMPAIGN_NAME, "stein-glm", features, "y", PUBLIC_NAME,  # type: ignore[arg-type]
                               setting.epsilon, delta_for(n), options, principal="bench")
    return features, campaign


def run_trial(setting: Setting, n: int, trial: int, seed: int, folder: Path) -> dict[str, Any]:
    """One record: a fresh database in ``folder`` (removed after), steps 1-5 of the module docstring."""
    from service.campaigns.estimates import fit_campaign
    from service.campaigns.simulate import simulate

    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    public_n = n if setting.public_n is None else setting.public_n
    problem = make_problem(design_name(setting.design), setting.model, n, public_n, setting.p, rng)
    path = folder / f"trial-{seed}.db"
    engine = harness.temporary_database(path)
    try:
        features, campaign = _store_problem(engine, setting, problem, n)
        simulated = simulate(engine, CAMPAIGN_NAME, problem.features, problem.labels,
                             seed=int(rng.integers(2**63)))
        fit_started = time.perf_counter()
        record: dict[str, Any] = {
            "design": setting.design, "model": setting.model, "p": setting.p, "public_n": public_n, "n": n,
            "trial": trial, "seed": seed, "epsilon": setting.epsilon, "delta": delta_for(n), "metric": setting.metric,
            "campaign_epsilon": campaign.epsilon, "campaign_delta": campaign.delta,
            "norm": campaign.spec.norm, "norm_bound": campaign.spec.norm_bound,
            "reports": sum(simulated.reports.values()), "simulate_seconds": simulated.seconds,
        }
        try:
            fitted = fit_campaign(engine, CAMPAIGN_NAME, setting.model)
        except InvalidInput as error:
            if error.code != "no_root":
                raise
            record.update({"squared_relative_error": None, "no_root": True, "note": str(error)})
        else:
            coef = np.array([fitted.coefficients[f] for f in features])
            record.update({"squared_relative_error": squared_relative_error(coef, problem.coef, setting.metric),
                           "no_root": False, "link_constant": fitted.details.get("link_constant")})
        record["fit_seconds"] = time.perf_counter() - fit_started
    finally:
        engine.dispose()
        path.unlink(missing_ok=True)
    record["seconds"] = time.perf_counter() - started
    return record


def run_stein_bench(config: SteinBench, log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Run every (setting, n, trial) and return the JSON-ready result: ``config``, ``records``, ``summary``."""
    config.validate()
    started = time.perf_counter()
    records = []
    with harness.temporary_folder("marginalia-stein-") as folder:
        for index, setting in enumerate(settings_of(config)):
            for n in config.sizes:
                for trial in range(config.trials):
                    record = run_trial(setting, n, trial, harness.trial_seed(config.seed, index, n, trial), folder)
                    records.append(record)
                    error = record["squared_relative_error"]
                    log(f"p={setting.p} m={record['public_n']} eps={setting.epsilon:g} n={n} trial={trial}: "
                        + ("no root" if error is None else f"error {error:.4g}")
                        + f" ({record['seconds']:.1f} s, {record['reports'] / record['simulate_seconds']:,.0f} "
                          "reports/s)")
    return {"benchmark": "stein-glm", "config": config.to_json(), "varied": config.varied, "records": records,
            "summary": summarize(records), "seconds_total": time.perf_counter() - started}


def _group_key(record: dict[str, Any]) -> tuple:
    public = "n" if record["public_n"] == record["n"] else record["public_n"]
    return record["design"], record["model"], record["p"], public, record["epsilon"]


def summarize(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting (``public_n`` ``"n"`` when it followed n): per n the trials, the answered ones, those without a
    root, median and mean error; and the fitted log-log slopes over the n where at least half the trials answered."""
    groups: dict[tuple, dict[int, list[dict[str, Any]]]] = {}
    for record in records:
        groups.setdefault(_group_key(record), {}).setdefault(record["n"], []).append(record)
    out = []
    for (design, model, p, public, epsilon), by_n in groups.items():
        points = []
        for n, trials in sorted(by_n.items()):
            errors = [r["squared_relative_error"] for r in trials if r["squared_relative_error"] is not None]
            points.append({"n": n, "trials": len(trials), "answered": len(errors),
                           "no_root": sum(bool(r.get("no_root")) for r in trials),
                           "median_error": statistics.median(errors) if errors else None,
                           "mean_error": statistics.fmean(errors) if errors else None,
                           "median_seconds": statistics.median(r["seconds"] for r in trials)})
        usable = [q for q in points if 2 * q["answered"] >= q["trials"]]
        sizes = [q["n"] for q in usable]
        out.append({"design": design, "model": model, "p": p, "public_n": public, "epsilon": epsilon,
                    "by_n": points, "n_used_for_slope": sizes,
                    "median_slope": loglog_slope(sizes, [q["median_error"] for q in usable]),
                    "mean_slope": loglog_slope(sizes, [q["mean_error"] for q in usable]),
                    "no_root_total": sum(q["no_root"] for q in points),
                    "trials_total": sum(q["trials"] for q in points)})
    return out


def _label(entry: dict[str, Any], varied: str) -> str:
    value = {"epsilon": f"eps={entry['epsilon']:g}", "p": f"p={entry['p']}",
             "public_n": f"m={entry['public_n']}"}[varied]
    slope = entry["median_slope"]
    failed = f", {entry['no_root_total']}/{entry['trials_total']} no root" if entry["no_root_total"] else ""
    return f"{value}: slope {'n/a' if slope is None else f'{slope:+.2f}'}{failed}"


def plot_stein_bench(result: dict[str, Any], path: Path, title: str | None = None) -> None:
    """Median squared relative error against n on log-log axes, one line per value of the varied axis (epsilon, p or
    public n), the quartiles of the answered trials as a band, the fitted slope of the medians in the legend; the 1/n
    reference dashed."""
    plt = harness.pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    records = result["records"]
    for color, entry in enumerate(result["summary"]):
        points = [q for q in entry["by_n"] if q["median_error"] is not None]
        if not points:
            continue
        mine = [r for r in records if _group_key(r) == (entry["design"], entry["model"], entry["p"],
                                                         entry["public_n"], entry["epsilon"])
                and r["squared_relative_error"] is not None]
        xs = [q["n"] for q in points]
        low, high = np.array([np.percentile([r["squared_relative_error"] for r in mine if r["n"] == n], (25, 75))
                              for n in xs]).T
        ax.plot(xs, [q["median_error"] for q in points], marker="o", color=f"C{color}",
                label=_label(entry, result["varied"]))
        ax.fill_between(xs, low, high, color=f"C{color}", alpha=0.12)
    sizes = sorted({r["n"] for r in records})
    answered = [q["median_error"] for e in result["summary"] for q in e["by_n"] if q["median_error"] is not None]
    if len(sizes) > 1 and answered:
        anchor = statistics.median(answered)
        ax.plot(sizes, [anchor * sizes[0] / n for n in sizes], "k--", linewidth=0.8, label="slope -1 (1/n)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (participants; delta = n^-1.1)")
    config = result["config"]
    metric = {"linf": "l-inf", "l2": "l2"}[paper_metric(config["design"])]
    ax.set_ylabel(f"median squared relative {metric} error")
    ax.set_title(title or f"stein-glm {config['model']}, {config['design']} design, through the service "
                 f"({config['trials']} trials)", fontsize=9)
    harness.finish_axes(ax, 7)
    harness.save_figure(fig, path)


def main(
    out: JsonOut,
    design: Annotated[str, typer.Option(help="gaussian, rotated or bernoulli (Sec. 6).")] = "gaussian",
    model: Annotated[str, typer.Option(help="The link labels are drawn from and fitted with (logistic, probit, "
                                            "boosting).")] = "logistic",
    p: Annotated[str, typer.Option("--p", help="Comma-separated dimensions.")] = "10",
    n: Annotated[str, typer.Option("--n", help="Comma-separated participant counts.")] = "10000,30000,100000,290000",
    public_n: Annotated[str | None, typer.Option(
        "--public-n", help="Comma-separated public table sizes (default: as many as n).")] = None,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons (delta = n^-1.1).")] = "2,3,5,10",
    trials: Annotated[int, typer.Option(help="Trials per (setting, n).")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the whole run (simulated participants, not a campaign's).")] = 0,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Squared relative error of the Stein-lemma GLM against n, through campaigns, the simulator and campaign fit."""
    config = SteinBench(
        design=design, model=model, sizes=harness.number_list(n, "--n", int),
        epsilons=harness.number_list(epsilon, "--epsilon", float), dimensions=harness.number_list(p, "--p", int),
        public_sizes=harness.number_list(public_n, "--public-n", int) if public_n is not None else (None,),
        trials=trials, seed=seed)
    config.validate()
    result = harness.run_and_write(lambda log: run_stein_bench(config, log=log), plot_stein_bench, out, plot, force,
                                   quiet)
    rows: list[tuple[object, ...]] = []
    for entry in result["summary"]:
        for point in entry["by_n"]:
            median = point["median_error"]
            rows.append((entry["p"], entry["public_n"], f"{entry['epsilon']:g}", f"{point['n']:,}",
                         f"{point['answered']}/{point['trials']}", point["no_root"],
                         "-" if median is None else f"{median:.4g}"))
        slope = entry["median_slope"]
        rows.append(("", "", "", "slope", "", "", "n/a" if slope is None else f"{slope:+.2f}"))
    if not quiet:
        harness.summary_table("stein-glm bench", ("p", "public n", "epsilon", "n", "answered", "no root",
                                                  "median error"), rows)
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
