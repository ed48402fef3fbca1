"""Which marginal mechanism answers all 2-way marginals best (issue 30, point 3): ``gaussian``, ``residual``, ``mst``
and ``aim`` side by side on every shared table at epsilon 0.1, 0.3, 1 and 4 (delta 1e-5), and the mechanism that
``--mechanism auto`` picks (:mod:`service.mechanisms.auto`) against the best of them.

Every mechanism runs as a release runs it: its registry runner with its default options at the rho the release
engine charges for (epsilon, 1e-5) (:meth:`~service.mechanisms.registry.MechanismSpec.cost`), on the table's counts in
memory (``ArrayOracle``: no SQL), seeded (``NoiseSource``, trial ``t`` seed ``harness.trial_seed(0, t)`` for every
mechanism). Each workload marginal is then read the way the service answers it: the non-negative consistent
answers of the measurements for ``gaussian`` and ``residual`` (:class:`service.releases.measured.MeasuredRelease`), the
graphical model's marginal for ``mst`` and ``aim``.

Error (the project's metric, ``measure.workload_error``): the sum over all 2-way marginals of the L1 distance between
the answer and the true counts, divided by N and by the number of marginals. A cell of the table is (table, epsilon):
its best mechanism is the one with the lowest median error over the trials; ``auto``'s ratio is its pick's median
over the best median (the issue's target: at most 1.05 in every cell). Run from the repository root::

    .venv/bin/python -m benchmarks.mechanism_choice                                # everything (hours on 2 cores)
    .venv/bin/python -m benchmarks.mechanism_choice --tables titanic --epsilons 1 --trials 1
    .venv/bin/python -m benchmarks.mechanism_choice --resume                       # skip runs already in the JSON
    .venv/bin/python -m benchmarks.mechanism_choice --trials 1 --json a.json &     # two processes, then merge:
    .venv/bin/python -m benchmarks.mechanism_choice --first-trial 1 --trials 2 --json b.json
    .venv/bin/python -m benchmarks.mechanism_choice --merge a.json b.json
    .venv/bin/python -m benchmarks.mechanism_choice --replot                       # summary and plot again

Writes ``benchmarks/results/mechanism_choice.json`` (every run, after each one, so an interrupted run keeps what it
measured; the summary; the machine) and ``mechanism_choice.png`` (each mechanism's median over the cell's best).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.harness import machine
from benchmarks.measure import TABLES, load_domain, load_oracle, two_way_pairs, workload_error

MECHANISMS = ("gaussian", "residual", "mst", "aim")
#: Variants measured beside the four (``--mechanisms residual-floor``): a mechanism with non-default options, which
#: ``auto`` may choose too. Not one of the four the target compares with.
VARIANTS = {"residual-floor": ("residual", {"loss": "max_var_floor"})}
EPSILONS = (0.1, 0.3, 1.0, 4.0)
DELTA = 1e-5
KEY = ("table", "epsilon", "mechanism", "trial")
RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "mechanism_choice.json"


def run_one(oracle, table: str, epsilon: float, mechanism: str, trial: int) -> dict[str, object]:  # noqa: ANN001
    """One release of ``table``'s all-2-way workload by ``mechanism`` (defaults), seeded, and its error."""
    from estimators.graphical import mbi_adapter
    from service.mechanisms import registry
    from service.mechanisms.registry import RunRequest
    from service.privacy.noise import NoiseSource
    from service.releases.engine import checked_runner
    from service.releases.measured import MeasuredRelease
    from workloads.marginals import parse_workload

    name, options = VARIANTS.get(mechanism, (mechanism, {}))
    spec = registry.get(name)
    queries = parse_workload("all-2way", oracle.domain)
    cost = spec.cost(epsilon, DELTA, None)
    request = RunRequest(cost, options, queries=queries if spec.uses_workload else (), epsilon=epsilon, delta=DELTA)
    started = time.perf_counter()
    result = checked_runner(spec, request)(oracle, NoiseSource(harness.trial_seed(0, trial)), lambda *_: None)
    seconds = time.perf_counter() - started
    if result.payload.model is None:
        measured = MeasuredRelease(result.payload.residuals)
        answer = lambda pair: measured.answer(pair)[0]  # noqa: E731
    else:
        answer = lambda pair: mbi_adapter.marginal(result.payload.model, pair)  # noqa: E731
    pairs = two_way_pairs(oracle)
    return {"table": table, "epsilon": epsilon, "mechanism": mechanism, "trial": trial, "rho": float(cost.rho),
            "rows": oracle.rows, "attributes": len(oracle.domain), "pairs": len(pairs),
            "error": workload_error(answer, oracle, pairs), "seconds": seconds}


