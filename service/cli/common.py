"""What every command of the command line shares: the typer classes, the consoles, the option types, opening the
database (with recovery), printing, the one error handler, progress bars, and output files."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class PlainHelp:
    """Commands whose ``--help`` flag shows no ``<bool>`` type, like our own flags."""

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Command(PlainHelp, typer.core.TyperCommand):
    pass


class Group(PlainHelp, typer.core.TyperGroup):
    pass


class Typer(typer.Typer):
    """typer.Typer whose commands and groups use the classes above."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=Group, no_args_is_help=True, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, cls=Command, **kwargs)


app = Typer(add_completion=False, help="Differentially private releases of sensitive tables.")

stdout = Console()
stderr = Console(stderr=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.", metavar="")]
QuietFlag = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.", metavar="")]
DryRunFlag = Annotated[bool, typer.Option(
    "--dry-run", metavar="", help="Spend and store nothing: print what it would charge, whether it fits and its "
    "expected accuracy (closed form for laplace, gaussian, residual; a simulation on a stored release's synthetic rows "
    "for mst, aim).")]
DatasetName = Annotated[str, typer.Argument(help="Dataset name.", metavar="NAME")]
ReleaseId = Annotated[int, typer.Argument(help="Release id (`marginalia release list`).", metavar="RELEASE")]
SeedOption = Annotated[int | None, typer.Option(
    help="Seed for tests/benchmarks only (no privacy): refused unless MARGINALIA_UNSAFE_SEEDED_RELEASES=1.")]


def open_engine():  # noqa: ANN202
    """The database of MARGINALIA_DATABASE_URL, upgraded, with the releases of dead processes recovered."""
    return open_and_recover()[0]


def open_and_recover() -> tuple[Any, list[Any]]:
    """Open and upgrade the database, recover what dead processes left behind (saying so on stderr);
    returns the engine and the recovered releases."""
    from db.migrate import open_database
    from service.accounting.accountant import describe_cost
    from service.releases.recovery import recover_interrupted, recover_jobs

    engine = open_database()
    recovered = recover_interrupted(engine)
    for failure in recovered:
        stderr.print(f"recovered release {failure.release_id} ({failure.mechanism}), left pending by a process that "
                     f"stopped: it is now failed_after_noise and its charge of {describe_cost(failure.cost)} stands",
                     highlight=False)
    recover_jobs(engine)
    return engine, recovered


def emit(as_json: bool, payload: Any, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    else:
        human()


def emit_plan(as_json: bool, plan: Any) -> None:
    """Print a dry run (a release's or a fit's plan: ``to_json``, ``describe``, ``fits``); exit with status 2, as the
    command itself would be refused, when it does not fit."""
    emit(as_json, plan.to_json(), lambda: stdout.print(escape(plan.describe()), highlight=False))
    if not plan.fits:
        raise typer.Exit(2)


def handles_errors(func: Callable[..., None]) -> Callable[..., None]:
    """Turn every failure into one paragraph (JSON with ``--json``) and an exit status: 2 for bad
    input and refusals, 130 for an interrupt, 1 for a bug. Never a traceback (unless MARGINALIA_DEBUG).

    Only our own messages are printed (a :class:`~service.errors.ServiceError`'s, a ValueError of the project's
    packages: :func:`service.error_text.is_bad_input`). Any other exception is a bug paragraph naming its type,
    with its message withheld: a driver's or a library's message may quote a cell value
    (:mod:`service.error_text`); ``MARGINALIA_DEBUG=1`` lets the full traceback reach the terminal instead."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from db.engine import DatabaseUnavailable
        from service.error_text import debugging, is_bad_input, shown_message
        from service.errors import ServiceError
        from service.interrupts import EXIT_STATUS, Interrupted

        as_json = bool(kwargs.get("as_json"))
        try:
            func(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, typer.Exit):
            raise
        except Interrupted as exc:
            fail(as_json, exc.code, exc.message, EXIT_STATUS, exc.outcome)
        except ServiceError as exc:
            fail(as_json, exc.code, _with_notes(exc.message, exc), 2, _release_failure(exc))
        except DatabaseUnavailable as exc:
            fail(as_json, getattr(exc, "code", "database_unavailable"), str(exc))
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            fail(as_json, "file_error", f"cannot use{where}: {exc.strerror or type(exc).__name__}", 2,
                 _release_failure(exc))
        except Exception as exc:
            if is_bad_input(exc):
                fail(as_json, "invalid_input", _with_notes(str(exc), exc), 2, _release_failure(exc))
            if debugging():
                raise
            message = (f"{shown_message(exc)} -- this is a bug in marginalia; rerun with MARGINALIA_DEBUG=1 for the "
                       "traceback")
            fail(as_json, "internal_error", _with_failure(message, exc), 1, _release_failure(exc))

    return wrapper


def _with_notes(message: str, exc: BaseException) -> str:
    """The message plus the notes the service attached (e.g. what became of a release's charge)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if n not in message]
    return " ".join([message.rstrip("."), *notes]) if notes else message


def _with_failure(message: str, exc: BaseException) -> str:
    """The message plus what became of a release's charge, from the failure the release engine attached rather than
    from the exception's notes (of a foreign exception, a library may have written them)."""
    failure = _release_failure(exc)
    return f"{message.rstrip('.')}. {failure.sentence()}" if failure is not None else message


def _release_failure(exc: BaseException) -> Any:
    return getattr(exc, "release_failure", None)


def fail(as_json: bool, code: str, message: str, status: int = 2, release: Any = None) -> None:
    if as_json:
        body: dict[str, object] = {"error": code, "message": message}
        if release is not None:
            body["release"] = release.to_json()
        sys.stdout.write(json.dumps(body) + "\n")
    else:
        stderr.print(f"[bold red]error[/] ({code}): {escape(message)}", highlight=False)
    raise typer.Exit(status)


class ProgressBars:
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

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            self.progress.stop()

    def __call__(self, done: int, total: int, message: str = "") -> None:
        from service.mechanisms.progress import FIT_PHASE

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


def unsafe_seeds_allowed() -> bool:
    from service.releases.engine import UNSAFE_SEEDED_RELEASES_ENV

    return os.environ.get(UNSAFE_SEEDED_RELEASES_ENV) == "1"


def check_seed(seed: int | None, noise: str = "the release's noise") -> None:
    """Refuse ``--seed`` on a command that makes a release (or randomizes reports: ``noise`` says whose), unless the
    unsafe switch is on (tests, benchmarks)."""
    from service.errors import InvalidInput
    from service.releases.engine import UNSAFE_SEEDED_RELEASES_ENV

    if seed is not None and not unsafe_seeds_allowed():
        raise InvalidInput(
            f"--seed makes {noise} reproducible by anyone who knows the seed: what it makes carries no "
            "privacy and is for tests and benchmarks only. It is refused unless the environment variable "
            f"{UNSAFE_SEEDED_RELEASES_ENV}=1 is set; leave --seed out for a real run", code="invalid_parameter")


def late_interrupt(release_id: int) -> None:
    """Say so when Ctrl-C came after the release was stored (too late to stop it: it is complete)."""
    from service import interrupts

    if interrupts.requested():
        stderr.print(f"the interrupt came after release {release_id} was stored: it is complete and charged",
                     highlight=False)

def check_output(path: Path, force: bool, option: str) -> None:
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

def write_output(path: Path, option: str, write: Callable[[Path], None]) -> None:
    from service.errors import InvalidInput

    try:
        write(path)
    except OSError as exc:
        raise InvalidInput(f"{option} {path}: cannot write it ({exc.strerror or exc})",
                           code="invalid_parameter") from None



def column_list(text: str | None) -> list[str] | None:
    return None if text is None else [c.strip() for c in text.split(",") if c.strip()]
