"""Benchmark for issue 3: accuracy, speed and memory of the marginal-release mechanisms
(laplace, gaussian, mst, aim) on real tables, workload = all 2-way marginals.

Privacy: mst, aim and gaussian get the zCDP rho the release engine charges for (epsilon, delta),
``floor_to_grid(cdp_rho(epsilon, delta))``, so they are (epsilon, delta)-DP. laplace gets epsilon
itself and is pure epsilon-DP (a stronger guarantee at the same epsilon, hence noisier).

Error (the issue's metric): the sum over all 2-way marginals of the L1 distance between the
release's answer and the true counts, divided by N and by the number of marginals. The release's
answer is ``pgm.marginal(model, pair)`` of the fitted model (since issue 9, laplace and gaussian fit none: their
answers are the non-negative consistent ones from the measurements, ``service.releases.measured``). For laplace and
gaussian the error of
the noisy measurements themselves (before any model; ``raw_error``) is reported too: with the
default ``max_model_size`` (80 MB) the model keeps only the cliques that fit
(``model_cliques`` of ``n_pairs``), so the model can be worse than the measurements.

Each (table, mechanism, epsilon, trial) runs in its own fresh process (``harness.run_child``), so
peak RSS and the JAX compile count are that run's alone. Trial t uses ``NoiseSource(t)``. The count
oracle is in memory (``ArrayOracle``), so times exclude SQL. Run from the repository root::

    .venv/bin/python -m benchmarks.marginals                    # everything: 2 tables x 4 mechanisms x 2 eps x 3
    .venv/bin/python -m benchmarks.marginals --tables adult --mechanisms mst aim --trials 1
    .venv/bin/python -m benchmarks.marginals --replot           # redraw the plot, print the medians
    .venv/bin/python -m benchmarks.marginals --merge a.json b.json  # combine runs made in parallel

Writes ``benchmarks/results/marginals.json`` (every run plus medians) and ``marginals.png``.
Results are written after every run, so an interrupted run keeps what it measured; ``--resume``
skips configurations already in the JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

from benchmarks import harness
from benchmarks.harness import machine
from benchmarks.measure import (
    TABLES,
    CompileCounter,
    engine_rho,
    load_oracle,
    peak_rss_mb,
    two_way_pairs,
    workload_error,
)

MECHANISMS = ("laplace", "gaussian", "mst", "aim")
KEY = ("table", "mechanism", "epsilon", "max_model_size", "trial")


def run_one(config: dict[str, object]) -> dict[str, object]:
    """One run in this (fresh) process: release, then measure time, memory, compiles and error."""
    compiles = CompileCounter()

    from estimators.graphical import mbi_adapter
    from service.mechanisms import direct
    from service.mechanisms.aim import run_aim
    from service.mechanisms.mst import run_mst
    from service.privacy.noise import NoiseSource
    from workloads.marginals import all_kway

    oracle = load_oracle(str(config["table"]))
    domain = oracle.domain
    workload = all_kway(domain, 2)
    epsilon, delta = float(config["epsilon"]), float(config["delta"])
    rho = engine_rho(epsilon, delta)
    noise = NoiseSource(int(config["seed"]))
    mechanism = str(config["mechanism"])
    cap = config["max_model_size"]
    size = direct.DEFAULT_MAX_MODEL_SIZE_MB if cap is None else float(cap)  # mst has no cap (a tree)
    iters = int(config["iters"])

    before = compiles.snapshot()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if mechanism == "laplace":
        result = direct.run_laplace(oracle, workload, Fraction(str(epsilon)), noise, max_model_size=size, iters=iters)
    elif mechanism == "gaussian":
        result = direct.run_gaussian(oracle, workload, rho, noise, max_model_size=size, iters=iters)
    elif mechanism == "mst":
        result = run_mst(oracle, rho, noise, iters=iters)
    else:
        result = run_aim(oracle, workload, rho, noise, max_model_size=size, iters=iters)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    peak = peak_rss_mb()
    n_compiles, compile_s = compiles.since(before)

    pairs = two_way_pairs(oracle)
    if result.payload.model is None:  # laplace, gaussian since issue 9: answered from the measurements, no model
        from service.releases.measured import MeasuredRelease

        measured = MeasuredRelease(result.payload.residuals)
        answer = lambda p: measured.answer(p)[0]  # noqa: E731
    else:
        answer = lambda p: mbi_adapter.marginal(result.payload.model, p)  # noqa: E731
    record: dict[str, object] = {
        **config,
        "privacy": "pure epsilon-DP" if mechanism == "laplace" else f"(epsilon, {delta:g})-DP via rho-zCDP",
        "rho": None if mechanism == "laplace" else float(rho),
        "rows": oracle.rows,
        "attributes": len(domain),
        "n_pairs": len(pairs),
        "error": workload_error(answer, oracle, pairs),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak,
        "jax_compiles": n_compiles,
        "jax_compile_s": compile_s,
        "load_average": os.getloadavg(),
    }
    if mechanism in ("laplace", "gaussian"):
        noisy = {m.attributes: m.values for m in result.payload.measurements}
        record["raw_error"] = workload_error(lambda p: noisy[tuple(p)], oracle, pairs)
        if "model_cliques" in result.details:  # results made before issue 9
            record["model_cliques"] = len(result.details["model_cliques"])
    for key in ("rounds", "annealed", "model_size_mb"):
        if key in result.details:
            record[key] = result.details[key]
    return record


def summarize(runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Medians over trials of every numeric measurement, per (table, mechanism, epsilon, cap)."""
    groups: dict[tuple, list[dict[str, object]]] = {}
    for run in runs:
        groups.setdefault(tuple(run[k] for k in KEY[:-1]), []).append(run)
    summary = []
    for key, group in groups.items():
        row: dict[str, object] = dict(zip(KEY[:-1], key, strict=True))
        row["trials"] = len(group)
        for field in ("error", "raw_error", "wall_s", "cpu_s", "peak_rss_mb", "jax_compiles", "model_cliques",
                      "rounds"):
            values = [r[field] for r in group if r.get(field) is not None]
            if values:
                row[f"median_{field}"] = statistics.median(values)
        if "error" in group[0]:
            row["min_error"] = min(r["error"] for r in group)
            row["max_error"] = max(r["error"] for r in group)
        summary.append(row)
    return summary


