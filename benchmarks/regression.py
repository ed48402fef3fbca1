"""``python -m benchmarks.regression``: the experiment protocol of Ferrando & Sheldon 2024, "Private Regression via
Data-Dependent Sufficient Statistic Perturbation" (Sec. 4, App. D), through the real service.

For every trial and epsilon, each private method gets a NEW release made by the release engine on a temporary
SQLite database (:func:`service.regression.fit.make_release`, charged by the accountant) and is then answered from it
with :func:`service.regression.fit`, exactly as an analyst's request would be:

* ``dd-ssp`` and ``aim-synth`` are answered from the SAME marginal release (AIM over all pairs among target and
  features): the comparison the paper draws between them is then free of release-to-release noise, and it is
  the service's "spend once, answer many" in action;
* ``adassp`` from a Gram release of the design's columns, ``objpert`` from its model release;
* ``ols`` (linear) and ``logreg`` (logistic) are the non-private references, fitted once on the training rows;
* ``adassp-paper`` (optional, not in the default list) reproduces the paper's AdaSSP baseline exactly as Alg. 2 is
  printed, with its (epsilon, delta) calibration ``sqrt(log(6/delta)) Delta / (epsilon/3)`` per part
  (:func:`estimators.central.adassp.adassp_noise_scales` with ``epsilon=``). That calibration is NOT certified by the
  service (docs/privacy.md, section 8.5), so this is computed in the benchmark process on the training rows, like the
  non-private references, never through a release: it shows how the service's AdaSSP compares to the paper's.

Methods that do not apply to the task (``ols``/``adassp`` for logistic, ``objpert``/``logreg`` for linear) are
skipped and listed. Each family of releases gets its own copy of the table (``bench-marginals``, ``bench-gram``,
``bench-model``) with a budget large enough for every trial, so that one family's charges never constrain
another's. Metrics are on the test rows, encoded like the training rows: ``mse`` of the linear target on its
encoded scale ``[-1, 1]``, ``auc`` of the logistic score. ``seconds`` is the wall time to get that answer from
scratch (its release plus the answer); ``release_seconds`` and ``answer_seconds`` split it (the marginal release is
shared by dd-ssp and aim-synth, so each carries its full time).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import typer

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from estimators.central.adassp import adassp_entry_std, adassp_noise_scales
from estimators.central.linear import AdaSSPLinearRegression
from estimators.central.metrics import auc, mse
from estimators.central.reference import LogisticReference, OLSReference
from estimators.central.sufficient_stats import GramStatistics, statistics_from_rows
from estimators.psd import smallest_eigenvalue
from service.accounting import accountant
from service.cli.common import QuietFlag, column_list
from service.data import datasets
from service.mechanisms import registry
from service.privacy.cost import exact
from service.privacy.noise import NoiseSource
from service.regression.choice import marginal_mechanism_for
from service.regression.design import build_design
from service.regression.fit import fit as fit_regression
from service.regression.fit import make_release
from workloads.domain import Domain, DomainError
from workloads.encodings import DesignEncoding

BENCH_METHODS = ("ols", "adassp", "dd-ssp", "aim-synth", "objpert", "logreg")
EXTRA_METHODS = ("adassp-paper",)
REFERENCES = {"ols": "linear", "logreg": "logistic"}
PRIVATE_TASKS = {"adassp": ("linear",), "dd-ssp": ("linear", "logistic"), "aim-synth": ("linear", "logistic"),
                 "objpert": ("logistic",), "adassp-paper": ("linear",)}
FAMILY = {"dd-ssp": "marginals", "aim-synth": "marginals", "adassp": "gram", "objpert": "model"}
#: One colour per method, the same in every plot.
COLORS = {"ols": "black", "logreg": "black", "adassp": "C0", "dd-ssp": "C1", "aim-synth": "C2", "objpert": "C3",
          "adassp-paper": "C4"}
#: The temporary tables' budget: far above what every trial together spends (the charges are still exact).
BENCH_BUDGET = ("10000", "0.5")


#: ``RegressionBench.mechanism``: let the service's rule pick each method's marginal mechanism.
AUTO = "auto"



@dataclass(frozen=True)
class RegressionBench:
    """One run of the protocol. ``features`` default to every column but the target; ``categorical`` names the
    unordered columns (reduced one-hot), all others are ordinal (scalar in [-1, 1]). ``marginal_trials`` (default:
    ``trials``) runs the AIM-based methods on fewer trials; ``marginal_options`` go to the marginal mechanism
    (e.g. AIM's ``rounds``, ``max_model_size``; each mechanism gets those it takes). ``mechanism`` ``"auto"`` (the
    default) lets the service's rule pick each method's mechanism (:func:`service.regression.choice.
    marginal_mechanism_for`, what ``fit`` does without ``--mechanism``): methods whose mechanisms differ get
    releases of their own."""

    train: Path
    test: Path
    domain: Path
    target: str
    task: str
    features: tuple[str, ...] | None = None
    categorical: tuple[str, ...] = ()
    methods: tuple[str, ...] = BENCH_METHODS
    epsilons: tuple[float, ...] = (0.05, 0.1, 0.5, 1.0, 2.0)
    delta: float = 1e-5
    trials: int = 5
    max_train: int = 50_000
    seed: int = 0
    intercept: bool = True
    mechanism: str = AUTO
    marginal_options: dict[str, object] = field(default_factory=dict)
    marginal_trials: int | None = None

    def validate(self) -> None:
        unknown = [m for m in self.methods if m not in BENCH_METHODS + EXTRA_METHODS]
        if unknown or not self.methods:
            raise BenchError(f"methods must be a non-empty list from {list(BENCH_METHODS + EXTRA_METHODS)}; "
                             f"unknown: {unknown}")
        if self.task not in ("linear", "logistic"):
            raise BenchError(f"task must be linear or logistic, got {self.task!r}")
        if not self.epsilons or any(not (isinstance(e, int | float) and math.isfinite(e) and e > 0)
                                    for e in self.epsilons):
            raise BenchError(f"epsilons must be positive finite numbers, got {list(self.epsilons)}")
        if not 0 < self.delta < 1:
            raise BenchError(f"delta must be in (0, 1), got {self.delta}")
        for name in ("trials", "max_train"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BenchError(f"{name} must be a positive integer, got {value!r}")
        if self.marginal_trials is not None and not 0 <= self.marginal_trials <= self.trials:
            raise BenchError(f"marginal_trials must be in 0..trials={self.trials}, got {self.marginal_trials}")

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        for key in ("train", "test", "domain"):
            data[key] = str(data[key])
        return data


def _read_coded(path: Path, domain: Domain, what: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise BenchError(f"{what} file {path}: {exc}") from None
    missing = [n for n in domain.names if n not in frame.columns]
    if missing:
        raise BenchError(f"{what} file {path} lacks the domain's columns {missing}")
    return frame[list(domain.names)]


def _metric(design: DesignEncoding, model: object, X: np.ndarray, y: np.ndarray) -> tuple[str, float]:
    if design.task == "linear":
        return "mse", mse(y, model.predict(X))  # type: ignore[attr-defined]
    return "auc", auc(y, model.decision_function(X))  # type: ignore[attr-defined]


def _extra_metrics(design: DesignEncoding, model: object, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """A logistic model's ``accuracy`` of its predicted labels on the test rows (beside the AUC of its scores)."""
    if design.task != "logistic":
        return {}
    out = {"accuracy": float(np.mean(model.predict(X) == y))}  # type: ignore[attr-defined]
    surrogate = getattr(model, "surrogate_theta_", None)  # a calibrated DD-SSP: its surrogate's labels too
    if surrogate is not None:
        score = X @ surrogate[int(design.intercept):] + (surrogate[0] if design.intercept else 0.0)
        out["accuracy_uncalibrated"] = float(np.mean(np.where(score > 0, 1, -1) == y))
    return out


