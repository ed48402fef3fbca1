"""The service's data folder, and Parquet files written there by streaming validated chunks.

A table stored by ``dataset load`` (engine ``duckdb``) is one Parquet file in the data folder, written chunk by
chunk (one row group per chunk, so memory is bounded by the chunk) under a temporary name and renamed into place
only once complete: a reader never sees a partial file, and a load that fails leaves none. Once written, a file is
never modified (read-only), so any number of processes read it at once.

The data folder is ``MARGINALIA_DATA_DIR`` when set; otherwise, for a SQLite service database in a file, the
folder ``<database file name without suffix>-tables`` next to it (``marginalia.db`` -> ``marginalia-tables/``);
otherwise (PostgreSQL, an in-memory SQLite) ``marginalia-tables`` in the working directory. Every process of one
service (the command line, the server's workers) must see the same folder.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine

from db.tables import SMALLINT_MAX

DATA_DIR_VARIABLE = "MARGINALIA_DATA_DIR"
DEFAULT_FOLDER = "marginalia-tables"


def data_folder(engine: Engine) -> Path:
    """Where this service's Parquet tables live (module docstring)."""
    configured = os.environ.get(DATA_DIR_VARIABLE)
    if configured:
        return Path(configured).expanduser().resolve()
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if database and database != ":memory:" and not database.startswith("file:"):
        path = Path(database).expanduser().resolve()
        return path.with_name(f"{path.stem}-tables")
    return Path(DEFAULT_FOLDER).resolve()


def new_file_name() -> str:
    """A fresh, unique file name for a table (chosen before its dataset has an id)."""
    return f"data-{uuid.uuid4().hex}.parquet"


class ParquetWriter:
    """Writes integer codes (rows x ``len(columns)``) to ``folder / name`` through a temporary file.

    :meth:`write` appends one chunk as a row group; :meth:`finish` closes the file and renames it into place;
    :meth:`abort` removes whatever was written. Columns are ``SMALLINT`` (int16) when the domain size allows,
    else ``INTEGER``, like the SQL tables.

    A row group is encoded and written by one background thread while the caller reads and checks the next chunk
    (pyarrow's writer releases the GIL), at most one chunk behind: memory stays at two chunks, and a write's error
    is raised by the next :meth:`write` or by :meth:`finish`."""

    def __init__(self, folder: Path, name: str, columns: Sequence[str], sizes: Sequence[int]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / name
        self._partial = folder / f".{name}.partial"
        self._types = [np.int16 if size <= SMALLINT_MAX else np.int32 for size in sizes]
        self._schema = pa.schema([(c, pa.from_numpy_dtype(t)) for c, t in zip(columns, self._types, strict=True)])
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self._partial, self._schema)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-writer")
        self._pending: Future[None] | None = None

    def write(self, codes: np.ndarray) -> None:
        if len(codes) == 0 or self._writer is None:
            return
        arrays = [pa.array(codes[:, j].astype(t)) for j, t in enumerate(self._types)]
        self._wait()
        self._pending = self._thread.submit(self._writer.write_table, pa.Table.from_arrays(arrays, schema=self._schema))

    def finish(self) -> Path:
        self._wait()
        self._close()
        os.replace(self._partial, self.path)
        return self.path

    def abort(self) -> None:
        try:
            self._wait()
        except Exception:  # noqa: BLE001 - the load failed already; the file goes whatever the last write did
            pass
        finally:
            self._close()
            self._partial.unlink(missing_ok=True)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _close(self) -> None:
        self._thread.shutdown(wait=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
