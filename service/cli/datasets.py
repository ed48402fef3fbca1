"""``marginalia dataset load | attach | migrate | list | show``: sensitive tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import (
    DatasetName,
    JsonFlag,
    ProgressBars,
    QuietFlag,
    Typer,
    emit,
    handles_errors,
    open_engine,
    stdout,
)

dataset_app = Typer(help="Load and list sensitive tables.")

EngineOption = Annotated[str, typer.Option(
    "--engine", help="Where the rows are kept: duckdb (a Parquet file in the data folder, counted by DuckDB) or sql "
    "(a table in the service database).", metavar="duckdb|sql")]


@dataset_app.command("load")
@handles_errors
def dataset_load(
    name: Annotated[str, typer.Argument(help="Name of the new dataset.", metavar="NAME")],
    csv: Annotated[list[Path], typer.Option("--csv", help="CSV file(s); repeat for several raw files.")],
    domain: Annotated[Path | None, typer.Option(help="private-pgm domain JSON {column: size}.")] = None,
    bins: Annotated[Path | None, typer.Option(help="Public binning spec (YAML/JSON) for raw tables.")] = None,
    categorical: Annotated[str, typer.Option(help="Comma-separated unordered columns (with --domain).")] = "",
    engine_name: EngineOption = "duckdb",
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Load a sensitive table: coded 0..size-1 with --domain, or raw with a public --bins spec."""
    from service.data import datasets
    from service.errors import InvalidInput

    if (domain is None) == (bins is None):
        raise InvalidInput("give exactly one of --domain (coded table) or --bins (raw table with a binning spec)",
                           code="invalid_parameter")
    engine = open_engine()
    with ProgressBars(f"loading {name}", quiet or as_json) as bar:
        if domain is not None:
            if len(csv) != 1:
                raise InvalidInput("a coded table is one --csv file", code="invalid_parameter")
            cats = tuple(c.strip() for c in categorical.split(",") if c.strip())
            info = datasets.load_coded_csv(engine, name, csv[0], domain, cats, progress=bar, store=engine_name)
        else:
            info = datasets.load_raw_csv(engine, name, list(csv), bins, progress=bar, store=engine_name)
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"loaded [bold]{info.name}[/]: {info.rows:,} rows, {len(info.domain)} columns ({info.engine})"))


