"""``marginalia public ...`` (public tables), ``marginalia campaign ...`` (local-DP campaigns, their fits and the
per-participant cap) and ``marginalia simulate`` (simulated participants through the real submission path).

Everything runs in process on the database of ``MARGINALIA_DATABASE_URL``, as a steward's tool; participants report
through the HTTP API (``service.client``).

``campaign create`` and ``campaign plan`` take the same protocol options, by construction: one decorator,
:data:`protocol_flags`, adds a ``--name`` flag per option the protocols declare
(:func:`service.campaigns.protocols.base.protocol_options`, through :func:`service.cli.options.declared_options`), and
``--option KEY=VALUE`` gives any of them. ``--participants N`` is the declared option on both: the campaign's planned
participants, at which ``campaign plan`` predicts the error. Reading the declarations loads no estimator
(:mod:`service.campaigns.protocols.catalog`), so ``marginalia --help`` stays quick.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from service.campaigns.protocols.base import protocol_options
from service.cli.common import (
    JsonFlag,
    ProgressBars,
    QuietFlag,
    SeedOption,
    Typer,
    app,
    check_seed,
    column_list,
    emit,
    handles_errors,
    open_engine,
    stderr,
    stdout,
    unsafe_seeds_allowed,
)
from service.cli.options import declared_options
from workloads.local.protocols import PROTOCOLS

public_app = Typer(help="Public tables: unlabeled rows declared public (no budget, readable by analysts).")
campaign_app = Typer(help="Local-DP campaigns: create, list, show, close, fit, the per-participant cap.")
Name = Annotated[str, typer.Argument(help="Name.", metavar="NAME")]
#: The protocols a campaign may run, from their registry (docs/campaigns.md says what each one is).
PROTOCOL_HELP = "One of: " + ", ".join(sorted(PROTOCOLS)) + "."
#: the protocol options as flags, for campaign create and campaign plan alike
protocol_flags = declared_options(protocol_options())
OPTION_HELP = "A protocol option KEY=VALUE (any declared option, as its flag gives it); repeatable."


def _option_value(text: str) -> Any:
    """An ``--option`` value as the JSON value the API would carry: a number (``1000``, ``0.5``, ``1e-3``) or a
    boolean (``true``, ``false``) when the text is one in JSON, else the text itself (``l2``, ``a=0:10;b=-1:1``)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, bool | int | float) else text


def _options(pairs: list[str] | None, named: dict[str, Any]) -> dict[str, Any]:
    """``--option KEY=VALUE`` pairs and the named protocol options given, as one mapping (named ones win)."""
    from service.errors import InvalidInput

    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise InvalidInput(f"--option must read KEY=VALUE, got {pair!r}", code="invalid_parameter")
        key, value = pair.split("=", 1)
        out[key.strip()] = _option_value(value.strip())
    out.update({k: v for k, v in named.items() if v is not None})
    return out


