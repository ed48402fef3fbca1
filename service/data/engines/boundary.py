"""The one boundary between the data engines and the rest of the service: whatever an engine, its driver or a
library raises inside an engine's call becomes an :class:`~service.data.engines.base.EngineError` whose message is
ours (docs/privacy.md section 1.3, "What an error may say").

Why: an engine writes the value it could not read into its error (DuckDB: ``Could not convert string 'Jane Doe
HIV+' to INT64``; PostgreSQL: ``invalid input syntax for type double precision: "..."``; Spark: ``The value '...'
of the type "STRING" cannot be cast``), and an engine's error reaches an analyst's answer (a fit that makes a
release), a job record and the server's log. So no text of the engine's is ever passed on. The message is
``dataset '<name>': <reason>``, the :class:`Reason` chosen from what the exception *is* -- a SQLSTATE, a Spark error
class, a gRPC status, a SQLite result code or its class (DuckDB's ``IOException``, the DB-API's ``DataError``) --
never from its text. The foreign exception itself goes nowhere: the :class:`EngineError` is raised outside the
``except`` block (no ``__context__``), and the log line the boundary writes for the operator holds its type,
SQLSTATE or error class and traceback frames only (:func:`service.error_text.shown_traceback`).

Our own refusals are the exception: the SQL an engine runs stops a scan with a message of ours when a value is
outside the spec or a privacy unit is NULL (:func:`~service.data.engines.base.refusal_sentence`,
:func:`~service.data.engines.base.null_unit_sentence`, compiled by :mod:`~service.data.engines.spec_sql` and
:mod:`~service.data.engines.units`). Each engine lists the sentences its SQL can raise, with the column each names
(:func:`compiled_refusals`); when the engine's refusal error (DuckDB's ``error()``, an ``InvalidInputException``;
Spark's ``raise_error()``, error class ``USER_RAISED_EXCEPTION``) carries one of them, the answer is a refusal naming
that column, written from our copy (:func:`~service.data.engines.base.values_outside_spec`), and marked
``value_refusal``. Our own exceptions (a :class:`~service.errors.ServiceError`, any exception of the project's
packages) pass through unchanged.

Every engine class is wrapped by :func:`engine_boundary` (its constructor and every public method, generators
included: each chunk of ``distinct_rows`` is read inside the boundary); :func:`call_inside` is the same boundary
for code outside an engine's methods (opening an attached SQL table). ``tests/service/data/test_engine_errors.py``
checks that every registered engine (:data:`~service.data.engines.registry.ENGINES`) is wrapped.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from db.tables import CodeOutOfRange
from service.data.engines.base import (
    EngineError,
    codes_outside_domain,
    null_unit,
    null_unit_sentence,
    refusal_sentence,
    values_outside_spec,
)
from service.data.engines.gradients import CodeOutsideDomain
from service.error_text import is_own, shown_traceback, type_name
from service.observability.metrics import ENGINE_SECONDS

log = logging.getLogger("marginalia.engines")

T = TypeVar("T")


class Reason(enum.Enum):
    """Why an engine could not answer, and what to do; the text follows ``dataset '<name>': ``."""

    FILES = "a file of its table cannot be read: check that its files are still in place and readable by the service"
    SCHEMA = ("its table, or a column its spec reads, cannot be found or has a type the spec cannot read: check the "
              "table against its spec, or attach it again")
    VALUE = ("a value cannot be read as the type its column needs: check the table's column types against its spec "
             "(a value the spec cannot code is refused as outside the spec)")
    RANGE = "a number computed from its rows is out of range of the engine's numbers: check the request's parameters"
    UNREACHABLE = ("where its table lives cannot be reached: check that the database or Spark server is running and "
                   "reachable from the service")
    DENIED = ("where its table lives refused the service's access: check the credentials and the read permission of "
              "the user the service connects as")
    RESOURCES = "its engine ran out of memory or disk space: retry later, or give the engine more"
    INTERRUPTED = "its engine stopped the query (cancelled, timed out or waiting for a lock): retry later"
    ENGINE = "its engine failed ({kind}): the server log has the traceback"

    @property
    def table_changed(self) -> bool:
        """Whether the reason is the table's own state (a 409 the steward resolves), not the engine's (a 503)."""
        return self in (Reason.FILES, Reason.SCHEMA)


#: SQLSTATEs (PostgreSQL, Spark 4; the SQL standard's classes) by their most specific prefix.
_SQLSTATES: dict[str, Reason] = {
    "08": Reason.UNREACHABLE, "28": Reason.DENIED, "42501": Reason.DENIED,
    "42P01": Reason.SCHEMA, "42703": Reason.SCHEMA, "42K09": Reason.SCHEMA, "42846": Reason.SCHEMA,
    "42883": Reason.SCHEMA, "42804": Reason.SCHEMA, "42K03": Reason.FILES, "58": Reason.FILES,
    "22003": Reason.RANGE, "22": Reason.VALUE, "53": Reason.RESOURCES,
    "57P01": Reason.UNREACHABLE, "57P03": Reason.UNREACHABLE, "57": Reason.INTERRUPTED, "40": Reason.INTERRUPTED,
    "55P03": Reason.INTERRUPTED,
}
#: Spark error classes (``getCondition()``), by the whole class or else its first part.
_SPARK_CONDITIONS: dict[str, Reason] = {
    "PATH_NOT_FOUND": Reason.FILES, "FAILED_READ_FILE": Reason.FILES, "CANNOT_READ_FILE_FOOTER": Reason.FILES,
    # a Parquet file of the table whose column has another type than the others' (a file rewritten where it lives)
    "FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH": Reason.SCHEMA,
    "TABLE_OR_VIEW_NOT_FOUND": Reason.SCHEMA, "UNRESOLVED_COLUMN": Reason.SCHEMA, "DATATYPE_MISMATCH": Reason.SCHEMA,
    "CAST_INVALID_INPUT": Reason.VALUE, "CAST_OVERFLOW": Reason.RANGE, "ARITHMETIC_OVERFLOW": Reason.RANGE,
    "NUMERIC_VALUE_OUT_OF_RANGE": Reason.RANGE, "JAVA_GATEWAY_EXITED": Reason.UNREACHABLE,
}
#: gRPC status codes (Spark Connect's transport), by name.
_GRPC_CODES: dict[str, Reason] = {
    "UNAVAILABLE": Reason.UNREACHABLE, "DEADLINE_EXCEEDED": Reason.UNREACHABLE, "UNAUTHENTICATED": Reason.DENIED,
    "PERMISSION_DENIED": Reason.DENIED, "RESOURCE_EXHAUSTED": Reason.RESOURCES, "CANCELLED": Reason.INTERRUPTED,
}
#: SQLite's result codes (``sqlite3.Error.sqlite_errorname``; SQLITE_ERROR is anything from a missing table on).
_SQLITE_CODES: dict[str, Reason] = {
    "SQLITE_ERROR": Reason.SCHEMA, "SQLITE_BUSY": Reason.INTERRUPTED, "SQLITE_LOCKED": Reason.INTERRUPTED,
    "SQLITE_CANTOPEN": Reason.UNREACHABLE, "SQLITE_PERM": Reason.DENIED, "SQLITE_AUTH": Reason.DENIED,
    "SQLITE_IOERR": Reason.FILES, "SQLITE_CORRUPT": Reason.FILES, "SQLITE_NOTADB": Reason.FILES,
    "SQLITE_FULL": Reason.RESOURCES, "SQLITE_NOMEM": Reason.RESOURCES, "SQLITE_INTERRUPT": Reason.INTERRUPTED,
    "SQLITE_MISMATCH": Reason.VALUE, "SQLITE_TOOBIG": Reason.VALUE,
}
#: Exception classes by name, looked up along the exception's class hierarchy (most specific first): DuckDB's
#: classes, then the DB-API's (PEP 249: psycopg, sqlite3 and DuckDB share the names), SQLAlchemy's, py4j's, Arrow's
#: and Python's own.
_CLASSES: dict[str, Reason] = {
    "HTTPException": Reason.FILES, "IOException": Reason.FILES, "ConversionException": Reason.VALUE,
    "OutOfRangeException": Reason.RANGE, "TypeMismatchException": Reason.SCHEMA, "BinderException": Reason.SCHEMA,
    "CatalogException": Reason.SCHEMA, "InvalidTypeException": Reason.SCHEMA, "InvalidInputException": Reason.FILES,
    "OutOfMemoryException": Reason.RESOURCES, "InterruptException": Reason.INTERRUPTED,
    "PermissionException": Reason.DENIED,
    "InterfaceError": Reason.UNREACHABLE, "OperationalError": Reason.UNREACHABLE, "DataError": Reason.VALUE,
    "ProgrammingError": Reason.SCHEMA,
    "NoSuchTableError": Reason.SCHEMA, "NoSuchColumnError": Reason.SCHEMA, "TimeoutError": Reason.INTERRUPTED,
    "Py4JNetworkError": Reason.UNREACHABLE, "ArrowInvalid": Reason.VALUE, "ArrowMemoryError": Reason.RESOURCES,
    "MemoryError": Reason.RESOURCES, "PermissionError": Reason.DENIED, "ConnectionError": Reason.UNREACHABLE,
    "OSError": Reason.FILES,
}


def compiled_refusals(attributes: Sequence[str], privacy_unit: str | None = None) -> dict[str, tuple[str, str]]:
    """The sentences an attached table's SQL may stop a scan with, each mapped to ``(kind, column)``: a value
    outside the spec of each of ``attributes`` (``"value"``), a NULL ``privacy_unit`` (``"unit"``)."""
    refusals = {refusal_sentence(a): ("value", a) for a in attributes}
    if privacy_unit is not None:
        refusals[null_unit_sentence(privacy_unit)] = ("unit", privacy_unit)
    return refusals


def engine_error(exc: BaseException, label: str, refusals: Mapping[str, tuple[str, str]] | None = None
                 ) -> BaseException:
    """The exception to raise for ``exc``, raised inside an engine's call on dataset ``label`` whose SQL may stop
    with ``refusals`` (:func:`compiled_refusals`): ``exc`` itself when it is our own, else an :class:`EngineError`
    of ours (module docstring), the foreign exception logged by type and frames only."""
    if isinstance(exc, CodeOutOfRange | CodeOutsideDomain):  # a stored table's code outside its domain
        return codes_outside_domain(label, getattr(exc, "attributes", []))
    if is_own(exc):
        return exc
    refused = _our_refusal(exc, refusals or {})
    if refused is not None:
        kind, column = refused
        return null_unit(label, column) if kind == "unit" else values_outside_spec(label, [column])
    reason, kind = _reason(exc)
    log.warning("dataset %r: engine error %s (%s); %s", label, kind, reason.name, shown_traceback(exc))
    return EngineError(f"dataset {label!r}: {reason.value.format(kind=kind)}", value_refusal=reason is Reason.VALUE,
                       table_changed=reason.table_changed)


def call_inside(label: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` inside the engine boundary, for dataset ``label`` (module docstring): the engine
    code that is not an engine's method (opening an attached SQL table)."""
    return _guarded(function, args, kwargs, lambda: label, lambda: None)


