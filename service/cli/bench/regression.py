"""``marginalia bench regression``: the regression protocol of Ferrando & Sheldon (2024) through the real release
path (:mod:`service.tools.bench.regression`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from service.cli.bench import bench_app
from service.cli.common import (
    JsonFlag,
    QuietFlag,
    check_output,
    column_list,
    emit,
    handles_errors,
    stderr,
    stdout,
    write_output,
)


@bench_app.command("regression")
@handles_errors
def bench_regression(
    train: Annotated[Path, typer.Option(help="Training CSV (coded 0..size-1).")],
    test: Annotated[Path, typer.Option(help="Test CSV (coded the same way).")],
    domain: Annotated[Path, typer.Option(help="private-pgm domain JSON {column: size}.")],
    target: Annotated[str, typer.Option(help="Target column.")],
    task: Annotated[str, typer.Option(help="linear or logistic.")],
    out: Annotated[Path, typer.Option(
        help="Write the JSON result to this file (refused if it exists, unless --force).")],
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
    plot: Annotated[Path | None, typer.Option(help="Write a PNG plot of metric vs epsilon here.")] = None,
    mechanism: Annotated[str, typer.Option(
        help="Marginal mechanism for dd-ssp / aim-synth; auto: the service's rule, as fit without --mechanism.")
    ] = "auto",
    aim_rounds: Annotated[int | None, typer.Option(help="AIM's planned rounds (default: AIM's rule).")] = None,
    max_model_size: Annotated[float | None, typer.Option(help="Largest graphical model in MB.")] = None,
    marginal_trials: Annotated[int | None, typer.Option(help="Fewer trials for the AIM-based methods.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out and --plot if they exist.",
                                        metavar="")] = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the regression protocol of Ferrando & Sheldon (2024) through the real release path on a temporary SQLite
    database."""
    from service.tools.bench import regression as bench

    try:
        eps = tuple(float(e) for e in epsilons.split(",") if e.strip())
    except ValueError:
        raise bench.BenchError(f"epsilons must be comma-separated numbers, got {epsilons!r}") from None
    options: dict[str, object] = {}
    if aim_rounds is not None:
        options["rounds"] = aim_rounds
    if max_model_size is not None:
        options["max_model_size"] = max_model_size
    config = bench.RegressionBench(
        train=train, test=test, domain=domain, target=target, task=task,
        features=tuple(column_list(features)) if features is not None else None,
        categorical=tuple(column_list(categorical) or ()),
        methods=tuple(column_list(methods) or ()) if methods is not None else bench.BENCH_METHODS,
        epsilons=eps, delta=delta, trials=trials, max_train=max_train, seed=seed, intercept=intercept,
        mechanism=mechanism, marginal_options=options, marginal_trials=marginal_trials,
    )
    check_output(out, force, "--out")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = bench.run_regression_bench(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    write_output(out, "--out", lambda path: path.write_text(json.dumps(result, indent=1, default=str) + "\n"))
    if plot is not None:
        write_output(plot, "--plot", lambda path: bench.plot_regression_bench(result, path))
    emit(as_json, result, lambda: stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""),
                                                highlight=False))
