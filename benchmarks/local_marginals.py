"""Marginals from a local-DP ``marginals`` campaign (issue 33): the campaign's model against two baselines written here,
its synthetic rows, the plan's prediction, and the central AIM at the same epsilon as the price of the local model.

Each trial plays every row of the table as one participant through the protocol's own device code
(``MarginalsSpec.randomize``: a uniform attribute set, then the set's frequency oracle) and the server's own tally
(``aggregate_input`` into a ``ReportAggregate``), seeded (``harness.trial_seed``), in memory: the submission path's
throughput is ``--throughput``'s measurement. From the one aggregate:

* **model**: the campaign's graphical model (:func:`estimators.local.marginals.fit_marginal_model`, as
  ``marginal --campaign`` answers);
* **synthetic**: as many rows as the table has, drawn from the model, counted;
* **separate** (baseline 1, no model): each workload marginal from the set estimates that contain it, each summed to
  the marginal, clipped at 0 and normalised, averaged over those sets; a marginal no set contains (a 3-way one from
  pairs) is the product of its attributes' one-way margins, each the average of every set holding it, clipped and
  normalised;
* **calm** (baseline 2, a CALM-style consistency step, Zhang et al. 2018, Sec. 5, after Qardaji et al. 2014): the
  sets' shared one-way margins made equal to their precision-weighted mean (each set's cells shifted by the
  difference, spread evenly over the other axes), then Norm-Sub (negatives set to 0, the rest shifted to sum to 1;
  Wang et al. 2020), three rounds; then answered as baseline 1;
* **aim**: the central AIM release (its registry runner and defaults, rho for (epsilon, 1e-5)), its model's marginals.

Error: the mean over the workload (every 2-way and every 3-way marginal, reported apart) of the L1 distance between
the answer normalised to proportions and the table's (0 to 2). The plan: ``campaign plan``'s simulated mean L1 over
the sets at the table's size (:mod:`estimators.local.marginals_planning`), beside the model's measured mean L1 over
the same sets, on the table's own test split as the public table.

Run from the repository root::

    .venv/bin/python -m benchmarks.local_marginals                 # adult and ACSincome, eps 1, 2, 4, 5 trials
    .venv/bin/python -m benchmarks.local_marginals --tables adult --epsilons 1 --trials 1 --aim-trials 0
    .venv/bin/python -m benchmarks.local_marginals --throughput 1000000   # the real submission path, one core
    .venv/bin/python -m benchmarks.local_marginals --resume               # keep the trials already in the JSON

Writes ``benchmarks/results/local_marginals.json`` (every trial, the summary, the machine) and
``local_marginals.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness
from benchmarks.harness import DATA, machine

#: (train CSV, public test CSV, domain JSON) per table
TABLES = {
    "adult": ("adult/adult_train.csv", "adult/adult_test.csv", "adult/adult-domain.json"),
    "acs-income": ("acs/ACSincome-LIN_train.csv", "acs/ACSincome-LIN_test.csv", "acs/ACSincome-LIN-domain.json"),
}
EPSILONS = (1.0, 2.0, 4.0)
METHODS = ("model", "synthetic", "separate", "calm", "aim")
RESULTS = Path(__file__).resolve().parent / "results"
OUT, PLOT = RESULTS / "local_marginals.json", RESULTS / "local_marginals.png"
CONSISTENCY_ROUNDS = 3


#: ``--rows``: only the first rows of each training table (smoke runs); None: all of them
ROWS: list[int | None] = [None]


def load(table: str) -> tuple[list[str], list[int], np.ndarray, np.ndarray]:
    import pandas as pd

    train, test, domain = TABLES[table]
    sizes = json.loads((DATA / domain).read_text())
    names = list(sizes)
    return (names, [sizes[n] for n in names], pd.read_csv(DATA / train, nrows=ROWS[0])[names].to_numpy(np.int64),
            pd.read_csv(DATA / test)[names].to_numpy(np.int64))


def proportions(rows: np.ndarray, columns: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    shape = tuple(sizes[c] for c in columns)
    cells = np.ravel_multi_index(tuple(rows[:, list(columns)].T), shape)
    return (np.bincount(cells, minlength=math.prod(shape)) / rows.shape[0]).reshape(shape)


def norm_sub(values: np.ndarray) -> np.ndarray:
    """Wang et al. (2020)'s Norm-Sub: the closest-in-shift non-negative vector summing to 1 (negatives to 0, a
    common shift of the positive cells)."""
    flat = values.ravel().astype(float)
    for _ in range(100):
        flat = np.maximum(flat, 0.0)
        positive = flat > 0
        if not positive.any():
            return np.full(values.shape, 1.0 / values.size)
        gap = (1.0 - flat.sum()) / positive.sum()
        flat[positive] += gap
        if flat.min() >= -1e-12:
            break
    flat = np.maximum(flat, 0.0)
    return (flat / flat.sum()).reshape(values.shape)


def margin(values: np.ndarray, axis: int) -> np.ndarray:
    return values.sum(axis=tuple(i for i in range(values.ndim) if i != axis))


class SetAnswers:
    """Baselines 1 and 2: workload marginals answered from the sets' own estimates (module docstring)."""

    def __init__(self, estimates: list[Any], names: list[str], consistent: bool) -> None:
        self.names = names
        self.tables = {e.attributes: np.array(e.frequencies, dtype=float) for e in estimates}
        self.precision = {e.attributes: 1.0 / e.mean_variance for e in estimates}
        if consistent:
            for _ in range(CONSISTENCY_ROUNDS):
                self._make_consistent()
                self.tables = {k: norm_sub(v) for k, v in self.tables.items()}
        else:
            self.tables = {k: v for k, v in self.tables.items()}
        self.one_way = {name: self._one_way(name) for name in names}

    def _one_way(self, name: str) -> np.ndarray:
        held = [(k, v) for k, v in self.tables.items() if name in k]
        average = np.mean([norm_sub(margin(v, k.index(name))) for k, v in held], axis=0)
        return norm_sub(average)

    def _make_consistent(self) -> None:
        for name in self.names:
            held = [k for k in self.tables if name in k]
            if len(held) < 2:
                continue
            margins = {k: margin(self.tables[k], k.index(name)) for k in held}
            weights = {k: self.precision[k] / (self.tables[k].size / self.tables[k].shape[k.index(name)])
                       for k in held}
            target = sum(weights[k] * margins[k] for k in held) / sum(weights.values())
            for k in held:
                axis = k.index(name)
                spread = self.tables[k].size / self.tables[k].shape[axis]
                shape = [1] * self.tables[k].ndim
                shape[axis] = -1
                self.tables[k] = self.tables[k] + ((target - margins[k]) / spread).reshape(shape)

    def answer(self, attributes: tuple[str, ...]) -> np.ndarray:
        covering = [k for k in self.tables if set(attributes) <= set(k)]
        if covering:
            parts = []
            for k in covering:
                kept = [k.index(a) for a in attributes]
                summed = self.tables[k].sum(axis=tuple(i for i in range(len(k)) if i not in kept))
                order = np.argsort(np.argsort(kept))  # the summed axes are in k's order: put them in the asked one
                parts.append(norm_sub(np.transpose(summed, order.tolist())))
            return np.mean(parts, axis=0)
        out = np.ones(())
        for a in attributes:
            out = np.multiply.outer(out, self.one_way[a])
        return out


