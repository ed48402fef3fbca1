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

Spark 4 runs in ANSI mode, where a failed cast stops the query with the value in its message (``CAST_INVALID_INPUT:
The value '...' of the type "STRING" cannot be cast``): the spec reads raw values only through ``TRY_CAST``
(:mod:`service.data.engines.dialect`), so such a value is outside the spec. Whatever Spark, py4j or gRPC raises is
translated by the engine boundary (:mod:`service.data.engines.boundary`) from its error class or gRPC status, never
its text; and pyspark's own query-context loggers, which print every query error's message (with the value) to
the process's stderr, and py4j's DEBUG log of the JVM's answers, are quieted when the session is made
(:func:`_quiet_pyspark_loggers`).

pyspark 4 warns on every import of its pandas and Connect modules that it "does not yet fully support pandas >=
3.0.0" (a ``FutureWarning`` on every Spark process's stderr). The engine hands pandas nothing but the grouped counts
(a few integer columns), which the engine contract tests check equal numpy's on both Spark modes; that one warning is
filtered by its text when this module is imported, every other warning stays.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from service.data.engines.base import SPARK, EngineError
from service.data.engines.boundary import compiled_refusals, engine_boundary
from service.data.engines.dialect import SPARK_SQL
from service.data.engines.gradients import GroupedRows, weighted_rows_sql
from service.data.engines.grouping import check_marginals, distinct_rows_sql, stacked_counts, stacked_keys_sql
from service.data.engines.queries import GradientQuery, Marginal
from service.data.engines.units import coded_sql
from service.error_text import debugging

#: The start of pyspark 4's pandas-3 warning (module docstring).
PANDAS_3_WARNING = "PySpark does not yet fully support pandas >= 3.0.0"
warnings.filterwarnings("ignore", message=PANDAS_3_WARNING, category=FutureWarning)

#: Environment variable: the Spark Connect URL of a cluster (``sc://host:15002``); unset: local mode.
SPARK_REMOTE_VARIABLE = "MARGINALIA_SPARK_REMOTE"
#: The master of the in-process Spark when no remote is set.
LOCAL_MASTER = "local[2]"
#: Shuffle partitions of the local-mode session (Spark's default of 200 is tuned for clusters: on two cores each
#: tiny partition of a grouped result costs a task).
LOCAL_SHUFFLE_PARTITIONS = "8"

#: Attempts to reach a Spark Connect server when the session is created (:func:`_probe`).
PROBE_RETRIES = 3

#: pyspark's loggers that print each query error's message, and its query, to stderr (pyspark/errors/exceptions).
PYSPARK_QUERY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")

log = logging.getLogger("marginalia.engines")
_sessions: dict[str | None, Any] = {}


def spark_session() -> Any:
    """This process's Spark session (module docstring), created on first use and kept: starting Spark costs
    seconds, so every table, release and test of a process shares it. :class:`EngineError` when pyspark is not
    installed; when Spark cannot be started or reached, pyspark's error, which the table's engine boundary turns
    into the dataset's ``engine_error`` (the log line says which Spark)."""
    remote = os.environ.get(SPARK_REMOTE_VARIABLE) or None
    session = _sessions.get(remote)
    if session is not None and (remote is None or _unanswered(session) is None):
        return session
    # the URL's parameters (``sc://host:15002/;token=...``) may hold a credential: the log names the server only
    server = remote.split(";", 1)[0] if remote else None
    where = f"Spark Connect at {server} ({SPARK_REMOTE_VARIABLE})" if remote else f"local-mode Spark ({LOCAL_MASTER})"
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineError("the Spark engine needs pyspark: pip install 'marginalia[spark]'") from None
    _quiet_pyspark_loggers()
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
        log.warning("%s cannot be started or reached (%s)", where, type(exc).__name__)
        raise
    _sessions[remote] = session
    return session


def _quiet_pyspark_loggers() -> None:
    """Keep Spark's messages out of the process's log: disable pyspark's query-context loggers
    (:data:`PYSPARK_QUERY_LOGGERS`), which log every query error with its message to stderr on their own handler,
    and, unless its level was configured, raise py4j's to WARNING: at DEBUG (a root logger at DEBUG is enough) py4j
    logs every answer of the JVM, the text of each error included. The engine boundary reports the errors.
    ``MARGINALIA_DEBUG=1`` (the operator asking for everything) leaves py4j as configured."""
    py4j = logging.getLogger("py4j")
    if py4j.level == logging.NOTSET and not debugging():
        py4j.setLevel(logging.WARNING)
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a pyspark without them (before 4.0) has nothing to quiet
        return
    for name in PYSPARK_QUERY_LOGGERS:
        PySparkLogger.getLogger(name).disabled = True


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


@engine_boundary
class SparkTable:
    """:class:`service.data.engines.base.TableEngine` over the Spark table ``table``.

    ``columns`` maps each attribute (domain order) to a Spark SQL expression over the table's columns giving its
    code 0..size-1; ``label`` names the table in errors (the dataset's name; errors never name the table, a path
    or what Spark said); ``privacy_unit``, a column of the table, makes the view keep one row per unit
    (:mod:`service.data.engines.units`)."""

    name = SPARK
    gradient_sums_in_one_scan = True

    def __init__(self, table: str, columns: Mapping[str, str], label: str, *,
                 privacy_unit: str | None = None) -> None:
        self.label = label
        self.refusals = compiled_refusals(list(columns), privacy_unit)
        self._names = {attribute: f"c{i}" for i, attribute in enumerate(columns)}
        self._view = f"marginalia_{uuid.uuid4().hex}"
        #: cached views of the distinct rows with counts (``CACHE TABLE``: one scan of the table on first use, kept
        #: in the executors' memory, spilled to disk if need be, until :meth:`close`)
        self._grouped = GroupedRows(SPARK_SQL, f"{self._view}_g", lambda name, sql: self._sql(
            f"CACHE TABLE {name} AS {sql}"))
        self.session = spark_session()
        frame = self.session.table(table)
        self.columns = list(frame.columns)  # Spark Connect resolves the table here
        self._frame = frame
        self._select: str | None = coded_sql(SPARK_SQL, SPARK_SQL.quote(f"{self._view}_rows"),
                                             {self._names[a]: e for a, e in columns.items()}, privacy_unit)

    def _coded(self) -> str:
        """The coded view's name, created on first use over a view of the table's own rows (a missing column of the
        spec fails here)."""
        if self._select is not None:
            self._frame.createOrReplaceTempView(f"{self._view}_rows")
            self.session.sql(self._select).createOrReplaceTempView(self._view)
            self._select = None
        return self._view

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        specs = check_marginals(marginals)
        result = self._sql(stacked_keys_sql(SPARK_SQL, self._coded(), self._names, specs))
        return stacked_counts(specs, result.column("key").to_numpy(), result.column("n").to_numpy())

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Iterator[np.ndarray]:
        sql = distinct_rows_sql(SPARK_SQL, self._coded(), [self._names[a] for a in attributes])
        width = len(attributes) + 1
        part: list[tuple[int, ...]] = []
        for row in self.session.sql(sql).toLocalIterator():
            part.append(tuple(row))
            if len(part) == chunk_rows:
                yield np.array(part, dtype=np.int64).reshape(len(part), width)
                part = []
        if part:
            yield np.array(part, dtype=np.int64).reshape(len(part), width)

    def row_weight_sums(self, query: GradientQuery) -> list[np.ndarray]:
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
        return self.session.sql(sql).toArrow()
