"""The one harness every benchmark uses: where things are, seeds, a temporary database, the output options
(``--json PATH``, ``--plot PATH``), writing the JSON and the plot, the summary table, and errors.

Output convention (every benchmark): ``--json PATH`` writes the records and the summary, ``--plot PATH`` the PNG.
The scripts that always wrote beside ``benchmarks/results/`` keep that default (the plot beside the JSON, ``.png``);
the experiments run through the service (regression, stein-glm, sparse, dp-iht) take ``--json`` as required, write a
plot only when asked, and refuse to overwrite either unless ``--force``. ``--out`` is a deprecated alias of ``--json``.

Benchmarks may import any part of the project; nothing in the project imports ``benchmarks`` (it is not in the wheel).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from service.errors import InvalidInput

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA", REPO.parent / "shared" / "data"))


class BenchError(InvalidInput, ValueError):
    """A benchmark's bad setting: one paragraph naming the option, exit status 2, nothing written."""

    code = "invalid_parameter"


# ---------------------------------------------------------------------------------------------------------- seeds
def seed_sequence(*key: int) -> np.random.SeedSequence:
    """The ``numpy.random.SeedSequence`` of one cell of a run (``key``: the run's seed, then the cell's indices)."""
    return np.random.SeedSequence([int(k) for k in key])


def trial_seed(*key: int) -> int:
    """One 32-bit integer seed from :func:`seed_sequence` (for the APIs that take an int)."""
    return int(seed_sequence(*key).generate_state(1)[0])


# ------------------------------------------------------------------------------------------- temporary database
@contextmanager
def temporary_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder removed afterwards (the temporary databases live in it: yours is never touched)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        yield Path(folder)


@contextmanager
def work_folder(folder: Path | None, prefix: str) -> Iterator[Path]:
    """``folder`` (created if need be, kept afterwards) when given, else a fresh temporary one (removed)."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with temporary_folder(prefix) as fresh:
        yield fresh


def temporary_database(path: Path) -> Any:
    """An engine on a new SQLite file ``path`` upgraded to the newest schema (the caller disposes of it)."""
    from db.migrate import open_database

    return open_database(f"sqlite:///{path}")


@contextmanager
def postgresql_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server (service/tools/pgserver.py) for ``--postgresql``, stopped when the block ends; a
    :class:`BenchError` if it cannot start."""
    from service.tools.pgserver import PostgresUnavailable, start_server

    try:
        server = start_server()
    except PostgresUnavailable as exc:
        raise BenchError(f"--postgresql: the server could not start: {exc}") from None
    try:
        yield server
    finally:
        server.stop()


def postgresql_database(server: Any, name: str) -> str:
    """The URL of a new, empty database ``name`` on ``server`` (dropped first if it exists)."""
    from sqlalchemy import create_engine, text

    admin = create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.url(name)


# -------------------------------------------------------------------------------------------------------- data
def taxi_split(path: Path) -> tuple[Any, Any]:
    """nist_taxi has no test split: the regression page's deterministic one, (train, test) frames with 1,000 test
    rows (``DataFrame.sample(n=1000, random_state=0)``) and every other row for training."""
    import pandas as pd

    frame = pd.read_csv(path)
    test = frame.sample(n=1000, random_state=0)
    return frame.drop(index=test.index), test


# ----------------------------------------------------------------------------------------------------- machine
def machine() -> dict[str, object]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def run_child(module: str, config: dict[str, object]) -> dict[str, object]:
    """Run ``python -m MODULE --child CONFIG`` in a fresh interpreter from the repository root (its peak memory and
    compilations are then its own); its last stdout line is the JSON result."""
    child = subprocess.run([sys.executable, "-m", module, "--child", json.dumps(config)], capture_output=True,
                           text=True, cwd=REPO)
    if child.returncode != 0:
        raise RuntimeError(f"run {config} failed:\n{child.stderr[-4000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


# -------------------------------------------------------------------------------------------------------- plot
def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display), imported only when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finish_axes(ax: Any, legend_size: int) -> None:
    """The benchmarks' axes style: a light grid on both scales' ticks, a small legend."""
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_figure(fig: Any, path: Path, dpi: int = 120) -> None:
    """Lay ``fig`` out tightly, write it to ``path`` as PNG and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


# ------------------------------------------------------------------------------------------- JSON and options
def write_json(path: Path, payload: Any, indent: int = 1) -> None:
    path.write_text(json.dumps(payload, indent=indent, default=str) + "\n")


class _DeprecatedOut(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        warnings.warn("--out is deprecated: use --json", DeprecationWarning, stacklevel=1)
        print("note: --out is deprecated, use --json", file=sys.stderr)
        setattr(namespace, self.dest, Path(values))


def add_outputs(parser: argparse.ArgumentParser, name: str) -> None:
    """``--json PATH`` (default ``benchmarks/results/NAME.json``), ``--plot PATH`` (default: beside the JSON) and
    the deprecated ``--out`` (= ``--json``) on a script's parser; read them back with :func:`outputs`."""
    parser.add_argument("--json", type=Path, default=RESULTS / f"{name}.json", help="write the JSON here")
    parser.add_argument("--plot", type=Path, default=None, help="write the PNG here (default: beside the JSON)")
    parser.add_argument("--out", dest="json", action=_DeprecatedOut, help=argparse.SUPPRESS)


