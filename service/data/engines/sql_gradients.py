"""DP-IHT's clipped gradient sums over a table of a SQL database (the service's ``data_<id>`` tables,
:mod:`service.data.engines.sql`, and attached databases, :mod:`service.data.engines.foreign_sql`).

On PostgreSQL the first call groups the source relation (the coded, privacy-unit-bounded rows: whatever ``source``
the engine counts) over the design's attributes into a temporary table of distinct rows with their counts, in code
order (:class:`service.data.engines.gradients.GroupedRows`, the helper the DuckDB and Spark engines use), and every
iteration is one ``GROUPING SETS`` aggregation over that table, each distinct row's clipped weight times its count
(:func:`service.data.engines.gradients.sql_gradient_sums`), instead of a scan of the whole table per iteration.

A temporary table lives in one session, and the engines' connections come from a pool, so the fit holds one
connection and one transaction from its first iteration until :meth:`SqlGradientSums.close` (the oracle's close,
at the end of the release, on every exit path): the table is created ``ON COMMIT DROP`` inside that transaction,
and ``close`` rolls the transaction back, which removes the table whether the fit finished or failed (a connection
that broke is discarded by the pool, and its session's temporary tables with it). Parallel workers are off for
the whole transaction, so the grouping and the sums are computed in one order and the same seed gives the same
model.

A database that cannot create a temporary table (a read-only transaction, such as a hot standby, or a role without
the ``TEMPORARY`` privilege) gets the former plan: every iteration scans the source relation. So does SQLite, which
has no ``GROUPING SETS`` (one ``GROUP BY`` per attribute over the source); DP-IHT reads the distinct rows there
instead (``gradient_sums_in_one_scan`` is false).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import numpy as np
from sqlalchemy import Connection, Engine, RootTransaction
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from service.data.engines.dialect import POSTGRESQL_SQL
from service.data.engines.gradients import GroupedRows, sql_gradient_sums
from service.data.engines.queries import GradientQuery

#: SQLSTATEs of a database that refuses a temporary table: ``read_only_sql_transaction`` (a hot standby, a
#: read-only default), ``insufficient_privilege`` (no ``TEMPORARY`` privilege on the database).
CANNOT_CREATE = ("25006", "42501")


class SqlGradientSums:
    """:meth:`service.data.engines.base.TableEngine.row_weight_sums` over ``source`` (a ``FROM`` item of the
    database of ``engine``: a quoted table, or a derived table with its alias) whose columns are ``columns``
    (attribute to unquoted column); module docstring."""

    def __init__(self, engine: Engine, source: str, columns: Mapping[str, str]) -> None:
        self.engine, self.source, self.columns = engine, source, dict(columns)
        #: whether the sums run over grouped distinct rows (PostgreSQL, until it refuses a temporary table)
        self.grouping = engine.dialect.name == "postgresql"
        self._connection: Connection | None = None
        self._transaction: RootTransaction | None = None
        self._grouped = GroupedRows(POSTGRESQL_SQL, f"marginalia_grouped_{uuid.uuid4().hex[:12]}_", self._create)

    def __call__(self, query: GradientQuery) -> list[np.ndarray]:
        if self.grouping:
            try:
                grouped = self._grouped.table(self.source, self.columns, query.attributes)
            except DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) not in CANNOT_CREATE:
                    raise
                self.close()
                self.grouping = False
            else:
                return sql_gradient_sums(self._held(), grouped, self.columns, query, count="n")
        with self.engine.connect() as connection:
            return sql_gradient_sums(connection, self.source, self.columns, query)

    def close(self) -> None:
        """End the held transaction (which drops the temporary tables) and return its connection to the pool, or
        discard the connection when it cannot roll back; never raises (it runs on every exit path of a fit)."""
        connection, transaction = self._connection, self._transaction
        self._connection = self._transaction = None
        self._grouped.tables.clear()
        if connection is None:
            return
        try:
            if transaction is not None and transaction.is_active:
                transaction.rollback()
        except SQLAlchemyError:  # the session cannot roll back: end it, and its temporary tables with it
            connection.invalidate()
        finally:
            connection.close()

    def _held(self) -> Connection:
        """The fit's connection, in its transaction (opened on first use, parallel workers off)."""
        if self._connection is None:
            self._connection = self.engine.connect()
            self._transaction = self._connection.begin()
            self._connection.exec_driver_sql("SET LOCAL max_parallel_workers_per_gather = 0")
        return self._connection

    def _create(self, name: str, sql: str) -> None:
        self._held().exec_driver_sql(f"CREATE TEMPORARY TABLE {POSTGRESQL_SQL.quote(name)} ON COMMIT DROP AS {sql}")
        self._held().exec_driver_sql(f"ANALYZE {POSTGRESQL_SQL.quote(name)}")
