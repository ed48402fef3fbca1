"""``marginalia fit``: a private regression (linear or logistic) from a release, reused when one answers it, or made
and charged when none does."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import (
    DryRunFlag,
    JsonFlag,
    ProgressBars,
    QuietFlag,
    SeedOption,
    app,
    check_seed,
    column_list,
    emit,
    emit_plan,
    handles_errors,
    late_interrupt,
    open_engine,
    stderr,
    stdout,
    unsafe_seeds_allowed,
)
from service.cli.options import declared_options
from service.regression import methods
from service.regression.choice import AUTO_METHOD

#: ``--method auto`` in the help (docs/regression-results.md, "method auto").
AUTO_HELP = f"{AUTO_METHOD} (chosen from the design and epsilon only)"


@app.command()
@handles_errors
@declared_options({spec.name: spec.options for spec in methods.specs()})
def fit(
    task: Annotated[str, typer.Argument(help="linear or logistic.", metavar="TASK")],
    name: Annotated[str, typer.Argument(help="Dataset to regress on.", metavar="NAME")],
    target: Annotated[str, typer.Option(help="Target column.")],
    method: Annotated[str, typer.Option(help=f"{methods.describe_choices(AUTO_HELP)}.")] = "dd-ssp",
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
    dry_run: DryRunFlag = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
    options: dict[str, object] | None = None,
) -> None:
    """Fit a private linear or logistic regression from a release (reused for free when one can answer).

    --dry-run spends and stores nothing: it says which stored release would answer (free), or what the new release
    would charge, the budget's epsilon spent before -> after and whether it fits (status 2 when it would be refused).

    dp-iht (a sparse model by noisy iterative hard thresholding, Wang & Xu 2019) takes --sparsity and optionally
    --iterations, --step, --clip-norm and --l2 (the method's declared settings, service/regression/methods.py); the
    same request later is answered by the stored model, free."""
    from service.accounting.accountant import describe_cost
    from service.regression.design import RegressionInputError
    from service.regression.fit import fit as fit_regression

    check_seed(seed)
    settings = dict(options or {})
    wrong, takers = methods.misplaced(method, settings)
    if wrong:
        raise RegressionInputError(f"--{'/--'.join(k.replace('_', '-') for k in wrong)} apply to --method "
                                   f"{' or '.join(takers)} only, not {method}")
    engine = open_engine()
    if dry_run:
        from service.regression.fit import plan_fit

        plan = plan_fit(engine, name, task, target, column_list(features), column_list(categorical), method, epsilon,
                        delta, release, intercept, mechanism=mechanism, options=settings or None,
                        allow_unmeasured=allow_unmeasured, allow_seeded=unsafe_seeds_allowed())
        emit_plan(as_json, plan)
        return
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
        if outcome.auto is not None:
            stdout.print(f"auto chose {outcome.method}: {outcome.auto.reason}", highlight=False)
        stdout.print(f"{outcome.method} {task} regression of [bold]{target}[/] answered by release "
                     f"[bold]{outcome.release_id}[/] ({outcome.release_mechanism}); this call spent {spent}",
                     highlight=False)
        if outcome.budget is not None:
            stdout.print(outcome.budget.describe(), highlight=False)
        per_code = outcome.coefficients_per_code
        errors, intervals = payload.get("standard_errors") or {}, payload.get("confidence_intervals") or {}
        table = Table("column", "encoded", *(("std. error", "95 % interval") if errors else ()), "per code",
                      title="coefficients: on the encoded scale (columns and a linear target in [-1, 1]) and per "
                      "code of each column (a linear target in its codes)")
        encoded = outcome.coefficients
        for column, value in per_code.items():  # without an intercept, the codes' reading still has one
            bars = ((f"{errors[column]:.3g}", "[{:.4g}, {:.4g}]".format(*intervals[column])) if column in errors
                    else ("-", "-")) if errors else ()
            table.add_row(column, f"{encoded[column]:.6g}" if column in encoded else "-", *bars, f"{value:.6g}")
        stdout.print(table)
        if errors:
            stdout.print(f"standard errors (encoded scale): {payload['error_basis']}", highlight=False)
        for note in outcome.notes:
            stderr.print(f"note: {note}", highlight=False)

    emit(as_json, payload, human)
