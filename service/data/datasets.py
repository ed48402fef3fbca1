"""Loading sensitive tables, and reading their public metadata.

The rows go to one of the data engines (:mod:`service.data.engines`): by default a Parquet file in the service's
data folder, counted by DuckDB (``store="duckdb"``), or a ``data_<id>`` table in the service database
(``store="sql"``). A load is all-or-nothing: for SQL the dataset row and every chunk of rows are committed in one
transaction; a Parquet file is written under a temporary name, renamed into place once complete, and only then
registered by one short transaction (and removed if that fails), so a bad row on line 200,000 leaves nothing
behind, and other writers of the service database are not held up while a large file loads. Files are streamed in chunks
of ``CHUNK_ROWS`` rows (:mod:`service.data.csv_chunks`): memory is bounded by the chunk, not the file. Each chunk
is parsed by pandas' C parser, validated with numpy (in one comparison when every code is an in-range integer),
and written in bulk (a Parquet row group, written by a background thread while the next chunk is parsed, or
:func:`db.tables.insert_rows`); every row keeps its file line, so an error names the line, and a row with more or
fewer fields than the header is reported as such (not as a bad value in some column).

A raw table keeps its binning spec's labels (``[25, 30)``, ``Private``) with its domain, and a coded table the
labels its domain file gives, so answers show them instead of bare codes (:attr:`StoredDataset.labels`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db import tables
from db.engine import serialized_transaction, transaction
from db.models import Dataset
from service import interrupts
from service.data import csv_chunks
from service.data.engines.base import SQL
from service.data.engines.duckdb_engine import StoredFile
from service.data.engines.record import Location
from service.data.engines.registry import DEFAULT_ENGINE, ENGINES, store_engines
from service.data.engines.store import ParquetWriter, data_folder, new_file_name
from service.errors import Conflict, InvalidInput, NotFound
from workloads.binning import BinningError, BinningSpec, apply_spec, load_spec, offending_lines
from workloads.domain import Domain, DomainError, labels_from_json

CHUNK_ROWS = 50_000
MAX_NAME_LENGTH = 200

#: ``progress(rows_done, rows_total)``
LoadProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    rows: int
    domain: Domain
    source: str
    labels: dict[str, list[str]] = field(default_factory=dict)
    engine: str = SQL

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "rows": self.rows, "source": self.source, "engine": self.engine,
                "domain": self.domain.to_dict(), "labels": self.labels}


def load_coded_csv(
    engine: Engine,
    name: str,
    csv_path: Path,
    domain_path: Path,
    categorical: tuple[str, ...] = (),
    progress: LoadProgress | None = None,
    source: str | None = None,
    chunk_rows: int | None = None,
    store: str = DEFAULT_ENGINE,
) -> DatasetInfo:
    """Load a table already coded 0..size-1 with a private-pgm domain file ``{column: size}`` (or ``{column: {"size",
    "kind", "labels"}}``: the labels, public, are what answers show for the codes).

    ``source`` is what the dataset records as its origin (default: the CSV path); ``store`` the engine that keeps
    the rows (:mod:`service.data.engines`: a Parquet file counted by DuckDB, the default, or a SQL table)."""
    try:
        domain_text = domain_path.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read {domain_path}: {exc.strerror}", code="invalid_domain") from None
    try:
        domain = Domain.from_json(domain_text, categorical)
        labels = labels_from_json(domain_text)
    except DomainError as exc:
        raise InvalidInput(f"{domain_path}: not a domain: {exc}", code="invalid_domain") from None
    chunk_rows = chunk_rows or CHUNK_ROWS
    total = csv_chunks.count_data_lines(csv_path, chunk_rows=chunk_rows)
    header = csv_chunks.header(csv_path)
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise InvalidInput(f"{csv_path}: the header names column(s) {duplicated} more than once",
                           code="column_mismatch")
    missing = [c for c in domain.names if c not in header]
    extra = [c for c in header if c not in domain]
    if missing or extra:
        raise InvalidInput(
            f"{csv_path}: its columns do not match those of {domain_path}"
            + (f"; missing from the file: {missing}" if missing else "")
            + (f"; in the file but not in the domain: {extra}" if extra else ""),
            code="column_mismatch",
        )
    chunks = _coded_chunks(csv_path, domain, chunk_rows)
    return _store(engine, name, domain, chunks, total, source=source or str(csv_path), progress=progress,
                  labels=labels, store=store)


def load_raw_csv(
    engine: Engine,
    name: str,
    csv_paths: list[Path],
    spec_path: Path,
    progress: LoadProgress | None = None,
    source: str | None = None,
    chunk_rows: int | None = None,
    store: str = DEFAULT_ENGINE,
) -> DatasetInfo:
    """Load raw files (numbers, strings) through a public binning spec (:mod:`workloads.binning`) into ``store``
    (as :func:`load_coded_csv`)."""
    try:
        spec = load_spec(spec_path)
    except BinningError as exc:
        raise InvalidInput(str(exc), code="invalid_spec") from None
    chunk_rows = chunk_rows or CHUNK_ROWS
    total = sum(csv_chunks.count_data_lines(p, header=spec.header, comment=spec.comment, chunk_rows=chunk_rows)
                for p in csv_paths)
    domain = spec.domain()

    def chunks() -> Iterator[np.ndarray]:
        for path in csv_paths:
            yield from _raw_chunks(path, spec, chunk_rows)

    labels = {c.name: list(c.labels) for c in spec.columns}
    return _store(engine, name, domain, chunks(), total, source=source or ", ".join(map(str, csv_paths)),
                  progress=progress, labels=labels, store=store)


def _store(
    engine: Engine,
    name: str,
    domain: Domain,
    chunks: Iterator[np.ndarray],
    total: int,
    source: str,
    progress: LoadProgress | None,
    labels: dict[str, list[str]] | None = None,
    store: str = DEFAULT_ENGINE,
) -> DatasetInfo:
    check_name(name)
    _check_store(store)
    labels = labels or {}
    columns = [
        {"name": a.name, "size": a.size, "kind": a.kind, "sql": sql, **({"labels": labels[a.name]}
                                                                      if a.name in labels else {})}
        for a, sql in zip(domain.attributes, tables.sql_column_names(len(domain)), strict=True)
    ]
    sizes = list(domain.sizes().values())
    if store == SQL:
        # One transaction, serialised from the start: the name check and the insert must not interleave with another
        # load, and the rows are committed with the dataset row.
        with serialized_transaction(engine) as session:
            dataset = _new_dataset(session, name, columns, source, SQL)
            table = tables.create_data_table(session.connection(), dataset.data_table, sizes)
            rows = _write_chunks(name, chunks, lambda codes: tables.insert_rows(session.connection(), table, codes),
                                 total, progress)
            dataset.row_count = _nonempty(rows, source)
    else:
        # The file is written first, outside any transaction (other writers of the service database are not held
        # up by a long load), then registered by one short transaction; either failing leaves no file and no row.
        with transaction(engine) as session:
            _refuse_duplicate(session, name)
        writer = ParquetWriter(data_folder(engine), new_file_name(), [c["sql"] for c in columns], sizes)
        written: Path | None = None
        try:
            rows = _nonempty(_write_chunks(name, chunks, writer.write, total, progress), source)
            written = writer.finish()
            with serialized_transaction(engine) as session:
                dataset = _new_dataset(session, name, columns, source, store)
                dataset.location = json.dumps(StoredFile(written.name).to_json())
                dataset.row_count = rows
        except BaseException:
            writer.abort()
            if written is not None:  # the file was complete but the dataset row was not committed
                written.unlink(missing_ok=True)
            raise
    return DatasetInfo(name=name, rows=rows, domain=domain, source=source, labels=labels, engine=store)


def _refuse_duplicate(session: Session, name: str) -> None:
    if session.execute(select(Dataset.id).where(Dataset.name == name)).first() is not None:
        raise Conflict(f"a dataset named {name!r} already exists; choose another name", code="duplicate_dataset")


def _new_dataset(session: Session, name: str, columns: list[dict[str, object]], source: str, store: str) -> Dataset:
    """The new dataset's row (its ``data_table`` named after its id), once no dataset has the name."""
    _refuse_duplicate(session, name)
    dataset = Dataset(name=name, domain_json=json.dumps({"columns": columns}), data_table="pending", row_count=0,
                      source=source, engine=store)
    session.add(dataset)
    session.flush()
    dataset.data_table = tables.data_table_name(dataset.id)
    return dataset