def _load(engine: object, name: str, csv: Path, domain_json: Path, categorical: Sequence[str]) -> None:
    datasets.load_coded_csv(engine, name, csv, domain_json, tuple(categorical))  # type: ignore[arg-type]
    accountant.set_budget(engine, name, *BENCH_BUDGET, principal="bench")  # type: ignore[arg-type]


def run_regression_bench(config: RegressionBench, log: Callable[[str], None] = lambda message: None) -> dict:
    """Run the protocol and return the JSON-ready result (module docstring)."""
    config.validate()
    started = time.perf_counter()
    try:
        domain = Domain.from_json(config.domain.read_text(), config.categorical)
    except (OSError, DomainError) as exc:
        raise BenchError(f"domain {config.domain}: {exc}") from None
    design = build_design(domain, config.task, config.target, config.features, None, config.intercept)
    columns = [n for n in domain.names if n in set(design.features) | {design.target}]
    sub_domain = domain.project(columns)
    train_all = _read_coded(config.train, domain, "train")[columns]
    test = _read_coded(config.test, domain, "test")[columns]
    train = train_all.sample(n=config.max_train, random_state=config.seed) if len(train_all) > config.max_train \
        else train_all
    X_test, y_test = design.encode(test)
    X_train, y_train = design.encode(train)

    applicable = [m for m in config.methods if REFERENCES.get(m, config.task) == config.task
                  and config.task in PRIVATE_TASKS.get(m, (config.task,))]
    skipped = [m for m in config.methods if m not in applicable]
    records: list[dict[str, object]] = []
    for method in (m for m in applicable if m in REFERENCES):
        t0 = time.perf_counter()
        reference = OLSReference(config.intercept) if method == "ols" else LogisticReference(config.intercept)
        reference.fit(X_train, y_train, design.feature_names)
        key, value = _metric(design, reference, X_test, y_test)
        records.append({"method": method, "epsilon": None, "trial": 0, key: value,
                        **_extra_metrics(design, reference, X_test, y_test), "seconds": time.perf_counter() - t0})
        log(f"{method}: {key}={value:.4f}")

    private = [m for m in applicable if m not in REFERENCES and m not in EXTRA_METHODS]
    paper = "adassp-paper" in applicable
    stats = statistics_from_rows(design, train) if paper else None
    marginal_trials = config.trials if config.marginal_trials is None else config.marginal_trials
    with harness.temporary_folder("marginalia-bench-") as work:
        csv, domain_json = work / "train.csv", work / "domain.json"
        train.to_csv(csv, index=False)
        domain_json.write_text(json.dumps({a.name: {"size": a.size, "kind": a.kind} for a in sub_domain.attributes}))
        engine = harness.temporary_database(work / "bench.db")
        loaded: set[str] = set()
        for trial in range(config.trials):
            for e_index, epsilon in enumerate(config.epsilons):
                seed = harness.trial_seed(config.seed, trial, e_index)
                if stats is not None:
                    records.append(_adassp_paper(stats, design, epsilon, config.delta, trial, seed, X_test, y_test))
                    log(f"adassp-paper eps={epsilon} trial={trial}: mse={records[-1]['mse']:.4f} (uncertified)")
                releases = {(FAMILY[m], _mechanism(config, design, m, epsilon)): None for m in private}
                for family, mechanism in releases:
                    methods = [m for m in private if (FAMILY[m], _mechanism(config, design, m, epsilon)) ==
                               (family, mechanism)]
                    if family == "marginals" and trial >= marginal_trials:
                        continue
                    name = f"bench-{family}"
                    if name not in loaded:
                        _load(engine, name, csv, domain_json, sub_domain.categorical())
                        loaded.add(name)
                    records.extend(_run_family(engine, name, config, design, methods, mechanism, epsilon, trial,
                                               seed, X_test, y_test, log))
        engine.dispose()
    return {
        "benchmark": "regression",
        "config": config.to_json(),
        "data": {"train_rows_available": len(train_all), "train_rows_used": len(train), "test_rows": len(test),
                 "columns": columns, "categorical": list(sub_domain.categorical()),
                 "encoded_columns": list(design.gram_names),
                 **({"majority_rate": float(max(np.mean(y_test == 1), np.mean(y_test == -1)))}
                    if config.task == "logistic" else {})},
        "metric": "mse" if config.task == "linear" else "auc",
        "skipped_methods": skipped,
        "records": records,
        "summary": summarize(records, "mse" if config.task == "linear" else "auc"),
        **({"summary_accuracy": summarize(records, "accuracy")} if config.task == "logistic" else {}),
        "seconds_total": time.perf_counter() - started,
    }