def aim_model(names: list[str], sizes: list[int], rows: np.ndarray, epsilon: float, trial: int) -> Any:
    """The central AIM release's model (registry runner, defaults), seeded."""
    from service.mechanisms import registry
    from service.mechanisms.registry import RunRequest
    from service.mechanisms.selection import ArrayOracle
    from service.privacy.noise import NoiseSource
    from service.releases.engine import checked_runner
    from workloads.domain import Domain
    from workloads.marginals import parse_workload

    domain = Domain.from_sizes(dict(zip(names, sizes, strict=True)))
    oracle = ArrayOracle(domain, {n: rows[:, i] for i, n in enumerate(names)})
    spec = registry.get("aim")
    cost = spec.cost(epsilon, 1e-5, None)
    request = RunRequest(cost, {}, queries=parse_workload("all-2way", domain), epsilon=epsilon, delta=1e-5)
    result = checked_runner(spec, request)(oracle, NoiseSource(harness.trial_seed(1, trial)), lambda *_: None)
    return result.payload.model


def design(sizes: list[int], epsilon: float, participants: int, way: int | None) -> tuple[tuple[int, ...], ...]:
    """The campaign's attribute sets: every ``way``-subset, or (``None``) the planned split a campaign takes by
    default (:func:`workloads.local.protocols.marginals.planned_sets`)."""
    from workloads.local.protocols.marginals import all_sets, planned_sets

    return planned_sets(tuple(sizes), epsilon, participants) if way is None else all_sets(len(sizes), way)


