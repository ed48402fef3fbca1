"""A table that lives in another SQL database (any SQLAlchemy URL), coded by its public binning spec in that
database: ``marginalia dataset attach NAME --sql URL --table T --spec SPEC``.

Each attribute is a ``CASE`` over the foreign column (SQLAlchemy expressions, so the same spec compiles for
PostgreSQL, SQLite or any dialect), and the counting SQL of :mod:`db.tables` runs over the derived table
``SELECT <case> AS c0, … FROM T``: on PostgreSQL one ``GROUPING SETS`` scan per batch. A value the spec cannot
code (outside the outer edges, not a number, NULL, an unlisted category) gets the code :data:`OUTSIDE`, a large
negative number, so its row's cell index is negative in every marginal that holds the column: the count is then
refused (:class:`db.tables.CodeOutOfRange`) and one more query names the column. Nothing is dropped or clipped,
and no value is shown. With a privacy unit the derived table keeps one row per unit
(:func:`service.data.engines.units.bounded_select`; a NULL unit is refused the same way, naming the unit column).

**A cast that cannot fail.** A value is read as a number only where the read cannot fail, since the database's
error would quote it (PostgreSQL: ``invalid input syntax for type double precision: "..."``, ``"1e400" is out of
range for type double precision``). The column's type, reflected when the table is opened, chooses how
(:func:`_number`):

* SQLite: only values whose ``typeof`` is ``integer`` or ``real`` are numbers (SQLite casts ``'abc'`` to 0.0);
* PostgreSQL integer and floating-point columns: cast to ``DOUBLE PRECISION``, which never fails for them (NaN is
  outside the spec);
* PostgreSQL ``NUMERIC``: compared as ``NUMERIC`` with the edges written as ``NUMERIC`` constants, never cast to a
  double (``1e400`` does not fit one); NaN is outside, ``Infinity`` above every finite edge;
* any other PostgreSQL type (text, boolean, date, JSON, ...): its text (every type casts to text) is a number only
  when it matches :data:`NUMBER_TEXT` (ASCII digits, an optional sign, point and exponent of at most three digits,
  ASCII spaces around) and is at most :data:`MAX_NUMBER_TEXT` characters: such a text always casts to ``NUMERIC``
  (PostgreSQL accepts exponents up to 1000 and tens of thousands of digits), and is compared as above;
  ``inf``/``infinity`` with an optional sign, in any case, is read as an infinity (as DuckDB's and Spark's
  ``TRY_CAST`` read it); anything else (``NaN``, ``true``, a date, a name) is outside the spec;
* any other database: cast to a double, as before (its errors are still translated by the engine boundary).

A categorical column is compared as text (``CAST(... AS VARCHAR)``, which no PostgreSQL or SQLite value fails).
Whatever the database still raises is translated by the engine boundary (:mod:`service.data.engines.boundary`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence

import numpy as np
from sqlalchemy import (
    Engine,
    Float,
    Integer,
    Numeric,
    String,
    Table,
    Text,
    case,
    cast,
    func,
    literal,
    not_,
    or_,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from db import tables
from service.data.engines.base import SQL, EngineError, null_unit, values_outside_spec
from service.data.engines.boundary import call_inside, engine_boundary
from service.data.engines.gradients import CodeOutsideDomain
from service.data.engines.queries import GradientQuery, Marginal
from service.data.engines.sql_gradients import SqlGradientSums
from service.data.engines.units import bounded_select
from workloads.binning import BinningSpec, ColumnBins

#: The code of a value outside the spec: negative enough that any cell index holding it is negative (while the
#: domain has fewer than 2^40 cells), small enough that it times a 2^22-cell stride still fits 64 bits.
OUTSIDE = -(1 << 40)
#: A PostgreSQL text that always casts to NUMERIC (module docstring): ASCII only (``[0-9]``, not ``\d``, which a
#: locale may widen to other digits; the spaces ``numeric_in`` skips), an exponent of at most three digits.
NUMBER_TEXT = "^[ \t\n\r\f\v]*[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]{1,3})?[ \t\n\r\f\v]*$"
#: An infinity as DuckDB's and Spark's ``TRY_CAST`` read it (compared case-insensitively), by sign.
POSITIVE_INFINITY_TEXT = "^[ \t\n\r\f\v]*[+]?inf(inity)?[ \t\n\r\f\v]*$"
NEGATIVE_INFINITY_TEXT = "^[ \t\n\r\f\v]*-inf(inity)?[ \t\n\r\f\v]*$"
#: The longest text read as a number (about 10^2000 at most: far inside NUMERIC's range).
MAX_NUMBER_TEXT = 1000


def spec_expressions(spec: BinningSpec, table: Table, dialect: str) -> dict[str, ColumnElement[int]]:
    """``{attribute: expression of its code}`` over the columns of ``table`` (module docstring)."""
    return {c.name: _code(c, table.c[c.name], spec.strip, dialect) for c in spec.columns}


def _code(column: ColumnBins, raw: ColumnElement[object], strip: bool, dialect: str) -> ColumnElement[int]:
    if column.edges:
        return _bins(column.edges, raw, dialect)
    value: ColumnElement[str] = cast(raw, String)
    if strip:
        value = func.trim(value)
    if column.strip_suffix:
        cut = func.substr(value, 1, func.length(value) - len(column.strip_suffix))
        value = case((value.endswith(column.strip_suffix, autoescape=True), cut), else_=value)
    return case(*((value == v, literal(code)) for code, v in enumerate(column.values)), else_=literal(OUTSIDE))


def _bins(edges: tuple[float, ...], raw: ColumnElement[object], dialect: str) -> ColumnElement[int]:
    """The code of ``raw`` in the bins of ``edges``: the guards of :func:`_number` first (``CASE`` evaluates its
    conditions in order and stops at the first true one, so the comparisons never meet a value they cannot read),
    then the outer edges, then the bins."""
    last = len(edges) - 2
    x, guards, edge = _number(raw, dialect, low=0 if edges[0] == -math.inf else OUTSIDE,
                              high=last if edges[-1] == math.inf else OUTSIDE)
    whens = [(condition, literal(code)) for condition, code in guards]
    if math.isfinite(edges[0]):
        whens.append((x < edge(edges[0]), literal(OUTSIDE)))
    if math.isfinite(edges[-1]):
        whens.append((x > edge(edges[-1]), literal(OUTSIDE)))
    whens += [(x < edge(e), literal(code)) for code, e in enumerate(edges[1:-1])]
    return case(*whens, else_=literal(last))


def _number(raw: ColumnElement[object], dialect: str, *, low: int, high: int
            ) -> tuple[ColumnElement[object], list[tuple[ColumnElement[bool], int]], Callable[[float], object]]:
    """How to read ``raw`` as a number without a failing cast (module docstring): the expression to compare, the
    guards ``(condition, code)`` to test before it (mostly ``OUTSIDE``; a text infinity gets ``low`` or ``high``, the
    code of the bin reaching that infinity or ``OUTSIDE``), and how to write an edge for the comparison."""
    guards: list[tuple[ColumnElement[bool], int]] = [(raw.is_(None), OUTSIDE)]
    kind = raw.type
    if dialect == "sqlite":  # SQLite casts any text to a number (0.0 for 'abc'): only numbers are numbers
        guards.append((func.typeof(raw).notin_(["integer", "real"]), OUTSIDE))
        return cast(raw, Float), guards, float
    if dialect != "postgresql":
        return cast(raw, Float), guards, float
    if isinstance(kind, Integer | Float):
        x = cast(raw, Float)
        guards.append((x == cast(literal("NaN"), Float), OUTSIDE))  # above every number in PostgreSQL's order
        return x, guards, float
    if isinstance(kind, Numeric):
        guards.append((raw == cast(literal("NaN"), Numeric), OUTSIDE))
        return raw, guards, _numeric_constant
    text = cast(raw, Text)
    guards += [
        (text.regexp_match(POSITIVE_INFINITY_TEXT, flags="i"), high),
        (text.regexp_match(NEGATIVE_INFINITY_TEXT, flags="i"), low),
        (or_(not_(text.regexp_match(NUMBER_TEXT)), func.length(text) > MAX_NUMBER_TEXT), OUTSIDE),
    ]
    return cast(text, Numeric), guards, _numeric_constant


def _numeric_constant(value: float) -> ColumnElement[object]:
    """``value`` (a finite edge) as a NUMERIC constant: compared with a double, PostgreSQL would cast the NUMERIC
    side to a double, which fails above 1.8e308."""
    return cast(literal(repr(float(value))), Numeric)


@engine_boundary
class ForeignSqlTable:
    """:class:`service.data.engines.base.TableEngine` over ``table`` in the database of ``engine`` (disposed by
    :meth:`close`), each attribute coded by ``expressions`` (:func:`spec_expressions`); ``privacy_unit``, a column
    of ``table``, makes every count see one row per unit (:func:`service.data.engines.units.bounded_select`)."""

    name = SQL

    def __init__(self, engine: Engine, table: Table, expressions: Mapping[str, ColumnElement[int]],
                 sizes: Mapping[str, int], label: str, *, privacy_unit: str | None = None) -> None:
        self.label = label
        self.engine = engine
        self._names = {a: f"c{i}" for i, a in enumerate(expressions)}
        self._unit = privacy_unit
        self._table = table
        #: every row, coded (what :meth:`outside_columns` checks); the counts read :attr:`_coded`
        self._rows = select(*(e.label(self._names[a]) for a, e in expressions.items())).select_from(table)
        self._coded = self._rows if privacy_unit is None else bounded_select(
            {self._names[a]: e for a, e in expressions.items()}, table, table.c[privacy_unit], OUTSIDE)
        self._shape = tables.data_table("coded", [sizes[a] for a in expressions])
        compiled = self._coded.compile(engine, compile_kwargs={"literal_binds": True})
        self._source = f"({compiled}) AS coded"
        #: on PostgreSQL one scan groups the coded rows, then each iteration aggregates the distinct rows
        #: (:mod:`service.data.engines.sql_gradients`); elsewhere DP-IHT reads the distinct rows (engines/sql.py)
        self.gradient_sums_in_one_scan = engine.dialect.name == "postgresql"
        self._gradients = SqlGradientSums(engine, self._source, self._names)

    def count_marginals(self, marginals: Sequence[Marginal]) -> list[np.ndarray]:
        specs = [([self._names[a] for a in attributes], shape) for attributes, shape in marginals]
        try:
            with self.engine.connect() as connection:
                return tables.count_marginals(connection, self._shape, specs, source=self._source)
        except tables.CodeOutOfRange:
            raise self._outside([a for attributes, _ in marginals for a in attributes]) from None

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Generator[np.ndarray, None, None]:
        coded = self._coded.subquery()
        columns = [coded.c[self._names[a]] for a in attributes]
        query = select(*columns, func.count()).group_by(*columns).order_by(*columns)
        with self.engine.connect() as connection:
            result = connection.execution_options(stream_results=True, yield_per=chunk_rows).execute(query)
            for part in result.partitions(chunk_rows):
                rows = np.array([tuple(r) for r in part], dtype=np.int64).reshape(len(part), len(columns) + 1)
                if (rows[:, :-1] < 0).any():
                    raise self._outside(list(attributes))
                yield rows

    def row_weight_sums(self, query: GradientQuery) -> list[np.ndarray]:
        try:
            return self._gradients(query)
        except CodeOutsideDomain as exc:
            raise self._outside(exc.attributes) from None

    def row_count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self._coded.subquery())).scalar_one())

    def outside_columns(self) -> list[str]:
        """The attributes with at least one value outside the spec, in any row (one scan)."""
        coded = self._rows.subquery()
        query = select(*(func.min(coded.c[c]) for c in self._names.values()))
        with self.engine.connect() as connection:
            minima = connection.execute(query).one()
        return [a for a, m in zip(self._names, minima, strict=True) if m is not None and m < 0]

    def close(self) -> None:
        self._gradients.close()
        self.engine.dispose()

    def null_units(self) -> bool:
        """Whether some row's privacy unit is NULL (False without a unit)."""
        if self._unit is None:
            return False
        query = select(func.count()).select_from(self._table).where(self._table.c[self._unit].is_(None))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar_one()) > 0

    def check(self) -> int:
        """Read every row once and return the row count, as DuckDB's and Spark's ``check`` do: a NULL unit or a
        value outside the spec raises :class:`EngineError` here, naming the column."""
        if self.null_units():
            raise null_unit(self.label, str(self._unit))
        outside = self.outside_columns()
        if outside:
            raise values_outside_spec(self.label, outside)
        return self.row_count()

    def _outside(self, attributes: list[str]) -> EngineError:
        if self.null_units():
            return null_unit(self.label, str(self._unit))
        return values_outside_spec(self.label, [a for a in self.outside_columns() if a in attributes] or attributes)