def _adassp_paper(
    stats: GramStatistics, design: DesignEncoding, epsilon: float, delta: float, trial: int, seed: int,
    X_test: np.ndarray, y_test: np.ndarray,
) -> dict[str, object]:
    """Alg. 2 of Ferrando & Sheldon as printed (uncertified calibration; module docstring), on the exact training
    ``Z^T Z``."""
    t0 = time.perf_counter()
    scales = adassp_noise_scales(design.feature_norm_bound(), design.target_bound(), stats.dimension, delta,
                                 epsilon=epsilon, include_yty=False)
    rng = NoiseSource(seed).numpy_generator()
    std = adassp_entry_std(scales)
    upper = np.triu_indices(std.shape[0])
    noise = np.zeros_like(std)
    noise[upper] = rng.standard_normal(upper[0].size) * std[upper]
    noise = np.triu(noise) + np.triu(noise, 1).T
    noisy = GramStatistics(stats.zz + noise, stats.feature_names, stats.target, stats.intercept, stats.n)
    lambda_noisy = smallest_eigenvalue(stats.xtx) + scales.sigma_lambda_min * float(rng.standard_normal())
    model = AdaSSPLinearRegression().fit(noisy, lambda_noisy, scales)
    key, value = _metric(design, model, X_test, y_test)
    return {"method": "adassp-paper", "epsilon": epsilon, "trial": trial, "seed": seed, key: value,
            "seconds": time.perf_counter() - t0, "certified": False}


