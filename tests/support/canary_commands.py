"""What the canary suite runs on the command line: every command that reads a sensitive table, against every
canary dataset (:mod:`tests.support.canary_tables`), with valid and invalid arguments.

:data:`COMMANDS` classifies every command of the typer app: either a function ``(context) -> [Run, ...]`` (the
command reads a table, or a dataset's records, and is run) or the reason it reads none. A command of the app without
an entry fails ``tests/system/test_canaries.py`` until it is classified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.support.canary_requests import FIT_DESIGNS, FIT_SETTINGS, Context
from tests.support.canary_tables import ATTACH_TABLES, HEALTHY, bad_cells, canary_frame, with_cells


@dataclass(frozen=True)
class Run:
    """One command line: ``args`` after ``marginalia``; ``variant`` names the canary dataset it reads (or None)."""

    label: str
    args: list[str]
    variant: str | None = None


def _files(ctx: Context) -> dict[str, str]:
    """The raw CSVs the load commands read: the canary table, and the table with one bad cell of each kind."""
    frame = canary_frame(ctx.tables.canaries)
    files = {}
    for label, cells in {"clean": {}, **bad_cells(ctx.tables.canaries)}.items():
        path = ctx.tables.folder / f"cli-{len(files)}.csv"
        with_cells(frame, cells).to_csv(path, index=False)
        files[label] = str(path)
    return files


def load(ctx: Context) -> list[Run]:
    spec = str(ctx.tables.spec)
    runs = []
    for label, path in _files(ctx).items():
        for engine in ("duckdb", "sql"):
            runs.append(Run(f"{label} ({engine})", ["dataset", "load", ctx.unique("cli load"), "--csv", path,
                                                    "--bins", spec, "--engine", engine], f"new table ({engine})"))
    return runs


def attach(ctx: Context) -> list[Run]:
    t = ctx.tables
    spec, lake = str(t.spec), t.lake
    runs = [Run(f"--parquet {key}", ["dataset", "attach", ctx.unique("cli attach"), "--parquet", str(lake / path),
                                     "--spec", spec], "canary lake") for key, path in ATTACH_TABLES.items()]
    runs.append(Run("--parquet clean --privacy-unit no_such_column",
                    ["dataset", "attach", ctx.unique("cli attach"), "--parquet", str(lake / ATTACH_TABLES["clean"]),
                     "--spec", spec, "--privacy-unit", "no_such_column"], "canary lake"))
    runs.append(Run("--sql the tampered SQLite table", ["dataset", "attach", ctx.unique("cli attach"), "--sql",
                                                        f"sqlite:///{t.sqlite_file}", "--table", "people",
                                                        "--spec", spec], "canary sqlite"))
    if t.postgres_url is not None:
        runs.append(Run("--sql the tampered PostgreSQL table", ["dataset", "attach", ctx.unique("cli attach"),
                                                                "--sql", t.postgres_url, "--table", "people",
                                                                "--spec", spec], "canary postgres"))
    if t.spark_views:
        for label, path in (("clean", lake / ATTACH_TABLES["clean"]),
                            ("a canary string in age", lake / ATTACH_TABLES["restrung"]),
                            ("a folder whose files disagree", lake / "attach" / "mixed")):
            runs.append(Run(f"--spark {label}", ["dataset", "attach", ctx.unique("cli attach"), "--spark",
                                                 f"parquet.`{path}`", "--spec", spec], "canary spark"))
    return runs


def per_dataset(*args: str, first_only: bool = False) -> Callable[[Context], list[Run]]:
    """``args`` with ``{name}`` standing for each canary dataset (only the first: a command that reads the dataset's
    records, not its rows, reads the same records whatever the engine)."""
    def build(ctx: Context) -> list[Run]:
        names = ctx.datasets()[:1] if first_only else ctx.datasets()
        return [Run(" ".join(args), [a.replace("{name}", name) for a in args], name) for name in names]
    return build


#: The fits the command line runs on every dataset: one per way an engine is read (marginal counts, DP-IHT's
#: gradient sums, ObjPert's distinct rows); the HTTP half runs every method of the registry.
CLI_FITS = (("linear", "dd-ssp"), ("linear", "dp-iht"), ("logistic", "objpert"))


def releases(ctx: Context) -> list[Run]:
    runs = []
    for name in ctx.datasets():
        runs.append(Run("laplace", ["release", "marginals", name, "--mechanism", "laplace", "--workload", "all-2way",
                                    "--epsilon", "0.1", "--quiet"], name))
    # after the zCDP releases of the HTTP half (issue 27, finding 6: the accountant's overflow)
    return [*runs, Run("an epsilon far beyond the budget", ["release", "marginals", HEALTHY.name, "--mechanism",
                                                            "laplace", "--workload", "all-1way", "--epsilon", "1e6",
                                                            "--quiet"], HEALTHY.name)]


def fits(ctx: Context) -> list[Run]:
    runs = []
    for name in ctx.datasets():
        for task, method in CLI_FITS:
            target, features = FIT_DESIGNS[task]
            settings = [f"--{k.replace('_', '-')}={v}" for k, v in FIT_SETTINGS[method].items()]
            runs.append(Run(f"{task} {method}", ["fit", task, name, "--target", target, "--features",
                                                 ",".join(features), "--method", method, "--epsilon", "0.5",
                                                 "--delta", "1e-6", *settings, "--quiet"], name))
    return runs


def _two_releases(ctx: Context) -> list[tuple[str, int]]:
    """A release of the healthy dataset and one of a tampered dataset: answering reads the release, never the
    table, so which engine made it does not matter."""
    releases = dict(ctx.tables.releases)
    return [(name, releases[name]) for name in (HEALTHY.name, ctx.tables.built[0].name)]


def answers(ctx: Context) -> list[Run]:
    return [Run("marginal sex", ["marginal", str(i), "sex"], name) for name, i in _two_releases(ctx)]


def synth(ctx: Context) -> list[Run]:
    out = ctx.tables.folder / "synth"
    out.mkdir(exist_ok=True)
    return [Run("synth 3 rows", ["synth", str(i), "--rows", "3", "--out", str(out / f"{i}.csv"), "--force"], name)
            for name, i in _two_releases(ctx)]


def simulate(ctx: Context) -> list[Run]:
    return [Run("simulate --table", ["simulate", ctx.tables.campaign, "--table", name, "--rows", "50", "--quiet"], name)
            for name in ctx.datasets()]


NO_TABLE = "reads no sensitive table"
COMMANDS: dict[str, Callable[[Context], list[Run]] | str] = {
    "init": f"creates or upgrades the database; {NO_TABLE}",
    "serve": "serves the HTTP API, which the suite calls in process (the HTTP half)",
    "marginal": answers,
    "synth": synth,
    "ledger": per_dataset("ledger", "{name}", first_only=True),  # every ledger note is searched where it is stored
    "fit": fits,
    "simulate": simulate,
    "dataset load": load,
    "dataset attach": attach,
    "dataset migrate": per_dataset("dataset", "migrate", "{name}", "--engine", "duckdb", "--quiet"),
    "dataset list": lambda ctx: [Run("list", ["dataset", "list"])],
    "dataset show": per_dataset("dataset", "show", "{name}", first_only=True),
    "source add": f"registers a folder, database or Spark session; {NO_TABLE}",
    "source update": "points a sql source at a new URL or password, reading its database's catalog (table names), "
                     f"never a row; {NO_TABLE}",
    "source list": f"lists the sources (the operator's own folders and URLs); {NO_TABLE}",
    "source remove": f"forgets a source; {NO_TABLE}",
    "budget set": per_dataset("budget", "set", "{name}", "--epsilon", "50", "--delta", "1e-5", first_only=True),
    "budget show": per_dataset("budget", "show", "{name}", first_only=True),
    "release marginals": releases,
    "release list": per_dataset("release", "list", "{name}", first_only=True),
    "keys create": f"API keys; {NO_TABLE}",
    "keys revoke": f"API keys; {NO_TABLE}",
    "keys list": f"API keys; {NO_TABLE}",
    "keys scope": f"a gateway's campaign scopes; {NO_TABLE}",
    "keys unscope": f"a gateway's campaign scopes; {NO_TABLE}",
    "keys scopes": f"a gateway's campaign scopes; {NO_TABLE}",
    "public load": f"public tables (not sensitive); {NO_TABLE}",
    "public list": f"public tables (not sensitive); {NO_TABLE}",
    "public show": f"public tables (not sensitive); {NO_TABLE}",
    "campaign create": f"local-DP campaigns: public parameters and randomized reports only; {NO_TABLE}",
    "campaign plan": f"local-DP campaigns: public tables only; {NO_TABLE}",
    "campaign list": f"local-DP campaigns; {NO_TABLE}",
    "campaign show": f"local-DP campaigns; {NO_TABLE}",
    "campaign close": f"local-DP campaigns; {NO_TABLE}",
    "campaign fit": f"local-DP campaigns: estimates from randomized reports; {NO_TABLE}",
    "campaign cap": f"local-DP spending caps; {NO_TABLE}",
}


def command_paths(app: object) -> list[str]:
    """Every command of the typer ``app``, as ``"group command"`` (or ``"command"``)."""
    import typer.main

    paths: list[str] = []

    def walk(command: object, prefix: tuple[str, ...]) -> None:
        children = getattr(command, "commands", None)
        if children is None:
            paths.append(" ".join(prefix))
            return
        for name, child in children.items():
            walk(child, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return paths
