"""``marginalia release marginals | list`` (the only commands that spend budget) and the free answers from a
stored release, ``marginalia marginal`` and ``marginalia synth``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from service.cli.common import (
    DatasetName,
    DryRunFlag,
    JsonFlag,
    ProgressBars,
    QuietFlag,
    SeedOption,
    Typer,
    app,
    check_output,
    check_seed,
    emit,
    emit_plan,
    handles_errors,
    late_interrupt,
    open_engine,
    stderr,
    stdout,
    unsafe_seeds_allowed,
    write_output,
)
from service.cli.options import declared_options
from service.errors import InvalidInput
from service.mechanisms import registry
from service.mechanisms.auto import AUTO
from service.mechanisms.registry import PrivacyNotion, ReleaseKind

#: The registered marginal mechanisms, for the help text (:mod:`service.mechanisms.registry`).
MARGINAL_MECHANISMS = registry.names(ReleaseKind.MARGINALS)
ZCDP_MECHANISMS = [name for name in MARGINAL_MECHANISMS if registry.get(name).notion is PrivacyNotion.ZCDP]

release_app = Typer(help="Make and list releases (the only commands that spend budget).")


@release_app.command("marginals")
@handles_errors
@declared_options({name: registry.get(name).options for name in MARGINAL_MECHANISMS})
def release_marginals(
    name: DatasetName,
    mechanism: Annotated[str, typer.Option(
        help=f"{', '.join(MARGINAL_MECHANISMS)}, or {AUTO} (the default): the zCDP mechanism the benchmark found "
             "best for this workload at this budget, chosen from the domain, the workload and rho only (never the "
             "data; docs/mechanisms.md, 'Which mechanism: auto'); it takes no mechanism options.")] = AUTO,
    workload: Annotated[str, typer.Option(
        help="all-1way, all-2way, all-3way, target:COL or a JSON file.")] = "all-2way",
    epsilon: Annotated[str | None, typer.Option(help="Epsilon to spend.")] = None,
    delta: Annotated[str | None, typer.Option(
        help="Delta (zCDP mechanisms convert (epsilon, delta) to rho).")] = None,
    rho: Annotated[str | None, typer.Option(help=f"zCDP rho to spend ({', '.join(ZCDP_MECHANISMS)}).")] = None,
    seed: SeedOption = None,
    dry_run: DryRunFlag = False,
    target_error: Annotated[float | None, typer.Option(
        help="With --dry-run: solve for the smallest epsilon at which every workload marginal's expected L1 error, "
             "normalised, is at most this (laplace, gaussian, residual: not mst or aim, whose estimate is a "
             "simulation; omit --epsilon and --rho, give --delta for a zCDP mechanism).")] = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
    options: dict[str, object] | None = None,
) -> None:
    """Release a marginal workload under the accountant; prints the release id, its cost and what it cost in the
    budget's own epsilon.

    --dry-run spends and stores nothing: it prints what the release would charge, the budget's epsilon spent before
    -> after (and why the first zCDP release costs more than its epsilon), whether it fits, and the expected error of
    each workload marginal with its basis: a closed form for laplace, gaussian and residual, a simulation on the
    synthetic rows of a stored release for mst and aim (as long as an AIM release for aim), or why none is possible;
    it exits with status 2 when the release would be
    refused, as the release would. Ctrl-C stops a release at the next safe point: the charge is refunded if no noise
    was drawn yet and stands otherwise (an MST or AIM release keeps only the charge of the steps whose noise was drawn
    and is refunded the rest: docs/privacy.md 6.5); the command says which and exits with status 130. The mechanism's
    options (--rounds, --loss...) are its registry declarations (service/mechanisms/catalog.py), each saying which
    mechanisms take it."""
    from service.accounting.accountant import describe_cost
    from service.releases import engine as release_engine

    if target_error is not None and not dry_run:
        raise InvalidInput("--target-error only plans: add --dry-run (then release at the epsilon it prints)",
                           code="invalid_parameter")
    check_seed(seed)
    if dry_run:
        from service.releases import planning

        plan = planning.plan_marginals(open_engine(), name, mechanism, workload, epsilon=epsilon, delta=delta,
                                       rho=rho, options=options, target_error=target_error)
        emit_plan(as_json, plan)
        return
    engine = open_engine()
    with ProgressBars(f"{mechanism} release of {name}", quiet) as bar:
        outcome = release_engine.release_marginals(engine, name, mechanism, workload, epsilon=epsilon, delta=delta,
                                                   rho=rho, seed=seed, options=options, progress=bar)
    late_interrupt(outcome.release_id)
    emit(as_json, {**outcome.to_json(), "status": "complete"}, lambda: stdout.print(
        (f"auto chose {outcome.auto.mechanism}: {outcome.auto.reason}\n" if outcome.auto is not None else "")
        + f"release [bold]{outcome.release_id}[/] ({outcome.mechanism}) complete: charged "
          f"{describe_cost(outcome.cost)}"
        + (f"\n{outcome.budget.describe()}" if outcome.budget is not None else "")
        + ("\n[bold red]seeded[/]: its noise is known to whoever knows the seed; it carries no privacy"
           if outcome.seeded else ""), highlight=False))


@release_app.command("list")
@handles_errors
def release_list(
    name: Annotated[str | None, typer.Argument(help="Only the releases of this dataset.", metavar="[NAME]")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List releases (of one dataset, or all)."""
    from service.releases import answers

    items = answers.list_releases(open_engine(), name)

    def human() -> None:
        table = Table("id", "dataset", "kind", "mechanism", "status", "seeded")
        for r in items:
            table.add_row(str(r.id), r.dataset.name, r.kind, r.mechanism, r.status, "SEEDED" if r.seeded else "")
        stdout.print(table)

    emit(as_json, [r.to_json() for r in items], human)