@public_app.command("load")
@handles_errors
def public_load(
    name: Name,
    csv: Annotated[Path, typer.Option(help="The table (header line, one row per line).")],
    domain: Annotated[Path | None, typer.Option(help="Coded columns: a domain JSON {column: size}.")] = None,
    bins: Annotated[Path | None, typer.Option(help="Coded columns: a public binning spec (YAML/JSON).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Register a public table: numeric columns as they are, coded ones through --domain or --bins."""
    from service.campaigns import public_tables

    info = public_tables.load_public_csv(open_engine(), name, csv, domain, bins)
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"public table [bold]{info.name}[/]: {info.rows:,} rows, columns {', '.join(info.column_names)}",
        highlight=False))


@public_app.command("list")
@handles_errors
def public_list(as_json: JsonFlag = False) -> None:
    """List public tables."""
    from service.campaigns import public_tables

    items = public_tables.list_public_tables(open_engine())

    def human() -> None:
        table = Table("name", "rows", "columns")
        for t in items:
            table.add_row(t.name, f"{t.rows:,}", ", ".join(t.column_names))
        stdout.print(table)

    emit(as_json, [t.to_json() for t in items], human)


@public_app.command("show")
@handles_errors
def public_show(name: Name, rows: Annotated[int, typer.Option(help="Rows to show.")] = 10,
                as_json: JsonFlag = False) -> None:
    """A public table's columns and its first rows (they are public)."""
    from service.campaigns import public_tables

    info, values = public_tables.public_rows(open_engine(), name, 0, rows)
    page = public_tables.rows_json(info, values, 0)

    def human() -> None:
        table = Table(*info.column_names, title=f"{info.name}: {info.rows:,} rows ({info.source})")
        for row in page["rows"]:
            table.add_row(*(f"{v:g}" if isinstance(v, float) else str(v) for v in row))
        stdout.print(table)

    emit(as_json, {**info.to_json(), "first_rows": page["rows"]}, human)


@campaign_app.command("create")
@handles_errors
@protocol_flags
def campaign_create(
    name: Name,
    protocol: Annotated[str, typer.Option(help=PROTOCOL_HELP)],
    features: Annotated[str, typer.Option(help="Comma-separated feature names, in the participants' order.")],
    epsilon: Annotated[float, typer.Option(help="What one participant spends over the whole campaign.")],
    target: Annotated[str | None, typer.Option(help="The label participants hold (GLM protocols).")] = None,
    public: Annotated[str | None, typer.Option(help="A public table holding the features.")] = None,
    delta: Annotated[float, typer.Option(help="Local delta per participant (0 for ldp-avg).")] = 0.0,
    option: Annotated[list[str] | None, typer.Option(help=OPTION_HELP)] = None,
    as_json: JsonFlag = False,
    options: dict[str, Any] | None = None,
) -> None:
    """Create a campaign: everything is validated before anything is stored."""
    from service.campaigns import campaigns

    info = campaigns.create_campaign(open_engine(), name, protocol, features, target, public, epsilon, delta,
                                     _options(option, options or {}), "cli")
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"campaign [bold]{info.name}[/] ({info.protocol}): {len(info.rounds)} round(s), each participant spends "
        f"at most epsilon {info.epsilon:g}, delta {info.delta:g}; round 0 is open", highlight=False))


@campaign_app.command("plan")
@handles_errors
@protocol_flags
def campaign_plan(
    protocol: Annotated[str, typer.Option(help=PROTOCOL_HELP)],
    features: Annotated[str, typer.Option(help="Comma-separated feature names, in the participants' order.")],
    epsilon: Annotated[float, typer.Option(help="What one participant would spend over the whole campaign.")],
    target: Annotated[str | None, typer.Option(help="The label participants hold.")] = None,
    public: Annotated[str | None, typer.Option(help="A public table holding the features (and the target, for "
                                                    "relative errors and an AUC range).")] = None,
    delta: Annotated[float, typer.Option(help="Local delta per participant.")] = 0.0,
    target_error: Annotated[float | None, typer.Option(help="Predict the participants needed for this relative "
                                                            "error (absolute without reference coefficients).")] = None,
    option: Annotated[list[str] | None, typer.Option(help=OPTION_HELP)] = None,
    as_json: JsonFlag = False,
    options: dict[str, Any] | None = None,
) -> None:
    """Predict a campaign's error before any report, spending nothing: at --participants N (the campaign's planned
    participants), or the N for --target-error (docs/campaigns.md, "Planning a campaign")."""
    from service.campaigns.planning import plan_campaign

    plan = plan_campaign(open_engine(), protocol, features, target, public, epsilon, delta,
                         _options(option, options or {}), target_error=target_error)

    def say(text: str) -> None:
        stdout.print(text, highlight=False, markup=False)  # the metric's formulas carry brackets

    def human() -> None:
        at = "" if plan.participants is None else f", {plan.participants:,} participants"
        say(f"{plan.protocol} at epsilon {plan.epsilon:g}, delta {plan.delta:g}{at} (a prediction: nothing spent)")
        if plan.auc is not None:  # what a steward acts on first: how well the fit will rank
            say(f"AUC on the public rows: {plan.auc['mean']:.3f} (90 % range {plan.auc['low']:.3f} to "
                f"{plan.auc['high']:.3f}; without noise {plan.auc['reference']:.3f})")
        elif plan.auc_note is not None and plan.target is not None:
            say(plan.auc_note)
        if plan.marginal_errors is not None:
            say(f"expected {plan.metric}: {plan.expected_error:.3g}")
            say("per attribute set (the model; each set on its own): " + ", ".join(
                f"{name} {error:.3g} ({plan.raw_errors[name]:.3g})" for name, error in plan.marginal_errors.items()))
        elif plan.participants is not None:
            relative = ("" if plan.expected_relative_error is None else
                        f"; relative to the reference's norm {plan.expected_relative_error:.3g}")
            say(f"expected error of {plan.metric}: {plan.expected_error:.3g} absolute (sqrt(E ||estimate - "
                f"reference||^2)){relative}")
        if plan.standard_errors:
            say("standard errors per coefficient, in the features' own units (as the fit reports them): " + ", ".join(
                f"{name} {error:.3g}" for name, error in plan.standard_errors.items()))
        say(f"reference: {plan.reference}")
        if plan.target_error is not None:
            needed = ("not reached at any n" if plan.participants_needed is None
                      else f"about {plan.participants_needed:,} participants")
            kind = "relative" if plan.relative_target else "absolute"
            say(f"for a {kind} error of {plan.target_error:g}: {needed}")
        for note in plan.notes:
            say(f"- {note}")

    emit(as_json, plan.to_json(), human)