def _nonempty(rows: int, source: str) -> int:
    if rows == 0:
        raise InvalidInput(f"{source}: the file has no data rows; nothing was stored", code="empty_file")
    return rows


def _write_chunks(name: str, chunks: Iterator[np.ndarray], write: Callable[[np.ndarray], None], total: int,
                  progress: LoadProgress | None) -> int:
    rows = 0
    for codes in chunks:
        interrupts.raise_if_requested(f"while loading {name!r}: nothing was stored")
        write(codes)
        rows += len(codes)
        if progress is not None:
            progress(rows, total)
    return rows


def _check_store(store: str) -> None:
    if store not in store_engines():
        raise InvalidInput(f"engine must be one of {store_engines()}, got {store!r}", code="invalid_parameter")



def check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH or name != name.strip():
        raise InvalidInput(
            f"dataset name must be 1–{MAX_NAME_LENGTH} characters without surrounding spaces, got {name!r}",
            code="invalid_name",
        )


def _coded_chunks(path: Path, domain: Domain, chunk_rows: int) -> Iterator[np.ndarray]:
    """Validate and yield chunks of codes (rows x attributes, domain order), vectorised: the C parser converts the
    numbers; a chunk whose columns are all integers, all within their domains, is checked in one comparison with the
    sizes; otherwise each column is checked on its own (every bad one named, with its first lines), and only a
    column the parser could not convert is read again as strings."""
    sizes = np.asarray([a.size for a in domain.attributes], dtype=np.int64)
    for chunk in csv_chunks.chunks(path, chunk_rows):
        numbers = chunk.numbers()
        if all(pd.api.types.is_integer_dtype(numbers[name]) for name in domain.names):
            codes = numbers[list(domain.names)].to_numpy(dtype=np.int64)
            if not ((codes < 0) | (codes >= sizes)).any():
                yield codes
                continue
        out = np.empty((len(chunk), len(domain)), dtype=np.int64)
        problems = []
        for j, attribute in enumerate(domain.attributes):
            column = numbers[attribute.name]
            if pd.api.types.is_integer_dtype(column) or pd.api.types.is_float_dtype(column):
                values = column.to_numpy(dtype=float)
            else:
                values = pd.to_numeric(column.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float)
            not_integer = np.isnan(values) | (values != np.round(values))
            out_of_range = ~not_integer & ((values < 0) | (values >= attribute.size))
            for bad, expected in ((not_integer, "an integer code"),
                                  (out_of_range, f"a code in 0..{attribute.size - 1}")):
                if bad.any():
                    problems.append(f"column {attribute.name!r}: a value is not {expected}, first on "
                                    f"{offending_lines(bad, chunk.lines)}")
            if not problems:
                out[:, j] = values.astype(np.int64)
        if problems:  # every column at fault, so that one round of fixes is enough
            raise InvalidInput(f"{chunk.path}, {'; '.join(problems)}. Nothing was stored.", code="invalid_value")
        yield out