@dataset_app.command("attach")
@handles_errors
def dataset_attach(
    name: Annotated[str, typer.Argument(help="Name of the new dataset.", metavar="NAME")],
    spec: Annotated[Path, typer.Option("--spec", help="Public binning spec (YAML/JSON), applied inside the "
                                       "engine; a value outside it is refused, naming its column.")],
    parquet: Annotated[list[str] | None, typer.Option(
        "--parquet", help="Parquet file or glob (repeatable), read where it lives: nothing is copied.",
        metavar="PATH|GLOB")] = None,
    sql: Annotated[str | None, typer.Option("--sql", help="SQLAlchemy URL of the database the table lives in "
                                            "(with --table), without a password: a database that needs one is "
                                            "registered as a source (`source add --sql URL --password-env VAR`) and "
                                            "attached with --source.", metavar="URL")] = None,
    source: Annotated[str | None, typer.Option("--source", help="A registered source (`marginalia source list`): "
                                               "with --table for a sql or spark source, with --parquet (paths inside "
                                               "its folder) for a parquet source.", metavar="NAME")] = None,
    table: Annotated[str | None, typer.Option("--table", help="The table's name in the --sql database or the "
                                              "--source.")] = None,
    spark: Annotated[str | None, typer.Option("--spark", help="A table of the Spark session (MARGINALIA_SPARK_REMOTE, "
                                              "else local mode): a catalog name or parquet.`/path`; counted by "
                                              "Spark, nothing is copied.", metavar="TABLE")] = None,
    privacy_unit: Annotated[str | None, typer.Option(
        "--privacy-unit", help="Column naming each row's privacy unit (e.g. a person id; never coded or released): "
        "every scan keeps one row per unit, so each guarantee is per unit (docs/privacy.md 1.1).",
        metavar="COLUMN")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Register a table where it lives (nothing copied): Parquet files counted by DuckDB, a table of another SQL
    database counted there, or a Spark table counted by Spark; its public binning spec is applied inside the
    engine. With --privacy-unit, one row per unit is counted."""
    from service.data.attach.tables import attach_parquet, attach_spark, attach_sql
    from service.data.attach.through_source import attach_from_source
    from service.errors import InvalidInput

    if source is not None:
        if sql is not None or spark is not None or bool(parquet) == (table is not None):
            raise InvalidInput("--source NAME goes with --table T or with --parquet PATH|GLOB (inside its folder)",
                               code="invalid_parameter")
        info = attach_from_source(open_engine(), name, source, parquet=list(parquet) if parquet else None,
                                  table=table, bins=spec, privacy_unit=privacy_unit)
    elif sum([bool(parquet), sql is not None, spark is not None]) != 1 or (sql is None) != (table is None):
        raise InvalidInput("give either --parquet PATH|GLOB, or --sql URL with --table T, or --spark TABLE, or "
                           "--source NAME with --table T or --parquet PATH|GLOB", code="invalid_parameter")
    elif parquet:
        info = attach_parquet(open_engine(), name, list(parquet), spec, privacy_unit=privacy_unit)
    elif spark is not None:
        info = attach_spark(open_engine(), name, spark, spec, privacy_unit=privacy_unit)
    else:
        info = attach_sql(open_engine(), name, str(sql), str(table), spec, privacy_unit=privacy_unit)
    emit(as_json, info.to_json(), lambda: stdout.print(
        f"attached [bold]{info.name}[/]: {counted(info.rows, privacy_unit)}, {len(info.domain)} columns "
        f"({info.engine})"))


def counted(rows: int, privacy_unit: str | None) -> str:
    """What a dataset's count counts: its rows, or for a table attached with a privacy unit its units (every scan
    keeps one row per unit, docs/privacy.md 1.1)."""
    return f"{rows:,} rows" if privacy_unit is None else f"{rows:,} units of {privacy_unit!r}"


@dataset_app.command("migrate")
@handles_errors
def dataset_migrate(
    name: DatasetName,
    engine_name: EngineOption = "duckdb",
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Move a dataset's rows to another engine (a SQL table to a DuckDB Parquet file): the dataset switches only
    once the copy is complete; its budget, ledger and releases are untouched."""
    from service.data.relocate import migrate_dataset

    with ProgressBars(f"migrating {name}", quiet or as_json) as bar:
        d = migrate_dataset(open_engine(), name, engine_name, progress=bar)
    emit(as_json, {"name": d.name, "rows": d.rows, "engine": d.engine},
         lambda: stdout.print(f"migrated [bold]{d.name}[/]: {d.rows:,} rows now in {d.engine}"))


@dataset_app.command("list")
@handles_errors
def dataset_list(as_json: JsonFlag = False) -> None:
    """List datasets (public metadata only). A table attached with a privacy unit counts its units, not its rows
    (``privacy_unit`` names the column; every count and guarantee is then per unit)."""
    from service.data import datasets

    items = datasets.list_datasets(open_engine())
    payload = [{"name": d.name, "rows": d.rows, "privacy_unit": d.privacy_unit, "columns": len(d.domain),
                "engine": d.engine, "domain": d.domain.to_dict()} for d in items]

    def human() -> None:
        table = Table("name", "counted (rows, or privacy units)", "columns", "engine")
        for d in items:
            table.add_row(d.name, counted(d.rows, d.privacy_unit), str(len(d.domain)), d.engine)
        stdout.print(table)

    emit(as_json, payload, human)


@dataset_app.command("show")
@handles_errors
def dataset_show(name: DatasetName, as_json: JsonFlag = False) -> None:
    """Show a dataset's domain (sizes and kinds of its columns, and the labels of their codes where its spec or
    domain gives them)."""
    from service.data import datasets

    d = datasets.get_dataset(open_engine(), name)
    payload = {"name": d.name, "rows": d.rows, "engine": d.engine, "privacy_unit": d.privacy_unit,
               "domain": d.domain.to_dict(), "labels": d.labels}

    def human() -> None:
        table = Table("column", "size", "kind", "labels",
                      title=f"{d.name}: {counted(d.rows, d.privacy_unit)} ({d.engine})")
        for a in d.domain.attributes:
            labels = d.labels.get(a.name, [])
            table.add_row(a.name, str(a.size), a.kind, ", ".join(labels[:4]) + (", ..." if len(labels) > 4 else ""))
        stdout.print(table)

    emit(as_json, payload, human)
