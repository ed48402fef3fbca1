"""Benchmark for issue 9 through the service path (SQLite database, release engine, accountant, stored payload,
answers as ``marginalia marginal`` gives them), in two parts:

* ``accuracy``: all 2-way marginals released by ``residual`` (the ResidualPlanner plan, sum_var), ``gaussian``
  (direct, answered without a model since issue 9) and ``aim`` at the same rho (``cdp_rho(epsilon, 1e-5)`` floored to
  the ledger's grid, as the engine charges), on adult (train split, 15 columns, 105 pairs) and ACSincome-LIN, epsilon
  0.1 and 1. Error: the issue-3 metric, the mean over the pairs of the L1 distance between the answer and the true
  counts, divided by N (``measure.workload_error``). Time: the release plus answering every workload marginal
  (target for residual on adult: 10 s), in wall and in process CPU seconds, with the load average (on a shared
  machine the CPU seconds say more).
* ``titanic``: ten Laplace all-2way releases of titanic (epsilon 1 each) one after the other, and the total time
  (target: 30 s; over 10 minutes before issue 9, when every release fitted a graphical model).

Trial ``t`` seeds the release with ``t`` (in-process only: seeded releases answer nothing over HTTP). Run from the
repository root::

    .venv/bin/python -m benchmarks.residual_service                      # both parts
    .venv/bin/python -m benchmarks.residual_service --parts titanic
    .venv/bin/python -m benchmarks.residual_service --mechanisms residual gaussian --trials 3

Writes ``benchmarks/results/residual_service.json`` (every run, medians, the machine) and ``residual_service.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.harness import DATA, machine
from benchmarks.measure import TABLES, two_way_pairs

DELTA = 1e-5
TARGET_SECONDS = 10.0
TITANIC_TARGET_SECONDS = 30.0


def service(folder: Path, table: str):  # noqa: ANN201
    """A fresh SQLite database holding ``table`` with a budget large enough for every run."""
    from service.accounting import accountant
    from service.data import datasets

    engine = harness.temporary_database(folder / f"{table}.db")
    csv, domain = TABLES[table]
    datasets.load_coded_csv(engine, table, DATA / csv, DATA / domain)
    accountant.set_budget(engine, table, 10_000, 1e-2)
    return engine


def accuracy(folder: Path, tables: list[str], mechanisms: list[str], epsilons: list[float], trials: int) -> list[dict]:
    from benchmarks.measure import load_oracle, workload_error
    from service.releases import answers
    from service.releases import engine as release_engine

    rows = []
    for table in tables:
        engine = service(folder, table)
        oracle = load_oracle(table)
        pairs = two_way_pairs(oracle)
        for mechanism in mechanisms:
            for epsilon in epsilons:
                for trial in range(trials):
                    started, cpu_started = time.perf_counter(), time.process_time()
                    outcome = release_engine.release_marginals(engine, table, mechanism, "all-2way", epsilon=epsilon,
                                                               delta=DELTA, seed=trial)
                    released = time.perf_counter()
                    answered = {p: answers.answer_marginal(engine, outcome.release_id, list(p), allow_seeded=True)
                                for p in pairs}
                    finished, cpu_finished = time.perf_counter(), time.process_time()
                    error = workload_error(lambda p, a=answered: a[p]["counts"], oracle, pairs)
                    row = {"table": table, "mechanism": mechanism, "epsilon": epsilon, "trial": trial,
                           "rho": float(outcome.cost.rho), "pairs": len(pairs), "error": error,
                           "release_seconds": released - started, "answer_seconds": finished - released,
                           "seconds": finished - started, "cpu_seconds": cpu_finished - cpu_started,
                           "load_average": os.getloadavg(),
                           "standard_errors": all(a.get("standard_errors") is not None for a in answered.values())}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


def titanic(folder: Path, releases: int) -> dict:
    from service.releases import engine as release_engine

    engine = service(folder, "titanic")
    seconds = []
    started, cpu_started = time.perf_counter(), time.process_time()
    for trial in range(releases):
        begun = time.perf_counter()
        release_engine.release_marginals(engine, "titanic", "laplace", "all-2way", epsilon=1, seed=trial)
        seconds.append(time.perf_counter() - begun)
    total, cpu_total = time.perf_counter() - started, time.process_time() - cpu_started
    result = {"releases": releases, "epsilon": 1.0, "total_seconds": total, "total_cpu_seconds": cpu_total,
              "load_average": os.getloadavg(), "seconds": seconds,
              "target_seconds": TITANIC_TARGET_SECONDS, "met": total <= TITANIC_TARGET_SECONDS}
    print(json.dumps(result), flush=True)
    return result


def medians(rows: list[dict]) -> list[dict]:
    keys = sorted({(r["table"], r["mechanism"], r["epsilon"]) for r in rows})
    out = []
    for table, mechanism, epsilon in keys:
        group = [r for r in rows if (r["table"], r["mechanism"], r["epsilon"]) == (table, mechanism, epsilon)]
        out.append({"table": table, "mechanism": mechanism, "epsilon": epsilon, "trials": len(group),
                    "error": statistics.median(r["error"] for r in group),
                    "seconds": statistics.median(r["seconds"] for r in group)})
    return out


def plot(summary: list[dict], path: Path) -> None:
    plt = harness.pyplot()

    groups = sorted({(s["table"], s["epsilon"]) for s in summary})
    mechanisms = sorted({s["mechanism"] for s in summary})
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(len(mechanisms), 1)
    for k, mechanism in enumerate(mechanisms):
        errors = [next((s["error"] for s in summary if (s["table"], s["epsilon"], s["mechanism"]) == (*g, mechanism)),
                       float("nan")) for g in groups]
        times = [next((s["seconds"] for s in summary if (s["table"], s["epsilon"], s["mechanism"]) == (*g, mechanism)),
                      float("nan")) for g in groups]
        positions = [i + k * width for i in range(len(groups))]
        left.bar(positions, errors, width, label=mechanism)
        right.bar(positions, times, width, label=mechanism)
    labels = [f"{t}\neps {e:g}" for t, e in groups]
    for ax, title in ((left, "mean L1 error / N over all pairs (lower is better)"),
                      (right, "release + answering every pair, s (log)")):
        ax.set_xticks([i + width * (len(mechanisms) - 1) / 2 for i in range(len(groups))], labels, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    right.set_yscale("log")
    right.axhline(TARGET_SECONDS, color="k", linestyle="--", linewidth=0.8)
    harness.save_figure(fig, path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["accuracy", "titanic"], choices=["accuracy", "titanic"])
    parser.add_argument("--tables", nargs="+", default=["adult", "acs-income"], choices=sorted(TABLES))
    parser.add_argument("--mechanisms", nargs="+", default=["residual", "gaussian", "aim"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--titanic-releases", type=int, default=10)
    harness.add_outputs(parser, "residual_service")
    args = parser.parse_args()
    previous = json.loads(args.json.read_text()) if args.json.exists() else {}
    result = {"command": " ".join(["python", *sys.argv]), "machine": machine()}
    with harness.temporary_folder("marginalia-residual-") as folder:
        if "accuracy" in args.parts:
            rows = accuracy(folder, args.tables, args.mechanisms, args.epsilons, args.trials)
            result.update(runs=rows, summary=medians(rows))
        elif "summary" in previous:
            result.update(runs=previous["runs"], summary=previous["summary"])
        if "titanic" in args.parts:
            result["titanic"] = titanic(folder, args.titanic_releases)
        elif "titanic" in previous:
            result["titanic"] = previous["titanic"]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    if result.get("summary"):
        plot(result["summary"], harness.outputs(args)[1])
        for s in result["summary"]:
            print(f"{s['table']:>10} eps={s['epsilon']:<4g} {s['mechanism']:>9}: error {s['error']:.4f}, "
                  f"{s['seconds']:.1f} s")


if __name__ == "__main__":
    main()