def add_table_options(parser: argparse.ArgumentParser, name: str, rows: str) -> None:
    """The options of a benchmark over generated tables: ``--rows`` (default ``rows``), ``--repeats``, ``--folder``,
    ``--seed``, ``--quiet`` and :func:`add_outputs`; read the sizes back with :func:`table_sizes`."""
    parser.add_argument("--rows", default=rows, help="comma-separated row counts")
    parser.add_argument("--repeats", type=int, default=1, help="timed rounds (the best is kept)")
    parser.add_argument("--folder", type=Path, default=None, help="where the tables go (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    add_outputs(parser, name)


def table_sizes(args: argparse.Namespace) -> tuple[int, ...]:
    """The row counts of ``--rows`` (:func:`add_table_options`), after checking them and ``--repeats``."""
    sizes = number_list(args.rows, "--rows", int)
    if not sizes or min(sizes) < 1:
        raise BenchError(f"--rows must be positive row counts, got {args.rows!r}")
    if args.repeats < 1:
        raise BenchError(f"--repeats must be at least 1, got {args.repeats}")
    return sizes


def outputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """The (JSON, PNG) paths of :func:`add_outputs`' options."""
    return args.json, args.plot if args.plot is not None else args.json.with_suffix(".png")


def number_list(text: str | None, option: str, kind: Callable[[str], Any]) -> tuple[Any, ...] | None:
    """A comma list of ``kind`` (int or float), or a :class:`BenchError` naming the option."""
    if text is None:
        return None
    try:
        return tuple(kind(v.strip()) for v in text.split(",") if v.strip())
    except ValueError:
        noun = "integers" if kind is int else "numbers"
        raise BenchError(f"{option} must be comma-separated {noun}, got {text!r}") from None


def _typer_options() -> tuple[Any, Any, Any]:
    import typer

    json_out = Annotated[Path, typer.Option("--json", "--out", help="Write the JSON records and summary to this file "
                                            "(refused if it exists, unless --force; --out is deprecated).")]
    plot_out = Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot here.")]
    force = Annotated[bool, typer.Option("--force", help="Overwrite --json and --plot if they exist.", metavar="")]
    return json_out, plot_out, force


#: The typer options of the service experiments: ``--json`` (alias ``--out``), ``--plot``, ``--force``.
JsonOut, PlotOut, Force = _typer_options()


def logger(quiet: bool) -> Callable[[str], None]:
    """Progress lines on stderr, or nothing with ``--quiet``."""
    from service.cli.common import stderr

    return (lambda message: None) if quiet else (lambda message: stderr.print(message))


def run_and_write(run: Callable[[Callable[[str], None]], dict[str, Any]],
                  draw: Callable[[dict[str, Any], Path], None], out: Path, plot: Path | None, force: bool,
                  quiet: bool) -> dict[str, Any]:
    """Refuse unwritable outputs before any work, ``run(log)``, write the JSON and (if asked) the plot."""
    from service.cli.common import check_output, write_output

    check_output(out, force, "--json")
    if plot is not None:
        check_output(plot, force, "--plot")
    result = run(logger(quiet))
    write_output(out, "--json", lambda path: write_json(path, result))
    if plot is not None:
        write_output(plot, "--plot", lambda path: draw(result, path))
    return result


def wrote(out: Path, plot: Path | None) -> None:
    from service.cli.common import stdout

    stdout.print(f"wrote {out}" + (f" and {plot}" if plot is not None else ""), highlight=False)


def summary_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print the summary as one table on stdout."""
    from rich.table import Table

    from service.cli.common import stdout

    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    stdout.print(table)


def command(func: Callable[..., None]) -> Any:
    """A one-command typer app around ``func`` (errors as one paragraph, exit status 2): ``app = command(main)``,
    then ``if __name__ == "__main__": app()``."""
    from service.cli.common import Typer, handles_errors

    app = Typer(add_completion=False)
    app.command()(handles_errors(func))
    return app
