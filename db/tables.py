"""Per-dataset row tables and the SQL that counts them.

Rows of dataset ``id`` live in ``data_<id>`` with one ``SMALLINT``/``INTEGER`` column per attribute,
named ``c0, c1, …`` (the user's column names, which may hold any character, stay in the dataset's
domain JSON). Marginals are computed with ``GROUP BY`` in the database; only the counts of the
non-empty cells come back, never rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sqlalchemy import Column, Connection, Integer, MetaData, SmallInteger, Table
from sqlalchemy.dialects import postgresql

SMALLINT_MAX = 32767
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: ``work_mem`` of the one-scan (GROUPING SETS) count on PostgreSQL, for that transaction only.
ONE_SCAN_WORK_MEM = "64MB"


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
    if connection.dialect.name == "postgresql":
        _copy_rows(connection, table, codes)
        return
    if connection.dialect.name == "sqlite":
        # One executemany on the driver's cursor (inside the connection's transaction), fed row tuples zipped
        # from the columns: no per-row list, dict or SQLAlchemy parameter processing, nothing for the GC to scan.
        quote = connection.dialect.identifier_preparer.quote
        columns = ", ".join(quote(c.name) for c in table.columns)
        marks = ", ".join("?" for _ in table.columns)
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(f"INSERT INTO {quote(table.name)} ({columns}) VALUES ({marks})",
                               zip(*codes.T.tolist(), strict=True))
        finally:
            cursor.close()
        return
    names = [c.name for c in table.columns]
    connection.execute(table.insert(), [dict(zip(names, row, strict=True)) for row in codes.tolist()])


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
    """Counts of ``table`` over ``columns`` as an int64 array of ``shape`` (axes in that order).

    One ``SELECT <cell index>, COUNT(*) … GROUP BY 1``: the database groups on a single integer, the
    row-major cell index of :func:`cell_index_sql` (faster than grouping on the columns, see
    benchmarks/README.md), and only the non-empty cells come back, through the DB-API cursor."""
    return count_marginals(connection, table, [(columns, shape)], one_scan=False)[0]


def count_marginals(
    connection: Connection,
    table: Table,
    marginals: Sequence[tuple[Sequence[str], Sequence[int]]],
    *,
    one_scan: bool | None = None,
    source: str | None = None,
) -> list[np.ndarray]:
    """Counts of ``table`` over each ``(columns, shape)`` of ``marginals``, in that order.

    ``source`` (SQL of a ``FROM`` item, default the quoted name of ``table``) counts a derived table with
    ``table``'s columns instead, such as a foreign table coded by ``CASE`` expressions; a row whose cell index is
    outside its marginal (a code outside its domain) raises :class:`CodeOutOfRange` rather than being counted anywhere.

    With ``one_scan`` (the default on PostgreSQL when there are several marginals) all of them are counted by
    one statement, ``GROUP BY GROUPING SETS ((k0), (k1), …)`` over their cell indexes, so the table is read
    once; otherwise (always on SQLite, which has no grouping sets) one ``GROUP BY`` query per marginal."""
    asked = [_check_marginal(table, columns, shape) for columns, shape in marginals]
    # Each distinct marginal is counted once; a repeat gets a copy.
    specs = list(dict.fromkeys(asked))
    counted = dict(zip(specs, _count_distinct(connection, table, specs, one_scan, source), strict=True))
    seen: set[tuple[tuple[str, ...], tuple[int, ...]]] = set()
    out = []
    for spec in asked:
        out.append(counted[spec].copy() if spec in seen else counted[spec])
        seen.add(spec)
    return out


def _count_distinct(
    connection: Connection,
    table: Table,
    specs: list[tuple[tuple[str, ...], tuple[int, ...]]],
    one_scan: bool | None,
    source: str | None = None,
) -> list[np.ndarray]:
    dialect = connection.dialect.name
    if one_scan is None:
        one_scan = dialect == "postgresql" and len(specs) > 1
    if one_scan and dialect != "postgresql":
        raise ValueError(f"one_scan needs GROUPING SETS, which the {dialect} dialect does not have")
    quote = connection.dialect.identifier_preparer.quote
    source = source or quote(table.name)
    keys = [cell_index_sql([quote(c) for c in columns], shape) for columns, shape in specs]
    if not one_scan:
        out = []
        for key, (_, shape) in zip(keys, specs, strict=True):
            cells = _fetch_int64(connection, f"SELECT {key} AS cell, COUNT(*) FROM {source} GROUP BY 1", 2)
            out.append(_dense(cells[:, 0], cells[:, 1], shape))
        return out
    aliases = [f"k{i}" for i in range(len(keys))]
    which = " ".join(f"WHEN GROUPING({a}) = 0 THEN {i}" for i, a in enumerate(aliases))
    sql = (
        f"SELECT CASE {which} END AS m, COALESCE({', '.join(aliases)}) AS cell, COUNT(*) "
        f"FROM (SELECT {', '.join(f'{k} AS {a}' for k, a in zip(keys, aliases, strict=True))} FROM {source}) AS s "
        f"GROUP BY GROUPING SETS ({', '.join(f'({a})' for a in aliases)})"
    )
    # The per-set hash tables need more than the default 4MB work_mem, or PostgreSQL sorts instead;
    # SET LOCAL ends with the transaction (benchmarks/README.md measures the difference).
    rows = _fetch_int64(connection, sql, 3, setup=f"SET LOCAL work_mem = '{ONE_SCAN_WORK_MEM}'")
    order = np.argsort(rows[:, 0], kind="stable")
    rows = rows[order]
    bounds = np.searchsorted(rows[:, 0], np.arange(len(specs) + 1))
    return [
        _dense(rows[lo:hi, 1], rows[lo:hi, 2], shape)
        for (_, shape), lo, hi in zip(specs, bounds[:-1], bounds[1:], strict=True)
    ]


def cell_index_sql(columns: Sequence[str], shape: Sequence[int]) -> str:
    """SQL for a row's row-major (C-order) cell index over ``columns`` of sizes ``shape``, the SQL twin of
    ``numpy.ravel_multi_index(columns, shape)``: ``((c_0 * k_1 + c_1) * k_2 + c_2) …`` (Horner's rule).

    ``columns`` must already be quoted identifiers. SQLite computes in 64-bit integers; PostgreSQL would
    compute ``SMALLINT * INTEGER`` in 32 bits, so beyond :data:`INT32_MAX` cells the first column is cast to
    ``BIGINT``. A marginal with no columns has the single cell 0."""
    if len(columns) != len(shape):
        raise ValueError(f"shape {tuple(shape)} must have one size per column {list(columns)}")
    if not columns:
        return "0"
    expr = columns[0] if math.prod(shape) <= INT32_MAX else f"CAST({columns[0]} AS BIGINT)"
    for name, size in zip(columns[1:], shape[1:], strict=True):
        expr = f"({expr}) * {int(size)} + {name}"
    return expr


def _check_marginal(
    table: Table, columns: Sequence[str], shape: Sequence[int]
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    columns, shape = tuple(columns), tuple(shape)
    unknown = [c for c in columns if c not in table.c]
    if unknown:
        raise ValueError(f"columns {unknown} are not columns of {table.name}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns {list(columns)} repeat a column")
    if len(shape) != len(columns):
        raise ValueError(f"shape {shape} must have one size per column {list(columns)}")
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in shape):
        raise ValueError(f"shape {shape} must hold positive integer sizes")
    if math.prod(shape) > INT64_MAX:
        raise ValueError(f"shape {shape} has more than 2^63 cells; its cell index does not fit an integer")
    return columns, tuple(int(s) for s in shape)


def _fetch_int64(connection: Connection, sql: str, width: int, setup: str | None = None) -> np.ndarray:
    """Run ``sql`` on the DB-API cursor of ``connection`` (inside its transaction, if one is open) and return
    the rows as an int64 array ``rows x width``. Skipping SQLAlchemy's result rows halves the fetch time of
    large marginals (benchmarks/README.md). A cell that is not an integer (a text in a SQLite column, which numpy
    would quote in its error) raises :class:`CodeOutOfRange`. The driver's own exceptions (psycopg's, sqlite3's)
    come up unwrapped, their messages as the database wrote them (which may quote a value): a caller above ``db``
    translates them (service/data/engines/boundary.py) and never shows them."""
    cursor = connection.connection.cursor()
    try:
        if setup is not None:
            cursor.execute(setup)
        cursor.execute(sql)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    try:
        return np.array(rows, dtype=np.int64).reshape(len(rows), width)
    except (TypeError, ValueError, OverflowError):  # a cell that is not an integer: SQLite's columns take any value
        pass
    raise CodeOutOfRange()  # outside the except block: numpy's error, which quotes the cell, is not its context


class CodeOutOfRange(ValueError):
    """A counted row's cell index is outside its marginal: one of its codes is outside its domain. The message is
    fixed: how many rows, and which cell, are private (the caller names the column with a query of its own)."""

    def __init__(self) -> None:
        super().__init__("a counted row has a code outside its column's domain")


def _dense(cells: np.ndarray, counts: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    size = math.prod(shape)
    # numpy would wrap a negative index round to a real cell, and refuse one past the end with the cell in its message
    if cells.size and (int(cells.min()) < 0 or int(cells.max()) >= size):
        raise CodeOutOfRange()
    out = np.zeros(size, dtype=np.int64)
    out[cells] = counts
    return out.reshape(shape)
