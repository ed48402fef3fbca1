"""A public binning spec (:mod:`workloads.binning`) compiled to SQL (DuckDB, or Spark through its
:class:`~service.data.engines.dialect.Dialect`), so a table attached where it lives is
coded inside the engine, on every scan, exactly as ``dataset load --bins`` codes a raw CSV.

Rule for a value the spec cannot code (outside the outer edges, not a number, NULL, a category not listed, a value
of a type the spec does not read): the scan is **refused** with an error naming the column, through the engine's
refusal (DuckDB's ``error()``, Spark's ``raise_error()``) in the ``ELSE`` branch of the column's ``CASE``, with our
sentence (:func:`~service.data.engines.base.refusal_sentence`), which the engine boundary recognises and reports
from its own copy (:mod:`service.data.engines.boundary`). The raw value is read only through casts that cannot fail
(``TRY_CAST`` to a double or a string, NULL when it cannot): an engine's failed cast would quote the value. No value
is dropped or clipped silently; the message never shows the value (a release that meets one fails before any noise
is drawn, and its caller may be an analyst). Widen the spec (``-.inf`` / ``.inf`` as outer edges, or list the
category) to count such rows.
"""

from __future__ import annotations

from service.data.engines.base import refusal_sentence
from service.data.engines.dialect import DUCKDB_SQL, Dialect
from workloads.binning import BinningSpec, ColumnBins


def spec_columns(spec: BinningSpec, dialect: Dialect = DUCKDB_SQL) -> dict[str, str]:
    """``{attribute: SQL expression of its code}`` for every column of ``spec``, in spec order."""
    return {column.name: column_sql(column, strip=spec.strip, dialect=dialect) for column in spec.columns}


def column_sql(column: ColumnBins, *, strip: bool, dialect: Dialect = DUCKDB_SQL) -> str:
    """The ``CASE`` giving ``column``'s code 0..size-1 from the raw column of the same name (module docstring)."""
    raw = dialect.quote(column.name)
    if column.edges:
        x = dialect.try_double(raw)
        edges = column.edges
        refuse = dialect.refuse(refusal_sentence(column.name))
        branches = " ".join(f"WHEN {x} < {dialect.double(edge)} THEN {code}" for code, edge in enumerate(edges[1:-1]))
        return (f"(CASE WHEN {x} IS NULL OR isnan({x}) OR {x} < {dialect.double(edges[0])} "
                f"OR {x} > {dialect.double(edges[-1])} THEN {refuse} {branches} ELSE {len(edges) - 2} END)")
    value = dialect.string(raw)
    if strip:
        value = f"trim({value})"
    if column.strip_suffix:
        value = (f"(CASE WHEN {dialect.ends_with(value, column.strip_suffix)} THEN left({value}, length({value}) - "
                 f"{len(column.strip_suffix)}) ELSE {value} END)")
    branches = " ".join(f"WHEN {dialect.literal(v)} THEN {code}" for code, v in enumerate(column.values))
    return f"(CASE {value} {branches} ELSE {dialect.refuse(refusal_sentence(column.name))} END)"