def run_trial(table: str, epsilon: float, trial: int, aim: bool, way: int | None) -> dict[str, Any]:
    from estimators.graphical import mbi_adapter
    from estimators.local.aggregate import ReportAggregate
    from estimators.local.marginals import fit_marginal_model, set_estimates
    from workloads.local.protocols import RoundState
    from workloads.local.protocols.marginals import MarginalsSpec

    names, sizes, rows, _ = load(table)
    n = rows.shape[0]
    spec = MarginalsSpec(tuple(names), tuple(sizes), design(sizes, epsilon, n, way), epsilon)
    state, rng = RoundState(0, {}), np.random.default_rng(harness.trial_seed(0, trial, int(epsilon * 100)))
    started = time.perf_counter()
    reports = spec.randomize(0, state, {"x": rows}, rng)
    randomized = time.perf_counter() - started
    aggregate = ReportAggregate.for_round(spec, 0, state).add(
        spec.aggregate_input(0, state, spec.report_schema(0, state).validate(reports)))
    started = time.perf_counter()
    model, _ = fit_marginal_model(spec, aggregate)
    fitted = time.perf_counter() - started
    synthetic_rows = np.stack([v for _, v in sorted(model.sample(n, rng).items(), key=lambda kv: names.index(kv[0]))],
                              axis=1)
    estimates = set_estimates(spec, aggregate)
    answers: dict[str, Any] = {
        "model": lambda attrs: model.marginal(attrs) / n,
        "synthetic": lambda attrs: proportions(synthetic_rows, tuple(names.index(a) for a in attrs), sizes),
        "separate": SetAnswers(estimates, names, consistent=False).answer,
        "calm": SetAnswers(estimates, names, consistent=True).answer,
    }
    aim_seconds = None
    if aim:
        started = time.perf_counter()
        central = aim_model(names, sizes, rows, epsilon, trial)
        aim_seconds = time.perf_counter() - started
        answers["aim"] = lambda attrs: mbi_adapter.marginal(central, attrs) / n
    errors: dict[str, dict[str, float]] = {}
    for k in (2, 3):
        workload = list(itertools.combinations(range(len(names)), k))
        truths = [proportions(rows, c, sizes) for c in workload]
        for method, answer in answers.items():
            total = sum(float(np.abs(answer(tuple(names[i] for i in c)) - t).sum()) for c, t in
                        zip(workload, truths, strict=True))
            errors.setdefault(method, {})[f"{k}-way"] = total / len(workload)
    sets_error = float(np.mean([np.abs(model.marginal(spec.set_names(j)) / n - proportions(rows, spec.sets[j], sizes))
                                .sum() for j in range(len(spec.sets))]))
    return {"table": table, "epsilon": epsilon, "trial": trial, "way": "planned" if way is None else way, "rows": n,
            "sets": len(spec.sets), "pairs": sum(len(s) == 2 for s in spec.sets),
            "oracles": sorted({o.name for o in spec.oracles}), "errors": errors, "model_sets_error": sets_error,
            "seconds": {"randomize": randomized, "fit": fitted, "aim": aim_seconds}, "iterations": model.iterations}


def plan_error(table: str, epsilon: float, way: int | None) -> float:
    """``campaign plan``'s simulated mean L1 over the sets at the table's size, from its test split."""
    from estimators.local.marginals_planning import marginals_error_model
    from workloads.local.protocols.marginals import MarginalsSpec

    names, sizes, rows, public = load(table)
    spec = MarginalsSpec(tuple(names), tuple(sizes), design(sizes, epsilon, rows.shape[0], way), epsilon)
    return float(np.mean(list(marginals_error_model(spec, public).model_errors(rows.shape[0]).values())))


