"""``marginalia budget set | show`` and ``marginalia ledger``: privacy budgets and what was spent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from service.cli.common import (
    DatasetName,
    JsonFlag,
    Typer,
    app,
    emit,
    handles_errors,
    open_engine,
    stdout,
)

budget_app = Typer(help="Set and show privacy budgets.")


def _print_budget(status: Any) -> None:
    data = status.to_json()
    table = Table("", "value", title=f"budget of {status.dataset}")
    for key, label in (("epsilon_total", "epsilon (total)"), ("delta_total", "delta (total)"),
                       ("delta_reserve", "delta reserve (for (epsilon, delta) releases after zCDP ones)"),
                       ("epsilon_spent", "epsilon spent (composed)"), ("epsilon_remaining", "epsilon remaining"),
                       ("epsilon_pure_spent", "epsilon of (epsilon, delta) releases"),
                       ("delta_spent", "delta of (epsilon, delta) releases"), ("rho_spent", "rho of zCDP releases")):
        table.add_row(label, f"{data[key]:.6g}")
    if status.anchor is not None:
        table.add_row("zCDP anchor: alpha, offset t", f"{data['zcdp_alpha']:.6g}, {data['zcdp_offset']:.6g}")
        table.add_row("delta held by zCDP releases", f"{data['zcdp_delta']:.3g}")
    table.add_section()
    table.add_row("can still spend: epsilon of one (epsilon, delta) release", f"{data['epsilon_spendable']:.6g}")
    table.add_row("can still spend: delta of (epsilon, delta) releases", f"{data['delta_spendable']:.3g}")
    table.add_row("can still spend: rho of one zCDP release", f"{data['rho_spendable']:.6g}")
    stdout.print(table)


@budget_app.command("set")
@handles_errors
def budget_set(
    name: DatasetName,
    epsilon: Annotated[str, typer.Option(help="Total epsilon.")],
    delta: Annotated[str, typer.Option(help="Total delta.")] = "0",
    delta_reserve: Annotated[str | None, typer.Option(
        help="Delta kept for (epsilon, delta) releases (objective perturbation) after zCDP releases start "
             "(docs/privacy.md 6.3). Default: a tenth of --delta; 0 gives all of delta to zCDP releases.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Set a dataset's total privacy budget (epsilon, delta)."""
    from service.accounting import accountant

    status = accountant.set_budget(open_engine(), name, epsilon, delta, delta_reserve=delta_reserve)
    emit(as_json, status.to_json(), lambda: _print_budget(status))


@budget_app.command("show")
@handles_errors
def budget_show(name: DatasetName, as_json: JsonFlag = False) -> None:
    """Show what is spent and what can still be spent (epsilon, delta and rho)."""
    from service.accounting import accountant

    status = accountant.budget_status(open_engine(), name)
    emit(as_json, status.to_json(), lambda: _print_budget(status))


def _wide_ledger(name: str, rows: list[dict[str, Any]]) -> Table:
    """One row per entry, one column per figure (a terminal of about 125 columns or more)."""
    words = {"overflow": "fold"}
    number = {"justify": "right", "no_wrap": True}
    table = Table(Column("#", **number), Column("entry", **words), Column("release", **number),
                  Column("status", **words), Column("mechanism", **words), Column("epsilon", **number),
                  Column("delta", **number), Column("rho", **number), Column("eps priced", **number),
                  Column("eps spent after", **number), title=f"privacy ledger of {name}")
    for r in rows:
        table.add_row(str(r["entry_id"]), str(r["entry"]), str(r["release_id"] or ""),
                      str(r["release_status"] or ""), str(r["mechanism"]), f"{r['epsilon']:.6g}",
                      f"{r['delta']:.3g}", f"{r['rho']:.6g}", f"{r['epsilon_priced']:.6g}",
                      f"{r['epsilon_spent_after']:.6g}")
    return table


