"""Loading sensitive tables into the database, and reading their public metadata.

A load runs in ONE transaction: the dataset row, its ``data_<id>`` table and every chunk of rows
are committed together or not at all, so a bad row on line 200,000 leaves nothing behind. Files
are read in chunks (``CHUNK_ROWS``) so memory stays flat on large tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from db import tables
from db.engine import serialized_transaction, transaction
from db.models import Dataset
from service.binning import BinningError, BinningSpec, apply_spec, load_spec, read_options
from service.errors import Conflict, InvalidInput, NotFound
from workloads.domain import Domain, DomainError

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

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "rows": self.rows, "source": self.source, "domain": self.domain.to_dict()}


def load_coded_csv(
    engine: Engine,
    name: str,
    csv_path: Path,
    domain_path: Path,
    categorical: tuple[str, ...] = (),
    progress: LoadProgress | None = None,
    source: str | None = None,
) -> DatasetInfo:
    """Load a table already coded 0..size-1 with a private-pgm domain file ``{column: size}``.

    ``source`` is what the dataset records as its origin (default: the CSV path)."""
    try:
        domain_text = domain_path.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read domain file {domain_path}: {exc.strerror}", code="invalid_domain") from None
    try:
        domain = Domain.from_json(domain_text, categorical)
    except DomainError as exc:
        raise InvalidInput(f"domain file {domain_path}: {exc}", code="invalid_domain") from None
    total = _count_data_lines(csv_path)
    header = _read_header(csv_path)
    missing = [c for c in domain.names if c not in header]
    extra = [c for c in header if c not in domain]
    if missing or extra:
        raise InvalidInput(
            f"{csv_path}: columns do not match the domain {domain_path}"
            + (f"; missing from the file: {missing}" if missing else "")
            + (f"; in the file but not in the domain: {extra}" if extra else ""),
            code="column_mismatch",
        )
    chunks = _coded_chunks(csv_path, domain)
    return _store(engine, name, domain, chunks, total, source=source or str(csv_path), progress=progress)


def load_raw_csv(
    engine: Engine,
    name: str,
    csv_paths: list[Path],
    spec_path: Path,
    progress: LoadProgress | None = None,
    source: str | None = None,
) -> DatasetInfo:
    """Load raw files (numbers, strings) through a public binning spec (:mod:`service.binning`)."""
    try:
        spec = load_spec(spec_path)
    except BinningError as exc:
        raise InvalidInput(str(exc), code="invalid_spec") from None
    total = sum(_count_data_lines(p, header=spec.header, comment=spec.comment) for p in csv_paths)
    domain = spec.domain()

    def chunks() -> Iterator[np.ndarray]:
        for path in csv_paths:
            yield from _raw_chunks(path, spec)

    return _store(engine, name, domain, chunks(), total, source=source or ", ".join(map(str, csv_paths)),
                  progress=progress)


def _store(
    engine: Engine,
    name: str,
    domain: Domain,
    chunks: Iterator[np.ndarray],
    total: int,
    source: str,
    progress: LoadProgress | None,
) -> DatasetInfo:
    _check_name(name)
    rows = 0
    # Serialised from the start: the name check and the insert must not interleave with another load.
    with serialized_transaction(engine) as session:
        if session.execute(select(Dataset.id).where(Dataset.name == name)).first() is not None:
            raise Conflict(f"a dataset named {name!r} already exists; choose another name", code="duplicate_dataset")
        columns = [
            {"name": a.name, "size": a.size, "kind": a.kind, "sql": sql}
            for a, sql in zip(domain.attributes, tables.sql_column_names(len(domain)), strict=True)
        ]
        dataset = Dataset(name=name, domain_json=json.dumps({"columns": columns}), data_table="pending",
                          row_count=0, source=source)
        session.add(dataset)
        session.flush()
        dataset.data_table = tables.data_table_name(dataset.id)
        connection = session.connection()
        table = tables.create_data_table(connection, dataset.data_table, [a.size for a in domain.attributes])
        for codes in chunks:
            tables.insert_rows(connection, table, codes)
            rows += len(codes)
            if progress is not None:
                progress(rows, total)
        if rows == 0:
            raise InvalidInput(f"{source}: the file has no data rows; nothing was stored", code="empty_file")
        dataset.row_count = rows
    return DatasetInfo(name=name, rows=rows, domain=domain, source=source)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH or name != name.strip():
        raise InvalidInput(
            f"dataset name must be 1–{MAX_NAME_LENGTH} characters without surrounding spaces, got {name!r}",
            code="invalid_name",
        )


def _count_data_lines(path: Path, header: bool = True, comment: str | None = None) -> int:
    try:
        with path.open("rb") as handle:
            lines = [line for line in handle if line.strip() and not (comment and line.startswith(comment.encode()))]
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", code="unreadable_file") from None
    if not lines:
        raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file")
    count = len(lines) - (1 if header else 0)
    if count <= 0:
        raise InvalidInput(f"{path}: the file has no data rows; nothing was stored", code="empty_file")
    return count


def _read_header(path: Path) -> list[str]:
    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        raise InvalidInput(f"{path}: the file is empty; nothing was stored", code="empty_file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: not a readable CSV file ({exc})", code="malformed_csv") from None


def _coded_chunks(path: Path, domain: Domain) -> Iterator[np.ndarray]:
    """Validate and yield chunks of codes (rows x attributes, domain order)."""
    line = 2  # line 1 is the header
    try:
        reader = pd.read_csv(path, dtype=str, chunksize=CHUNK_ROWS, keep_default_na=False)
        for frame in reader:
            out = np.empty((len(frame), len(domain)), dtype=np.int64)
            for j, attribute in enumerate(domain.attributes):
                raw = frame[attribute.name].str.strip()
                numbers = pd.to_numeric(raw, errors="coerce")
                values = numbers.to_numpy(dtype=float)
                not_integer = np.isnan(values) | (values != np.round(values))
                _reject(path, attribute.name, raw, not_integer, line, "an integer code")
                out_of_range = (values < 0) | (values >= attribute.size)
                _reject(path, attribute.name, raw, out_of_range, line, f"a code in 0..{attribute.size - 1}")
                out[:, j] = values.astype(np.int64)
            yield out
            line += len(frame)
    except pd.errors.ParserError as exc:
        raise InvalidInput(f"{path}: malformed CSV near line {line}: {exc}", code="malformed_csv") from None


def _raw_chunks(path: Path, spec: BinningSpec) -> Iterator[np.ndarray]:
    line = 2 if spec.header else 1
    try:
        for frame in pd.read_csv(path, chunksize=CHUNK_ROWS, **read_options(spec)):
            frame = frame.dropna(how="all")
            try:
                yield apply_spec(spec, frame, first_line=line)
            except BinningError as exc:
                raise InvalidInput(f"{path}: {exc}", code="invalid_value") from None
            line += len(frame)
    except pd.errors.ParserError as exc:
        raise InvalidInput(f"{path}: malformed CSV near line {line}: {exc}", code="malformed_csv") from None


def _reject(path: Path, column: str, raw: pd.Series, bad: np.ndarray, first_line: int, expected: str) -> None:
    if not bad.any():
        return
    positions = np.flatnonzero(bad)[:5]
    examples = ", ".join(f"line {first_line + int(p)}: {raw.iloc[int(p)]!r}" for p in positions)
    raise InvalidInput(
        f"{path}, column {column!r}: {int(bad.sum())}+ value(s) are not {expected}; first offending rows: "
        f"{examples}. Nothing was stored.",
        code="invalid_value",
    )


# reading ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredDataset:
    """A dataset's public metadata plus what the release engine needs to count its rows."""

    id: int
    name: str
    rows: int
    domain: Domain
    data_table: str
    sql_columns: dict[str, str]


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
    )


def get_dataset(engine: Engine, name: str) -> StoredDataset:
    with transaction(engine) as session:
        dataset = session.execute(select(Dataset).where(Dataset.name == name)).scalar_one_or_none()
        if dataset is None:
            raise NotFound(f"no dataset named {name!r}", code="dataset_not_found")
        return stored_dataset(dataset)


def list_datasets(engine: Engine) -> list[StoredDataset]:
    with transaction(engine) as session:
        return [stored_dataset(d) for d in session.execute(select(Dataset).order_by(Dataset.name)).scalars()]
