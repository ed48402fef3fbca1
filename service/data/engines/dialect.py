"""The few spellings in which the engines' SQL dialects differ, so that one compiler writes the counting SQL and
the binning spec's ``CASE`` expressions for every engine (:mod:`service.data.engines.spec_sql`,
:mod:`service.data.engines.grouping`): quoting, string literals, forgiving casts to a double and to a string (a cast
of a raw value never fails: its error would show the value), a double constant, a suffix test and the refusal that
stops a scan with a message.

DuckDB follows standard SQL (``"id"``, ``'it''s'``, ``TRY_CAST``, ``error()``); Spark SQL quotes identifiers with
backticks, escapes string literals with a backslash (two adjacent literals are concatenated, so ``''`` is not a
quote) and stops a scan with ``raise_error()`` (Spark SQL reference, "Built-in Functions"). The service database's
dialects (SQLite, PostgreSQL) write the DP-IHT gradient SQL only (:mod:`service.data.engines.gradients`): standard
quoting, and PostgreSQL spells the double type ``DOUBLE PRECISION``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """A SQL dialect's spellings (module docstring)."""

    name: str
    identifier_quote: str
    #: characters escaped by a backslash inside a string literal (empty: the quote is doubled instead)
    backslash_escapes: bool
    string_type: str
    #: ``None`` where the dialect has no such function (only the spec compiler needs them: DuckDB and Spark)
    ends_with_function: str | None = None
    refuse_function: str | None = None
    double_type: str = "DOUBLE"
    #: ``{values}`` (comma-separated) at the 1-based ``{index}``, NULL outside; ``None``: the dialect has no arrays
    array_lookup: str | None = None

    def quote(self, identifier: str) -> str:
        """``identifier`` as a quoted identifier."""
        q = self.identifier_quote
        return q + identifier.replace(q, q + q) + q

    def literal(self, text: str) -> str:
        """``text`` as a string literal."""
        if self.backslash_escapes:
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    def try_double(self, expression: str) -> str:
        """``expression`` as a DOUBLE, NULL when it is not a number (a cast that cannot fail, as :meth:`string`)."""
        return f"TRY_CAST({expression} AS {self.double_type})"

    def double(self, value: float) -> str:
        """The DOUBLE constant ``value`` (infinities included)."""
        if math.isinf(value):
            text = "Infinity" if value > 0 else "-Infinity"
        else:
            text = repr(float(value))
        return f"CAST({self.literal(text)} AS {self.double_type})"

    def string(self, expression: str) -> str:
        """``expression`` as a string, NULL when it has none. ``TRY_CAST``: a cast of a raw value must never fail,
        since the engine's error would quote the value (Spark runs ANSI mode, whose failed casts print it); a NULL
        matches no category of the spec, so the value is refused as outside the spec."""
        return f"TRY_CAST({expression} AS {self.string_type})"

    def ends_with(self, expression: str, suffix: str) -> str:
        if self.ends_with_function is None:
            raise ValueError(f"the {self.name} dialect has no suffix test here")
        return f"{self.ends_with_function}({expression}, {self.literal(suffix)})"

    def refuse(self, message: str) -> str:
        """An INTEGER expression that stops the scan with ``message`` when evaluated."""
        if self.refuse_function is None:
            raise ValueError(f"the {self.name} dialect has no refusal function here")
        return f"CAST({self.refuse_function}({self.literal(message)}) AS INTEGER)"


DUCKDB_SQL = Dialect(name="duckdb", identifier_quote='"', backslash_escapes=False, string_type="VARCHAR",
                     ends_with_function="ends_with", refuse_function="error",
                     array_lookup="list_extract([{values}], {index})")
SPARK_SQL = Dialect(name="spark", identifier_quote="`", backslash_escapes=True, string_type="STRING",
                    ends_with_function="endswith", refuse_function="raise_error",
                    array_lookup="element_at(array({values}), {index})")
SQLITE_SQL = Dialect(name="sqlite", identifier_quote='"', backslash_escapes=False, string_type="TEXT")
POSTGRESQL_SQL = Dialect(name="postgresql", identifier_quote='"', backslash_escapes=False, string_type="TEXT",
                         double_type="DOUBLE PRECISION",
                         # an attached table's code outside its spec is -2^40 (foreign_sql.OUTSIDE): not an INTEGER
                         # subscript, so it is mapped to 0, outside the array (NULL), and the row is refused
                         array_lookup="(ARRAY[{values}])[GREATEST({index}, 0)]")
