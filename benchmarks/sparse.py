"""``python -m benchmarks.sparse``: Sec. 7.1 of Wang & Xu, "On sparse linear regression in the local differential
privacy model" (ICML 2019), through the real collections path.

For every ``(p, n, epsilon, trial)`` one synthetic problem is drawn (``estimators.local.sparse.synthetic``: ``x``
uniform in ``{-1, +1}^p``, ``theta*`` with ``s`` non-zeros uniform in ``[0, 1]`` rescaled to unit norm, noise uniform
in ``[-0.05, 0.05]``). Each selected method's **family** then collects once from those rows, and every method of the
family answers from that one collection:

* family ``ldp-iht`` (method ``ldp-iht``, Alg. 1): a campaign ``--protocol ldp-iht`` on a temporary SQLite database,
  the simulator plays its ``T`` rounds (``--iht-variant``: ``default``, ``T = 1``; ``paper``, ``T = ceil(ln(n / p))``
  and the worst-case clip) through the batch submission path (validation, the local
  ledger, the running aggregates, the transitions), then the code ``marginalia campaign fit`` runs (model ``iht``);
  family ``ldp-iht-coordinate`` (method of the same name): the same with ``--option randomizer=coordinate`` (one
  sampled gradient coordinate per participant, issue 20);
* family ``label-ldp`` (methods ``label-ldp-iht``, Alg. 2, and ``lasso``, Sec. 5): the rows' features are loaded as
  a public table, a ``label-ldp`` campaign collects the label reports once, and both models answer from it (free);
* families ``bernstein``, ``bernstein-1bit`` and ``dr-erm`` (Wang, Gaboardi & Xu 2018, Algs. 2-4; methods of the
  same names, model ``linear``): a campaign of that protocol on the same rows (Bernstein: ``p <= 3``, box
  ``[-1, 1]^p``; DR-ERM: the l1 ball of radius ``--drerm-radius``, by default 1, the public norm of ``theta*``, and
  ``||Phi x||`` clipped at ``sqrt(p)``);
* family ``linear-ssp`` (method of the same name, model ``linear``): one report per participant of her sufficient
  statistics ``[x, svec(x x^T), y, x y]`` through the l2-ball randomizer (issue 20), ``norm_bound = sqrt(p)`` (exact
  on this design), no ridge stated (AdaSSP's rule); the low-dimensional baseline beside Bernstein;
* family ``central`` (method ``dp-iht``, Alg. 3): the rows held centrally, one charged DP-IHT release of a temporary
  table at ``(epsilon, delta)`` (``benchmarks.dp_iht.fit_synthetic_dp_iht``): the central model's error
  beside the local protocols' on the same problem.

Methods are found by name in :data:`METHODS`; a method joins with :func:`register_method` and its family's collector
with :func:`register_family`. One record per ``(method, p, n, epsilon, trial)``: ``relative_error``
``||theta - theta*|| / ||theta*||``, ``excess_risk`` (``L(theta) - L(theta*)``, ``L`` the empirical squared risk
``(1/2n) ||y - X theta||^2`` on the cell's rows), ``seconds`` (wall time: the family's collection plus this method's
fit), ``collect_seconds``, ``fit_seconds``, ``cpu_seconds`` (this process's CPU time for the same; on a shared
machine the wall time varies with the load), ``reports``; a ``summary`` per ``(method, p, n, epsilon)`` (mean,
standard deviation, min, max). Seeds: the rows and the simulated devices of a cell are seeded from ``--seed`` and the
cell (a benchmark's simulated participants; no campaign takes a seed).
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
from sqlalchemy import Engine

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from estimators.local.accuracy import relative_error
from estimators.local.sparse.synthetic import SparseLinearData, sparse_linear_data
from service.cli.common import QuietFlag, column_list

DEFAULT_METHODS = ("ldp-iht", "label-ldp-iht", "lasso")


@dataclass(frozen=True)
class SparseBench:
    """The run's settings (``eta``: the IHT step of every IHT method; ``None``: the protocol's default, 1)."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    ps: tuple[int, ...] = (100, 400)
    ns: tuple[int, ...] = (10_000, 40_000)
    sparsity: int = 10
    epsilons: tuple[float, ...] = (1.0,)
    delta: float = 1e-3
    trials: int = 5
    seed: int = 0
    eta: float | None = None
    noise_bound: float = 0.05
    iht_variant: str = "default"
    drerm_radius: str = "norm"