@app.command()
@handles_errors
def marginal(
    arguments: Annotated[list[str], typer.Argument(
        help="The release id, then the attributes of the marginal in the order wanted (quote names such as "
             "'income>50K'); with --campaign, the attributes only.", metavar="RELEASE ATTRIBUTE...")],
    campaign: Annotated[str | None, typer.Option(
        help="Answer from this marginals campaign's model instead of a release (then give no release id).")] = None,
    codes: Annotated[bool, typer.Option("--codes", help=CODES_HELP, metavar="")] = False,
    bootstrap: Annotated[bool, typer.Option(
        "--bootstrap", metavar="",
        help="Standard errors for a marginal an MST or AIM release (or a campaign) did not measure, from the model's "
             "parametric bootstrap (computed the first time; free).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Answer any marginal from a stored release, or a marginals campaign (free); says what was measured of it, and
    the standard error of its cells with its basis (the measurements, or with --bootstrap the parametric bootstrap of
    the model). A marginal outside what the release measured needs its graphical model: the first such answer fits it
    (shown as progress) and stores it for later ones.

    Cells are named by the labels of the table's spec or domain where it has them (--codes for the codes)."""
    release, attributes = answer_source(arguments, campaign, "ATTRIBUTE")
    if campaign is not None:
        from service.campaigns import marginal_answers

        with ProgressBars(f"graphical model of campaign {campaign}", as_json) as bar:
            answer = marginal_answers.answer_marginal(open_engine(), campaign, attributes, codes=codes,
                                                      bootstrap=bootstrap, allow_seeded=unsafe_seeds_allowed(),
                                                      progress=bar)
    else:
        from service.releases import answers

        with ProgressBars(f"graphical model of release {release}", as_json) as bar:
            answer = answers.answer_marginal(open_engine(), release, attributes, codes=codes,
                                             allow_seeded=unsafe_seeds_allowed(), progress=bar, bootstrap=bootstrap)
    emit(as_json, answer, lambda: _print_marginal(answer))


def answer_source(arguments: list[str], campaign: str | None, what: str) -> tuple[int | None, list[str]]:
    """The release id and the rest of the positional arguments, or (with ``--campaign``) none and all of them."""
    if campaign is not None:
        if what == "ATTRIBUTE" and not arguments:
            raise InvalidInput("give the attributes of the marginal", code="invalid_parameter")
        return None, list(arguments)
    if not arguments:
        raise InvalidInput("give a release id (marginalia release list), or --campaign NAME",
                           code="invalid_parameter")
    try:
        release = int(arguments[0])
    except ValueError:
        raise InvalidInput(f"{arguments[0]!r} is not a release id (a whole number; for a campaign, --campaign NAME)",
                           code="invalid_parameter") from None
    if what == "ATTRIBUTE" and len(arguments) < 2:
        raise InvalidInput("give the attributes of the marginal after the release id", code="invalid_parameter")
    return release, list(arguments[1:])


def answered_by(answer: dict[str, Any]) -> str:
    """Who answered, in words: ``release 3`` or ``campaign 'survey'``."""
    if answer.get("campaign") is not None:
        return f"campaign {answer['campaign']!r}"
    return f"release {answer['release_id']}"


def free_words(answer: dict[str, Any]) -> str:
    """What an answer cost, in words (:func:`free_answer` for a release)."""
    if answer.get("campaign") is not None:
        return (f"cost 0: post-processing of campaign {answer['campaign']!r}'s {answer.get('reports', 0):,} reports, "
                "which their participants' devices randomized")
    return free_answer(answer["release_id"])


MARGINAL_ROWS_SHOWN = 200
CODES_HELP = "Codes, not the labels of the table's spec or domain."


def free_answer(release_id: int) -> str:
    """What an answer from a stored release cost, in words."""
    return f"cost 0: post-processing of release {release_id}, which paid when it was made"


def _print_marginal(answer: dict[str, Any]) -> None:
    """A marginal as a table: one row per cell of the other axes (labels where the table has them)."""
    import numpy as np

    attributes, labels = answer["attributes"], answer["labels"]
    counts = np.asarray(answer["counts"], dtype=float)
    names = [labels.get(a) or [str(code) for code in range(size)] for a, size in zip(attributes, counts.shape,
                                                                                       strict=True)]
    stdout.print(f"marginal {attributes} from {answered_by(answer)} (estimated counts; {free_words(answer)})",
                 highlight=False)
    if counts.ndim == 1:
        table = Table(attributes[0], "count")
        for name, value in zip(names[0], counts, strict=True):
            table.add_row(name, f"{value:,.1f}")
    else:
        table = Table(" × ".join(attributes[:-1]) + f" \\ {attributes[-1]}",
                      *(Column(n, justify="right", no_wrap=True) for n in names[-1]))
        for index in itertools.islice(np.ndindex(*counts.shape[:-1]), MARGINAL_ROWS_SHOWN):
            table.add_row(" × ".join(names[axis][i] for axis, i in enumerate(index)),
                          *(f"{v:,.1f}" for v in counts[index]))
    stdout.print(table)
    rows = int(np.prod(counts.shape[:-1])) if counts.ndim > 1 else counts.shape[0]
    if counts.ndim > 1 and rows > MARGINAL_ROWS_SHOWN:
        stdout.print(f"(the first {MARGINAL_ROWS_SHOWN} of {rows:,} rows; --json gives them all)")
    _print_marginal_errors(answer)
    warning = answer["coverage"]["warning"]
    if warning:
        stderr.print(f"[bold yellow]warning[/]: {warning}", highlight=False)


#: What each ``error_basis`` of a marginal answer means, as the command line prints it.
ERROR_BASIS_WORDS = {
    "measurement": "from the release's measurements: of the unbiased estimate they support, which the counts "
                   "adjust or model",
}


def _print_marginal_errors(answer: dict[str, Any]) -> None:
    """The cells' standard errors (their distinct values when the same for many cells) and their basis."""
    import numpy as np

    errors, basis = answer.get("standard_errors"), answer.get("error_basis", "none")
    if errors is None:
        if not answer["coverage"]["measured"]:
            stdout.print("no standard errors: the release did not measure this marginal (--bootstrap gives them for "
                         "an MST or AIM release)", highlight=False)
        return
    values = np.asarray(errors, dtype=float)
    distinct = np.unique(np.round(values, 6))
    shown = (", ".join(f"{v:,.2f}" for v in distinct) if distinct.size <= 5
             else f"{values.min():,.2f} to {values.max():,.2f}")
    words = ERROR_BASIS_WORDS.get(basis, basis)
    if answer.get("campaign") is not None:
        words = words.replace("the release's", "the campaign's")
    stdout.print(f"standard error of each cell ({words}): {shown}", highlight=False)


@app.command()
@handles_errors
def synth(
    release: Annotated[int | None, typer.Argument(help="Release id (`marginalia release list`); none with "
                                                   "--campaign.", metavar="[RELEASE]")] = None,
    rows: Annotated[int, typer.Option(help="Number of synthetic rows.")] = ...,  # type: ignore[assignment]
    out: Annotated[Path, typer.Option(help="CSV file to write (refused if it exists, unless --force).")] = ...,  # type: ignore[assignment]
    campaign: Annotated[str | None, typer.Option(
        help="Draw from this marginals campaign's model instead of a release.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for a reproducible sample.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.", metavar="")] = False,
    codes: Annotated[bool, typer.Option("--codes", help=CODES_HELP, metavar="")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Draw synthetic rows from a stored release, or a marginals campaign (free), into a CSV file.

    The columns the table's spec or domain labels hold the labels (--codes for the codes)."""
    if (release is None) == (campaign is None):
        raise InvalidInput("give a release id or --campaign NAME (one of them)", code="invalid_parameter")
    from service.releases import answers

    check_output(out, force, "--out")
    if campaign is not None:
        from service.campaigns import marginal_answers

        with ProgressBars(f"graphical model of campaign {campaign}", as_json) as bar:
            frame = marginal_answers.synthetic_frame(open_engine(), campaign, rows, seed, labels=not codes,
                                                     allow_seeded=unsafe_seeds_allowed(), progress=bar)
        answer: dict[str, object] = {"campaign": campaign, "release_id": None}
        source = f"campaign {campaign!r}"
        cost = "cost 0: post-processing of the campaign's reports"
    else:
        with ProgressBars(f"graphical model of release {release}", as_json) as bar:
            frame = answers.synthetic_frame(open_engine(), release, rows, seed, labels=not codes,
                                             allow_seeded=unsafe_seeds_allowed(), progress=bar)
        answer = {"release_id": release}
        source, cost = f"release {release}", free_answer(release)
    write_output(out, "--out", lambda path: frame.to_csv(path, index=False))
    emit(as_json, {**answer, "rows": len(frame), "out": str(out), "cost": answers.FREE.to_json()},
         lambda: stdout.print(f"wrote {len(frame):,} synthetic rows of {source} to {out} ({cost})",
                              highlight=False))
