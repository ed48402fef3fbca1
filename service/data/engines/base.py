"""The interface every data engine implements, and the names of the engines.

An engine answers three questions about one table, all aggregations computed where the table lives:

* :meth:`TableEngine.count_marginals`: dense int64 counts of several marginals, each over some of the table's
  attributes, in one scan of the table where the engine can (``GROUPING SETS``);
* :meth:`TableEngine.distinct_rows`: ``SELECT attributes, COUNT(*) ... GROUP BY attributes`` streamed in chunks,
  for the mechanisms whose objective is a sum over rows and that need the rows themselves (objective
  perturbation, whose solver and certificate work on the rows);
* :meth:`TableEngine.row_weight_sums`: DP-IHT's per-iteration sum of clipped per-row gradients, and the curvature
  of its loss at the released model (the error bars), as sums of a per-row weight per (attribute, code) and per pair
  of codes (:mod:`service.data.engines.gradients`), one scan where the engine can.

Nothing else leaves an engine: no row is ever read one by one. Attributes are named by the dataset's domain; the
engine maps them to its own columns.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Protocol

import numpy as np

from service.data.engines.queries import GradientQuery, Marginal
from service.errors import ServiceError

#: The names of the engines of this service (``datasets.engine``): a ``data_<id>`` table in the service database or
#: another SQL database, a Parquet table counted by DuckDB, a table of a Spark session. Each engine's record (where its
#: datasets live, how it attaches) is registered in :mod:`service.data.engines.registry`.
SQL = "sql"
DUCKDB = "duckdb"
SPARK = "spark"


#: The phrase every refusal of a value the spec (or the privacy unit) cannot take carries, in whichever engine
#: raised it (DuckDB's ``error()``, Spark's ``raise_error()``, the SQL engines' own check): a scan stopped by the
#: data, as opposed to an engine that cannot be read (:attr:`EngineError.value_refusal`).
VALUE_REFUSAL = "refused, never dropped"
#: The error code of an :class:`EngineError` that refuses a value (:attr:`EngineError.value_refusal`).
VALUE_REFUSED = "value_refused"
#: The code of a table that no longer matches its registration (a file gone, a column gone or retyped): a 409.
TABLE_CHANGED = "table_changed"


class EngineError(ServiceError):
    """The engine cannot read its table (a missing file, an unreachable database, a value outside the spec). The
    message is always ours (:mod:`service.data.engines.boundary`): it names the dataset, the reason and what to do,
    and for a refused value the column, never a value, a count, a path or the engine's own text.

    ``value_refusal`` says that the data stopped the scan (a value outside the spec, a NULL privacy unit, a stored
    code outside its domain, a value the engine cannot read as its column's type), as opposed to an engine that
    cannot read its table; ``columns`` are the columns named, where known. ``table_changed`` says that the table no
    longer matches its registration (a file of it gone or unreadable, a column gone or of another type).

    Both are the table's state, not the service's: a 409 (``value_refused``, ``table_changed``) that the steward
    resolves (widen the spec, fix or attach the table again), and the request may be retried unchanged afterwards.
    Only an engine that cannot answer now (a database or Spark server unreachable, access refused, out of memory, a
    query cancelled, an engine failure) is a 503 ``engine_error``: the service cannot serve the request for now."""

    code = "engine_error"
    status = 503

    def __init__(self, message: str, *, value_refusal: bool = False, table_changed: bool = False,
                 columns: Sequence[str] = ()) -> None:
        conflict = VALUE_REFUSED if value_refusal else TABLE_CHANGED if table_changed else None
        super().__init__(message, **({"code": conflict, "status": 409} if conflict else {}))
        self.value_refusal = value_refusal
        self.table_changed = table_changed and not value_refusal
        self.columns = tuple(columns)


def refusal_sentence(column: str) -> str:
    """What the SQL of an attached table stops a scan with when ``column`` holds a value the spec cannot code
    (:mod:`service.data.engines.spec_sql`): our words, which the engine boundary recognises in the engine's error."""
    return (f"column {column!r}: a value cannot be coded by the binning spec; values outside the spec are "
            f"{VALUE_REFUSAL}: widen the spec to count them")


def null_unit_sentence(unit: str) -> str:
    """What a scan stops with when a row's privacy unit ``unit`` is NULL (:mod:`service.data.engines.units`)."""
    return (f"column {unit!r} (the privacy unit) is NULL in some row: every row must name its unit; a NULL unit is "
            f"{VALUE_REFUSAL}")


def values_outside_spec(label: str, columns: Sequence[str]) -> EngineError:
    """The refusal of dataset ``label``'s scan because ``columns`` hold a value the spec cannot code."""
    columns = list(columns)
    named = f"column {columns[0]!r} holds a value" if len(columns) == 1 else f"columns {columns} hold values"
    return EngineError(f"dataset {label!r}: {named} the binning spec cannot code; values outside the spec are "
                       f"{VALUE_REFUSAL}: widen the spec to count them", value_refusal=True, columns=columns)


def codes_outside_domain(label: str, columns: Sequence[str]) -> EngineError:
    """The refusal of a stored table's scan (``dataset load``: codes, not raw values) because ``columns`` (empty:
    unknown) hold a code outside the column's domain: the table was changed outside the service."""
    columns = list(columns)
    named = ("a row holds a code" if not columns else f"column {columns[0]!r} holds a code" if len(columns) == 1
             else f"columns {columns} hold codes")
    return EngineError(f"dataset {label!r}: {named} outside its domain, so the stored table was changed outside the "
                       f"service; such rows are {VALUE_REFUSAL}: load the dataset again", value_refusal=True,
                       columns=columns)


def null_unit(label: str, unit: str) -> EngineError:
    """The refusal of dataset ``label``'s scan because a row's privacy unit ``unit`` is NULL."""
    return EngineError(f"dataset {label!r}: {null_unit_sentence(unit)}", value_refusal=True, columns=[unit])


class TableEngine(Protocol):
    """Exact aggregations of one sensitive table (module docstring)."""

    name: str
    #: whether :meth:`row_weight_sums` is one scan of the table (else DP-IHT reads the distinct rows once)
    gradient_sums_in_one_scan: bool

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        """Counts over each ``(attributes, shape)``, as int64 arrays of that shape (every cell, empty ones 0),
        in the order asked; one scan of the table per call where the engine allows."""
        ...

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Generator[np.ndarray, None, None]:
        """The distinct rows over ``attributes`` in ascending code order, each with its count, as int64 chunks of
        at most ``chunk_rows`` rows and ``len(attributes) + 1`` columns (the codes, then the count)."""
        ...

    def row_weight_sums(self, query: GradientQuery) -> list[np.ndarray]:
        """For each marginal of ``query.marginals()`` (each attribute of ``query.attributes``, the features then the
        target, then the pairs of a curvature query), the float64 array, one entry per cell, of the sum of the rows'
        weights ``w`` (the query's statistic) over the rows in that cell (cells with no row: 0).
        Raises :class:`EngineError` naming an attribute whose code is outside its domain."""
        ...

    def row_count(self) -> int:
        """The table's number of rows (private: stewards only)."""
        ...

    def close(self) -> None:
        """Release the engine's connections; the engine is not used afterwards."""
        ...


def is_value_refusal(error: EngineError) -> bool:
    """Whether ``error`` is the refusal of a value rather than an unreadable table (:attr:`EngineError.value_refusal`,
    set where the refusal was made, never read from a message)."""
    return error.value_refusal
