"""The ``marginalia`` command line (typer). Every command that prints takes ``--json``.

Errors are one paragraph on stderr (or ``{"error", "message"}`` on stdout with ``--json``) and exit
status 2; nothing is stored when a command fails before its release produced noise, and a command
that made a release says what became of its charge. Ctrl-C (or SIGTERM) stops a command at the next
safe point (:mod:`service.interrupts`): a release then says what of its charge was refunded and
what stands, and the command exits with status 130. A bug is one paragraph too, with exit status 1
(``MARGINALIA_DEBUG=1`` shows its traceback).

Every command first upgrades the database and recovers the releases that a killed process left
``pending`` (:func:`service.releases.recovery.recover_interrupted`), saying so on stderr.

One module per command group: :mod:`~service.cli.database` (``init``), :mod:`~service.cli.datasets`,
:mod:`~service.cli.sources`, :mod:`~service.cli.budgets` (and ``ledger``), :mod:`~service.cli.releases` (and the
free answers ``marginal``, ``synth``), :mod:`~service.cli.server` (``serve``, ``keys``),
:mod:`~service.cli.regression` (``fit``), :mod:`~service.cli.campaigns` (``public``, ``campaign``, ``simulate``:
local-DP collections);
what they share is :mod:`~service.cli.common`. This module builds :data:`app`. The benchmarks are not commands: they
live outside the shipped code, in the ``benchmarks`` package (``python -m benchmarks.NAME``, ``make bench``).
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

# the command line runs the service: on a client-only install (`pip install 'marginalia[client]'`) say so, in one line
_SERVER_PACKAGES = ("typer", "rich", "sqlalchemy", "alembic", "fastapi", "scipy", "mbi")
_missing = [name for name in _SERVER_PACKAGES if find_spec(name) is None]
if _missing:
    raise SystemExit(
        "marginalia: the command line runs the service and needs the server extra "
        f"({', '.join(_missing)} not installed): pip install 'marginalia[server]'"
    )

# the program itself (the console script, or ``python -m service.cli``, while it imports this package), not an import
if __name__ == "__main__" or Path(sys.argv[0]).name == "marginalia" or sys.argv[0] == "-m":
    from service import interrupts as _interrupts  # defer Ctrl-C before anything slow is imported

    _interrupts.defer_signals()

# each module registers its commands on ``app`` when imported, in the order ``marginalia --help`` lists them
from service.cli import database, releases, budgets, server, regression, datasets, sources, campaigns  # noqa: E402, I001, F401
from service.cli.common import app  # noqa: E402

app.add_typer(datasets.dataset_app, name="dataset")
app.add_typer(sources.source_app, name="source")
app.add_typer(budgets.budget_app, name="budget")
app.add_typer(releases.release_app, name="release")
app.add_typer(server.keys_app, name="keys")
app.add_typer(campaigns.public_app, name="public")
app.add_typer(campaigns.campaign_app, name="campaign")

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover
    app()