#: DR-ERM's l1 radius: ``norm`` (default) the design's public l2 norm of ``theta*`` (1: Sec. 7.1's ``theta*`` is
#: rescaled to unit norm, the same ``R = 1`` the IHT protocols project on); ``sparsity`` the radius ``sqrt(s) R`` of
#: the first runs, which holds every s-sparse ``theta*`` of norm ``R`` but lets the noise fill a ball ``sqrt(s)``
#: times larger (docs/sparse-results.md, DR-ERM)
DRERM_RADII = ("norm", "sparsity")


@dataclass(frozen=True)
class BenchCell:
    """One problem: its settings, its rows, the temporary database and the seed of its simulated devices."""

    engine: Engine
    work: Path
    config: SparseBench
    p: int
    n: int
    epsilon: float
    trial: int
    data: SparseLinearData
    device_seed: int

    @property
    def tag(self) -> str:
        return f"p{self.p}-n{self.n}-e{self.epsilon:g}-t{self.trial}".replace(".", "_")

    @property
    def features(self) -> list[str]:
        return [f"x{j + 1}" for j in range(self.p)]

    @property
    def label_bound(self) -> float:
        """``sqrt(s) + C``: no label of the model class exceeds it (``||theta||_1 <= sqrt(s) ||theta||_2``)."""
        return math.sqrt(self.config.sparsity) + self.config.noise_bound


#: ``collect(cell) -> handle`` (what the family's methods answer from) and ``answer(cell, handle) -> (coef, extra)``
Collect = Callable[[BenchCell], Any]
Answer = Callable[[BenchCell, Any], tuple[np.ndarray, dict[str, Any]]]


@dataclass(frozen=True)
class SparseMethod:
    name: str
    family: str
    answer: Answer


FAMILIES: dict[str, Collect] = {}
METHODS: dict[str, SparseMethod] = {}


def register_family(name: str, collect: Collect) -> None:
    if name in FAMILIES:
        raise ValueError(f"family {name!r} is registered twice")
    FAMILIES[name] = collect


def register_method(method: SparseMethod) -> SparseMethod:
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} is registered twice")
    if method.family not in FAMILIES:
        raise ValueError(f"method {method.name!r}: register family {method.family!r} first")
    METHODS[method.name] = method
    return method


# ------------------------------------------------------------------------------------------------- local families
def _options(cell: BenchCell, **extra: object) -> dict[str, object]:
    options: dict[str, object] = {"sparsity": cell.config.sparsity, "participants": cell.n,
                                  "label_bound": cell.label_bound, **extra}
    if cell.config.eta is not None:
        options["eta"] = cell.config.eta
    return options


def _simulate(cell: BenchCell, campaign: str) -> int:
    from service.campaigns.simulate import simulate

    result = simulate(cell.engine, campaign, cell.data.X, cell.data.y, seed=cell.device_seed)
    return sum(result.reports.values())


def _ldp_iht_collector(randomizer: str) -> Collect:
    """A family of one ``ldp-iht`` campaign with the gradient randomizer ``randomizer`` (``--iht-variant``'s
    defaults; the coordinate randomizer's ``feature_bound`` is its default, 1 on ``{-1, +1}^p``)."""

    def collect(cell: BenchCell) -> str:
        from service.campaigns.campaigns import create_campaign

        name = f"ldp-iht-{randomizer}-{cell.tag}"
        create_campaign(cell.engine, name, "ldp-iht", cell.features, "y", epsilon=cell.epsilon, delta=0.0,
                        options=_options(cell, variant=cell.config.iht_variant, randomizer=randomizer))
        _simulate(cell, name)
        return name

    return collect