def engine_boundary(cls: type[T]) -> type[T]:
    """Wrap the constructor and every public method of the engine class ``cls`` in the boundary (module
    docstring). The dataset's name is the instance's ``label`` (set first thing by each constructor), or the
    constructor's ``label`` argument; its refusals are the instance's ``refusals`` (:func:`compiled_refusals`)."""
    for name, member in list(vars(cls).items()):
        if not inspect.isfunction(member) or (name.startswith("_") and name != "__init__"):
            continue
        setattr(cls, name, _stream(member) if inspect.isgeneratorfunction(member) else _call(member))
    cls.engine_boundary = True  # type: ignore[attr-defined]
    return cls


def _guarded(function: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], label: Callable[[], str],
             refusals: Callable[[], Mapping[str, tuple[str, str]] | None]) -> T:
    """``function(*args, **kwargs)``, any exception translated (:func:`engine_error`) and the translation raised
    outside the ``except`` block, so that the foreign exception is not even its ``__context__``."""
    error: BaseException | None = None
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - translated or passed through (module docstring)
        error = engine_error(exc, label(), refusals())
        if error is exc:
            raise
    raise error from None


def _call(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` inside the boundary, its time observed as ``marginalia_engine_seconds`` by engine and operation
    (:mod:`service.observability.metrics`; the engine is the class's name without ``Table``: ``duckdb``, ``sql``,
    ``foreignsql``, ``spark``)."""
    operation = "open" if method.__name__ == "__init__" else method.__name__

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        engine = type(self).__name__.removesuffix("Table").lower()
        with ENGINE_SECONDS.labels(engine, operation).time():
            return _guarded(method, (self, *args), kwargs, lambda: _label(self, method, args, kwargs),
                            lambda: getattr(self, "refusals", None))

    return call


def _stream(method: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    @functools.wraps(method)
    def stream(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        error: BaseException | None = None
        try:
            yield from method(self, *args, **kwargs)  # a consumer's close() reaches the engine's generator
            return
        except Exception as exc:  # noqa: BLE001 - translated or passed through (module docstring)
            error = engine_error(exc, _label(self, method, args, kwargs), getattr(self, "refusals", None))
            if error is exc:
                raise
        raise error from None

    return stream


def _label(engine: Any, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    label = getattr(engine, "label", None)
    if label is None:
        try:
            label = inspect.signature(method).bind_partial(engine, *args, **kwargs).arguments.get("label")
        except TypeError:
            label = None
    return str(label) if label is not None else "?"


def _our_refusal(exc: BaseException, refusals: Mapping[str, tuple[str, str]]) -> tuple[str, str] | None:
    """The refusal of ours that ``exc`` carries, if ``exc`` is an engine's refusal error (module docstring)."""
    if not refusals:
        return None
    condition = _call_quietly(exc, "getCondition")
    if condition == "USER_RAISED_EXCEPTION":  # Spark's raise_error(): our sentence is its one parameter
        parameters = _call_quietly(exc, "getMessageParameters")
        raised = parameters.get("errorMessage") if isinstance(parameters, dict) else None
        if raised in refusals:
            return refusals[raised]
        text = str(exc)
    elif any(c.__name__ == "InvalidInputException" for c in type(exc).__mro__):  # DuckDB's error()
        text = str(exc)
    else:
        return None
    found = [sentence for sentence in refusals if sentence in text]  # our exact sentence inside the engine's wrapper
    return refusals[max(found, key=len)] if found else None


def _reason(exc: BaseException) -> tuple[Reason, str]:
    """The :class:`Reason` for ``exc``, from what it is (module docstring), and how the log line names it."""
    original = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's exception
    errors = [exc] if not isinstance(original, BaseException) else [original, exc]
    for error in errors:
        for source in (error, *_java_causes(error)):
            condition = _call_quietly(source, "getCondition")
            if isinstance(condition, str):
                reason = _SPARK_CONDITIONS.get(condition) or _SPARK_CONDITIONS.get(condition.split(".")[0])
                if reason is not None:
                    return reason, f"{type_name(error)} {condition}"
        state = getattr(error, "sqlstate", None) or _call_quietly(error, "getSqlState")
        if isinstance(state, str):
            for length in (5, 2):
                reason = _SQLSTATES.get(state[:length])
                if reason is not None:
                    return reason, f"{type_name(error)} SQLSTATE {state}"
        sqlite = getattr(error, "sqlite_errorname", None)
        if isinstance(sqlite, str) and sqlite.split("_")[0] == "SQLITE":
            reason = _SQLITE_CODES.get("_".join(sqlite.split("_")[:2]))
            if reason is not None:
                return reason, f"{type_name(error)} {sqlite}"
    for error in (exc, exc.__cause__, exc.__context__):  # Spark Connect wraps a grpc.RpcError
        code = _call_quietly(error, "code")
        reason = _GRPC_CODES.get(getattr(code, "name", ""))
        if reason is not None:
            return reason, f"{type_name(exc)} gRPC {code.name}"
    for error in errors:
        for cls in type(error).__mro__:
            reason = _CLASSES.get(cls.__name__)
            if reason is not None:
                return reason, type_name(error)
    return Reason.ENGINE, type_name(original if isinstance(original, BaseException) else exc)


def _java_causes(error: BaseException, depth: int = 8) -> Iterator[Any]:
    """The Java exception behind a local-mode pyspark error and its causes, outermost first: a task's failure stays a
    ``Py4JJavaError`` whose Java exception (a ``SparkException`` without an error class, "job aborted") has the
    classed one (``FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH``) as its cause."""
    java = getattr(error, "java_exception", None)
    for _ in range(depth):
        if java is None:
            return
        yield java
        java = _call_quietly(java, "getCause")


def _call_quietly(error: object, method: str) -> Any:
    """``error.method()``, or None when ``error`` (an exception, or a Spark error's Java exception) has no such
    method or it fails (a Spark error whose JVM is gone)."""
    function = getattr(error, method, None)
    if not callable(function):
        return None
    try:
        return function()
    except Exception:  # noqa: BLE001 - a structured attribute we could not read is no reason
        return None
