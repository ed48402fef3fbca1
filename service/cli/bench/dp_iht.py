"""``marginalia bench dp-iht``: Sec. 7.2 of Wang & Xu (2019) through the real release path
(:mod:`service.tools.bench.dp_iht`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from service.cli.bench import bench_app
from service.cli.common import JsonFlag, QuietFlag, check_output, emit, handles_errors, stderr, stdout, write_output


def _numbers(text: str, option: str, kind: type) -> tuple:
    from service.tools.bench.regression import BenchError

    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise BenchError(f"{option} must be comma-separated {kind.__name__}s, got {text!r}") from None


@bench_app.command("dp-iht")
@handles_errors
def bench_dp_iht(
    train: Annotated[Path, typer.Option(help="Training CSV (coded 0..size-1), e.g. adult_train.csv.")],
    domain: Annotated[Path, typer.Option(help="private-pgm domain JSON {column: size}.")],
    out: Annotated[Path, typer.Option(help="Write the JSON result here (refused if it exists, unless --force).")],
    plot: Annotated[Path | None, typer.Option(help="Write the three-panel PNG here.")] = None,
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
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out and --plot.", metavar="")] = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Optimality gap of DP-IHT's l0-constrained logistic regression vs p, sparsity and epsilon, on adult's nested
    designs (p = 23, 45, 86, 250), each model a real charged release in a temporary SQLite database."""
    from service.tools.bench import dp_iht as bench

    config = bench.DPIHTBench(
        train=train, domain=domain, target=target, sparsities=_numbers(sparsities, "--sparsities", int),
        epsilons=_numbers(epsilons, "--epsilons", float), sparsity=sparsity, epsilon=epsilon, delta=delta, l2=l2,
        iterations=iterations, trials=trials, max_train=max_train, seed=seed,
        sweeps=tuple(v.strip() for v in sweeps.split(",") if v.strip()), sweep_design=sweep_design)
    check_output(out, force, "--out")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = bench.run_dp_iht_bench(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    write_output(out, "--out", lambda path: path.write_text(json.dumps(result, indent=1, default=str) + "\n"))
    if plot is not None:
        write_output(plot, "--plot", lambda path: bench.plot_dp_iht_bench(result, path))
    emit(as_json, result["summary"], lambda: stdout.print(
        f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False))
