"""The ``marginalia`` command line (typer). Every command that prints takes ``--json``.

Errors are one paragraph on stderr (or ``{"error", "message"}`` on stdout with ``--json``) and exit
status 2; nothing is stored when a command fails before its release produced noise, and a command
that made a release says what became of its charge. Ctrl-C (or SIGTERM) stops a command at the next
safe point (:mod:`service.interrupts`): a release then says whether its charge was refunded or
stands, and the command exits with status 130. A bug is one paragraph too, with exit status 1
(``MARGINALIA_DEBUG=1`` shows its traceback).

Every command first upgrades the database and recovers the releases that a killed process left
``pending`` (:func:`service.recovery.recover_interrupted`), saying so on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__" or Path(sys.argv[0]).name == "marginalia":  # the program itself, not an import:
    from service import interrupts as _interrupts  # defer Ctrl-C before anything slow is imported

    _interrupts.defer_signals()

import functools  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Annotated, Any  # noqa: E402

import click  # noqa: E402
import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Column, Table  # noqa: E402


class _PlainHelp:
    """Commands whose ``--help`` flag shows no ``<bool>`` type, like our own flags."""

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class _Command(_PlainHelp, typer.core.TyperCommand):
    pass


class _Group(_PlainHelp, typer.core.TyperGroup):
    pass


class _Typer(typer.Typer):
    """typer.Typer whose commands and groups use the classes above."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_Group, no_args_is_help=True, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, cls=_Command, **kwargs)


app = _Typer(add_completion=False, help="Differentially private releases of sensitive tables.")
dataset_app = _Typer(help="Load and list sensitive tables.")
budget_app = _Typer(help="Set and show privacy budgets.")
release_app = _Typer(help="Make and list releases (the only commands that spend budget).")
app.add_typer(dataset_app, name="dataset")
app.add_typer(budget_app, name="budget")
app.add_typer(release_app, name="release")

stdout = Console()
stderr = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.", metavar="")]
QuietFlag = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.", metavar="")]
DatasetName = Annotated[str, typer.Argument(help="Dataset name.", metavar="NAME")]
ReleaseId = Annotated[int, typer.Argument(help="Release id (`marginalia release list`).", metavar="RELEASE")]
SeedOption = Annotated[int | None, typer.Option(
    help="Seed for tests/benchmarks only (no privacy): refused unless MARGINALIA_UNSAFE_SEEDED_RELEASES=1.")]


def _engine():  # noqa: ANN202
    """The database of MARGINALIA_DATABASE_URL, upgraded, with the releases of dead processes recovered."""
    return _open_and_recover()[0]


def _open_and_recover() -> tuple[Any, list[Any]]:
    """Open and upgrade the database, recover what dead processes left behind (saying so on stderr);
    returns the engine and the recovered releases."""
    from db.migrate import open_database
    from service.recovery import describe_cost, recover_interrupted, recover_jobs

    engine = open_database()
    recovered = recover_interrupted(engine)
    for failure in recovered:
        stderr.print(f"recovered release {failure.release_id} ({failure.mechanism}), left pending by a process that "
                     f"stopped: it is now failed_after_noise and its charge of {describe_cost(failure.cost)} stands",
                     highlight=False)
    recover_jobs(engine)
    return engine, recovered