def _collect_label_ldp(cell: BenchCell) -> str:
    from service.campaigns.campaigns import create_campaign
    from service.campaigns.public_tables import PublicColumn, store_public_table

    name = f"label-ldp-{cell.tag}"
    # the rows are in memory: stored as `marginalia public load` stores a parsed CSV (no round trip through a file)
    store_public_table(cell.engine, name, [PublicColumn(f, "numeric") for f in cell.features], cell.data.X,
                       "benchmarks.sparse")
    create_campaign(cell.engine, name, "label-ldp", cell.features, "y", public=name, epsilon=cell.epsilon,
                    delta=cell.config.delta, options=_options(cell, standardize=False))
    _simulate(cell, name)
    return name


def campaign_answer(model: str) -> Answer:
    """Fit ``model`` from the family's campaign with the code ``marginalia campaign fit`` runs."""

    def answer(cell: BenchCell, campaign: str) -> tuple[np.ndarray, dict[str, Any]]:
        from service.campaigns.estimates import fit_campaign

        fit = fit_campaign(cell.engine, campaign, model)
        coef = np.array([fit.coefficients[name] for name in cell.features])
        kept = ("rounds_used", "iterations", "alpha", "eta", "radius", "ridge")
        return coef, {"reports": fit.reports, **{k: v for k, v in fit.details.items() if k in kept}}

    return answer


def _collect_plain(protocol: str, **options: object) -> Collect:
    """A family of one campaign of ``protocol`` on the rows as they are (no public table)."""

    def collect(cell: BenchCell) -> str:
        from service.campaigns.campaigns import create_campaign

        name = f"{protocol}-{cell.tag}"
        extra = {key: value(cell) if callable(value) else value for key, value in options.items()}
        create_campaign(cell.engine, name, protocol, cell.features, "y", epsilon=cell.epsilon, delta=0.0,
                        options={"participants": cell.n, "label_bound": cell.label_bound, **extra})
        _simulate(cell, name)
        return name

    return collect


def _drerm_radius(config: SparseBench) -> float:
    """The l1 radius of DR-ERM's constraint set from public quantities of the design (:data:`DRERM_RADII`)."""
    return math.sqrt(config.sparsity) if config.drerm_radius == "sparsity" else 1.0


register_family("ldp-iht", _ldp_iht_collector("l2ball"))
register_family("ldp-iht-coordinate", _ldp_iht_collector("coordinate"))
register_family("label-ldp", _collect_label_ldp)
# Bernstein (p <= 3): the box [-1, 1]^p holds theta* (unit norm); DR-ERM: the l1 ball of --drerm-radius
register_family("bernstein", _collect_plain("bernstein", feature_bound=1.0))
register_family("bernstein-1bit", _collect_plain("bernstein-1bit", feature_bound=1.0))
register_family("dr-erm", _collect_plain("dr-erm", radius=lambda cell: _drerm_radius(cell.config),
                                         feature_radius=lambda cell: math.sqrt(cell.p)))
register_method(SparseMethod("ldp-iht", "ldp-iht", campaign_answer("iht")))
register_method(SparseMethod("ldp-iht-coordinate", "ldp-iht-coordinate", campaign_answer("iht")))
register_method(SparseMethod("label-ldp-iht", "label-ldp", campaign_answer("iht")))
register_method(SparseMethod("lasso", "label-ldp", campaign_answer("lasso")))
register_method(SparseMethod("bernstein", "bernstein", campaign_answer("linear")))
register_method(SparseMethod("bernstein-1bit", "bernstein-1bit", campaign_answer("linear")))
register_method(SparseMethod("dr-erm", "dr-erm", campaign_answer("linear")))
# local sufficient-statistics perturbation (issue 20): ||x|| = sqrt(p) exactly on this design, the label bound as above
register_family("linear-ssp", _collect_plain("linear-ssp", norm_bound=lambda cell: math.sqrt(cell.p)))
register_method(SparseMethod("linear-ssp", "linear-ssp", campaign_answer("linear")))


