"""Per-dataset row tables and the SQL that counts them.

Rows of dataset ``id`` live in ``data_<id>`` with one ``SMALLINT``/``INTEGER`` column per attribute,
named ``c0, c1, …`` (the user's column names, which may hold any character, stay in the dataset's
domain JSON). Marginals are computed with ``GROUP BY`` in the database; only the counts of the
non-empty cells come back, never rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import Column, Connection, Integer, MetaData, SmallInteger, Table, func, select
from sqlalchemy.dialects import postgresql

SMALLINT_MAX = 32767


def data_table_name(dataset_id: int) -> str:
    return f"data_{dataset_id}"


def sql_column_names(count: int) -> list[str]:
    return [f"c{i}" for i in range(count)]


def data_table(name: str, sizes: Sequence[int]) -> Table:
    """The SQLAlchemy ``Table`` of a dataset's rows (columns ``c0..c{n-1}``)."""
    metadata = MetaData()
    columns = [
        Column(col, SmallInteger if size <= SMALLINT_MAX else Integer, nullable=False)
        for col, size in zip(sql_column_names(len(sizes)), sizes, strict=True)
    ]
    return Table(name, metadata, *columns)


def create_data_table(connection: Connection, name: str, sizes: Sequence[int]) -> Table:
    table = data_table(name, sizes)
    table.create(connection)
    return table


def insert_rows(connection: Connection, table: Table, codes: np.ndarray) -> None:
    """Insert a chunk of integer-coded rows (shape ``rows x columns``) into ``table``."""
    if codes.size == 0:
        return
    names = [c.name for c in table.columns]
    if connection.dialect.name == "postgresql":
        _copy_rows(connection, table, codes)
        return
    records = [dict(zip(names, map(int, row), strict=True)) for row in codes.tolist()]
    connection.execute(table.insert(), records)


def _copy_rows(connection: Connection, table: Table, codes: np.ndarray) -> None:
    """PostgreSQL: stream the chunk with COPY (psycopg 3), far faster than INSERT."""
    raw = connection.connection.driver_connection
    quoted = ", ".join(postgresql.dialect().identifier_preparer.quote(c.name) for c in table.columns)
    with raw.cursor() as cursor:
        with cursor.copy(f"COPY {table.name} ({quoted}) FROM STDIN") as copy:
            for row in codes.tolist():
                copy.write_row(row)


def count_marginal(
    connection: Connection, table: Table, columns: Sequence[str], shape: Sequence[int]
) -> np.ndarray:
    """Counts of ``table`` over ``columns`` as an int64 array of ``shape`` (axes in that order),
    computed by ``SELECT col…, COUNT(*) … GROUP BY col…``."""
    cols = [table.c[name] for name in columns]
    counts = np.zeros(tuple(shape), dtype=np.int64)
    result = connection.execute(select(*cols, func.count()).group_by(*cols))
    rows = result.fetchall()
    if rows:
        array = np.asarray(rows, dtype=np.int64)
        counts[tuple(array[:, :-1].T)] = array[:, -1]
    return counts


def count_rows(connection: Connection, table: Table) -> int:
    return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def drop_data_table(connection: Connection, name: str) -> None:
    Table(name, MetaData()).drop(connection, checkfirst=True)