def auto_pick(table: str, epsilon: float) -> tuple[str, dict[str, object]]:
    """The mechanism and options ``--mechanism auto`` picks for ``table``'s all-2-way workload at ``epsilon`` (public
    inputs only)."""
    from service.mechanisms import auto, registry
    from workloads.marginals import parse_workload

    domain = load_domain(table)
    rho = registry.zcdp_cost(auto.AUTO, epsilon, DELTA, None).rho
    choice = auto.choose(domain, parse_workload("all-2way", domain), rho)
    return choice.mechanism, dict(choice.options)


def summarize(runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per (table, epsilon): every mechanism's median error, the best, auto's pick and its ratio to the best."""
    cells: dict[tuple[str, float], dict[str, list[float]]] = {}
    for run in runs:
        cells.setdefault((str(run["table"]), float(run["epsilon"])), {}).setdefault(
            str(run["mechanism"]), []).append(float(run["error"]))
    rows = []
    for (table, epsilon), by_mechanism in sorted(cells.items()):
        medians = {m: statistics.median(v) for m, v in by_mechanism.items()}
        compared = [m for m in medians if m in MECHANISMS]
        if not compared:  # a run of variants only: nothing to compare with yet (merge it with the four's)
            continue
        best = min(compared, key=medians.get)
        row: dict[str, object] = {"table": table, "epsilon": epsilon, "medians": medians,
                                  "trials": {m: len(v) for m, v in by_mechanism.items()}, "best": best,
                                  "complete": set(MECHANISMS) <= set(medians)}
        choice = auto_pick(table, epsilon)
        pick = choice[0] if not choice[1] else next(
            (v for v, (name, options) in VARIANTS.items() if (name, options) == choice), None)
        row["auto"] = pick
        row["auto_ratio"] = medians[pick] / medians[best] if pick in medians else None
        rows.append(row)
    return rows


def plot(summary: list[dict[str, object]], path: Path) -> None:
    plt = harness.pyplot()
    labels = [f"{r['table']} {r['epsilon']:g}" for r in summary]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(labels)), 4.5))
    for i, mechanism in enumerate((*MECHANISMS, *VARIANTS)):
        ratios = [r["medians"].get(mechanism, float("nan")) / r["medians"][r["best"]] for r in summary]
        ax.scatter(range(len(labels)), ratios, label=mechanism, marker="os^Dv"[i], s=22)
    auto_ratios = [r["auto_ratio"] if r["auto_ratio"] is not None else float("nan") for r in summary]
    ax.scatter(range(len(labels)), auto_ratios, label="auto's pick", marker="x", color="black", s=40)
    ax.axhline(1.05, color="grey", linestyle=":", label="target 1.05")
    ax.set_xticks(range(len(labels)), labels, rotation=70, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("median error / best median")
    ax.set_title("all 2-way marginals, mean L1 / N (lower is better; 1 = best of the four)")
    harness.finish_axes(ax, 7)
    harness.save_figure(fig, path)


def write(runs: list[dict[str, object]], command: str, out: Path, *, final: bool = True) -> list[dict[str, object]]:
    """The JSON: every run, and (``final``) the summary with auto's picks as the rule now makes them."""
    summary = summarize(runs) if final else []
    harness.write_json(out, {"command": command, "machine": machine(), "delta": DELTA, "summary": summary,
                             "runs": runs})
    return summary


def print_summary(summary: list[dict[str, object]]) -> None:
    rows = []
    for r in summary:
        medians = r["medians"]
        cells = [f"{medians[m]:.4f}" if m in medians else "-" for m in (*MECHANISMS, *VARIANTS)]
        ratio = "-" if r["auto_ratio"] is None else f"{r['auto_ratio']:.3f}"
        rows.append([r["table"], f"{r['epsilon']:g}", *cells, r["best"], r["auto"] or "-", ratio])
    harness.summary_table("median error over trials (mean L1 / N, all 2-way)",
                          ["table", "epsilon", *MECHANISMS, *VARIANTS, "best", "auto", "auto / best"], rows)


def markdown(summary: list[dict[str, object]]) -> str:
    """The summary as the table of docs/mechanisms.md ("Which mechanism: auto"): medians, the best in bold, auto's
    pick and its ratio to the best."""
    columns = [m for m in (*MECHANISMS, *VARIANTS) if any(m in r["medians"] for r in summary)]
    lines = ["| table | epsilon | " + " | ".join(columns) + " | auto picks | auto / best |",
             "|---|---|" + "---|" * len(columns) + "---|---|"]
    for r in summary:
        medians = r["medians"]
        cells = [("-" if m not in medians else f"**{medians[m]:.4f}**" if m == r["best"] else f"{medians[m]:.4f}")
                 for m in columns]
        ratio = "-" if r["auto_ratio"] is None else f"{r['auto_ratio']:.3f}"
        lines.append(f"| {r['table']} | {r['epsilon']:g} | " + " | ".join(cells) + f" | {r['auto']} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", nargs="+", default=sorted(TABLES), choices=sorted(TABLES))
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=[*MECHANISMS, *VARIANTS])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--first-trial", type=int, default=0,
                        help="run trials FIRST_TRIAL .. TRIALS-1 only (to split a run between processes)")
    parser.add_argument("--json", type=Path, default=OUT)
    parser.add_argument("--plot", type=Path, help="the plot (default: the JSON's path with .png)")
    parser.add_argument("--resume", action="store_true", help="skip runs already in the JSON")
    parser.add_argument("--merge", nargs="+", type=Path, help="combine these JSON files into --json")
    parser.add_argument("--replot", action="store_true", help="summary and plot of the JSON again, no runs")
    parser.add_argument("--markdown", action="store_true", help="print the summary as docs/mechanisms.md's table")
    args = parser.parse_args()
    command = "python -m benchmarks.mechanism_choice " + " ".join(sys.argv[1:])
    if args.merge:
        runs = {tuple(r[k] for k in KEY): r for f in args.merge for r in json.loads(f.read_text())["runs"]}
        summary = write(list(runs.values()), command, args.json)
    elif args.replot:
        saved = json.loads(args.json.read_text())
        summary = write(saved["runs"], saved["command"], args.json)
    else:
        runs = json.loads(args.json.read_text())["runs"] if args.resume and args.json.exists() else []
        done = {tuple(r[k] for k in KEY) for r in runs}
        for table in args.tables:
            oracle = load_oracle(table)
            for epsilon in args.epsilons:
                for mechanism in args.mechanisms:
                    for trial in range(args.first_trial, args.trials):
                        if (table, epsilon, mechanism, trial) in done:
                            continue
                        run = run_one(oracle, table, epsilon, mechanism, trial)
                        print(f"{table} eps {epsilon:g} {mechanism} trial {trial}: {run['error']:.4f} "
                              f"in {run['seconds']:.1f} s", file=sys.stderr, flush=True)
                        runs.append(run)
                        write(runs, command, args.json, final=False)
        summary = write(runs, command, args.json)
    if args.markdown:
        print(markdown(summary))
    else:
        print_summary(summary)
    plot(summary, args.plot or args.json.with_suffix(".png"))


if __name__ == "__main__":
    main()
