"""The counting SQL every SQL-speaking engine runs over its coded view (DuckDB, Spark): one ``GROUP BY GROUPING
SETS`` over the marginals' row-major cell indexes, so a batch of marginals is one scan of the table, and the
``GROUP BY`` of the distinct rows. The view has one integer column per attribute; :func:`dense_counts` turns the
``(marginal, cell, count)`` rows of the answer into dense arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from db.tables import CodeOutOfRange, cell_index_sql
from service.data.engines.dialect import Dialect
from service.data.engines.queries import Marginal


def check_marginals(marginals: Sequence[Marginal]) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    """``marginals`` as tuples of attribute names and int sizes."""
    return [(tuple(a), tuple(int(s) for s in shape)) for a, shape in marginals]


def grouping_sets_sql(dialect: Dialect, view: str, columns: Mapping[str, str],
                      marginals: Sequence[tuple[tuple[str, ...], tuple[int, ...]]], weight: str | None = None) -> str:
    """``SELECT m, cell, n``: for each marginal ``m`` (its position in ``marginals``) the count ``n`` of every
    non-empty ``cell`` of ``view``, whose column for each attribute is ``columns[attribute]`` (unquoted). With
    ``weight`` (a column of ``view``, unquoted), ``n`` is the sum of that column over the cell's rows instead."""
    keys = [cell_index_sql([dialect.quote(columns[a]) for a in attributes], shape) for attributes, shape in marginals]
    total = "COUNT(*)" if weight is None else f"SUM({dialect.quote(weight)})"
    if len(keys) == 1:
        return f"SELECT 0 AS m, {keys[0]} AS cell, {total} AS n FROM {view} GROUP BY {keys[0]}"
    aliases = [f"k{i}" for i in range(len(keys))]
    which = " ".join(f"WHEN GROUPING({a}) = 0 THEN {i}" for i, a in enumerate(aliases))
    inner = ", ".join([*(f"{k} AS {a}" for k, a in zip(keys, aliases, strict=True)),
                       *([] if weight is None else [dialect.quote(weight)])])
    return (f"SELECT CASE {which} END AS m, COALESCE({', '.join(aliases)}) AS cell, {total} AS n "
            f"FROM (SELECT {inner} FROM {view}) AS keyed "
            f"GROUP BY GROUPING SETS ({', '.join(f'({a})' for a in aliases)})")


def dense_counts(marginals: Sequence[tuple[tuple[str, ...], tuple[int, ...]]], which: np.ndarray, cells: np.ndarray,
                 counts: np.ndarray, dtype: type = np.int64) -> list[np.ndarray]:
    """The dense arrays (int64 counts, or ``dtype`` sums) of each marginal from the rows ``(which, cell, count)`` of
    :func:`grouping_sets_sql` (cells absent from the answer are 0). A cell outside the marginal (a code outside its
    domain in a stored table, which numpy would wrap round to a real cell or refuse with the cell in its message)
    raises :class:`~db.tables.CodeOutOfRange`."""
    which, cells = (np.asarray(v, dtype=np.int64) for v in (which, cells))
    counts = np.asarray(counts, dtype=dtype)
    out = []
    for i, (_, shape) in enumerate(marginals):
        dense = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
        mine = which == i
        if mine.any() and (cells[mine].min() < 0 or cells[mine].max() >= dense.size):
            raise CodeOutOfRange()
        dense[cells[mine]] = counts[mine]
        out.append(dense.reshape(shape))
    return out


def distinct_rows_sql(dialect: Dialect, view: str, columns: Sequence[str]) -> str:
    """The distinct rows over ``columns`` (unquoted) of ``view`` with their counts, in ascending order."""
    quoted = ", ".join(dialect.quote(c) for c in columns)
    return f"SELECT {quoted}, COUNT(*) AS n FROM {view} GROUP BY {quoted} ORDER BY {quoted}"


def stacked_keys_sql(dialect: Dialect, view: str, columns: Mapping[str, str],
                     marginals: Sequence[tuple[tuple[str, ...], tuple[int, ...]]], weight: str | None = None) -> str:
    """``SELECT key, n``: the same counts as :func:`grouping_sets_sql` as one ``GROUP BY`` of a single BIGINT key.
    Each row emits one key per marginal (``explode`` of an array: Spark SQL's generator), its cell index plus the
    marginal's offset in the concatenation of every marginal's cells (:func:`stacked_counts` splits them back).
    Spark expands ``GROUPING SETS`` into one wide row per set (every set's key column, NULL but one), which costs
    more than these narrow rows (benchmarks/spark_engine.py measured both; docs/engines.md). With ``weight`` (a
    column of ``view``, unquoted) ``n`` sums that column instead of counting."""
    offsets = np.cumsum([0, *(int(np.prod(shape, dtype=np.int64)) for _, shape in marginals)])[:-1]
    keys = [f"CAST({cell_index_sql([dialect.quote(columns[a]) for a in attributes], shape)} AS BIGINT) + {int(o)}"
            for (attributes, shape), o in zip(marginals, offsets, strict=True)]
    total, carry = ("COUNT(*)", "") if weight is None else (f"SUM({dialect.quote(weight)})",
                                                           f", {dialect.quote(weight)}")
    return (f"SELECT key, {total} AS n FROM (SELECT explode(array({', '.join(keys)})) AS key{carry} FROM {view}) "
            "AS stacked GROUP BY key")


def stacked_counts(marginals: Sequence[tuple[tuple[str, ...], tuple[int, ...]]], keys: np.ndarray,
                   counts: np.ndarray, dtype: type = np.int64) -> list[np.ndarray]:
    """The dense arrays (int64 counts, or ``dtype`` sums) of each marginal from the rows ``(key, count)`` of
    :func:`stacked_keys_sql`."""
    sizes = [int(np.prod(shape, dtype=np.int64)) for _, shape in marginals]
    stacked = np.zeros(sum(sizes), dtype=dtype)
    stacked[np.asarray(keys, dtype=np.int64)] = np.asarray(counts, dtype=dtype)
    parts = np.split(stacked, np.cumsum(sizes)[:-1])
    return [part.reshape(shape) for part, (_, shape) in zip(parts, marginals, strict=True)]