def _narrow_ledger(name: str, rows: list[dict[str, Any]]) -> Table:
    """One row per entry in three columns, each cell a few short lines, so that a terminal of 80 columns (the width
    of a pipe) shows every entry, status, mechanism and figure whole: what the entry is (its number, kind, release
    and the release's status), the mechanism, and the figures (those that are not 0, and what was spent after)."""
    cell = {"overflow": "fold"}  # below ~50 columns a long word folds onto the next line: still never cut
    table = Table(Column("entry", **cell), Column("mechanism", **cell), Column("figures", **cell),
                  title=f"privacy ledger of {name}", show_lines=True)
    for r in rows:
        entry = f"#{r['entry_id']} {r['entry']}"
        if r["release_id"]:
            entry += f"\nrelease {r['release_id']}\n{r['release_status'] or ''}".rstrip()
        figures = [f"{label} {r[key]:{form}}" for key, label, form in (
            ("epsilon", "epsilon", ".6g"), ("delta", "delta", ".3g"), ("rho", "rho", ".6g"))
            if r[key]]
        if r["epsilon_priced"] != r["epsilon"]:
            figures.append(f"eps priced {r['epsilon_priced']:.6g}")
        figures.append(f"eps spent after {r['epsilon_spent_after']:.6g}")
        table.add_row(entry, str(r["mechanism"]), "\n".join(figures))
    return table


@app.command()
@handles_errors
def ledger(
    name: DatasetName,
    head: Annotated[bool, typer.Option(
        "--head", help="Print the newest link of the ledger's hash chain, to publish (a rollback is then detectable).")
    ] = False,
    verify: Annotated[bool, typer.Option(
        "--verify", help="Recompute the hash chain from the entries; exit 2 naming each entry that differs.")] = False,
    published: Annotated[Path | None, typer.Option(
        "--published", help="With --verify: a head printed earlier by --head --json; the ledger must still hold it.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print a dataset's privacy ledger (append-only), oldest first; or check its hash chain (docs/operations.md)."""
    from service.accounting import accountant

    engine = open_engine()
    if head:
        found = accountant.ledger_head(engine, name)
        emit(as_json, found.to_json(), lambda: stdout.print(
            f"head of the ledger of {name}: entry {found.entry_id} ({found.entries} entries), hash {found.entry_hash}",
            highlight=False))
        return
    if verify or published is not None:
        _verify(engine, name, published, as_json)
        return
    rows = accountant.ledger_rows(engine, name)

    def human() -> None:
        # nothing is ever cut: the wide table when the terminal holds it, else a narrow layout of the same figures
        wide = _wide_ledger(name, rows)
        natural = stdout.measure(wide, options=stdout.options.update_width(10_000)).maximum
        fits = natural <= stdout.width
        stdout.print(wide if fits else _narrow_ledger(name, rows))

    emit(as_json, rows, human)


def _verify(engine: Any, name: str, published: Path | None, as_json: bool) -> None:  # noqa: ANN401
    """``ledger --verify``: the chain and the published head checked; exit 2 with the problems (``ledger_broken``)."""
    import json

    from service.accounting import accountant
    from service.errors import ServiceError

    head = None
    if published is not None:
        try:
            given = json.loads(published.read_text())
        except ValueError:
            raise ServiceError(f"--published {published}: not JSON (use what `ledger {name} --head --json` prints)",
                               code="invalid_parameter", status=422) from None
        head = accountant.published_head(name, given)
    verdict = accountant.verify_ledger(engine, name, head)
    if not verdict.ok:
        raise ServiceError(f"the ledger of {name} is not intact: " + "; ".join(verdict.problems),
                           code="ledger_broken", status=409)
    against = f", and holds the published head (entry {head.entry_id})" if head is not None else ""
    emit(as_json, verdict.to_json(), lambda: stdout.print(
        f"the ledger of {name} is intact: {verdict.head.entries} entries chain to {verdict.head.entry_hash}{against}",
        highlight=False))