# ------------------------------------------------------------------------------------------------- central DP-IHT
def _answer_dp_iht(cell: BenchCell, handle: None) -> tuple[np.ndarray, dict[str, Any]]:
    """Wang & Xu's DP-IHT (Alg. 3) on the cell's rows held centrally: one charged release of a temporary table at
    ``(epsilon, delta)``, with the local protocols' settings: ``T = ceil(ln(n / p))`` iterations and the step ``--eta``
    (default 1). Both are public facts of the design (``x`` uniform in ``{-1, +1}^p``: the squared loss's Hessian is
    about the identity), as in the paper; the service's own default step, ``1 / B^2`` from the worst-case row norm
    ``B = sqrt(p)``, would stop 50 iterations about 0.6 short of ``theta*`` whatever ``n``."""
    from benchmarks.dp_iht import fit_synthetic_dp_iht
    from service.campaigns.protocols.common import default_steps

    iterations = default_steps(cell.n, cell.p)
    step = cell.config.eta if cell.config.eta is not None else 1.0
    theta = fit_synthetic_dp_iht(cell.data, cell.epsilon, cell.config.delta, cell.config.sparsity,
                                 iterations=iterations, step=step, seed=cell.device_seed)
    return theta, {"iterations": iterations, "step": step}


register_family("central", lambda cell: None)  # the rows are the central table: nothing is collected
register_method(SparseMethod("dp-iht", "central", _answer_dp_iht))


# ------------------------------------------------------------------------------------------------------------ run
def check_config(config: SparseBench) -> None:
    unknown = [m for m in config.methods if m not in METHODS]
    if not config.methods or unknown:
        raise BenchError(f"method must be among {sorted(METHODS)}, got {unknown or list(config.methods)}")
    for label, values in (("p", config.ps), ("n", config.ns)):
        if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise BenchError(f"--{label} must be positive integers, got {list(values)}")
    if any(config.sparsity > p for p in config.ps) or config.sparsity < 1:
        raise BenchError(f"--s must be in [1, p] for every p, got s={config.sparsity}, p={list(config.ps)}")
    if not config.epsilons or any(not (math.isfinite(e) and e > 0) for e in config.epsilons):
        raise BenchError(f"--epsilon must be positive numbers, got {list(config.epsilons)}")
    if config.trials < 1:
        raise BenchError(f"--trials must be a positive integer, got {config.trials}")
    if config.iht_variant not in ("default", "paper"):
        raise BenchError(f"--iht-variant must be default or paper, got {config.iht_variant!r}")
    if config.drerm_radius not in DRERM_RADII:
        raise BenchError(f"--drerm-radius must be one of {list(DRERM_RADII)}, got {config.drerm_radius!r}")
    if config.eta is not None and not (math.isfinite(config.eta) and config.eta > 0):
        raise BenchError(f"--eta must be a positive number, got {config.eta}")


