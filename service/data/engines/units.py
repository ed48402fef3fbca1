"""Privacy units: a table attached with ``--privacy-unit COLUMN`` is read as **one row per unit** (docs/privacy.md
section 1.1), in every engine's source relation, so that counting, ``GROUPING SETS``, the distinct rows and the row
count all see the bounded table and nothing downstream changes.

The row kept for a unit is the one whose codes are smallest in lexicographic order of the coded columns (``c0``,
``c1``, … in domain order): ``ROW_NUMBER() OVER (PARTITION BY unit ORDER BY c0, c1, …) = 1``. The rule depends only
on that unit's own rows (two rows tied in that order have the same codes, so which of them the engine keeps does
not change any count), which makes the selection 1-stable from unit neighbours to row neighbours (the derivation is
in docs/privacy.md; cf. the per-user contribution bounding of Wilson et al. 2020, "Differentially Private SQL with
Bounded User Contribution", section 3, here with a bound of one row).

Every row is still coded before the selection, so a value outside the spec is refused in any row of any unit, as
without a unit; a NULL unit is refused too (naming the column), never dropped or merged into one unit. The unit
column itself is never coded or released: it only partitions.

:func:`coded_sql` writes the relation for the SQL-string engines (DuckDB, Spark SQL); :func:`bounded_select` builds
the same relation with SQLAlchemy for an attached SQL database (SQLite, PostgreSQL, …).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Select, case, func, literal, or_, select
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause

from service.data.engines.base import null_unit_sentence
from service.data.engines.dialect import Dialect

#: Names of the helper columns inside the bounded relation (never seen outside it).
UNIT_ALIAS = "marginalia_unit"
RANK_ALIAS = "marginalia_rank"
GUARD_ALIAS = "marginalia_unit_guard"


def coded_sql(dialect: Dialect, source: str, columns: Mapping[str, str], unit: str | None) -> str:
    """``SELECT CAST(<expression> AS INTEGER) AS <name>, … FROM source`` for ``columns`` (``{name: expression}``,
    domain order); with ``unit`` (a column of ``source``), only the first row of each unit in the order of those
    codes (module docstring). Identifiers are quoted by ``dialect``."""
    q = dialect.quote
    select_list = ", ".join(f"CAST({expression} AS INTEGER) AS {q(name)}" for name, expression in columns.items())
    if unit is None:
        return f"SELECT {select_list} FROM {source}"
    names = ", ".join(q(name) for name in columns)
    guard = f"CASE WHEN {q(unit)} IS NULL THEN {dialect.refuse(null_unit_sentence(unit))} ELSE 0 END"
    rows = f"SELECT {select_list}, {q(unit)} AS {q(UNIT_ALIAS)}, {guard} AS {q(GUARD_ALIAS)} FROM {source}"
    # the guard leads the window's order so that it is computed for every row (a NULL unit stops the scan)
    ranked = (f"SELECT {names}, ROW_NUMBER() OVER (PARTITION BY {q(UNIT_ALIAS)} ORDER BY {q(GUARD_ALIAS)}, {names})"
              f" AS {q(RANK_ALIAS)} FROM ({rows}) AS coded_rows")
    return f"SELECT {names} FROM ({ranked}) AS ranked WHERE {q(RANK_ALIAS)} = 1"


def bounded_select(codes: Mapping[str, ColumnElement[int]], table: FromClause, unit: ColumnElement[object],
                   outside: int) -> Select:
    """``SELECT <code> AS <name>, … FROM table`` for ``codes`` (``{name: expression}``, domain order) reduced to one
    row per value of ``unit`` (a column of ``table``: the privacy unit), in SQLAlchemy (module docstring). A
    database without a refusal function marks a bad row by the code ``outside``
    (:mod:`service.data.engines.foreign_sql`): a NULL unit gives every column that code, and a unit holding a row
    with such a code keeps that row (it sorts first), so the count is refused as it would be without a unit."""
    marked = select(*(case((unit.is_(None), literal(outside)), else_=e).label(n) for n, e in codes.items()),
                    unit.label(UNIT_ALIAS)).select_from(table).subquery("coded_rows")
    columns = [marked.c[n] for n in codes]
    bad_first = case((or_(*(c < 0 for c in columns)), 0), else_=1)
    rank = func.row_number().over(partition_by=marked.c[UNIT_ALIAS], order_by=[bad_first, *columns])
    ranked = select(*columns, rank.label(RANK_ALIAS)).subquery("ranked")
    return select(*(ranked.c[n] for n in codes)).where(ranked.c[RANK_ALIAS] == 1)
