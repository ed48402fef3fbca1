"""The rows of public tables: one table ``public_rows_<id>`` per public table, one float column per column.

A public table is public by a steward's declaration (``marginalia public load``): its rows may be returned to
analysts as they are, so unlike a dataset's ``data_<id>`` table its rows are read back (in pages, in load order).
Columns are ``DOUBLE PRECISION`` named ``c0, c1, ...`` (the user's names stay in ``public_tables.columns_json``);
a coded column holds the index of its value or bin. ``row_index`` keeps the load order for paging.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import BigInteger, Column, Connection, Double, MetaData, Table

#: Rows inserted per statement when loading.
INSERT_CHUNK = 10_000


def public_rows_table_name(table_id: int) -> str:
    return f"public_rows_{int(table_id)}"


def public_rows_table(name: str, column_count: int) -> Table:
    """The SQLAlchemy ``Table`` of a public table's rows: ``row_index`` and ``c0 .. c{n-1}``."""
    if column_count < 1:
        raise ValueError(f"a public table needs at least one column, got {column_count}")
    columns = [Column(f"c{i}", Double, nullable=False) for i in range(column_count)]
    return Table(name, MetaData(), Column("row_index", BigInteger, primary_key=True, autoincrement=False), *columns)


def create_public_rows(connection: Connection, name: str, values: np.ndarray) -> Table:
    """Create ``name`` and insert ``values`` (a finite float matrix ``rows x columns``), in row order."""
    array = np.asarray(values, dtype=float)
    if array.ndim != 2 or not np.all(np.isfinite(array)):
        raise ValueError(f"public rows must be a finite matrix, got shape {array.shape}")
    table = public_rows_table(name, array.shape[1])
    table.create(connection)
    # one executemany of plain tuples per chunk on the driver (SQLAlchemy's per-row dictionaries cost 3x more)
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(f'"{c.name}"' for c in table.columns)
    sql = f'INSERT INTO "{name}" ({columns}) VALUES ({", ".join([marker] * len(table.columns))})'
    for start in range(0, array.shape[0], INSERT_CHUNK):
        chunk = array[start:start + INSERT_CHUNK]
        connection.exec_driver_sql(sql, [(start + i, *row) for i, row in enumerate(chunk.tolist())])
    return table


def read_public_rows(connection: Connection, name: str, column_count: int, offset: int = 0,
                     limit: int | None = None) -> np.ndarray:
    """Rows ``offset .. offset + limit - 1`` (all from ``offset`` when ``limit`` is None) as a float matrix."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"offset and limit must be non-negative, got {offset} and {limit}")
    table = public_rows_table(name, column_count)  # checks the column count
    columns = ", ".join(f'"{c.name}"' for c in table.columns if c.name != "row_index")
    no_limit = " LIMIT -1" if connection.dialect.name == "sqlite" else ""  # SQLite wants a LIMIT before an OFFSET
    window = f" LIMIT {int(limit)}" if limit is not None else no_limit
    sql = f'SELECT {columns} FROM "{name}" ORDER BY row_index{window} OFFSET {int(offset)}'
    # the driver's cursor: plain tuples (SQLAlchemy's Row objects would cost 2-3x more on a wide table)
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    return np.array(rows, dtype=float).reshape(len(rows), column_count)
