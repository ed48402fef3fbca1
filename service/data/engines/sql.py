"""The SQL engine: a dataset's ``data_<id>`` table in the service database (SQLite or PostgreSQL).

This is where every table lived before issue 21; the counting SQL is :func:`db.tables.count_marginals` (one
``GROUPING SETS`` scan per call on PostgreSQL, one ``GROUP BY`` per marginal on SQLite, which has no grouping
sets). DP-IHT's clipped gradient sums on PostgreSQL group the table once into a temporary table of distinct rows
with their counts and aggregate over it each iteration (:mod:`service.data.engines.sql_gradients`); on SQLite
they would be one scan per attribute per iteration, so DP-IHT reads the distinct rows there instead
(:attr:`SqlTable.gradient_sums_in_one_scan` is false).

The table holds codes written by ``dataset load``, but it lives in a database others may write to: a code outside
its column's domain (or, in SQLite, whose columns take any value, a text) is refused, naming the column, rather than
counted in a wrong cell or reported in numpy's words (``index 31337 is out of bounds``, ``invalid literal for
int()``), and whatever the database raises is translated by the engine boundary
(:mod:`service.data.engines.boundary`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from sqlalchemy import Engine, case, func, select

from db import tables
from service.data.engines.base import SQL, EngineError, codes_outside_domain
from service.data.engines.boundary import engine_boundary
from service.data.engines.gradients import CodeOutsideDomain
from service.data.engines.queries import GradientQuery, Marginal
from service.data.engines.sql_gradients import SqlGradientSums


@engine_boundary
class SqlTable:
    """:class:`service.data.engines.base.TableEngine` over ``table_name`` in the database of ``engine``.

    ``columns`` maps each attribute to its column (``c0``, ``c1``, …) and ``sizes`` gives its domain size; ``label``
    names the table in errors (the dataset's name)."""

    name = SQL

    def __init__(self, engine: Engine, table_name: str, columns: Mapping[str, str], sizes: Mapping[str, int],
                 label: str) -> None:
        self.label = label
        self.engine = engine
        self.columns = dict(columns)
        self.sizes = {a: int(sizes[a]) for a in self.columns}
        self.table = tables.data_table(table_name, [sizes[a] for a in self.columns])
        self.gradient_sums_in_one_scan = engine.dialect.name == "postgresql"
        self._gradients = SqlGradientSums(engine, engine.dialect.identifier_preparer.quote(self.table.name), columns)

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        specs = [([self.columns[a] for a in attributes], shape) for attributes, shape in marginals]
        try:
            with self.engine.connect() as connection:
                return tables.count_marginals(connection, self.table, specs)
        except tables.CodeOutOfRange:
            raise self._outside([a for attributes, _ in marginals for a in attributes]) from None

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Iterator[np.ndarray]:
        columns = [self.table.c[self.columns[a]] for a in attributes]
        query = select(*columns, func.count()).group_by(*columns).order_by(*columns)
        with self.engine.connect() as connection:
            result = connection.execution_options(stream_results=True, yield_per=chunk_rows).execute(query)
            for part in result.partitions(chunk_rows):
                plain = [tuple(row) for row in part]  # Row objects are slow for numpy to inspect
                try:  # (a code outside its domain is refused by the count oracle, which knows the domain)
                    rows = np.array(plain, dtype=np.int64).reshape(len(plain), len(columns) + 1)
                except (TypeError, ValueError, OverflowError):  # a text or a huge number in SQLite's column
                    rows = None  # refused below, outside the except block: numpy's error quotes the value
                if rows is None:
                    raise self._outside(list(attributes))
                yield rows

    def row_weight_sums(self, query: GradientQuery) -> list[np.ndarray]:
        try:
            return self._gradients(query)
        except (CodeOutsideDomain, tables.CodeOutOfRange):
            raise self._outside(list(query.attributes)) from None

    def row_count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self.table)).scalar_one())

    def outside_columns(self) -> list[str]:
        """The attributes with a code outside their domain in some row (one scan): not an integer in
        ``0..size-1`` (SQLite orders a text above every number)."""
        outside = [func.sum(case((self.table.c[c].between(0, self.sizes[a] - 1), 0), else_=1))
                   for a, c in self.columns.items()]
        with self.engine.connect() as connection:
            counts = connection.execute(select(*outside)).one()
        return [a for a, n in zip(self.columns, counts, strict=True) if n]

    def close(self) -> None:
        """Release the connection DP-IHT held (its temporary tables go with its transaction); the service database's
        engine belongs to the caller."""
        self._gradients.close()

    def _outside(self, attributes: list[str]) -> EngineError:
        return codes_outside_domain(self.label, [a for a in self.outside_columns() if a in attributes])