def _mechanism(config: RegressionBench, design: DesignEncoding, method: str, epsilon: float) -> str | None:
    """The marginal mechanism of ``method``'s release (None for the gram and model families)."""
    if FAMILY[method] != "marginals":
        return None
    if config.mechanism != AUTO:
        return config.mechanism
    return marginal_mechanism_for(design, method, exact(str(epsilon)), exact(str(config.delta)))


def _run_family(
    engine: object, name: str, config: RegressionBench, design: DesignEncoding, methods: list[str],
    mechanism: str | None, epsilon: float, trial: int, seed: int, X_test: np.ndarray, y_test: np.ndarray,
    log: Callable[[str], None],
) -> list[dict[str, object]]:
    """One new release for ``methods`` (one family; for marginal methods, by ``mechanism``) at ``epsilon``, then each
    method answered from it."""
    dataset = datasets.get_dataset(engine, name)  # type: ignore[arg-type]
    eps, dlt = exact(str(epsilon)), exact(str(config.delta))
    base = {"epsilon": epsilon, "trial": trial, "seed": seed, **({"mechanism": mechanism} if mechanism else {})}
    taken = registry.get(mechanism).option_names if mechanism else ()
    t0 = time.perf_counter()
    try:
        outcome = make_release(engine, dataset, design, methods[0], eps, dlt, seed=seed,  # type: ignore[arg-type]
                               principal="bench", mechanism=mechanism or "aim",
                               options={k: v for k, v in config.marginal_options.items() if k in taken})
    except Exception as exc:  # noqa: BLE001 - a failed trial is recorded, the run goes on
        log(f"{methods} eps={epsilon} trial={trial}: release failed: {exc}")
        return [{"method": m, **base, "error": f"release failed: {type(exc).__name__}: {exc}"} for m in methods]
    release_seconds = time.perf_counter() - t0
    out = []
    for method in methods:
        t1 = time.perf_counter()
        record: dict[str, object] = {"method": method, **base, "release_id": outcome.release_id,
                                     "cost": outcome.cost.to_json(), "release_seconds": release_seconds}
        try:
            fitted = fit_regression(engine, name, config.task, config.target, design.features,  # type: ignore[arg-type]
                                    method=method, release_id=outcome.release_id, intercept=config.intercept,
                                    seed=seed, principal="bench", allow_seeded=True)  # in-process benchmark
            key, value = _metric(design, fitted.model, X_test, y_test)
            record[key] = value
            record.update(_extra_metrics(design, fitted.model, X_test, y_test))
        except Exception as exc:  # noqa: BLE001
            record["error"] = f"{type(exc).__name__}: {exc}"
            key, value = "error", math.nan
        record["answer_seconds"] = time.perf_counter() - t1
        record["seconds"] = release_seconds + float(record["answer_seconds"])  # type: ignore[arg-type]
        log(f"{method} eps={epsilon} trial={trial}: {key}={value:.4f} ({record['seconds']:.1f} s)")
        out.append(record)
    return out


def summarize(records: Sequence[dict[str, object]], metric: str) -> dict[str, dict[str, dict[str, float]]]:
    """Medians (and min, max, count) of the metric and of ``seconds`` per method and epsilon (``"none"`` for the
    non-private references)."""
    groups: dict[tuple[str, str], list[dict[str, object]]] = {}
    for record in records:
        key = (str(record["method"]), "none" if record["epsilon"] is None else repr(float(record["epsilon"])))
        groups.setdefault(key, []).append(record)
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for (method, epsilon), group in groups.items():
        values = [float(r[metric]) for r in group if r.get(metric) is not None and not isinstance(r.get(metric), str)]
        values = [v for v in values if math.isfinite(v)]
        seconds = [float(r["seconds"]) for r in group if "seconds" in r]
        entry = {"trials": len(group), "failed": len(group) - len(values)}
        if values:
            entry.update({"median": statistics.median(values), "min": min(values), "max": max(values)})
        if seconds:
            entry["median_seconds"] = statistics.median(seconds)
        summary.setdefault(method, {})[epsilon] = entry
    return summary