def markdown(summary: list[dict[str, object]]) -> str:
    """The table of medians for benchmarks/README.md."""
    lines = ["| table | mechanism | privacy | ε | cap MB | trials | error (median) | noisy marginals, no model "
             "| model cliques | wall s | CPU s | peak RSS MB | JAX compiles |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = {m: i for i, m in enumerate(MECHANISMS)}
    for r in sorted(summary, key=lambda r: (r["table"], order[r["mechanism"]], r["epsilon"], r["max_model_size"] or 0)):
        raw = f"{r['median_raw_error']:.4f}" if "median_raw_error" in r else "–"
        cliques = f"{r['median_model_cliques']:g}" if "median_model_cliques" in r else "–"
        privacy = "ε-DP" if r["mechanism"] == "laplace" else "(ε, δ)"
        cap = "–" if r["max_model_size"] is None else f"{r['max_model_size']:g}"
        lines.append(f"| {r['table']} | {r['mechanism']} | {privacy} | {r['epsilon']:g} | {cap} | {r['trials']} "
                     f"| {r['median_error']:.4f} | {raw} | {cliques} | {r['median_wall_s']:.1f} "
                     f"| {r['median_cpu_s']:.1f} | {r['median_peak_rss_mb']:.0f} | {r['median_jax_compiles']:g} |")
    return "\n".join(lines)


def write(path: Path, runs: list[dict[str, object]], command: str) -> None:
    report = {"command": command, "machine": machine(), "summary": summarize(runs), "runs": runs}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=["adult", "acs-income"], choices=sorted(TABLES))
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=MECHANISMS)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--trials", type=int, default=3, help="trial t uses NoiseSource(t)")
    parser.add_argument("--iters", type=int, default=1000, help="(final) estimation iterations")
    parser.add_argument("--max-model-size", type=float, nargs="+", default=[80.0],
                        help="MB; several values run laplace/gaussian once per cap (aim uses the first)")
    harness.add_outputs(parser, "marginals")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in --json, skip their configs")
    parser.add_argument("--replot", action="store_true", help="only redraw the plot from --json")
    parser.add_argument("--merge", type=Path, nargs="+", help="combine the runs of these JSON files into --json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return
    if args.merge:
        parts = [json.loads(path.read_text()) for path in args.merge]
        write(args.json, [run for part in parts for run in part["runs"]], " && ".join(p["command"] for p in parts))
    if args.merge or args.replot:
        runs = json.loads(args.json.read_text())["runs"]
        plot(runs, harness.outputs(args)[1])
        print(markdown(summarize(runs)))
        return

    command = " ".join([Path(sys.executable).name, *sys.argv])
    runs: list[dict[str, object]] = json.loads(args.json.read_text())["runs"] if args.resume else []
    done = {tuple(r[k] for k in KEY) for r in runs}
    for table, mechanism, epsilon, trial in itertools.product(args.tables, args.mechanisms, args.epsilons,
                                                              range(args.trials)):
        caps = args.max_model_size if mechanism in ("laplace", "gaussian") else args.max_model_size[:1]
        if mechanism == "mst":
            caps = [None]  # MST's model is a tree: no cap
        for cap in caps:
            config = {"table": table, "mechanism": mechanism, "epsilon": epsilon, "delta": args.delta,
                      "seed": trial, "trial": trial, "iters": args.iters, "max_model_size": cap}
            if tuple(config[k] for k in KEY) in done:
                continue
            run = harness.run_child("benchmarks.marginals", config)
            runs.append(run)
            raw = f" raw={run['raw_error']:.4f}" if "raw_error" in run else ""
            print(f"{table:10s} {mechanism:8s} eps={epsilon:<4} cap={cap} trial={trial} wall={run['wall_s']:7.1f}s "
                  f"cpu={run['cpu_s']:7.1f}s rss={run['peak_rss_mb']:6.0f}MB compiles={run['jax_compiles']:3d} "
                  f"error={run['error']:.4f}{raw} load={run['load_average'][0]:.1f}", flush=True)
            write(args.json, runs, command)
    write(args.json, runs, command)
    plot(runs, harness.outputs(args)[1])
    print(markdown(summarize(runs)))
    print(f"wrote {args.json}")


def plot(runs: list[dict[str, object]], path: Path) -> None:
    """Top row: median error vs epsilon per mechanism (one panel per table; trials as dots; dashed =
    the direct measurements before the model). Bottom row: median wall time vs epsilon."""
    plt = harness.pyplot()
    summary = summarize(runs)
    tables = sorted({str(r["table"]) for r in summary})
    figure, axes = plt.subplots(2, len(tables), figsize=(5.5 * len(tables), 8), squeeze=False)
    colors = dict(zip(MECHANISMS, ("tab:orange", "tab:green", "tab:blue", "tab:red"), strict=True))
    for column, table in enumerate(tables):
        rows = [r for r in summary if r["table"] == table]
        lines = sorted({(str(r["mechanism"]), r["max_model_size"]) for r in rows}, key=lambda x: (x[0], x[1] or 0))
        for mechanism, cap in lines:
            mine = sorted((r for r in rows if r["mechanism"] == mechanism and r["max_model_size"] == cap),
                          key=lambda r: r["epsilon"])
            eps = [r["epsilon"] for r in mine]
            label = mechanism if cap in (None, 80.0) or mechanism == "aim" else f"{mechanism} (cap {cap:g} MB)"
            style = "-" if cap in (None, 80.0) else "-."
            color = colors[mechanism]
            axes[0][column].plot(eps, [r["median_error"] for r in mine], style, marker="o", color=color, label=label)
            trials = [r for r in runs if r["table"] == table and r["mechanism"] == mechanism
                      and r["max_model_size"] == cap]
            axes[0][column].scatter([r["epsilon"] for r in trials], [r["error"] for r in trials], s=8, color=color,
                                    alpha=0.4)
            if "median_raw_error" in mine[0] and cap in (None, 80.0):
                axes[0][column].plot(eps, [r["median_raw_error"] for r in mine], "--", marker="x", color=color,
                                     label=f"{mechanism}: noisy marginals (no model)")
            axes[1][column].plot(eps, [r["median_wall_s"] for r in mine], style, marker="o", color=color,
                                 label=label)
        for row, ylabel in ((0, "mean workload error (L1 / N / #marginals)"), (1, "wall time (s), median")):
            axis = axes[row][column]
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_xlabel("epsilon (delta 1e-5; laplace pure epsilon)")
            axis.set_ylabel(ylabel)
            axis.set_title(f"{table}: {'error' if row == 0 else 'time'}, all 2-way marginals")
            axis.legend(fontsize=7)
    harness.save_figure(figure, path)


if __name__ == "__main__":
    main()