@campaign_app.command("list")
@handles_errors
def campaign_list(as_json: JsonFlag = False) -> None:
    """List campaigns."""
    from service.campaigns import campaigns

    items = campaigns.list_campaigns(open_engine())

    def human() -> None:
        table = Table("name", "protocol", "status", "rounds", "reports", "epsilon", "delta")
        for c in items:
            table.add_row(c.name, c.protocol, c.status, "/".join(r.status for r in c.rounds),
                          f"{sum(r.reports for r in c.rounds):,}", f"{c.epsilon:g}", f"{c.delta:g}")
        stdout.print(table)

    emit(as_json, [c.to_json() for c in items], human)


@campaign_app.command("show")
@handles_errors
def campaign_show(name: Name, as_json: JsonFlag = False) -> None:
    """A campaign: its spec, rounds, counts and published states."""
    from service.campaigns import campaigns

    info = campaigns.get_campaign(open_engine(), name)

    def human() -> None:
        stdout.print(f"[bold]{info.name}[/] ({info.protocol}, {info.status}): features "
                     f"{', '.join(info.features)}" + (f", target {info.target}" if info.target else "")
                     + (f", public table {info.public_table}" if info.public_table else ""), highlight=False)
        table = Table("round", "group", "epsilon", "delta", "status", "reports", "planned")
        for r in info.rounds:
            table.add_row(str(r.index), r.group, f"{r.epsilon:g}", f"{r.delta:g}", r.status, f"{r.reports:,}",
                          "" if r.expected is None else f"{r.expected:,}")
        stdout.print(table)

    emit(as_json, info.to_json(), human)


