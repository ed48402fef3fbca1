"""The SQL engine: a dataset's ``data_<id>`` table in the service database (SQLite or PostgreSQL).

This is where every table lived before issue 21; the counting SQL is :func:`db.tables.count_marginals` (one
``GROUPING SETS`` scan per call on PostgreSQL, one ``GROUP BY`` per marginal on SQLite, which has no grouping
sets). DP-IHT's clipped gradient sums on PostgreSQL group the table once into a temporary table of distinct rows
with their counts and aggregate over it each iteration (:mod:`service.data.engines.sql_gradients`); on SQLite
they would be one scan per attribute per iteration, so DP-IHT reads the distinct rows there instead
(:attr:`SqlTable.gradient_sums_in_one_scan` is false).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from sqlalchemy import Engine, func, select

from db import tables
from service.data.engines.base import SQL, Marginal
from service.data.engines.gradients import GradientQuery
from service.data.engines.sql_gradients import SqlGradientSums


class SqlTable:
    """:class:`service.data.engines.base.TableEngine` over ``table_name`` in the database of ``engine``.

    ``columns`` maps each attribute to its column (``c0``, ``c1``, …) and ``sizes`` gives its domain size."""

    name = SQL

    def __init__(self, engine: Engine, table_name: str, columns: Mapping[str, str], sizes: Mapping[str, int]) -> None:
        self.engine = engine
        self.columns = dict(columns)
        self.table = tables.data_table(table_name, [sizes[a] for a in self.columns])
        self.gradient_sums_in_one_scan = engine.dialect.name == "postgresql"
        self._gradients = SqlGradientSums(engine, engine.dialect.identifier_preparer.quote(self.table.name), columns)

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        specs = [([self.columns[a] for a in attributes], shape) for attributes, shape in marginals]
        with self.engine.connect() as connection:
            return tables.count_marginals(connection, self.table, specs)

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Iterator[np.ndarray]:
        columns = [self.table.c[self.columns[a]] for a in attributes]
        query = select(*columns, func.count()).group_by(*columns).order_by(*columns)
        with self.engine.connect() as connection:
            result = connection.execution_options(stream_results=True, yield_per=chunk_rows).execute(query)
            for part in result.partitions(chunk_rows):
                plain = [tuple(row) for row in part]  # Row objects are slow for numpy to inspect
                yield np.array(plain, dtype=np.int64).reshape(len(plain), len(columns) + 1)

    def clipped_gradient_sums(self, query: GradientQuery) -> list[np.ndarray]:
        return self._gradients(query)

    def row_count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self.table)).scalar_one())

    def close(self) -> None:
        """Release the connection DP-IHT held (its temporary tables go with its transaction); the service database's
        engine belongs to the caller."""
        self._gradients.close()