def run_sparse_bench(config: SparseBench, log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Every cell, every family once per cell, every method from its family's collection (module docstring)."""
    from service.campaigns.caps import set_default_cap

    check_config(config)
    families = list(dict.fromkeys(METHODS[m].family for m in config.methods))
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    with harness.temporary_folder("marginalia-sparse-bench-") as work:
        for p in config.ps:
            for n in config.ns:
                for e_index, epsilon in enumerate(config.epsilons):
                    for trial in range(config.trials):
                        sequence = harness.seed_sequence(config.seed, p, n, e_index, trial)
                        data_seed, device_seed = sequence.spawn(2)
                        data = sparse_linear_data(n, p, config.sparsity, np.random.default_rng(data_seed),
                                                  config.noise_bound)
                        db = work / f"cell-{p}-{n}-{e_index}-{trial}.db"
                        engine = harness.temporary_database(db)
                        # the temporary database's steward allows what the run asks (each participant reports once)
                        set_default_cap(engine, max(10.0, max(config.epsilons)), max(1e-4, config.delta))
                        cell = BenchCell(engine, work, config, p, n, epsilon, trial, data,
                                         int(device_seed.generate_state(1)[0]))
                        for family in families:
                            t0, c0 = time.perf_counter(), time.process_time()
                            handle = FAMILIES[family](cell)
                            collect_seconds = time.perf_counter() - t0
                            collect_cpu = time.process_time() - c0
                            for method in (m for m in config.methods if METHODS[m].family == family):
                                t1, c1 = time.perf_counter(), time.process_time()
                                coef, extra = METHODS[method].answer(cell, handle)
                                fit_seconds = time.perf_counter() - t1
                                fit_cpu = time.process_time() - c1
                                error = relative_error(coef, data.theta_star)
                                excess = excess_risk(data, coef)
                                records.append({
                                    "method": method, "family": family, "p": p, "n": n, "epsilon": epsilon,
                                    "trial": trial, "s": config.sparsity, "delta": config.delta,
                                    "relative_error": error, "excess_risk": excess,
                                    "seconds": collect_seconds + fit_seconds,
                                    "collect_seconds": collect_seconds, "fit_seconds": fit_seconds,
                                    "cpu_seconds": collect_cpu + fit_cpu,
                                    "support_recovered": float(np.mean(coef[data.theta_star != 0] != 0)), **extra})
                                log(f"{method} p={p} n={n} eps={epsilon:g} trial={trial}: relative error "
                                    f"{error:.3f}, {collect_seconds + fit_seconds:.1f} s")
                        engine.dispose()
                        db.unlink()
    return {"benchmark": "sparse", "config": {**asdict(config), "families": families}, "records": records,
            "summary": summarize(records), "seconds": time.perf_counter() - started}


def excess_risk(data: SparseLinearData, coef: np.ndarray) -> float:
    """``L(theta) - L(theta*)`` with ``L(theta) = (1/2n) ||y - X theta||^2`` on the cell's rows (the empirical risk
    the ERM papers measure)."""
    def risk(theta: np.ndarray) -> float:
        return float(np.mean(np.square(data.y - data.X @ theta)) / 2.0)

    return risk(coef) - risk(data.theta_star)


def summarize(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, standard deviation, min and max of the relative error (and the mean seconds) per method and cell."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["method"], record["p"], record["n"], record["epsilon"]), []).append(record)
    out = []
    for (method, p, n, epsilon), rows in groups.items():
        errors = [r["relative_error"] for r in rows]
        out.append({"method": method, "p": p, "n": n, "epsilon": epsilon, "trials": len(rows),
                    "excess_risk_mean": statistics.fmean(r["excess_risk"] for r in rows),
                    "relative_error_mean": statistics.fmean(errors),
                    "relative_error_std": statistics.stdev(errors) if len(errors) > 1 else 0.0,
                    "relative_error_min": min(errors), "relative_error_max": max(errors),
                    "seconds_mean": statistics.fmean(r["seconds"] for r in rows)})
    return out


def plot_sparse_bench(result: dict[str, Any], path: Path) -> None:
    """Mean relative error against n (log x), one panel per p, one line per method and epsilon, min-max band."""
    plt = harness.pyplot()

    summary = result["summary"]
    ps = sorted({row["p"] for row in summary})
    fig, axes = plt.subplots(1, len(ps), figsize=(5.2 * len(ps), 4.2), squeeze=False, sharey=True)
    for ax, p in zip(axes[0], ps, strict=True):
        lines = sorted({(row["method"], row["epsilon"]) for row in summary if row["p"] == p})
        for index, (method, epsilon) in enumerate(lines):
            rows = sorted((r for r in summary if r["p"] == p and r["method"] == method and r["epsilon"] == epsilon),
                          key=lambda r: r["n"])
            xs = [r["n"] for r in rows]
            label = method if len({e for _, e in lines}) == 1 else f"{method}, eps={epsilon:g}"
            ax.plot(xs, [r["relative_error_mean"] for r in rows], marker="o", color=f"C{index}", label=label)
            ax.fill_between(xs, [r["relative_error_min"] for r in rows], [r["relative_error_max"] for r in rows],
                            color=f"C{index}", alpha=0.15)
        ax.set_xscale("log")
        ax.set_xlabel("n (participants)")
        ax.set_title(f"p = {p}, s = {result['config']['sparsity']}", fontsize=10)
        ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("relative error ||theta - theta*|| / ||theta*||")
    axes[0][0].legend(fontsize=8)
    eta = result["config"]["eta"]
    iht = any("iht" in method for method in result["config"]["methods"])
    step = f", IHT step eta = {1.0 if eta is None else eta:g}" if iht else ""
    fig.suptitle(f"Sec. 7.1's design through the collections service{step}", fontsize=10)
    harness.save_figure(fig, path)


def main(
    out: JsonOut,
    plot: PlotOut = None,
    force: Force = False,
    quiet: QuietFlag = False,
    method: Annotated[str, typer.Option(help="Comma-separated methods (ldp-iht, label-ldp-iht, lasso, and any "
                                             "registered one).")] = "ldp-iht,label-ldp-iht,lasso",
    p: Annotated[str, typer.Option("--p", help="Comma-separated dimensions.")] = "100,400",
    n: Annotated[str, typer.Option("--n", help="Comma-separated numbers of participants.")] = "10000,40000",
    s: Annotated[int, typer.Option("--s", help="Non-zeros of theta* (and the s kept by IHT).")] = 10,
    epsilon: Annotated[str, typer.Option(help="Comma-separated local epsilons.")] = "1",
    delta: Annotated[float, typer.Option(help="Local delta of the Gaussian label reports.")] = 1e-3,
    eta: Annotated[float | None, typer.Option(help="IHT step (default: the protocols' default, 1; Sec. 7.1 "
                                                   "states 0.1 or 0.2).")] = None,
    trials: Annotated[int, typer.Option(help="Trials per cell.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the rows and the simulated devices.")] = 0,
    iht_variant: Annotated[str, typer.Option(help="ldp-iht's defaults: default (T = 1, clip min(B_y, 2 R)) or paper "
                                                  "(T = ceil(ln(n/p)), the worst-case clip).")] = "default",
    drerm_radius: Annotated[str, typer.Option(help="DR-ERM's l1 radius: norm (1, the public norm of theta*) or "
                                                   "sparsity (sqrt(s), the first runs').")] = "norm",
) -> None:
    """Sec. 7.1 of Wang & Xu (2019): sparse linear regression under local DP through the real collections path
    (campaigns on a temporary SQLite database, the simulator, campaign fit)."""
    config = SparseBench(
        methods=tuple(column_list(method) or ()), ps=harness.number_list(p, "--p", int),
        ns=harness.number_list(n, "--n", int), sparsity=s, epsilons=harness.number_list(epsilon, "--epsilon", float),
        delta=delta, trials=trials, seed=seed, eta=eta, iht_variant=iht_variant,
        drerm_radius=drerm_radius)
    check_config(config)
    result = harness.run_and_write(lambda log: run_sparse_bench(config, log=log), plot_sparse_bench, out, plot,
                                   force, quiet)
    harness.summary_table("relative error ||theta - theta*|| / ||theta*||",
                          ("method", "p", "n", "epsilon", "trials", "relative error (mean)", "seconds (mean)"),
                          [(row["method"], row["p"], row["n"], f"{row['epsilon']:g}", row["trials"],
                            f"{row['relative_error_mean']:.3f}", f"{row['seconds_mean']:.1f}")
                           for row in result["summary"]])
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
