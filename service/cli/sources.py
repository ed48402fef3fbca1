"""``marginalia source add | list | remove``: the places stewards may attach tables from over HTTP.

Only the operator, who has the server's shell, names a folder, a database URL or the Spark session;
``POST /datasets/attach`` (and ``Client.attach_dataset``) then names a source and what to read inside it
(:mod:`service.data.attach.sources`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import JsonFlag, Typer, emit, handles_errors, open_engine, stdout

source_app = Typer(help="Register the folders, databases and Spark session stewards may attach tables from over HTTP.")
SourceName = Annotated[str, typer.Argument(help="Source name (what a steward's attach request names).",
                                           metavar="NAME")]


@source_app.command("add")
@handles_errors
def source_add(
    name: SourceName,
    parquet_root: Annotated[Path | None, typer.Option(
        "--parquet-root", help="A folder: stewards attach Parquet files or globs inside it, never outside.",
        metavar="DIR")] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="A SQLAlchemy URL: stewards attach tables of this database; the URL and its password stay "
        "on the server (prefer a read-only role).", metavar="URL")] = None,
    spark: Annotated[bool, typer.Option(
        "--spark", help="The service's Spark session (MARGINALIA_SPARK_REMOTE, else local mode): stewards attach "
        "tables of its catalog.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Register a source of attachable tables: exactly one of --parquet-root, --sql or --spark."""
    from service.data.attach.sources import add_source

    source = add_source(open_engine(), name, parquet_root=parquet_root, sql=sql, spark=spark)
    emit(as_json, source.to_json(), lambda: stdout.print(
        f"source [bold]{source.name}[/] ({source.kind}): {source.where()}", highlight=False))


@source_app.command("list")
@handles_errors
def source_list(as_json: JsonFlag = False) -> None:
    """List the sources (database URLs with their password masked)."""
    from service.data.attach.sources import list_sources

    items = list_sources(open_engine())

    def human() -> None:
        table = Table("name", "kind", "where")
        for s in items:
            table.add_row(s.name, s.kind, s.where())
        stdout.print(table)

    emit(as_json, [s.to_json() for s in items], human)


@source_app.command("remove")
@handles_errors
def source_remove(name: SourceName, as_json: JsonFlag = False) -> None:
    """Forget a source: no new attach through it; datasets already attached through it keep counting where they
    live (each keeps its own copy of the location)."""
    from service.data.attach.sources import remove_source

    source = remove_source(open_engine(), name)
    emit(as_json, {"name": source.name, "removed": True},
         lambda: stdout.print(f"removed source [bold]{source.name}[/]"))