def _emit(as_json: bool, payload: Any, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        human()


def handles_errors(func: Callable[..., None]) -> Callable[..., None]:
    """Turn every failure into one paragraph (JSON with ``--json``) and an exit status: 2 for bad
    input and refusals, 130 for an interrupt, 1 for a bug. Never a traceback (unless MARGINALIA_DEBUG)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from db.engine import DatabaseUnavailable
        from service.errors import ServiceError
        from service.interrupts import EXIT_STATUS, Interrupted

        as_json = bool(kwargs.get("as_json"))
        try:
            func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Interrupted as exc:
            _fail(as_json, exc.code, exc.message, EXIT_STATUS, exc.outcome)
        except ServiceError as exc:
            _fail(as_json, exc.code, _with_notes(exc.message, exc), 2, _release_failure(exc))
        except DatabaseUnavailable as exc:
            _fail(as_json, "database_unavailable", str(exc))
        except (ValueError, TypeError) as exc:
            _fail(as_json, "invalid_input", _with_notes(str(exc), exc), 2, _release_failure(exc))
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            _fail(as_json, "file_error", f"cannot use{where}: {exc.strerror or exc}", 2, _release_failure(exc))
        except Exception as exc:
            if os.environ.get("MARGINALIA_DEBUG"):
                raise
            message = (f"{type(exc).__name__}: {exc} -- this is a bug in marginalia; rerun with "
                       "MARGINALIA_DEBUG=1 for the traceback")
            _fail(as_json, "internal_error", _with_notes(message, exc), 1, _release_failure(exc))

    return wrapper


def _with_notes(message: str, exc: BaseException) -> str:
    """The message plus the notes the service attached (e.g. what became of a release's charge)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n not in message]
    return " ".join([message.rstrip("."), *notes]) if notes else message


def _release_failure(exc: BaseException) -> Any:
    return getattr(exc, "release_failure", None)


def _fail(as_json: bool, code: str, message: str, status: int = 2, release: Any = None) -> None:
    if as_json:
        body: dict[str, object] = {"error": code, "message": message}
        if release is not None:
            body["release"] = release.to_json()
        sys.stdout.write(json.dumps(body) + "\n")
    else:
        stderr.print(f"[bold red]error[/] ({code}): {message}", highlight=False)
    raise typer.Exit(status)


class _Bar:
    """A rich progress bar fed by ``progress(done, total, message)`` callbacks (on stderr). Reports of
    a graphical-model fit (message ``FIT_PHASE``) get a second bar of their own, so a long fit shows
    its iterations instead of a step counter that seems stuck.

    Nothing is drawn until the first callback: the work reports progress only once every parameter has been
    validated, so a refused request prints its error alone, without an empty bar above it."""

    def __init__(self, description: str, quiet: bool) -> None:
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"), console=stderr, transient=False,
        )
        self.description = description
        self.task = None
        self.fit_task = None

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            self.progress.stop()

    def __call__(self, done: int, total: int, message: str = "") -> None:
        from service.progress import FIT_PHASE

        if self.quiet:
            return
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task(self.description, total=None, note="")
        if message == FIT_PHASE:
            if self.fit_task is None:
                self.fit_task = self.progress.add_task(f"  {FIT_PHASE}", total=total, note="iterations")
            self.progress.update(self.fit_task, completed=done, total=total)
            return
        self.progress.update(self.task, completed=done, total=total, note=message[:60])


def _unsafe_seeds_allowed() -> bool:
    from service.releases import UNSAFE_SEEDED_RELEASES_ENV

    return os.environ.get(UNSAFE_SEEDED_RELEASES_ENV) == "1"


def _check_seed(seed: int | None) -> None:
    """Refuse ``--seed`` on a command that makes a release, unless the unsafe switch is on (tests, benchmarks)."""
    from service.errors import InvalidInput
    from service.releases import UNSAFE_SEEDED_RELEASES_ENV

    if seed is not None and not _unsafe_seeds_allowed():
        raise InvalidInput(
            "--seed makes the release's noise reproducible by anyone who knows the seed: such a release carries no "
            "privacy and is for tests and benchmarks only. It is refused unless the environment variable "
            f"{UNSAFE_SEEDED_RELEASES_ENV}=1 is set; leave --seed out for a real release", code="invalid_parameter")


# init -------------------------------------------------------------------------------------------
@app.command()
@handles_errors
def init(as_json: JsonFlag = False) -> None:
    """Create or upgrade the database schema and recover what killed processes left pending.

    The database is MARGINALIA_DATABASE_URL (default ./marginalia.db). Every command recovers too."""
    from db.engine import database_url, safe_url

    _, recovered = _open_and_recover()
    url = safe_url(database_url())
    _emit(as_json, {"database": url, "status": "ready", "recovered_releases": [f.to_json() for f in recovered]},
          lambda: stdout.print(f"database ready: {url}", highlight=False))


# datasets ---------------------------------------------------------------------------------------
@dataset_app.command("load")
@handles_errors
def dataset_load(
    name: Annotated[str, typer.Argument(help="Name of the new dataset.", metavar="NAME")],
    csv: Annotated[list[Path], typer.Option("--csv", help="CSV file(s); repeat for several raw files.")],
    domain: Annotated[Path | None, typer.Option(help="private-pgm domain JSON {column: size}.")] = None,
    bins: Annotated[Path | None, typer.Option(help="Public binning spec (YAML/JSON) for raw tables.")] = None,
    categorical: Annotated[str, typer.Option(help="Comma-separated unordered columns (with --domain).")] = "",
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Load a sensitive table: coded 0..size-1 with --domain, or raw with a public --bins spec."""
    from service import datasets
    from service.errors import InvalidInput

    if (domain is None) == (bins is None):
        raise InvalidInput("give exactly one of --domain (coded table) or --bins (raw table with a binning spec)",
                           code="invalid_parameter")
    engine = _engine()
    with _Bar(f"loading {name}", quiet or as_json) as bar:
        if domain is not None:
            if len(csv) != 1:
                raise InvalidInput("a coded table is one --csv file", code="invalid_parameter")
            cats = tuple(c.strip() for c in categorical.split(",") if c.strip())
            info = datasets.load_coded_csv(engine, name, csv[0], domain, cats, progress=bar)
        else:
            info = datasets.load_raw_csv(engine, name, list(csv), bins, progress=bar)
    _emit(as_json, info.to_json(), lambda: stdout.print(
        f"loaded [bold]{info.name}[/]: {info.rows:,} rows, {len(info.domain)} columns"))


@dataset_app.command("list")
@handles_errors
def dataset_list(as_json: JsonFlag = False) -> None:
    """List datasets (public metadata only)."""
    from service import datasets

    items = datasets.list_datasets(_engine())
    payload = [{"name": d.name, "rows": d.rows, "columns": len(d.domain), "domain": d.domain.to_dict()} for d in items]

    def human() -> None:
        table = Table("name", "rows", "columns")
        for d in items:
            table.add_row(d.name, f"{d.rows:,}", str(len(d.domain)))
        stdout.print(table)

    _emit(as_json, payload, human)


@dataset_app.command("show")
@handles_errors
def dataset_show(name: DatasetName, as_json: JsonFlag = False) -> None:
    """Show a dataset's domain (sizes and kinds of its columns)."""
    from service import datasets

    d = datasets.get_dataset(_engine(), name)
    payload = {"name": d.name, "rows": d.rows, "domain": d.domain.to_dict()}

    def human() -> None:
        table = Table("column", "size", "kind", title=f"{d.name}: {d.rows:,} rows")
        for a in d.domain.attributes:
            table.add_row(a.name, str(a.size), a.kind)
        stdout.print(table)

    _emit(as_json, payload, human)


# budgets ----------------------------------------------------------------------------------------
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
    from service import accountant

    status = accountant.set_budget(_engine(), name, epsilon, delta, delta_reserve=delta_reserve)
    _emit(as_json, status.to_json(), lambda: _print_budget(status))


@budget_app.command("show")
@handles_errors
def budget_show(name: DatasetName, as_json: JsonFlag = False) -> None:
    """Show what is spent and what can still be spent (epsilon, delta and rho)."""
    from service import accountant

    status = accountant.budget_status(_engine(), name)
    _emit(as_json, status.to_json(), lambda: _print_budget(status))


# releases ---------------------------------------------------------------------------------------
@release_app.command("marginals")
@handles_errors
def release_marginals(
    name: DatasetName,
    mechanism: Annotated[str, typer.Option(help="laplace, gaussian, mst or aim.")],
    workload: Annotated[str, typer.Option(
        help="all-1way, all-2way, all-3way, target:COL or a JSON file.")] = "all-2way",
    epsilon: Annotated[str | None, typer.Option(help="Epsilon to spend.")] = None,
    delta: Annotated[str | None, typer.Option(
        help="Delta (zCDP mechanisms convert (epsilon, delta) to rho).")] = None,
    rho: Annotated[str | None, typer.Option(help="zCDP rho to spend (gaussian, mst, aim).")] = None,
    seed: SeedOption = None,
    rounds: Annotated[int | None, typer.Option(help="AIM: number of rounds (default: AIM's rule).")] = None,
    max_model_size: Annotated[float | None, typer.Option(help="Largest graphical model in MB.")] = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Release a marginal workload under the accountant; prints the release id, its cost and what it cost in the
    budget's own epsilon.

    Ctrl-C stops it at the next safe point: the charge is refunded if no noise was drawn yet and stands
    otherwise; the command says which and exits with status 130."""
    from service import releases
    from service.recovery import describe_cost

    _check_seed(seed)
    options: dict[str, object] = {}
    if rounds is not None:
        options["rounds"] = rounds
    if max_model_size is not None:
        options["max_model_size"] = max_model_size
    engine = _engine()
    with _Bar(f"{mechanism} release of {name}", quiet) as bar:
        outcome = releases.release_marginals(engine, name, mechanism, workload, epsilon=epsilon, delta=delta, rho=rho,
                                             seed=seed, options=options, progress=bar)
    _late_interrupt(outcome.release_id)
    _emit(as_json, {**outcome.to_json(), "status": "complete"}, lambda: stdout.print(
        f"release [bold]{outcome.release_id}[/] ({mechanism}) complete: charged {describe_cost(outcome.cost)}"
        + (f"\n{outcome.budget.describe()}" if outcome.budget is not None else "")
        + ("\n[bold red]seeded[/]: its noise is known to whoever knows the seed; it carries no privacy"
           if outcome.seeded else ""), highlight=False))


def _late_interrupt(release_id: int) -> None:
    """Say so when Ctrl-C came after the release was stored (too late to stop it: it is complete)."""
    from service import interrupts

    if interrupts.requested():
        stderr.print(f"the interrupt came after release {release_id} was stored: it is complete and charged",
                     highlight=False)


@release_app.command("list")
@handles_errors
def release_list(
    name: Annotated[str | None, typer.Argument(help="Only the releases of this dataset.", metavar="[NAME]")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List releases (of one dataset, or all)."""
    from service import releases

    items = releases.list_releases(_engine(), name)

    def human() -> None:
        table = Table("id", "dataset", "kind", "mechanism", "status", "seeded")
        for r in items:
            table.add_row(str(r.id), r.dataset.name, r.kind, r.mechanism, r.status, "SEEDED" if r.seeded else "")
        stdout.print(table)

    _emit(as_json, [r.to_json() for r in items], human)


@app.command()
@handles_errors
def marginal(
    release: ReleaseId,
    attributes: Annotated[list[str], typer.Argument(
        help="Attributes of the marginal, in the order wanted (quote names such as 'income>50K').",
        metavar="ATTRIBUTE...")],
    as_json: JsonFlag = False,
) -> None:
    """Answer any marginal from a stored release (free); says what the release measured of it."""
    from service import releases

    answer = releases.answer_marginal(_engine(), release, list(attributes), allow_seeded=_unsafe_seeds_allowed())
    _emit(as_json, answer, lambda: _print_marginal(answer))


MARGINAL_ROWS_SHOWN = 200


def _print_marginal(answer: dict[str, Any]) -> None:
    """A marginal as a table: one row per cell of the other axes (labels where the table has them)."""
    import numpy as np

    attributes, labels = answer["attributes"], answer["labels"]
    counts = np.asarray(answer["counts"], dtype=float)
    names = [labels.get(a) or [str(code) for code in range(size)] for a, size in zip(attributes, counts.shape,
                                                                                       strict=True)]
    stdout.print(f"marginal {attributes} from release {answer['release_id']} (estimated counts)", highlight=False)
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
    warning = answer["coverage"]["warning"]
    if warning:
        stderr.print(f"[bold yellow]warning[/]: {warning}", highlight=False)


@app.command()
@handles_errors
def synth(
    release: ReleaseId,
    rows: Annotated[int, typer.Option(help="Number of synthetic rows.")],
    out: Annotated[Path, typer.Option(help="CSV file to write (refused if it exists, unless --force).")],
    seed: Annotated[int | None, typer.Option(help="Seed for a reproducible sample.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.", metavar="")] = False,
    codes: Annotated[bool, typer.Option("--codes", help="Write codes, not the labels of a raw table's bins.",
                                        metavar="")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Draw synthetic rows from a stored release (free) into a CSV file.

    A raw table's columns hold its binning spec's labels (--codes for the codes)."""
    from service import releases

    _check_output(out, force, "--out")
    frame = releases.synthetic_frame(_engine(), release, rows, seed, labels=not codes,
                                     allow_seeded=_unsafe_seeds_allowed())
    _write_output(out, "--out", lambda path: frame.to_csv(path, index=False))
    _emit(as_json, {"release_id": release, "rows": len(frame), "out": str(out)},
          lambda: stdout.print(f"wrote {len(frame):,} synthetic rows to {out}", highlight=False))


def _check_output(path: Path, force: bool, option: str) -> None:
    """Refuse, before any work, an output file that cannot or must not be written."""
    from service.errors import InvalidInput

    if path.is_dir():
        raise InvalidInput(f"{option} {path} is a folder; give a file name", code="invalid_parameter")
    if path.exists() and not force:
        raise InvalidInput(f"{option} {path} exists; add --force to overwrite it", code="file_exists")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInput(f"{option} {path}: the folder {folder} does not exist", code="invalid_parameter")
    if not os.access(folder, os.W_OK):
        raise InvalidInput(f"{option} {path}: the folder {folder} is not writable", code="invalid_parameter")


def _write_output(path: Path, option: str, write: Callable[[Path], None]) -> None:
    from service.errors import InvalidInput

    try:
        write(path)
    except OSError as exc:
        raise InvalidInput(f"{option} {path}: cannot write it ({exc.strerror or exc})",
                           code="invalid_parameter") from None


@app.command()
@handles_errors
def ledger(name: DatasetName, as_json: JsonFlag = False) -> None:
    """Print a dataset's privacy ledger (append-only), oldest first."""
    from service import accountant

    rows = accountant.ledger_rows(_engine(), name)

    def human() -> None:
        # numbers are never cut: they keep their width, and the words wrap when the terminal is narrow
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
        stdout.print(table)

    _emit(as_json, rows, human)


# server and API keys (issue 5) -------------------------------------------------------------------
keys_app = _Typer(help="Create, list and revoke API keys (a key is shown once).")
app.add_typer(keys_app, name="keys")


@app.command()
@handles_errors
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (use a TLS proxy beyond loopback).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the HTTP API: migrates the database and recovers interrupted releases first."""
    from db.engine import database_url
    from service.api.server import serve as run_server

    run_server(database_url(), host, port, log_level=log_level)


@keys_app.command("create")
@handles_errors
def keys_create(
    role: Annotated[str, typer.Option(help="steward, analyst or auditor.")],
    name: Annotated[str, typer.Option(help="Who holds the key (shown in the ledger).")],
    dataset: Annotated[list[str] | None, typer.Option(help="Scope a steward key to this dataset; repeatable.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API key and print it ONCE; only its SHA-256 hash is stored."""
    from service import auth

    info, key = auth.create_key(_engine(), role, name, dataset or None)
    _emit(as_json, {"key": key, **info.to_json()}, lambda: stdout.print(
        f"API key {info.id} for {info.role} [bold]{info.name}[/]: {key}\n"
        "store it now: it is not kept and cannot be shown again", highlight=False))


@keys_app.command("revoke")
@handles_errors
def keys_revoke(
    key_id: Annotated[int, typer.Argument(help="Key id (from `keys list`).", metavar="KEY_ID")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke a key: every later request made with it is refused (401)."""
    from service import auth

    info = auth.revoke_key(_engine(), key_id)
    _emit(as_json, info.to_json(), lambda: stdout.print(f"revoked API key {info.id} ({info.role} {info.name})"))


@keys_app.command("list")
@handles_errors
def keys_list(as_json: JsonFlag = False) -> None:
    """List keys (never the keys themselves nor their hashes)."""
    from service import auth

    items = auth.list_keys(_engine())

    def human() -> None:
        table = Table("id", "name", "role", "datasets", "created", "revoked")
        for k in items:
            table.add_row(str(k.id), k.name, k.role, ", ".join(k.scope) if k.scope else "all",
                          k.created_at.isoformat(timespec="seconds"),
                          k.revoked_at.isoformat(timespec="seconds") if k.revoked_at else "")
        stdout.print(table)

    _emit(as_json, [k.to_json() for k in items], human)


# private regression and its benchmark (issue 4) ----------------------------------------------------
bench_app = _Typer(help="Benchmarks on temporary databases (yours is never touched).")
app.add_typer(bench_app, name="bench")


def _column_list(text: str | None) -> list[str] | None:
    return None if text is None else [c.strip() for c in text.split(",") if c.strip()]


@app.command()
@handles_errors
def fit(
    task: Annotated[str, typer.Argument(help="linear or logistic.", metavar="TASK")],
    name: Annotated[str, typer.Argument(help="Dataset to regress on.", metavar="NAME")],
    target: Annotated[str, typer.Option(help="Target column.")],
    method: Annotated[str, typer.Option(help="dd-ssp, adassp (linear), objpert (logistic) or aim-synth.")] = "dd-ssp",
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
        help="Marginal mechanism of a new dd-ssp/aim-synth release (default aim); a reused release keeps its own.")
    ] = None,
    allow_unmeasured: Annotated[bool, typer.Option(
        "--allow-unmeasured", metavar="",
        help="Let a release that did not measure every column and pair of the regression answer (they are then "
             "the model's extrapolation).")] = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Fit a private linear or logistic regression from a release (reused for free when one can answer)."""
    from service import regression
    from service.recovery import describe_cost

    _check_seed(seed)
    engine = _engine()
    with _Bar(f"{method} {task} regression of {name}", quiet or as_json) as bar:
        outcome = regression.fit(engine, name, task, target, _column_list(features), _column_list(categorical),
                                 method, epsilon, delta, release, intercept, seed, mechanism=mechanism, progress=bar,
                                 allow_unmeasured=allow_unmeasured, allow_seeded=_unsafe_seeds_allowed())
    if not outcome.reused:
        _late_interrupt(outcome.release_id)
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

    _emit(as_json, payload, human)


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
    mechanism: Annotated[str, typer.Option(help="Marginal mechanism for dd-ssp / aim-synth.")] = "aim",
    aim_rounds: Annotated[int | None, typer.Option(help="AIM's planned rounds (default: AIM's rule).")] = None,
    max_model_size: Annotated[float | None, typer.Option(help="Largest graphical model in MB.")] = None,
    marginal_trials: Annotated[int | None, typer.Option(help="Fewer trials for the AIM-based methods.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out and --plot if they exist.",
                                        metavar="")] = False,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Run paper 002's regression protocol through the real release path on a temporary SQLite database."""
    from service import bench

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
        features=tuple(_column_list(features)) if features is not None else None,
        categorical=tuple(_column_list(categorical) or ()),
        methods=tuple(_column_list(methods) or ()) if methods is not None else bench.BENCH_METHODS,
        epsilons=eps, delta=delta, trials=trials, max_train=max_train, seed=seed, intercept=intercept,
        mechanism=mechanism, marginal_options=options, marginal_trials=marginal_trials,
    )
    _check_output(out, force, "--out")
    if plot is not None:
        _check_output(plot, force, "--plot")
    result = bench.run_regression_bench(config, log=(lambda m: None) if quiet else (lambda m: stderr.print(m)))
    _write_output(out, "--out", lambda path: path.write_text(json.dumps(result, indent=1, default=str) + "\n"))
    if plot is not None:
        _write_output(plot, "--plot", lambda path: bench.plot_regression_bench(result, path))
    _emit(as_json, result, lambda: stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""),
                                                highlight=False))


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()


# local-DP collections (issue 8): public tables, campaigns, the simulator -------------------------------
from service.collections.commands import register as _register_collections  # noqa: E402

_register_collections(app)
