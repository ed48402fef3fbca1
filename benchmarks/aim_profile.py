"""Benchmark: wall time, CPU time, peak memory and JAX compilations of MST and AIM on real tables
(issue 3, "Speed and memory"), plus the mean workload error of each release.

Every (table, mechanism, epsilon, trial) runs in a fresh Python process, so its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and its count of XLA compilations (a
``jax.monitoring`` listener on ``/jax/core/compile/backend_compile_duration``) are its own. rho is
what the release engine would charge for (epsilon, delta): ``floor_to_grid(cdp_rho(epsilon,
delta))``. The count oracle is in memory (``selection.ArrayOracle``), so times exclude SQL.

The error is the issue's metric: the sum over all 2-way marginals of the L1 distance between the
model's marginal and the true counts, divided by N and by the number of marginals.

Wall time depends on what else runs on the machine; CPU time (user + system of the process) is
the better number on a shared machine, and the load average is recorded with each run.

Run from the repository root::

    .venv/bin/python -m benchmarks.aim_profile                       # adult, mst+aim, epsilon 0.1 and 1
    .venv/bin/python -m benchmarks.aim_profile --tables adult acs-income --trials 3

Writes ``benchmarks/results/aim_profile.json`` (and ``.png`` when matplotlib is available).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.measure import (
    TABLES,
    CompileCounter,
    engine_rho,
    load_oracle,
    peak_rss_mb,
    two_way_pairs,
    workload_error,
)


def run_one(config: dict[str, object]) -> dict[str, object]:
    """One run in this (fresh) process; returns its measurements."""
    compiles = CompileCounter()

    from estimators.graphical import mbi_adapter
    from service.mechanisms.aim import run_aim
    from service.mechanisms.mst import run_mst
    from service.privacy.noise import NoiseSource
    from workloads.marginals import all_kway

    oracle = load_oracle(str(config["table"]))
    domain = oracle.domain
    rho = engine_rho(float(config["epsilon"]), float(config["delta"]))
    noise = NoiseSource(int(config["seed"]))
    rounds_seen: list[tuple[float, str]] = []
    started = time.perf_counter()

    def progress(done: int, total: int, message: str) -> None:
        rounds_seen.append((time.perf_counter() - started, message))

    compiles_before = compiles.snapshot()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if config["mechanism"] == "mst":
        result = run_mst(oracle, rho, noise, progress=progress, iters=int(config["iters"]))
    else:
        options = {"round_iters": int(config["round_iters"]), "iters": int(config["iters"]),
                   "max_model_size": float(config["max_model_size"])}
        result = run_aim(oracle, all_kway(domain, 2), rho, noise, progress=progress, **options)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    peak_mb = peak_rss_mb()
    mechanism_compiles, compile_s = compiles.since(compiles_before)

    assert result.cost.rho == rho, (result.cost.rho, rho)
    pairs = two_way_pairs(oracle)
    error = workload_error(lambda p: mbi_adapter.marginal(result.payload.model, p), oracle, pairs)
    details = {k: v for k, v in result.details.items() if k in ("rounds", "annealed", "model_size_mb",
                                                                "fit_iterations", "tree", "selected")}
    return {
        **config,
        "rho": float(rho),
        "rows": oracle.rows,
        "attributes": len(domain),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak_mb,
        "jax_compiles": mechanism_compiles,
        "jax_compile_s": compile_s,
        "workload_error": error,
        "load_average": os.getloadavg(),
        "last_rounds": rounds_seen[-3:],
        **details,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=["adult"], choices=sorted(TABLES))
    parser.add_argument("--mechanisms", nargs="+", default=["mst", "aim"], choices=["mst", "aim"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0])
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--iters", type=int, default=1000, help="final estimation iterations")
    parser.add_argument("--round-iters", type=int, default=100, help="AIM: estimation iterations per round")
    parser.add_argument("--max-model-size", type=float, default=80.0)
    harness.add_outputs(parser, "aim_profile")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return

    runs = []
    for table, mechanism, epsilon, trial in itertools.product(args.tables, args.mechanisms, args.epsilons,
                                                              range(args.trials)):
        config = {"table": table, "mechanism": mechanism, "epsilon": epsilon, "delta": args.delta,
                  "seed": args.seed + trial, "trial": trial, "iters": args.iters, "round_iters": args.round_iters,
                  "max_model_size": args.max_model_size}
        try:
            run = harness.run_child("benchmarks.aim_profile", config)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        runs.append(run)
        print(f"{table:10s} {mechanism:4s} eps={epsilon:<4} trial={trial} wall={run['wall_s']:7.1f}s "
              f"cpu={run['cpu_s']:7.1f}s rss={run['peak_rss_mb']:6.0f}MB compiles={run['jax_compiles']:3d} "
              f"rounds={run.get('rounds', '-')} size={run.get('model_size_mb', 0):.1f}MB "
              f"error={run['workload_error']:.4f} load={run['load_average'][0]:.1f}", flush=True)
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": harness.machine(),
        "runs": runs,
    }
    out, png = harness.outputs(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    plot(runs, png)
    print(f"wrote {out} and {png}")


def plot(runs: list[dict[str, object]], path: Path) -> None:
    plt = harness.pyplot()
    labels = [f"{r['table']}\n{r['mechanism']} ε={r['epsilon']}" for r in runs]
    figure, axes = plt.subplots(1, 3, figsize=(4 + 1.2 * len(runs), 4))
    for axis, key, title in zip(axes, ("cpu_s", "peak_rss_mb", "workload_error"),
                                ("CPU time (s)", "peak RSS (MB)", "mean workload error"), strict=True):
        axis.bar(range(len(runs)), [r[key] for r in runs])
        axis.set_xticks(range(len(runs)), labels, fontsize=7, rotation=60)
        axis.set_title(title)
    harness.save_figure(figure, path)


if __name__ == "__main__":
    main()
