"""``marginalia fit`` (a private regression), ``marginalia bench regression`` (its benchmark) and ``marginalia bench
sparse`` (Sec. 7.1 of Wang & Xu 2019 through the collections path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import (
    JsonFlag,
    ProgressBars,
    QuietFlag,
    SeedOption,
    Typer,
    app,
    check_output,
    check_seed,
    column_list,
    emit,
    handles_errors,
    late_interrupt,
    open_engine,
    stderr,
    stdout,
    unsafe_seeds_allowed,
    write_output,
)

bench_app = Typer(help="Benchmarks on temporary databases (yours is never touched).")


@app.command()
@handles_errors
def fit(
    task: Annotated[str, typer.Argument(help="linear or logistic.", metavar="TASK")],
    name: Annotated[str, typer.Argument(help="Dataset to regress on.", metavar="NAME")],
    target: Annotated[str, typer.Option(help="Target column.")],
    method: Annotated[str, typer.Option(
        help="dd-ssp, adassp (linear), objpert (logistic), aim-synth or dp-iht.")] = "dd-ssp",
    features: Annotated[str | None, typer.Option(help="Comma-separated feature columns (default: all others).")] = None,
    categorical: Annotated[str | None, typer.Option(
        help="Comma-separated features to one-hot encode (default: the dataset's categorical columns).")] = None,
    epsilon: Annotated[str | None, typer.Option(help="Epsilon a new release may spend.")] = None,
    delta: Annotated[str | None, typer.Option(help="Delta a new release may spend.")] = None,
    release: Annotated[int | None, typer.Option(help="Answer from this release (free).")] = None,
    intercept: Annotated[bool, typer.Option("--intercept/--no-intercept", help="Fit an intercept.",
                                            metavar="")] = True,
    seed: SeedOption = None,
    mechanism: Annotated[str | None, typer.Option(
        help="Marginal mechanism of a new dd-ssp/aim-synth release (default: a rule on public quantities, "
             "docs/mechanisms.md); a reused release keeps its own.")
    ] = None,
    allow_unmeasured: Annotated[bool, typer.Option(
        "--allow-unmeasured", metavar="",
        help="Let a release that did not measure every column and pair of the regression answer (they are then "
             "the model's extrapolation).")] = False,
    sparsity: Annotated[int | None, typer.Option(
        help="dp-iht: the number of non-zero coefficients to keep (the intercept counts). Required for dp-iht.")
    ] = None,
    iterations: Annotated[int | None, typer.Option(help="dp-iht: iterations T (default 50).")] = None,
    step: Annotated[float | None, typer.Option(
        help="dp-iht: step size eta (default 1/L, L the design's public smoothness bound).")] = None,
    clip_norm: Annotated[float | None, typer.Option(
        help="dp-iht: per-example gradient clip G (default: ||x|| bound B, logistic; 2B, linear).")] = None,
    l2: Annotated[float | None, typer.Option(help="dp-iht: l2 penalty (l2/2)||theta||^2 (default 0).")] = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Fit a private linear or logistic regression from a release (reused for free when one can answer).

    dp-iht (a sparse model by noisy iterative hard thresholding, Wang & Xu 2019) takes --sparsity and optionally
    --iterations, --step, --clip-norm and --l2; the same request later is answered by the stored model, free."""
    from service.accounting.accountant import describe_cost
    from service.regression.design import RegressionInputError
    from service.regression.fit import fit as fit_regression

    check_seed(seed)
    settings = {key: value for key, value in (("sparsity", sparsity), ("iterations", iterations), ("step", step),
                                              ("clip_norm", clip_norm), ("l2", l2)) if value is not None}
    if settings and method != "dp-iht":
        raise RegressionInputError(f"--{'/--'.join(k.replace('_', '-') for k in settings)} apply to --method dp-iht "
                                   f"only, not {method}")
    engine = open_engine()
    with ProgressBars(f"{method} {task} regression of {name}", quiet or as_json) as bar:
        outcome = fit_regression(engine, name, task, target, column_list(features), column_list(categorical),
                                 method, epsilon, delta, release, intercept, seed, mechanism=mechanism, progress=bar,
                                 options=settings or None,
                                 allow_unmeasured=allow_unmeasured, allow_seeded=unsafe_seeds_allowed())
    if not outcome.reused:
        late_interrupt(outcome.release_id)
    payload = outcome.to_json()

    def human() -> None:
        spent = "nothing (a stored release answered)" if outcome.cost.is_zero else describe_cost(outcome.cost)
        stdout.print(f"{method} {task} regression of [bold]{target}[/] answered by release "
                     f"[bold]{outcome.release_id}[/] ({outcome.release_mechanism}); this call spent {spent}",
                     highlight=False)
        if outcome.budget is not None:
            stdout.print(outcome.budget.describe(), highlight=False)
        table = Table("column", "coefficient", title="coefficients (target on its encoded scale)")
        for column, value in outcome.coefficients.items():
            table.add_row(column, f"{value:.6g}")
        stdout.print(table)
        for note in outcome.notes:
            stderr.print(f"note: {note}", highlight=False)

    emit(as_json, payload, human)


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
    from service.tools import bench

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


def _numbers(text: str, option: str, kind: type) -> tuple:
    from service.tools.sparse_bench import SparseBenchError

    try:
        return tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SparseBenchError(f"{option} must be comma-separated {kind.__name__}s, got {text!r}") from None


@bench_app.command("sparse")
@handles_errors
def bench_sparse(
    out: Annotated[Path, typer.Option("--json", help="Write the JSON records here (refused if it exists, unless "
                                                     "--force).")],
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
    plot: Annotated[Path | None, typer.Option(help="Write a PNG plot of relative error vs n here.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --json and --plot if they exist.",
                                        metavar="")] = False,
    quiet: QuietFlag = False,
) -> None:
    """Sec. 7.1 of Wang & Xu (2019): sparse linear regression under local DP through the real collections path
    (campaigns on a temporary SQLite database, the simulator, campaign fit)."""
    from service.tools import sparse_bench

    config = sparse_bench.SparseBench(
        methods=tuple(column_list(method) or ()), ps=_numbers(p, "--p", int), ns=_numbers(n, "--n", int),
        sparsity=s, epsilons=_numbers(epsilon, "--epsilon", float), delta=delta, trials=trials, seed=seed, eta=eta)
    sparse_bench.check_config(config)
    check_output(out, force, "--json")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = sparse_bench.run_sparse_bench(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    write_output(out, "--json", lambda path: path.write_text(json.dumps(result, indent=1) + "\n"))
    if plot is not None:
        write_output(plot, "--plot", lambda path: sparse_bench.plot_sparse_bench(result, path))
    table = Table("method", "p", "n", "epsilon", "trials", "relative error (mean)", "seconds (mean)",
                  title="relative error ||theta - theta*|| / ||theta*||")
    for row in result["summary"]:
        table.add_row(row["method"], str(row["p"]), str(row["n"]), f"{row['epsilon']:g}", str(row["trials"]),
                      f"{row['relative_error_mean']:.3f}", f"{row['seconds_mean']:.1f}")
    stdout.print(table)
    stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False)