def open_foreign(url: str, table_name: str, spec_json: Mapping[str, object], label: str, sizes: Mapping[str, int], *,
                 privacy_unit: str | None = None) -> ForeignSqlTable:
    """The engine of table ``table_name`` of the database at ``url``, coded by the binning spec ``spec_json`` (as an
    attached dataset's location keeps it: :class:`service.data.engines.sql_engine.AttachedSql`); an unreachable
    database or a missing table raises :class:`EngineError` naming the dataset."""
    from sqlalchemy import MetaData

    from db.engine import make_engine
    from workloads.binning import parse_spec

    spec = parse_spec(dict(spec_json), source=f"the binning spec of {label!r}")
    engine = make_engine(url)
    try:
        table = call_inside(label, Table, table_name, MetaData(), autoload_with=engine)
    except EngineError:
        engine.dispose()
        raise
    missing = [c.name for c in spec.columns if c.name not in table.c]
    if missing:
        engine.dispose()
        raise EngineError(f"dataset {label!r}: its table no longer has the column(s) {missing} of its spec: check the "
                          "table, or attach it again")
    unit = privacy_unit
    if unit is not None and unit not in table.c:
        engine.dispose()
        raise EngineError(f"dataset {label!r}: its table has no column {unit!r} (its privacy unit)")
    return ForeignSqlTable(engine, table, spec_expressions(spec, table, engine.dialect.name), sizes, label,
                           privacy_unit=unit)
