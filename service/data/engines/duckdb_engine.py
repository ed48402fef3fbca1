"""The DuckDB engine's record: Parquet tables counted by an embedded DuckDB (:mod:`service.data.engines.duckdb_table`).

Two locations: :class:`StoredFile`, a file ``dataset load`` (or ``dataset migrate``) wrote in the service's data
folder, its columns already coded (``{"file": NAME}``); and :class:`ParquetFiles`, files attached where they live
(``dataset attach --parquet PATH|GLOB --spec SPEC``), coded inside DuckDB by the spec on every scan
(``{"parquet": [PATH|GLOB, ...], "spec": SPEC}``, with ``"privacy_unit"`` when set).

Attaching (:func:`attach`) finds the files without reading a row: each path made absolute, a file that does not exist
or a glob matching none refused (``missing_file``, naming the path), a file two of the paths name refused (DuckDB
would read it twice); the columns are read from the files' footers, and a file that is not Parquet is refused naming
it, never with DuckDB's own message (which may quote what it read).
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import duckdb
from sqlalchemy import Engine

from service.data.engines import claims as claiming
from service.data.engines.base import DUCKDB, TableEngine
from service.data.engines.claims import Claim
from service.data.engines.duckdb_table import DuckDBTable, literal, parquet_source, quote
from service.data.engines.record import Attaching, DataEngine, Location, Opening, spec_of, spec_to_dict
from service.data.engines.spec_sql import spec_columns
from service.data.engines.store import data_folder
from service.errors import InvalidInput
from workloads.binning import BinningSpec

GLOB_CHARACTERS = set("*?[")


@dataclass(frozen=True)
class StoredFile(Location):
    """A Parquet file the service wrote in its data folder (``file``: its name there), columns ``c0, c1, ...``."""

    TAG: ClassVar[str | None] = "file"
    file: str
    privacy_unit: str | None = None

    def open(self, service: Engine, dataset: Opening) -> TableEngine:
        columns = {a: quote(c) for a, c in dataset.sql_columns.items()}
        return DuckDBTable([str(data_folder(service) / self.file)], columns, dataset.name)

    def claims(self, service: Engine, data_table: str) -> set[Claim]:  # noqa: ARG002
        return claiming.file_claims([str(data_folder(service) / self.file)])


@dataclass(frozen=True)
class ParquetFiles(Location):
    """Parquet files attached where they live (absolute paths or globs), coded by the binning spec ``spec``."""

    TAG: ClassVar[str | None] = "parquet"
    parquet: tuple[str, ...]
    spec: dict[str, object] = field(default_factory=dict)
    privacy_unit: str | None = None

    def open(self, service: Engine, dataset: Opening) -> TableEngine:  # noqa: ARG002
        spec = spec_of(self.spec, dataset.name)
        return DuckDBTable(list(self.parquet), spec_columns(spec), dataset.name, privacy_unit=self.privacy_unit)

    def claims(self, service: Engine, data_table: str) -> set[Claim]:  # noqa: ARG002
        return claiming.file_claims(list(self.parquet))


@dataclass
class _ParquetAttach:
    """:class:`~service.data.engines.record.Attaching` of Parquet files (module docstring)."""

    sources: list[str]
    claims: dict[Claim, str]
    spec: BinningSpec
    unit: str | None
    name: str
    what: str = "files"
    prefix: str = ""
    unreadable: str = "engine_error"

    @property
    def where(self) -> str:
        return f"--parquet {', '.join(self.sources)}"

    @property
    def source(self) -> str:
        return ", ".join(self.sources)

    @property
    def location(self) -> ParquetFiles:
        return ParquetFiles(tuple(self.sources), spec_to_dict(self.spec), self.unit)

    def columns(self) -> list[str]:
        return _parquet_columns(self.sources)

    def table(self) -> DuckDBTable:
        return DuckDBTable(self.sources, spec_columns(self.spec), self.name, privacy_unit=self.unit)

    def close(self) -> None:
        pass


def attach(target: object, spec: BinningSpec, unit: str | None, name: str) -> Attaching:
    """The attach of the Parquet files ``target`` (a list of paths or globs; module docstring)."""
    paths = [str(p) for p in target] if isinstance(target, list | tuple) else []
    if not paths:
        raise InvalidInput("give at least one --parquet PATH or GLOB", code="invalid_parameter")
    sources = [_resolve(p) for p in paths]
    return _ParquetAttach(sources, _file_claims(sources), spec, unit, name)


def _file_claims(sources: list[str]) -> dict[Claim, str]:
    """The files ``sources`` read, by real path, each named ``--parquet PATH``; a file two of them name (two globs
    that overlap, a symlink beside its target) is refused, since DuckDB would read it twice: its rows would count
    twice in every marginal."""
    found: dict[Claim, str] = {}
    for source in sources:
        for claim in sorted(claiming.file_claims([source]), key=lambda c: c.key):
            if claim in found:
                raise InvalidInput(f"--parquet {claim.key}: this file is named twice (by {found[claim]} and by "
                                   f"{source}); DuckDB would read its rows twice; nothing was stored",
                                   code="invalid_parameter")
            found[claim] = source
    return {claim: f"--parquet {claim.key}" for claim in found}


def _resolve(path: str) -> str:
    """``path`` made absolute; a file that does not exist, or a glob that matches no file, is refused, and so is a
    path the file system refuses to look at (too long a name, a symlink loop, no permission: any ``OSError``)."""
    try:
        absolute = str(Path(path).expanduser().absolute())
        if GLOB_CHARACTERS & set(path):
            if not glob.glob(absolute):
                raise InvalidInput(f"--parquet {path}: no file matches this pattern; nothing was stored",
                                   code="missing_file")
        elif not Path(absolute).is_file():
            raise InvalidInput(f"--parquet {path}: no such file; nothing was stored", code="missing_file")
    except OSError:
        raise InvalidInput(f"--parquet {path}: this path cannot be read (too long a name, a symlink loop, or no "
                           "permission); nothing was stored", code="missing_file") from None
    return absolute


def _parquet_columns(sources: list[str]) -> list[str]:
    """The columns of the Parquet files ``sources`` (every file's footer is read, no row); a file that is not
    Parquet is refused, naming the first source DuckDB cannot read (never with DuckDB's own message, which may quote
    what it read)."""
    connection = duckdb.connect(":memory:")
    listed = ", ".join(literal(s) for s in sources)
    try:
        connection.execute(f"SELECT COUNT(*) FROM parquet_file_metadata([{listed}])").fetchall()
        return [row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {parquet_source(sources)}").fetchall()]
    except duckdb.Error:
        for source in sources:
            try:
                connection.execute(f"SELECT COUNT(*) FROM parquet_file_metadata({literal(source)})").fetchall()
            except duckdb.Error:
                raise InvalidInput(f"--parquet {source}: not readable as Parquet (not a Parquet file, damaged, or "
                                   "not readable by this service); nothing was stored", code="invalid_file") from None
        raise InvalidInput(f"--parquet {', '.join(sources)}: not readable as one Parquet table; nothing was stored",
                           code="invalid_file") from None
    finally:
        connection.close()


ENGINE = DataEngine(DUCKDB, locations=(StoredFile, ParquetFiles), attach=attach, stored=StoredFile)
