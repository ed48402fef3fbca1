"""``marginalia source add | update | list | remove``: the places stewards may attach tables from over HTTP.

Only the operator, who has the server's shell, names a folder, a database URL or the Spark session;
``POST /datasets/attach`` (and ``Client.attach_dataset``) then names a source and what to read inside it
(:mod:`service.data.attach.sources`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from service.cli.common import JsonFlag, Typer, emit, handles_errors, open_engine, stdout

if TYPE_CHECKING:
    from service.data.attach.sources import Source

source_app = Typer(help="Register the folders, databases and Spark session stewards may attach tables from over HTTP.")
SourceName = Annotated[str, typer.Argument(help="Source name (what a steward's attach request names).",
                                           metavar="NAME")]


PasswordEnv = Annotated[str | None, typer.Option(
    "--password-env", help="The environment variable holding the --sql database's password, in every server "
    "process (stored: its name, never the password).", metavar="VAR")]
PasswordFile = Annotated[Path | None, typer.Option(
    "--password-file", help="A file holding the --sql database's password on one line, read at each connection "
    "(stored: its path, never the password; keep it readable by the service's user only).", metavar="PATH")]
NoCheck = Annotated[bool, typer.Option(
    "--no-check", help="Store the source without connecting first (for a password only the server processes "
    "have).")]


@source_app.command("add")
@handles_errors
def source_add(
    name: SourceName,
    parquet_root: Annotated[Path | None, typer.Option(
        "--parquet-root", help="A folder: stewards attach Parquet files or globs inside it, never outside.",
        metavar="DIR")] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="A SQLAlchemy URL without a password (prefer a read-only role): stewards attach tables of this "
        "database; the password's place is --password-env or --password-file.", metavar="URL")] = None,
    password_env: PasswordEnv = None,
    password_file: PasswordFile = None,
    spark: Annotated[bool, typer.Option(
        "--spark", help="The service's Spark session (MARGINALIA_SPARK_REMOTE, else local mode): stewards attach "
        "tables of its catalog.")] = False,
    no_check: NoCheck = False,
    as_json: JsonFlag = False,
) -> None:
    """Register a source of attachable tables: exactly one of --parquet-root, --sql or --spark. A --sql database
    must accept a connection now (unless --no-check)."""
    from service.data.attach.sources import add_source

    source = add_source(open_engine(), name, parquet_root=parquet_root, sql=sql, spark=spark,
                        password_env=password_env, password_file=password_file, check=not no_check)
    emit(as_json, source.to_json(), lambda: _say(source, "source"))


@source_app.command("update")
@handles_errors
def source_update(
    name: SourceName,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="The database's new URL, without a password (the same tables: moved, or reached as another "
        "role).", metavar="URL")] = None,
    password_env: PasswordEnv = None,
    password_file: PasswordFile = None,
    no_password: Annotated[bool, typer.Option("--no-password", help="The database needs no password.")] = False,
    no_check: NoCheck = False,
    as_json: JsonFlag = False,
) -> None:
    """Rotate a sql source's password or move its database: every dataset attached through it connects the new way
    from now on; no budget, release or ledger entry changes. Refused, changing nothing, unless the database accepts
    a connection (unless --no-check) and still holds each of those datasets' tables."""
    from service.data.attach.sources import update_source

    source = update_source(open_engine(), name, sql=sql, password_env=password_env, password_file=password_file,
                           no_password=no_password, check=not no_check)
    emit(as_json, source.to_json(), lambda: _say(source, "updated source"))


def _say(source: Source, what: str) -> None:
    password = f"; password: {source.password()}" if source.kind == "sql" else ""
    serves = f"; serves {len(source.datasets)} dataset(s)" if source.datasets else ""
    stdout.print(f"{what} [bold]{source.name}[/] ({source.kind}): {source.where()}{password}{serves}", highlight=False)


@source_app.command("list")
@handles_errors
def source_list(as_json: JsonFlag = False) -> None:
    """List the sources: where each reads, where a sql source's password is (never the password), the datasets
    attached through it, and whether it is removed (serving those datasets, taking no new attach)."""
    from service.data.attach.sources import list_sources

    items = list_sources(open_engine())

    def human() -> None:
        table = Table("name", "kind", "where", "password", "datasets", "state")
        for s in items:
            table.add_row(s.name, s.kind, s.where(), s.password(), ", ".join(s.datasets),
                          "removed" if s.removed else "active")
        stdout.print(table)

    emit(as_json, [s.to_json() for s in items], human)


@source_app.command("remove")
@handles_errors
def source_remove(name: SourceName, as_json: JsonFlag = False) -> None:
    """Stop new attaches through a source. Datasets attached through it keep counting where they live: a sql
    source they read through is kept, marked removed, for its URL and password (`source update` still rotates
    them)."""
    from service.data.attach.sources import remove_source

    source = remove_source(open_engine(), name)
    kept = bool(source.datasets)
    emit(as_json, {"name": source.name, "removed": True, "kept_for": list(source.datasets)},
         lambda: stdout.print(f"removed source [bold]{source.name}[/]" + (
             f"; kept for the dataset(s) attached through it: {', '.join(source.datasets)}" if kept else "")))