def plot_regression_bench(result: dict, path: Path, title: str | None = None) -> None:
    """Median metric against epsilon per method (log x), min-max over trials as a band; references dashed.
    ``title`` defaults to the training file's name, the task and the target."""
    plt = harness.pyplot()
    metric = str(result["metric"])
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for method, by_eps in sorted(result["summary"].items()):
        color = COLORS.get(method, "C7")
        if "none" in by_eps:
            if "median" in by_eps["none"]:
                ax.axhline(by_eps["none"]["median"], color=color, linestyle="--", label=f"{method} (non-private)")
            continue
        points = sorted((float(e), v) for e, v in by_eps.items() if "median" in v)
        if not points:
            continue
        xs = [p[0] for p in points]
        label = f"{method} (uncertified)" if method in EXTRA_METHODS else method
        ax.plot(xs, [p[1]["median"] for p in points], marker="o", color=color, label=label)
        ax.fill_between(xs, [p[1]["min"] for p in points], [p[1]["max"] for p in points], color=color, alpha=0.15)
    ax.set_xscale("log")
    ax.set_xlabel(f"epsilon (delta = {result['config']['delta']:g})")
    ax.set_ylabel("test MSE (target scaled to [-1, 1])" if metric == "mse" else "test AUC")
    if metric == "mse":
        ax.set_yscale("log")
    config = result["config"]
    ax.set_title(title or f"{Path(str(config['train'])).stem}: {config['task']} {config['target']}"
                 f" ({'with' if config['intercept'] else 'no'} intercept)", fontsize=10)
    harness.finish_axes(ax, 8)
    harness.save_figure(fig, path)


def main(
    train: Annotated[Path, typer.Option(help="Training CSV (coded 0..size-1).")],
    test: Annotated[Path, typer.Option(help="Test CSV (coded the same way).")],
    domain: Annotated[Path, typer.Option(help="private-pgm domain JSON {column: size}.")],
    target: Annotated[str, typer.Option(help="Target column.")],
    task: Annotated[str, typer.Option(help="linear or logistic.")],
    out: JsonOut,
    categorical: Annotated[str, typer.Option(help="Comma-separated unordered columns (one-hot).")] = "",
    features: Annotated[str | None, typer.Option(help="Comma-separated features (default: all others).")] = None,
    methods: Annotated[str | None, typer.Option(
        help="Comma-separated, from ols,adassp,dd-ssp,aim-synth,objpert,logreg (default: all).")] = None,
    epsilons: Annotated[str, typer.Option(help="Comma-separated epsilons.")] = "0.05,0.1,0.5,1,2",
    delta: Annotated[float, typer.Option(help="Delta of every release.")] = 1e-5,
    trials: Annotated[int, typer.Option(help="Trials per epsilon.")] = 5,
    max_train: Annotated[int, typer.Option(help="Cap on training rows (a seeded sample).")] = 50_000,
    seed: Annotated[int, typer.Option(help="Seed of the whole run.")] = 0,
    intercept: Annotated[bool, typer.Option("--intercept/--no-intercept", help="Fit intercepts.", metavar="")] = True,
    plot: PlotOut = None,
    mechanism: Annotated[str, typer.Option(
        help="Marginal mechanism for dd-ssp / aim-synth; auto: the service's rule, as fit without --mechanism.")
    ] = "auto",
    aim_rounds: Annotated[int | None, typer.Option(help="AIM's planned rounds (default: AIM's rule).")] = None,
    max_model_size: Annotated[float | None, typer.Option(help="Largest graphical model in MB.")] = None,
    marginal_trials: Annotated[int | None, typer.Option(help="Fewer trials for the AIM-based methods.")] = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Run the regression protocol of Ferrando & Sheldon (2024) through the real release path on a temporary SQLite
    database."""
    eps = harness.number_list(epsilons, "--epsilons", float)
    options: dict[str, object] = {}
    if aim_rounds is not None:
        options["rounds"] = aim_rounds
    if max_model_size is not None:
        options["max_model_size"] = max_model_size
    config = RegressionBench(
        train=train, test=test, domain=domain, target=target, task=task,
        features=tuple(column_list(features)) if features is not None else None,
        categorical=tuple(column_list(categorical) or ()),
        methods=tuple(column_list(methods) or ()) if methods is not None else BENCH_METHODS,
        epsilons=eps, delta=delta, trials=trials, max_train=max_train, seed=seed, intercept=intercept,
        mechanism=mechanism, marginal_options=options, marginal_trials=marginal_trials,
    )
    harness.run_and_write(lambda log: run_regression_bench(config, log=log), plot_regression_bench, out, plot, force,
                          quiet)
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":
    app()
