"""The DP-IHT benchmarks: Sec. 7.2 of Wang & Xu 2019 through the real release path, and a synthetic-problem hook.

Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Sec. 7.2: DP-IHT
(Alg. 3) on sparsity-constrained logistic regression, ``l(w, z) = log(1 + exp(-y <w, x>)) + (lambda/2) ||w||^2`` with
``lambda = 1e-3``, ``delta = 1e-3``, ``T = 400``; the *optimality gap* is the private model's training loss minus the
loss of the non-private sparsity-constrained optimum, which the paper approximates by running IHT (Jain, Tewari & Kar
2014, "On iterative hard thresholding methods for high-dimensional M-estimation", NeurIPS) until
``||w_t - w_{t+1}|| / ||w_t|| <= 1e-6``. The paper plots the gap against ``p``, the sparsity and epsilon on Covertype
and finds it flat in ``p`` and growing as the sparsity grows or epsilon shrinks.

What :func:`run_dp_iht_bench` does (:class:`DPIHTBench` for the settings):

* the table (ours: adult, the shared tables have no Covertype) is loaded once into a temporary SQLite database with a
  huge budget; every private model is a real ``fit(..., method="dp-iht")`` (:mod:`service.regression.fit`): a new
  release each time (``reuse=False``), charged, seeded (benchmarks only), its noise drawn by the release engine;
* ``p`` varies through nested designs (:data:`ADULT_DESIGNS`: more columns, then every column one-hot);
* the reference is :func:`sparse_logistic_optimum` on the same encoded rows (intercept included and counted in the
  sparsity, as in DP-IHT), with the paper's stopping rule and a step ``1/L`` from the data's own smoothness (it is
  non-private); the private step is the service's public default ``1/L`` from the design's norm bound (the paper's
  TFOCS backtracking reads the data, which a private run cannot);
* up to three sweeps (``p`` at the default sparsity and epsilon; the sparsity, and epsilon at the default sparsity, on
  ``sweep_design``, by default the largest design), ``trials`` seeded releases each; records with ``optimality_gap``
  and ``seconds``, a summary (mean, standard deviation, min, max per point), and :func:`plot_dp_iht_bench` draws one
  panel per sweep.

:func:`fit_synthetic_dp_iht` fits DP-IHT through the same release path on a synthetic sparse linear problem
(:mod:`estimators.local.sparse.synthetic`) and returns ``||theta - theta*|| / ||theta*||``, for
``python -m benchmarks.sparse --method dp-iht``.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from sqlalchemy import Engine

from benchmarks import harness
from benchmarks.harness import BenchError, Force, JsonOut, PlotOut
from benchmarks.regression import BENCH_BUDGET
from estimators.local.accuracy import relative_error
from estimators.local.sparse.iht import hard_threshold
from estimators.local.sparse.synthetic import SparseLinearData
from service.accounting import accountant
from service.cli.common import QuietFlag
from service.data import datasets
from service.regression.design import build_design
from service.regression.fit import fit as fit_regression
from workloads.domain import Domain, DomainError
from workloads.encodings import DesignEncoding

ADULT_ORDINAL = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = ("workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
                     "native-country", "income>50K")


@dataclass(frozen=True)
class DesignSpec:
    """A design of the p sweep: its features, and which of them are one-hot encoded (the others are scalar)."""

    name: str
    features: tuple[str, ...]
    one_hot: tuple[str, ...]


def _adult_designs() -> tuple[DesignSpec, ...]:
    small = ("sex", "race", "relationship", "marital-status")
    medium = (*small, "workclass", "occupation")
    large = (*medium, "native-country")
    return (
        DesignSpec("adult-10", (*ADULT_ORDINAL, *small), small),
        DesignSpec("adult-12", (*ADULT_ORDINAL, *medium), medium),
        DesignSpec("adult-13", (*ADULT_ORDINAL, *large), large),
        DesignSpec("adult-13-onehot", (*ADULT_ORDINAL, *large), (*ADULT_ORDINAL, *large)),
    )


#: The nested designs of the p sweep on adult (``education`` left out: ``education-num`` encodes it): 23, 45, 86 and
#: 250 coefficients with the intercept.
ADULT_DESIGNS = _adult_designs()
SWEEPS = ("p", "sparsity", "epsilon")


@dataclass(frozen=True)
class DPIHTBench:
    """Settings of :func:`run_dp_iht_bench` (module docstring). The defaults are the paper's where it gives them
    (``l2``, ``delta``, ``iterations``)."""

    train: Path
    domain: Path
    target: str = "income>50K"
    categorical: tuple[str, ...] = ADULT_CATEGORICAL
    designs: tuple[DesignSpec, ...] = ADULT_DESIGNS
    sparsities: tuple[int, ...] = (5, 10, 20)
    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    sparsity: int = 10  # of the p and epsilon sweeps
    epsilon: float = 1.0  # of the p and sparsity sweeps
    delta: float = 1e-3
    l2: float = 1e-3
    iterations: int = 400
    trials: int = 3
    seed: int = 0
    max_train: int = 50_000
    reference_tolerance: float = 1e-6
    reference_max_iterations: int = 20_000
    sweeps: tuple[str, ...] = SWEEPS
    sweep_design: str | None = None  # the design of the sparsity and epsilon sweeps (default: the last one)

    def validate(self) -> None:
        if not self.designs:
            raise BenchError("give at least one design")
        for name in ("iterations", "trials", "max_train", "sparsity", "reference_max_iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BenchError(f"{name} must be a positive integer, got {value!r}")
        if not self.sparsities or any(not isinstance(s, int) or s < 1 for s in self.sparsities):
            raise BenchError(f"sparsities must be positive integers, got {self.sparsities}")
        if not self.epsilons or any(not math.isfinite(e) or e <= 0 for e in (*self.epsilons, self.epsilon)):
            raise BenchError(f"epsilons must be finite numbers > 0, got {self.epsilons} and {self.epsilon}")
        if not 0 < self.delta < 1:
            raise BenchError(f"delta must be in (0, 1), got {self.delta}")
        if not (math.isfinite(self.l2) and self.l2 >= 0):
            raise BenchError(f"l2 must be a finite number >= 0, got {self.l2}")
        if not self.sweeps or any(sweep not in SWEEPS for sweep in self.sweeps):
            raise BenchError(f"sweeps must be among {list(SWEEPS)}, got {list(self.sweeps)}")
        self.swept_design()

    def swept_design(self) -> DesignSpec:
        """The design of the sparsity and epsilon sweeps."""
        if self.sweep_design is None:
            return self.designs[-1]
        for design in self.designs:
            if design.name == self.sweep_design:
                return design
        raise BenchError(f"sweep_design must be one of {[d.name for d in self.designs]}, got {self.sweep_design!r}")

    def points(self) -> list[tuple[str, DesignSpec, int, float]]:
        """``(sweep, design, sparsity, epsilon)`` of every point of the chosen sweeps: p, sparsity, epsilon."""
        swept = self.swept_design()
        points = {"p": [("p", d, self.sparsity, self.epsilon) for d in self.designs],
                  "sparsity": [("sparsity", swept, s, self.epsilon) for s in self.sparsities],
                  "epsilon": [("epsilon", swept, self.sparsity, e) for e in self.epsilons]}
        return [point for sweep in SWEEPS if sweep in self.sweeps for point in points[sweep]]

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["train"], data["domain"] = str(self.train), str(self.domain)
        return data


def logistic_loss(theta: np.ndarray, Z: np.ndarray, y: np.ndarray, l2: float) -> float:
    """``(1/n) sum_i log(1 + exp(-y_i <theta, z_i>)) + (l2/2) ||theta||^2`` (Sec. 7.2's objective), overflow-free."""
    return _loss_and_gradient(theta, Z, y, l2)[0]


@dataclass(frozen=True)
class SparseOptimum:
    """The non-private reference: its parameter vector, loss, iterations and whether the stopping rule was met."""

    theta: np.ndarray
    loss: float
    iterations: int
    converged: bool
    seconds: float


def _loss_and_gradient(theta: np.ndarray, Z: np.ndarray, y: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    margins = y * (Z @ theta)
    slopes = -y * 0.5 * (1.0 - np.tanh(0.5 * margins))  # d/dm log(1 + e^-m) = -1 / (1 + e^m), times y
    loss = float(np.mean(np.logaddexp(0.0, -margins)) + 0.5 * l2 * float(theta @ theta))
    return loss, Z.T @ slopes / len(y) + l2 * theta


def sparse_logistic_optimum(Z: np.ndarray, y: np.ndarray, sparsity: int, l2: float, tolerance: float = 1e-6,
                            max_iterations: int = 20_000, stable_support: int = 100) -> SparseOptimum:
    """IHT (Jain, Tewari & Kar 2014) on Sec. 7.2's objective, from 0, with step ``1/L``, ``L = lambda_max(Z^T Z) /
    (4n) + l2`` (the loss's smoothness on these rows), until ``||w_t - w_{t+1}|| / ||w_t|| <= tolerance`` (the paper's
    rule) or ``max_iterations`` IHT steps. Non-private: it reads the data freely.

    To get there in seconds rather than minutes: whenever the support has not changed for ``stable_support`` steps,
    the loss restricted to it is minimised outright (L-BFGS-B to a gradient of 1e-10) and IHT resumes from there; the
    paper's stopping rule is still what ends the run, so the result is a fixed point of IHT. It need not be the one
    plain IHT reaches (IHT is not convex): polishing after 20 stable steps stopped adult's 23-coefficient design at
    s = 10 on a worse fixed point (loss 0.4269), while waiting 100, 400 or 1,500 steps gives plain IHT's point (loss
    0.376893, the same support; plain IHT itself is still 1e-9 above it after 3,000 steps), hence the default 100."""
    from scipy.optimize import minimize

    started = time.perf_counter()
    step = 1.0 / (float(np.linalg.eigvalsh(Z.T @ Z / len(y))[-1]) / 4.0 + l2)
    theta = np.zeros(Z.shape[1])
    support, unchanged = np.zeros(Z.shape[1], dtype=bool), 0
    for iteration in range(1, max_iterations + 1):
        _, gradient = _loss_and_gradient(theta, Z, y, l2)
        updated = hard_threshold(theta - step * gradient, sparsity)
        change, scale = float(np.linalg.norm(updated - theta)), float(np.linalg.norm(theta))
        theta = updated
        if scale > 0 and change <= tolerance * scale:
            return SparseOptimum(theta, logistic_loss(theta, Z, y, l2), iteration, True,
                                 time.perf_counter() - started)
        kept = theta != 0
        unchanged = unchanged + 1 if np.array_equal(kept, support) else 0
        support = kept
        if unchanged == stable_support:
            columns = np.flatnonzero(kept)
            polished = minimize(_loss_and_gradient, theta[columns], args=(Z[:, columns], y, l2), jac=True,
                                method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 0.0, "maxiter": 10_000})
            theta = np.zeros_like(theta)
            theta[columns] = polished.x
    return SparseOptimum(theta, logistic_loss(theta, Z, y, l2), max_iterations, False, time.perf_counter() - started)


@contextmanager
def temporary_table(frame: pd.DataFrame, domain: Domain, name: str, categorical: Sequence[str]) -> Iterator[Engine]:
    """``frame`` (integer codes) loaded as dataset ``name`` into a temporary SQLite database with a bench budget."""
    with harness.temporary_folder("marginalia-dp-iht-") as work:
        csv, domain_json = work / "train.csv", work / "domain.json"
        frame.to_csv(csv, index=False)
        domain_json.write_text(json.dumps({a: domain.size(a) for a in frame.columns}))
        engine = harness.temporary_database(work / "bench.db")
        try:
            datasets.load_coded_csv(engine, name, csv, domain_json, tuple(c for c in categorical if c in frame))
            accountant.set_budget(engine, name, *BENCH_BUDGET, principal="bench")
            yield engine
        finally:
            engine.dispose()


def _design_rows(design: DesignEncoding, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The encoded rows with the constant column first (DP-IHT's coefficient layout) and the labels."""
    X, y = design.encode(frame)
    return np.column_stack([np.ones(len(X)), X]) if design.intercept else X, y


def _theta(model: object, design: DesignEncoding) -> np.ndarray:
    coef = np.asarray(model.coef_, dtype=float)  # type: ignore[attr-defined]
    return np.concatenate([[float(model.intercept_)], coef]) if design.intercept else coef  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PreparedTable:
    """The table's rows (capped at ``max_train``), its domain, each design and its encoded rows."""

    frame: pd.DataFrame
    domain: Domain
    designs: dict[str, DesignEncoding]
    rows: dict[str, tuple[np.ndarray, np.ndarray]]


def prepare_table(config: DPIHTBench) -> PreparedTable:
    """Read and check the table and encode every design (errors before any work)."""
    config.validate()
    try:
        domain = Domain.from_json(config.domain.read_text(), config.categorical)
        frame = pd.read_csv(config.train)
    except (OSError, DomainError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise BenchError(f"cannot read the table: {exc}") from None
    columns = sorted({c for d in config.designs for c in d.features} | {config.target}, key=list(frame).index)
    missing = [c for c in columns if c not in frame or c not in domain]
    if missing:
        raise BenchError(f"the table or its domain lacks the columns {missing}")
    frame = frame[columns]
    if len(frame) > config.max_train:
        frame = frame.sample(n=config.max_train, random_state=config.seed)
    designs = {d.name: build_design(domain, "logistic", config.target, d.features, d.one_hot) for d in config.designs}
    rows = {name: _design_rows(design, frame) for name, design in designs.items()}
    for _, spec, sparsity, _ in config.points():
        width = rows[spec.name][0].shape[1]
        if sparsity > width:
            raise BenchError(f"sparsity {sparsity} exceeds the {width} coefficients of {spec.name}")
    return PreparedTable(frame, domain, designs, rows)


def noiseless_loss(design: DesignEncoding, Z: np.ndarray, y: np.ndarray, sparsity: int, config: DPIHTBench) -> float:
    """The training loss of DP-IHT's own iteration (same T, public step, clipping and penalty) with no noise and the
    true row count: what the private run would reach if privacy cost nothing. The gap between it and the reference is
    optimisation error (T steps at the public step, or another IHT fixed point), not privacy."""
    from estimators.central.dp_iht import DPIHTLogisticRegression
    from service.mechanisms import registry

    settings = registry.get("dp-iht").settings(design, {"sparsity": sparsity, "iterations": config.iterations,
                                                        "l2": config.l2})
    model = DPIHTLogisticRegression(sparsity=sparsity, iterations=config.iterations, eta=settings["step"], rho=1.0,
                                    clip_norm=settings["clip_norm"], l2=config.l2, normalizer=float(len(y)))
    model.fit(Z, y, lambda sigma, size: np.zeros(size))
    return logistic_loss(np.asarray(model.coef_, dtype=float), Z, y, config.l2)


def reference_table(config: DPIHTBench, table: PreparedTable,
                    log: Callable[[str], None] = lambda message: None) -> dict[tuple[str, int], dict[str, object]]:
    """For every (design, sparsity) of the run: the non-private optimum (:func:`sparse_logistic_optimum`) and the
    noiseless DP-IHT loss (:func:`noiseless_loss`), as JSON-ready entries."""
    out: dict[tuple[str, int], dict[str, object]] = {}
    for _, spec, sparsity, _ in config.points():
        if (spec.name, sparsity) in out:
            continue
        Z, y = table.rows[spec.name]
        ref = sparse_logistic_optimum(Z, y, sparsity, config.l2, config.reference_tolerance,
                                      config.reference_max_iterations)
        noiseless = noiseless_loss(table.designs[spec.name], Z, y, sparsity, config)
        out[(spec.name, sparsity)] = {
            "design": spec.name, "p": int(Z.shape[1]), "sparsity": sparsity, "loss": ref.loss,
            "iterations": ref.iterations, "converged": ref.converged, "seconds": ref.seconds,
            "nonzeros": int(np.count_nonzero(ref.theta)), "noiseless_loss": noiseless,
            "noiseless_gap": noiseless - ref.loss}
        log(f"reference {spec.name} (p={Z.shape[1]}) s={sparsity}: loss {ref.loss:.6f} after {ref.iterations} "
            f"iterations ({'converged' if ref.converged else 'NOT converged'}, {ref.seconds:.1f} s); noiseless "
            f"DP-IHT gap {noiseless - ref.loss:.5f}")
    return out


def run_dp_iht_bench(config: DPIHTBench, log: Callable[[str], None] = lambda message: None) -> dict:
    """Run the Sec. 7.2 protocol and return the JSON-ready result (module docstring)."""
    started = time.perf_counter()
    table = prepare_table(config)
    references = reference_table(config, table, log)
    records: list[dict[str, object]] = []
    with temporary_table(table.frame, table.domain, "table", config.categorical) as engine:
        for index, (sweep, spec, sparsity, epsilon) in enumerate(config.points()):
            Z, y = table.rows[spec.name]
            optimum = float(references[(spec.name, sparsity)]["loss"])  # type: ignore[arg-type]
            for trial in range(config.trials):
                seed = harness.trial_seed(config.seed, index, trial)
                t0 = time.perf_counter()
                outcome = fit_regression(
                    engine, "table", "logistic", config.target, list(spec.features), list(spec.one_hot), "dp-iht",
                    str(epsilon), str(config.delta), seed=seed, principal="bench", reuse=False,
                    options={"sparsity": sparsity, "iterations": config.iterations, "l2": config.l2})
                seconds = time.perf_counter() - t0
                loss = logistic_loss(_theta(outcome.model, table.designs[spec.name]), Z, y, config.l2)
                records.append({
                    "sweep": sweep, "design": spec.name, "p": int(Z.shape[1]), "sparsity": sparsity,
                    "epsilon": epsilon, "delta": config.delta, "trial": trial, "seed": seed,
                    "release_id": outcome.release_id, "rho": float(outcome.cost.rho), "private_loss": loss,
                    "optimal_loss": optimum, "optimality_gap": loss - optimum, "seconds": seconds,
                    "step": outcome.details.get("step"), "sigma_gradient": outcome.details.get("sigma_gradient"),
                })
                log(f"{sweep}: {spec.name} p={Z.shape[1]} s={sparsity} eps={epsilon} trial {trial}: gap "
                    f"{loss - optimum:.5f} ({seconds:.1f} s)")
    return {
        "config": config.to_json(),
        "records": records,
        "references": list(references.values()),
        "summary": summarize(records),
        "seconds": time.perf_counter() - started,
    }


def config_from_json(data: dict[str, object]) -> DPIHTBench:
    """The :class:`DPIHTBench` a result's ``config`` describes."""
    values = dict(data)
    values["train"], values["domain"] = Path(str(values["train"])), Path(str(values["domain"]))
    values["designs"] = tuple(DesignSpec(d["name"], tuple(d["features"]), tuple(d["one_hot"]))  # type: ignore[index]
                              for d in values["designs"])  # type: ignore[union-attr]
    for key in ("categorical", "sparsities", "epsilons", "sweeps"):
        if key in values:
            values[key] = tuple(values[key])  # type: ignore[arg-type]
    return DPIHTBench(**values)  # type: ignore[arg-type]


def add_noiseless(path: Path, log: Callable[[str], None] = lambda message: None) -> dict:
    """Recompute the references of a result written before :func:`noiseless_loss` existed, with the noiseless DP-IHT
    loss, and write them back. The references are deterministic: each recomputed optimum must equal the stored one
    (to 1e-12), or nothing is written."""
    result = json.loads(path.read_text())
    config = config_from_json(result["config"])
    fresh = reference_table(config, prepare_table(config), log)
    for old in result["references"]:
        new = fresh[(old["design"], old["sparsity"])]
        if abs(float(new["loss"]) - float(old["loss"])) > 1e-12:  # type: ignore[arg-type]
            raise BenchError(f"reference {old['design']} s={old['sparsity']} changed: {old['loss']} -> {new['loss']}")
    result["references"] = list(fresh.values())
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def summarize(records: Sequence[dict[str, object]]) -> dict[str, list[dict[str, object]]]:
    """Per sweep, one entry per point: the varied value, the mean, standard deviation, min and max gap over the
    trials, and the mean seconds per private fit."""
    varied = {"p": "p", "sparsity": "sparsity", "epsilon": "epsilon"}
    out: dict[str, list[dict[str, object]]] = {}
    for sweep, column in varied.items():
        groups: dict[object, list[dict[str, object]]] = {}
        for record in records:
            if record["sweep"] == sweep:
                groups.setdefault(record[column], []).append(record)
        out[sweep] = [{
            column: value,
            "trials": len(group),
            "gap_mean": statistics.fmean(float(r["optimality_gap"]) for r in group),  # type: ignore[arg-type]
            "gap_sd": statistics.stdev([float(r["optimality_gap"]) for r in group]) if len(group) > 1 else 0.0,  # type: ignore[arg-type]
            "gap_min": min(float(r["optimality_gap"]) for r in group),  # type: ignore[arg-type]
            "gap_max": max(float(r["optimality_gap"]) for r in group),  # type: ignore[arg-type]
            "seconds_mean": statistics.fmean(float(r["seconds"]) for r in group),  # type: ignore[arg-type]
        } for value, group in sorted(groups.items(), key=lambda item: float(item[0]))]  # type: ignore[arg-type]
    return out


def plot_dp_iht_bench(result: dict, path: Path) -> None:
    """Three panels: the optimality gap (mean, min-max band) against p, the sparsity and epsilon."""
    plt = harness.pyplot()

    config = result["config"]
    swept = config["sweep_design"] or config["designs"][-1]["name"]
    fixed = {"p": f"s={config['sparsity']}, eps={config['epsilon']:g}",
             "sparsity": f"{swept}, eps={config['epsilon']:g}",
             "epsilon": f"{swept}, s={config['sparsity']}"}
    panels = [(sweep, points) for sweep, points in result["summary"].items() if points]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.8), squeeze=False)
    noiseless = {(r["design"], r["sparsity"]): r.get("noiseless_gap") for r in result["references"]}
    for ax, (sweep, points) in zip(axes[0], panels, strict=True):
        xs = [float(p[sweep]) for p in points]
        ax.plot(xs, [p["gap_mean"] for p in points], marker="o", color="C0", label="DP-IHT (mean)")
        ax.fill_between(xs, [p["gap_min"] for p in points], [p["gap_max"] for p in points], color="C0", alpha=0.2,
                        label="min-max over trials")
        at = {float(r[sweep]): (r["design"], r["sparsity"]) for r in result["records"] if r["sweep"] == sweep}
        baseline = [noiseless.get(at.get(x)) for x in xs]  # type: ignore[arg-type]
        if all(value is not None for value in baseline):
            ax.plot(xs, baseline, linestyle="--", marker="x", color="C1", label="same iterations, no noise")
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xlabel(sweep)
        ax.set_title(f"gap vs {sweep} ({fixed[sweep]})", fontsize=9)
        ax.grid(True, alpha=0.3)
        if sweep == "epsilon":
            ax.set_xscale("log")
            ax.minorticks_off()
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
    axes[0][0].set_ylabel("optimality gap (training loss)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"DP-IHT, l0-constrained logistic regression on {Path(str(config['train'])).stem} "
                 f"(delta={config['delta']:g}, T={config['iterations']}, l2={config['l2']:g})", fontsize=10)
    harness.save_figure(fig, path)


# the synthetic problem of Sec. 7.1 (for ``python -m benchmarks.sparse --method dp-iht``) ---------------------------
@dataclass(frozen=True)
class SyntheticCoding:
    """How a synthetic problem becomes a coded table: each ``x_j`` in ``{-1, +1}`` is a 2-level column (scalar-encoded
    back to ``{-1, +1}`` exactly) and ``y`` is rounded to ``levels`` evenly spaced codes over ``[-b, b]``, ``b`` the
    problem's label bound, which the design's scalar target encodes as ``y / b`` (rounding error at most
    ``b / (levels - 1)``). The fitted coefficients times ``b`` estimate ``theta*``."""

    levels: int = 1001
    columns: tuple[str, ...] = field(default=())

    def frame(self, data: SparseLinearData) -> tuple[pd.DataFrame, dict[str, int]]:
        p = data.X.shape[1]
        names = self.columns or tuple(f"x{j}" for j in range(p))
        bound = data.label_bound
        codes = np.rint((np.clip(data.y, -bound, bound) / bound + 1.0) * (self.levels - 1) / 2.0).astype(int)
        frame = pd.DataFrame(((data.X + 1.0) / 2.0).astype(int), columns=list(names)).assign(y=codes)
        return frame, {**{name: 2 for name in names}, "y": self.levels}


def fit_synthetic_dp_iht(data: SparseLinearData, epsilon: float, delta: float, sparsity: int, *,
                         iterations: int = 50, step: float | None = None, seed: int | None = None,
                         coding: SyntheticCoding | None = None) -> np.ndarray:
    """DP-IHT (linear, no intercept) fitted through the release path on ``data`` (a temporary coded table, a charged
    release); returns ``theta = b * coef`` (:class:`SyntheticCoding`), the estimate of ``theta*``. ``seed`` makes the
    release reproducible (benchmarks only). The charge is ``cdp_rho(epsilon, delta)``; the step defaults to the
    service's public ``1/L``."""
    coding = coding or SyntheticCoding()
    frame, sizes = coding.frame(data)
    domain = Domain.from_dict({name: {"size": size, "kind": "ordinal"} for name, size in sizes.items()})
    options: dict[str, object] = {"sparsity": sparsity, "iterations": iterations}
    if step is not None:
        options["step"] = step
    features = [c for c in frame.columns if c != "y"]
    with temporary_table(frame, domain, "synthetic", ()) as engine:
        outcome = fit_regression(engine, "synthetic", "linear", "y", features, [], "dp-iht", str(epsilon), str(delta),
                                 intercept=False, seed=seed, principal="bench", reuse=False, options=options)
    return np.asarray(outcome.model.coef_, dtype=float) * data.label_bound


def synthetic_relative_error(data: SparseLinearData, epsilon: float, delta: float, sparsity: int, **fit: Any) -> float:
    """``||theta - theta*|| / ||theta*||`` of :func:`fit_synthetic_dp_iht` (``fit``: its keyword options)."""
    return relative_error(fit_synthetic_dp_iht(data, epsilon, delta, sparsity, **fit), data.theta_star)


def main(
    train: Annotated[Path, typer.Option(help="Training CSV (coded 0..size-1), e.g. adult_train.csv.")],
    domain: Annotated[Path, typer.Option(help="private-pgm domain JSON {column: size}.")],
    out: JsonOut,
    plot: PlotOut = None,
    target: Annotated[str, typer.Option(help="Binary target column.")] = "income>50K",
    sparsities: Annotated[str, typer.Option(help="Sparsities of the sparsity sweep.")] = "5,10,20",
    epsilons: Annotated[str, typer.Option(help="Epsilons of the epsilon sweep.")] = "0.5,1,2,4",
    sparsity: Annotated[int, typer.Option(help="Sparsity of the p and epsilon sweeps.")] = 10,
    epsilon: Annotated[float, typer.Option(help="Epsilon of the p and sparsity sweeps.")] = 1.0,
    delta: Annotated[float, typer.Option(help="Delta of every release (the paper's 1e-3).")] = 1e-3,
    l2: Annotated[float, typer.Option(help="The penalty lambda (the paper's 1e-3).")] = 1e-3,
    iterations: Annotated[int, typer.Option(help="DP-IHT iterations T (the paper's 400).")] = 400,
    trials: Annotated[int, typer.Option(help="Seeded releases per point.")] = 3,
    max_train: Annotated[int, typer.Option(help="Cap on training rows (a seeded sample).")] = 50_000,
    seed: Annotated[int, typer.Option(help="Seed of the whole run.")] = 0,
    sweeps: Annotated[str, typer.Option(help="Which sweeps to run, from p,sparsity,epsilon.")] = "p,sparsity,epsilon",
    sweep_design: Annotated[str | None, typer.Option(
        help="Design of the sparsity and epsilon sweeps: adult-10, adult-12, adult-13 or adult-13-onehot "
             "(default: the last).")] = None,
    force: Force = False,
    quiet: QuietFlag = False,
) -> None:
    """Optimality gap of DP-IHT's l0-constrained logistic regression vs p, sparsity and epsilon, on adult's nested
    designs (p = 23, 45, 86, 250), each model a real charged release in a temporary SQLite database."""
    config = DPIHTBench(
        train=train, domain=domain, target=target, sparsities=harness.number_list(sparsities, "--sparsities", int),
        epsilons=harness.number_list(epsilons, "--epsilons", float), sparsity=sparsity, epsilon=epsilon, delta=delta,
        l2=l2, iterations=iterations, trials=trials, max_train=max_train, seed=seed,
        sweeps=tuple(v.strip() for v in sweeps.split(",") if v.strip()), sweep_design=sweep_design)
    harness.run_and_write(lambda log: run_dp_iht_bench(config, log=log), plot_dp_iht_bench, out, plot, force, quiet)
    harness.wrote(out, plot)


app = harness.command(main)

if __name__ == "__main__":  # pragma: no cover
    # two maintenance forms beside the benchmark: ``--add-noiseless RESULT.json`` and ``--replot RESULT.json PNG``
    if len(sys.argv) == 3 and sys.argv[1] == "--add-noiseless":
        add_noiseless(Path(sys.argv[2]), log=print)
    elif len(sys.argv) == 4 and sys.argv[1] == "--replot":
        plot_dp_iht_bench(json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[3]))
    else:
        app()