def _raw_chunks(path: Path, spec: BinningSpec, chunk_rows: int) -> Iterator[np.ndarray]:
    names = None if spec.header else spec.names
    for chunk in csv_chunks.chunks(path, chunk_rows, comment=spec.comment, names=names, strip=spec.strip):
        try:
            yield apply_spec(spec, chunk.strings(), lines=chunk.lines)
        except BinningError as exc:
            raise InvalidInput(f"{path}: {exc}", code="invalid_value") from None


# reading ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredDataset:
    """A dataset's public metadata plus what the release engine needs to count its rows.

    ``labels`` maps columns to the label of each code: a raw table's from its public binning spec (a bin interval
    or a category's name), a coded table's from its domain file (none when the file gives none)."""

    id: int
    name: str
    rows: int
    domain: Domain
    data_table: str
    sql_columns: dict[str, str]
    labels: dict[str, list[str]] = field(default_factory=dict)
    #: where the rows live: the engine (:mod:`service.data.engines.registry`) and its typed location, read from the
    #: stored JSON (never shown to analysts; None: the engine's location stored as NULL, a ``data_<id>`` table)
    engine: str = SQL
    location: Location | None = None

    def labels_of(self, attributes: Sequence[str]) -> dict[str, list[str]]:
        return {a: self.labels[a] for a in attributes if a in self.labels}

    @property
    def privacy_unit(self) -> str | None:
        """The column whose value is one privacy unit (``dataset attach --privacy-unit``; docs/privacy.md 1.1), or
        None when every row is one. Public: it says what every guarantee and every count is about."""
        return None if self.location is None else self.location.privacy_unit


def stored_dataset(dataset: Dataset) -> StoredDataset:
    columns = json.loads(dataset.domain_json)["columns"]
    domain = Domain.from_dict({c["name"]: {"size": c["size"], "kind": c["kind"]} for c in columns})
    return StoredDataset(
        id=dataset.id,
        name=dataset.name,
        rows=dataset.row_count,
        domain=domain,
        data_table=dataset.data_table,
        sql_columns={c["name"]: c["sql"] for c in columns},
        labels={c["name"]: list(c["labels"]) for c in columns if "labels" in c},
        engine=dataset.engine,
        location=_location(dataset),
    )


def _location(dataset: Dataset) -> Location | None:
    """The typed location of the stored ``dataset``; None for an engine this service does not register (opening it
    is then refused, naming the engine: :func:`service.data.engines.registry.open_table`)."""
    record = ENGINES.find(dataset.engine)
    return None if record is None else record.read(dataset.location)


def get_dataset(engine: Engine, name: str) -> StoredDataset:
    with transaction(engine) as session:
        dataset = session.execute(select(Dataset).where(Dataset.name == name)).scalar_one_or_none()
        if dataset is None:
            raise NotFound(f"no dataset named {name!r}", code="dataset_not_found")
        return stored_dataset(dataset)


def list_datasets(engine: Engine) -> list[StoredDataset]:
    with transaction(engine) as session:
        return [stored_dataset(d) for d in session.execute(select(Dataset).order_by(Dataset.name)).scalars()]