def throughput(participants: int, batch: int) -> dict[str, Any]:
    """``participants`` simulated ACSincome participants (rows resampled) at epsilon 1 through the real submission
    path on a temporary SQLite database: reports per second of ingest, the model's fit seconds, peak memory."""
    import resource

    from db.engine import make_engine
    from db.migrate import upgrade_to_head
    from service.campaigns import campaigns, marginal_answers
    from service.campaigns.submission import Submitter, submit_reports

    names, sizes, rows, _ = load("acs-income")
    rng = np.random.default_rng(harness.trial_seed(2, participants))
    with harness.temporary_folder("marginalia-local-marginals-") as folder:
        engine = make_engine(f"sqlite:///{folder / 'bench.db'}")
        upgrade_to_head(engine)
        info = campaigns.create_campaign(engine, "throughput", "marginals", names, epsilon=1.0,
                                         options={"domain": dict(zip(names, sizes, strict=True)),
                                                  "participants": participants})
        submitter = Submitter.simulator("bench")
        state = info.round_state(0)
        ingest, randomize, memory = 0.0, 0.0, []
        for start in range(0, participants, batch):
            chosen = rows[rng.integers(0, rows.shape[0], size=min(batch, participants - start))]
            began = time.perf_counter()
            reports = info.spec.randomize(0, state, {"x": chosen}, rng)
            randomize += time.perf_counter() - began
            began = time.perf_counter()
            submit_reports(engine, "throughput", 0, reports, submitter,
                           [str(i) for i in range(start, start + chosen.shape[0])], campaign=info)
            ingest += time.perf_counter() - began
            memory.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        began = time.perf_counter()
        marginal_answers.answer_marginal(engine, "throughput", [names[0]], allow_seeded=True)
        fit = time.perf_counter() - began
    return {"participants": participants, "batch": batch, "ingest_seconds": ingest,
            "reports_per_second": participants / ingest, "randomize_seconds": randomize, "fit_seconds": fit,
            "peak_rss_mb_by_batch": memory[:: max(1, len(memory) // 20)], "peak_rss_mb": max(memory)}


def summarize(runs: list[dict[str, Any]], plans: dict[str, float]) -> list[dict[str, Any]]:
    cells: dict[tuple[str, float, object], list[dict[str, Any]]] = {}
    for run in runs:
        cells.setdefault((run["table"], run["epsilon"], run["way"]), []).append(run)
    out = []
    for (table, epsilon, way), found in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        row: dict[str, Any] = {"table": table, "epsilon": epsilon, "way": way, "trials": len(found)}
        for k in ("2-way", "3-way"):
            means = {m: statistics.mean(r["errors"][m][k] for r in found if m in r["errors"])
                     for m in METHODS if any(m in r["errors"] for r in found)}
            row[k] = means
            row[f"{k} model below both baselines"] = means["model"] < min(means["separate"], means["calm"])
            row[f"{k} synthetic / model"] = means["synthetic"] / means["model"]
            if "aim" in means:
                row[f"{k} model / aim"] = means["model"] / means["aim"]
        measured = statistics.mean(r["model_sets_error"] for r in found)
        key = f"{table}|{epsilon:g}|{way}"
        row["sets"] = found[0]["sets"]
        row["pairs"] = found[0].get("pairs")
        row["sets: measured"] = measured
        if key in plans:
            row["sets: planned"] = plans[key]
            row["planned / measured"] = plans[key] / measured
        out.append(row)
    return out


def plot(summary: list[dict[str, Any]], path: Path) -> None:
    plt = harness.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, k in zip(axes, ("2-way", "3-way"), strict=True):
        labels = [f"{r['table']} {r['epsilon']:g} ({r['way']})" for r in summary]
        for i, method in enumerate(METHODS):
            values = [r[k].get(method, float("nan")) for r in summary]
            ax.scatter(range(len(labels)), values, label=method, marker="os^Dv"[i], s=26)
        ax.set_xticks(range(len(labels)), labels, rotation=40, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("mean L1 of the normalised marginals")
        ax.set_title(f"all {k} marginals (lower is better)")
        harness.finish_axes(ax, 7)
    harness.save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--aim-trials", type=int, default=2, help="trials of the central AIM per cell (0: none)")
    parser.add_argument("--way", type=int, default=None,
                        help="the attribute sets: every subset of this size (default: the planned split)")
    parser.add_argument("--throughput", type=int, default=0, help="participants for the submission-path run (0: none)")
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--no-plan", action="store_true", help="skip the plan's prediction")
    parser.add_argument("--rows", type=int, default=None, help="only the first N rows of each table (smoke runs)")
    parser.add_argument("--resume", action="store_true", help="keep the trials already in the JSON, run the others")
    harness.add_outputs(parser, "local_marginals")
    args = parser.parse_args()
    out, png = harness.outputs(args)
    ROWS[0] = args.rows
    runs, plans = [], {}
    if args.resume and out.exists():
        runs = json.loads(out.read_text()).get("runs", [])
    done = {(r["table"], r["epsilon"], r["trial"], r["way"]) for r in runs}
    for table in args.tables:
        for epsilon in args.epsilons:
            for trial in range(args.trials):
                if (table, epsilon, trial, "planned" if args.way is None else args.way) in done:
                    continue
                run = run_trial(table, epsilon, trial, trial < args.aim_trials, args.way)
                runs.append(run)
                harness.write_json(out, {"command": " ".join(["python -m benchmarks.local_marginals", *sys.argv[1:]]),
                                         "machine": machine(), "partial": True, "runs": runs})
                print(f"{table} eps {epsilon:g} trial {trial}: " + ", ".join(
                    f"{m} {e['2-way']:.3f}/{e['3-way']:.3f}" for m, e in run["errors"].items())
                    + f" (fit {run['seconds']['fit']:.1f} s)", flush=True)
            if not args.no_plan:
                plans[f"{table}|{epsilon:g}|{'planned' if args.way is None else args.way}"] = plan_error(
                    table, epsilon, args.way)
    summary = summarize(runs, plans)
    command = " ".join(["python -m benchmarks.local_marginals", *sys.argv[1:]])
    payload: dict[str, Any] = {"command": command, "machine": machine(), "summary": summary, "runs": runs}
    if args.throughput:
        payload["throughput"] = throughput(args.throughput, args.batch)
        print(json.dumps(payload["throughput"], indent=1))
    harness.write_json(out, payload)
    if summary:
        plot(summary, png)
    for row in summary:
        print(json.dumps({k: v for k, v in row.items()}, default=float))
    harness.wrote(out, png if summary else None)


if __name__ == "__main__":
    main()
