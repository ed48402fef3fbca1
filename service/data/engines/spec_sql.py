"""A public binning spec (:mod:`workloads.binning`) compiled to DuckDB SQL, so a table attached where it lives is
coded inside the engine, on every scan, exactly as ``dataset load --bins`` codes a raw CSV.

Rule for a value the spec cannot code (outside the outer edges, not a number, NULL, a category not listed): the
scan is **refused** with an error naming the column, through DuckDB's ``error()`` in the ``ELSE`` branch of the
column's ``CASE``. No value is dropped or clipped silently; the message never shows the value (a release that
meets one fails before any noise is drawn, and its caller may be an analyst). Widen the spec (``-.inf`` /
``.inf`` as outer edges, or list the category) to count such rows.
"""

from __future__ import annotations

import math

from service.data.engines.duckdb_table import literal, quote
from workloads.binning import BinningSpec, ColumnBins


def spec_columns(spec: BinningSpec) -> dict[str, str]:
    """``{attribute: DuckDB expression of its code}`` for every column of ``spec``, in spec order."""
    return {column.name: column_sql(column, strip=spec.strip) for column in spec.columns}


def column_sql(column: ColumnBins, *, strip: bool) -> str:
    """The ``CASE`` giving ``column``'s code 0..size-1 from the raw column of the same name (module docstring)."""
    raw = quote(column.name)
    if column.edges:
        x = f"TRY_CAST({raw} AS DOUBLE)"
        edges = column.edges
        refuse = _refuse(column, f"a number in [{_number(edges[0])}, {_number(edges[-1])}]")
        branches = " ".join(f"WHEN {x} < {_double(edge)} THEN {code}" for code, edge in enumerate(edges[1:-1]))
        return (f"(CASE WHEN {x} IS NULL OR isnan({x}) OR {x} < {_double(edges[0])} OR {x} > {_double(edges[-1])} "
                f"THEN {refuse} {branches} ELSE {len(edges) - 2} END)")
    value = f"CAST({raw} AS VARCHAR)"
    if strip:
        value = f"trim({value})"
    if column.strip_suffix:
        suffix = literal(column.strip_suffix)
        value = (f"(CASE WHEN ends_with({value}, {suffix}) THEN left({value}, length({value}) - "
                 f"{len(column.strip_suffix)}) ELSE {value} END)")
    branches = " ".join(f"WHEN {literal(v)} THEN {code}" for code, v in enumerate(column.values))
    return f"(CASE {value} {branches} ELSE {_refuse(column, f'one of {list(column.values)}')} END)"


def _refuse(column: ColumnBins, expected: str) -> str:
    message = (f"column {column.name!r}: a value cannot be coded by the binning spec (expected {expected}); values "
               "outside the spec are refused, never dropped: widen the spec to count them")
    return f"CAST(error({literal(message)}) AS INTEGER)"


def _double(value: float) -> str:
    if math.isinf(value):
        return "'inf'::DOUBLE" if value > 0 else "'-inf'::DOUBLE"
    return f"{float(value)!r}::DOUBLE"


def _number(value: float) -> str:
    return "inf" if value == math.inf else "-inf" if value == -math.inf else f"{value:g}"