@campaign_app.command("close")
@handles_errors
def campaign_close(
    name: Name,
    round_index: Annotated[int | None, typer.Option("--round", help="Close only this round (the open one); "
                                                    "the next opens with its public state.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Close a campaign (no more reports), or only its open round. Idempotent."""
    from service.campaigns import campaigns

    engine = open_engine()
    info = (campaigns.close_campaign(engine, name) if round_index is None
            else campaigns.close_round(engine, name, round_index))
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"campaign {info.name}: {info.status}; rounds {', '.join(f'{r.index} {r.status}' for r in info.rounds)}",
        highlight=False))


@campaign_app.command("fit")
@handles_errors
def campaign_fit(
    name: Name,
    model: Annotated[str, typer.Option(help="linear, logistic, probit, poisson, cubic, sigmoid, boosting, "
                                            "logistic-loss (GLM campaigns; linear also bernstein, dr-erm, "
                                            "linear-ssp), mean (ldp-avg), iht (ldp-iht, "
                                            "label-ldp), lasso or lasso-raw (label-ldp).")],
    covariance: Annotated[str | None, typer.Option(help="pooled, private or public (X^T X's source).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse a noise-dominated fit (error noise_dominated) "
                                                          "instead of answering it with a warning.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """A model from the campaign's stored aggregates, with standard errors and a signal-to-noise verdict (a warning on
    stderr when the noise dominates or the fit is weak): post-processing, free."""
    from service.campaigns import campaigns, estimates

    engine = open_engine()
    if not unsafe_seeds_allowed():
        campaigns.get_campaign(engine, name).refuse_if_seeded()
    fit = estimates.fit_campaign(engine, name, model, covariance, strict)
    if fit.quality is not None and fit.quality.warns:
        stderr.print(f"[bold yellow]warning[/]: {estimates.warning_text(fit.quality)}", highlight=False)

    def human() -> None:
        bound = fit.influence.per_report if fit.influence is not None else None
        caption = (f"one more report moves the {fit.influence.of} by at most {bound:.3g} ({fit.influence.norm})"
                   if bound is not None else "" if fit.influence is None
                   else estimates.unbounded_influence_text(fit.influence))
        table = Table("coefficient", "value", "std. error", title=f"{fit.model} from campaign {fit.campaign} "
                                                                  f"({fit.reports:,} reports; cost 0)")
        errors = fit.standard_errors or {}
        for key, value in fit.coefficients.items():
            table.add_row(key, f"{value:.6g}", f"{errors[key]:.3g}" if key in errors else "")
        stdout.print(table)
        stdout.print(caption)

    emit(as_json, fit.to_json(), human)


@campaign_app.command("cap")
@handles_errors
def campaign_cap(
    epsilon: Annotated[float | None, typer.Option(help="The cap on a participant's total epsilon.")] = None,
    delta: Annotated[float | None, typer.Option(help="The cap on her delta.")] = None,
    key: Annotated[int | None, typer.Option(help="Override for this participant key id only.")] = None,
    gateway: Annotated[int | None, typer.Option(help="With --pseudonym: a gateway's participant.")] = None,
    pseudonym: Annotated[str | None, typer.Option(help="The gateway's pseudonym of the participant.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show or set the default per-participant cap, or override one participant's."""
    from service.campaigns import caps
    from service.errors import InvalidInput

    engine = open_engine()
    if epsilon is None and delta is None and key is None and gateway is None:
        cap = caps.default_cap(engine)
        emit(as_json, cap.to_json(), lambda: stdout.print(
            f"default cap: epsilon {cap.epsilon:g}, delta {cap.delta:g} per participant over all campaigns"))
        return
    if epsilon is None or delta is None:
        raise InvalidInput("give both --epsilon and --delta", code="invalid_parameter")
    if key is None and gateway is None:
        cap = caps.set_default_cap(engine, epsilon, delta)
    else:
        cap = caps.set_participant_cap(engine, epsilon, delta, key, gateway, pseudonym)
    who = "default cap" if key is None and gateway is None else "cap of that participant"
    emit(as_json, cap.to_json(), lambda: stdout.print(f"{who}: epsilon {cap.epsilon:g}, delta {cap.delta:g}"))


@app.command("simulate")
@handles_errors
def simulate_command(
    name: Name,
    csv: Annotated[Path | None, typer.Option(help="Participants' private values (feature and target columns).")]
    = None,
    table: Annotated[str | None, typer.Option(help="Participants drawn from a stored dataset's codes: charged to "
                                                   "its budget (the campaign's per-participant epsilon, delta); "
                                                   "needs --rows.")] = None,
    target: Annotated[str | None, typer.Option(help="With --table: the label column.")] = None,
    features: Annotated[str | None, typer.Option(help="Source columns for the campaign's features, in "
                                                      "order (default: the same names).")] = None,
    design: Annotated[str | None, typer.Option(help="A synthetic design: gaussian, rotated or bernoulli.")]
    = None,
    n: Annotated[int | None, typer.Option(help="With --design: participants.")] = None,
    p: Annotated[int | None, typer.Option(help="With --design: features (the campaign's dimension).")] = None,
    link: Annotated[str, typer.Option(help="With --design: how labels are drawn.")] = "logistic",
    rows: Annotated[int | None, typer.Option(help="Use only the first N rows (--csv); with --table, the number of "
                                                  "participants drawn at random (required).")] = None,
    seed: SeedOption = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Play participants through the real randomizer and the real batch submission path. Ctrl-C stops at the next
    batch: the batches stored stand (exit status 130)."""
    from service.campaigns import simulate, table_simulation
    from service.errors import InvalidInput

    check_seed(seed, "the simulated devices' noise")
    engine = open_engine()
    sources = [csv is not None, table is not None, design is not None]
    if sum(sources) != 1:
        raise InvalidInput("give exactly one of --csv, --table or --design", code="invalid_parameter")
    columns = column_list(features)
    with ProgressBars(f"simulating {name}", quiet or as_json) as bar:
        def progress(done: int, total: int) -> None:
            bar(done, total)

        if table is not None:
            outcome: Any = table_simulation.simulate_table(engine, name, table, rows, target, columns, seed,
                                                           progress=progress)
        else:
            if csv is not None:
                x, y = simulate.rows_from_csv(engine, name, csv, rows, columns)
            elif n is None or p is None:
                raise InvalidInput("--design needs --n and --p", code="invalid_parameter")
            else:
                x, y = simulate.rows_from_design(engine, name, design, n, p, link, seed)
            outcome = simulate.simulate(engine, name, x, y, seed=seed, progress=progress)
    emit(as_json, outcome.to_json(), lambda: stdout.print(outcome.describe(), highlight=False))
