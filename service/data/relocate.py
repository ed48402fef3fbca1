"""Moving a stored dataset from one engine to another: ``marginalia dataset migrate NAME --engine duckdb``.

A dataset whose rows are a ``data_<id>`` table in the service database (engine ``sql``, every table loaded before
issue 21) is copied, streamed in chunks, into a Parquet file in the data folder (:mod:`service.data.engines.store`);
only once the file is complete and holds every row does one transaction switch the dataset to ``duckdb`` and drop
the old table. A failure at any point before that leaves the dataset as it was and removes the partial file; its
releases, budget and ledger are untouched (they refer to the dataset, not to where its rows live).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from sqlalchemy import Engine, select, text

from db import tables
from db.engine import serialized_transaction
from db.models import Dataset
from service import interrupts
from service.data.datasets import CHUNK_ROWS, StoredDataset, get_dataset
from service.data.engines.base import DUCKDB, SQL, codes_outside_domain
from service.data.engines.duckdb_engine import StoredFile
from service.data.engines.registry import store_engines
from service.data.engines.sql_engine import ServiceTable
from service.data.engines.store import ParquetWriter, data_folder, new_file_name
from service.errors import Conflict, InvalidInput


def migrate_dataset(engine: Engine, name: str, to: str, *, progress: Callable[[int, int], None] | None = None,
                    chunk_rows: int = CHUNK_ROWS) -> StoredDataset:
    """Move dataset ``name`` to engine ``to`` (module docstring); returns the dataset as now stored."""
    if to not in store_engines():
        raise InvalidInput(f"engine must be one of {store_engines()}, got {to!r}", code="invalid_parameter")
    dataset = get_dataset(engine, name)
    if dataset.engine == to:
        raise Conflict(f"dataset {name!r} already lives in the {to} engine; nothing to do", code="already_there")
    if (dataset.engine, to) != (SQL, DUCKDB) or dataset.location != ServiceTable():
        raise InvalidInput(f"dataset {name!r} lives in the {dataset.engine} engine: only SQL tables migrate (to "
                           "duckdb); an attached table stays where it lives", code="invalid_parameter")
    columns = [dataset.sql_columns[a] for a in dataset.domain.names]
    writer = ParquetWriter(data_folder(engine), new_file_name(), columns,
                           list(dataset.domain.sizes().values()))
    written: Path | None = None
    try:
        rows = 0
        for codes in _sql_rows(engine, dataset, columns, chunk_rows):
            interrupts.raise_if_requested(f"while migrating {name!r}: the dataset was left as it was")
            writer.write(codes)
            rows += len(codes)
            if progress is not None:
                progress(rows, dataset.rows)
        if rows != dataset.rows:
            raise Conflict(f"dataset {name!r} changed while it was copied ({rows} rows read, {dataset.rows} "
                           "recorded); nothing was changed", code="dataset_changed")
        written = writer.finish()
        with serialized_transaction(engine) as session:
            row = session.execute(select(Dataset).where(Dataset.id == dataset.id)).scalar_one()
            if row.engine != SQL:
                raise Conflict(f"dataset {name!r} was migrated by someone else meanwhile", code="dataset_changed")
            row.engine = DUCKDB
            row.location = json.dumps(StoredFile(written.name).to_json())
            session.connection().execute(text(f"DROP TABLE {dataset.data_table}"))
    except BaseException:
        writer.abort()
        if written is not None:
            written.unlink(missing_ok=True)
        raise
    return get_dataset(engine, name)


def _sql_rows(engine: Engine, dataset: StoredDataset, columns: list[str], chunk_rows: int) -> Iterator[np.ndarray]:
    """The dataset's coded rows in chunks. A cell that is not a code of its column's domain (a text or a huge number
    in SQLite's column, a code past the domain: the table was changed outside the service) is refused in our words
    naming the attribute (:func:`~service.data.engines.base.codes_outside_domain`), never numpy's, which quotes it."""
    sizes = np.array(list(dataset.domain.sizes().values()), dtype=np.int64)
    table = tables.data_table(dataset.data_table, list(sizes))
    with engine.connect() as connection:
        result = connection.execution_options(stream_results=True, yield_per=chunk_rows).execute(
            select(*(table.c[c] for c in columns)))
        for part in result.partitions(chunk_rows):
            try:
                codes = np.array([tuple(r) for r in part], dtype=np.int64).reshape(len(part), len(columns))
            except (TypeError, ValueError, OverflowError):
                codes = None  # refused outside the except block, so no traceback carries numpy's message
            if codes is None:
                raise codes_outside_domain(dataset.name, [])
            outside = ((codes < 0) | (codes >= sizes)).any(axis=0)
            if outside.any():
                raise codes_outside_domain(dataset.name, [a for a, bad in zip(dataset.domain.names, outside,
                                                                             strict=True) if bad])
            yield codes
