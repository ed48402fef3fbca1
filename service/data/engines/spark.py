"""The Spark engine: a table in a Spark session's catalog (or a path Spark reads, ``parquet.`/data/adult```),
counted by Spark where it lives, through pyspark.

The session (:func:`spark_session`, one per process) is Spark Connect at ``MARGINALIA_SPARK_REMOTE`` when that is
set (``sc://host:15002``: a cluster's Spark Connect server), else an in-process local-mode Spark (``local[2]``).
The table is exposed to the counting SQL as a temporary view with one integer column per attribute (``c0``,
``c1``, …), each the ``CASE`` expression compiled from the dataset's public binning spec in Spark's dialect
(:mod:`service.data.engines.spec_sql` with :data:`~service.data.engines.dialect.SPARK_SQL`): the binning runs in
Spark, on every scan, and a value outside the spec stops the scan with an error naming its column
(``raise_error()``), the rule of ``dataset attach --parquet``. With a privacy unit the view keeps one row per unit
(:mod:`service.data.engines.units`).

Counting is one scan per batch of marginals (:func:`service.data.engines.grouping.stacked_keys_sql`): each row
emits one BIGINT key per marginal (its cell index offset by the marginal's place in the batch) and one ``GROUP BY``
counts them. Spark SQL has ``GROUPING SETS`` too, but expands them into one wide row per set; the narrow keys
measured about twice as fast (docs/engines.md). Only the non-empty cells' counts come back (as Arrow). The
distinct rows are a ``GROUP BY ... ORDER BY`` streamed partition by partition (``toLocalIterator``), so the
oracle's public cap on their number stops the read as soon as it is passed. DP-IHT's clipped gradient sums are one
aggregation with the same exploded keys, over a cached view of the distinct rows with their counts (grouped by one scan
on first use), summing each distinct row's clipped weight times its count (:mod:`service.data.engines.gradients`).
Nothing else is read: no row leaves Spark one by one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from service.data.engines.base import SPARK, EngineError, Marginal
from service.data.engines.dialect import SPARK_SQL
from service.data.engines.gradients import GradientQuery, GroupedRows, weighted_rows_sql
from service.data.engines.grouping import check_marginals, distinct_rows_sql, stacked_counts, stacked_keys_sql
from service.data.engines.units import coded_sql

#: Environment variable: the Spark Connect URL of a cluster (``sc://host:15002``); unset: local mode.
SPARK_REMOTE_VARIABLE = "MARGINALIA_SPARK_REMOTE"
#: The master of the in-process Spark when no remote is set.
LOCAL_MASTER = "local[2]"
#: Shuffle partitions of the local-mode session (Spark's default of 200 is tuned for clusters: on two cores each
#: tiny partition of a grouped result costs a task).
LOCAL_SHUFFLE_PARTITIONS = "8"

#: Attempts to reach a Spark Connect server when the session is created (:func:`_probe`).
PROBE_RETRIES = 3

_sessions: dict[str | None, Any] = {}


def spark_session() -> Any:
    """This process's Spark session (module docstring), created on first use and kept: starting Spark costs
    seconds, so every table, release and test of a process shares it. :class:`EngineError` when pyspark is not
    installed or Spark cannot be reached."""
    remote = os.environ.get(SPARK_REMOTE_VARIABLE) or None
    session = _sessions.get(remote)
    if session is not None and (remote is None or _unanswered(session) is None):
        return session
    # the URL's parameters (``sc://host:15002/;token=...``) may hold a credential: errors name the server only
    server = remote.split(";", 1)[0] if remote else None
    where = f"Spark Connect at {server} ({SPARK_REMOTE_VARIABLE})" if remote else f"local-mode Spark ({LOCAL_MASTER})"
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineError("the Spark engine needs pyspark: pip install 'marginalia[spark]'") from None
    try:
        if remote:  # no options: each would be a call to the server, retried for minutes if it is down
            # the Connect session class itself: pyspark.sql.SparkSession.builder.remote() would switch the whole
            # process to Connect mode (an environment variable), breaking a local session of the same process;
            # create(), not getOrCreate(), which would return the process's first Connect session whatever its URL
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            session = ConnectSession.builder.remote(remote).create()
            _probe(session)
        else:
            session = (SparkSession.builder.appName("marginalia").master(LOCAL_MASTER)
                       .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                       .config("spark.log.level", "FATAL")  # errors reach the caller as EngineError, not the log
                       .config("spark.sql.shuffle.partitions", LOCAL_SHUFFLE_PARTITIONS).getOrCreate())
    except Exception as exc:  # noqa: BLE001 - pyspark raises many kinds (Java gateway, gRPC, import of extras)
        raise EngineError(f"{where} is unreachable: {first_line(exc)}") from None
    _sessions[remote] = session
    return session


def _probe(session: Any) -> None:
    """Reach a new Spark Connect session's server now (the client connects lazily). Its calls retry an unavailable
    server :data:`PROBE_RETRIES` times (about a second), now and later: the client's default policy retries for ten
    minutes, which would hold a release (and the dataset's lock) that long when the server goes away mid-way."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session.client.set_retry_policies([DefaultPolicy(max_retries=PROBE_RETRIES)])
    error = _unanswered(session)
    if error is not None:
        raise error


def _unanswered(session: Any) -> Exception | None:
    """None when a Spark Connect session still answers, else its error, the session released (best effort) so a
    new one replaces it: a server restarted since the session was made has forgotten it, and its channel may still
    refuse."""
    try:
        session.sql("SELECT 1").collect()
        return None
    except Exception as exc:  # noqa: BLE001 - gRPC, a stopped session, a changed server-side session
        try:
            session.stop()
        except Exception:  # noqa: BLE001, S110 - an unreachable server has no session to release
            pass
        return exc


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (pyspark appends the JVM's stack trace; a gRPC error, its status and
    details), or its type's name."""
    for error in () if _condition(exc) else (exc, exc.__context__):  # Connect wraps a grpc.RpcError (a dump)
        details, code = getattr(error, "details", None), getattr(error, "code", None)
        if callable(details) and callable(code):
            try:
                return f"{code().name}: {(details() or '').strip().splitlines()[0]}"
            except Exception:  # noqa: BLE001, S110 - fall back to the message
                pass
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _condition(exc: BaseException) -> str | None:
    """The Spark error class of ``exc`` (``TABLE_OR_VIEW_NOT_FOUND``), which its message starts with; None for a
    transport error (Spark Connect's carry the gRPC status instead)."""
    try:
        return exc.getCondition()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not a Spark error, or its JVM is gone
        return None


class SparkTable:
    """:class:`service.data.engines.base.TableEngine` over the Spark table ``table``.

    ``columns`` maps each attribute (domain order) to a Spark SQL expression over the table's columns giving its
    code 0..size-1; ``label`` names the table in errors (the dataset's name; the table's name or path is replaced
    by ``<its Spark table>``); ``privacy_unit``, a column of the table, makes the view keep one row per unit
    (:mod:`service.data.engines.units`)."""

    name = SPARK
    gradient_sums_in_one_scan = True

    def __init__(self, table: str, columns: Mapping[str, str], label: str, *, show_table: bool = False,
                 privacy_unit: str | None = None) -> None:
        self.label = label
        self._show_table = show_table  # errors say the table's name (``dataset attach``: the steward typed it)
        self._table = table
        self._names = {attribute: f"c{i}" for i, attribute in enumerate(columns)}
        self._view = f"marginalia_{uuid.uuid4().hex}"
        #: cached views of the distinct rows with counts (``CACHE TABLE``: one scan of the table on first use, kept
        #: in the executors' memory, spilled to disk if need be, until :meth:`close`)
        self._grouped = GroupedRows(SPARK_SQL, f"{self._view}_g", lambda name, sql: self._sql(
            f"CACHE TABLE {name} AS {sql}"))
        self.session = spark_session()
        try:
            frame = self.session.table(table)
            self.columns = list(frame.columns)  # Spark Connect resolves the table here
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc) from None
        self._frame = frame
        self._select: str | None = coded_sql(SPARK_SQL, SPARK_SQL.quote(f"{self._view}_rows"),
                                             {self._names[a]: e for a, e in columns.items()}, privacy_unit)

    def _coded(self) -> str:
        """The coded view's name, created on first use over a view of the table's own rows (a missing column of the
        spec fails here)."""
        if self._select is not None:
            try:
                self._frame.createOrReplaceTempView(f"{self._view}_rows")
                self.session.sql(self._select).createOrReplaceTempView(self._view)
            except Exception as exc:  # noqa: BLE001
                raise self._error(exc) from None
            self._select = None
        return self._view

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        specs = check_marginals(marginals)
        result = self._sql(stacked_keys_sql(SPARK_SQL, self._coded(), self._names, specs))
        return stacked_counts(specs, result.column("key").to_numpy(), result.column("n").to_numpy())

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Iterator[np.ndarray]:
        sql = distinct_rows_sql(SPARK_SQL, self._coded(), [self._names[a] for a in attributes])
        width = len(attributes) + 1
        try:
            rows = self.session.sql(sql).toLocalIterator()
            part: list[tuple[int, ...]] = []
            for row in rows:
                part.append(tuple(row))
                if len(part) == chunk_rows:
                    yield np.array(part, dtype=np.int64).reshape(len(part), width)
                    part = []
        except GeneratorExit:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc) from None
        if part:
            yield np.array(part, dtype=np.int64).reshape(len(part), width)

    def clipped_gradient_sums(self, query: GradientQuery) -> list[np.ndarray]:
        specs = query.marginals()
        grouped = self._grouped.table(self._coded(), self._names, query.attributes)
        weighted = f"({weighted_rows_sql(SPARK_SQL, grouped, self._names, query, count='n')}) AS weighted"
        result = self._sql(stacked_keys_sql(SPARK_SQL, weighted, self._names, specs, weight="w"))
        return stacked_counts(specs, result.column("key").to_numpy(), result.column("n").to_numpy(), dtype=np.float64)

    def row_count(self) -> int:
        return int(self._sql(f"SELECT COUNT(*) AS n FROM {self._coded()}").column("n")[0].as_py())

    def check(self) -> int:
        """Read every row once through the view (every attribute's code computed) and return the row count: a
        value outside the spec raises :class:`EngineError` here."""
        codes = ", ".join(f"MAX({SPARK_SQL.quote(c)}) AS m{i}" for i, c in enumerate(self._names.values()))
        return int(self._sql(f"SELECT COUNT(*) AS n, {codes} FROM {self._coded()}")
                   .column("n")[0].as_py())

    def close(self) -> None:
        """Drop the views; the session stays for the next table (:func:`spark_session`)."""
        for name in self._grouped.tables.values():
            try:
                self.session.sql(f"UNCACHE TABLE IF EXISTS {name}").collect()
                self.session.catalog.dropTempView(name)
            except Exception:  # noqa: BLE001, S110 - a session that went away has dropped its views
                pass
        if self._select is None:
            try:
                self.session.catalog.dropTempView(self._view)
                self.session.catalog.dropTempView(f"{self._view}_rows")
            except Exception:  # noqa: BLE001, S110 - a session that went away has dropped its views
                pass

    def _sql(self, sql: str) -> Any:
        """The result of ``sql`` as an Arrow table."""
        try:
            return self.session.sql(sql).toArrow()
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> EngineError:
        reason = first_line(exc)
        if not self._show_table:
            reason = reason.replace(self._table, "<its Spark table>")
        return EngineError(f"dataset {self.label!r}: Spark cannot read its table: {reason}")
