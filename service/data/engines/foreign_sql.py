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
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence

import numpy as np
from sqlalchemy import Engine, Float, String, Table, case, cast, func, literal, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from db import tables
from service.data.engines.base import SQL, VALUE_REFUSAL, EngineError, Marginal
from service.data.engines.gradients import CodeOutsideDomain, GradientQuery
from service.data.engines.sql_gradients import SqlGradientSums
from service.data.engines.units import bounded_select, null_unit_message
from workloads.binning import BinningSpec, ColumnBins

#: The code of a value outside the spec: negative enough that any cell index holding it is negative (while the
#: domain has fewer than 2^40 cells), small enough that it times a 2^22-cell stride still fits 64 bits.
OUTSIDE = -(1 << 40)


def spec_expressions(spec: BinningSpec, table: Table, dialect: str) -> dict[str, ColumnElement[int]]:
    """``{attribute: expression of its code}`` over the columns of ``table`` (module docstring)."""
    return {c.name: _code(c, table.c[c.name], spec.strip, dialect) for c in spec.columns}


def _code(column: ColumnBins, raw: ColumnElement[object], strip: bool, dialect: str) -> ColumnElement[int]:
    if column.edges:
        x = cast(raw, Float)
        edges = column.edges
        outside = [raw.is_(None)]
        if dialect == "sqlite":  # SQLite casts any text to a number (0.0 for 'abc'): only numbers are numbers
            outside.append(func.typeof(raw).notin_(["integer", "real"]))
        if math.isfinite(edges[0]):
            outside.append(x < edges[0])
        if math.isfinite(edges[-1]):
            outside.append(x > edges[-1])
        if dialect == "postgresql":  # NaN, which PostgreSQL orders above every number, even above an infinite edge
            outside.append(x == cast(literal("NaN"), Float))
        whens = [(condition, literal(OUTSIDE)) for condition in outside]
        whens += [(x < edge, literal(code)) for code, edge in enumerate(edges[1:-1])]
        return case(*whens, else_=literal(len(edges) - 2))
    value: ColumnElement[str] = cast(raw, String)
    if strip:
        value = func.trim(value)
    if column.strip_suffix:
        cut = func.substr(value, 1, func.length(value) - len(column.strip_suffix))
        value = case((value.endswith(column.strip_suffix, autoescape=True), cut), else_=value)
    return case(*((value == v, literal(code)) for code, v in enumerate(column.values)), else_=literal(OUTSIDE))


class ForeignSqlTable:
    """:class:`service.data.engines.base.TableEngine` over ``table`` in the database of ``engine`` (disposed by
    :meth:`close`), each attribute coded by ``expressions`` (:func:`spec_expressions`); ``privacy_unit``, a column
    of ``table``, makes every count see one row per unit (:func:`service.data.engines.units.bounded_select`)."""

    name = SQL

    def __init__(self, engine: Engine, table: Table, expressions: Mapping[str, ColumnElement[int]],
                 sizes: Mapping[str, int], label: str, *, privacy_unit: str | None = None) -> None:
        self.engine = engine
        self.label = label
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
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def distinct_rows(self, attributes: Sequence[str], *, chunk_rows: int) -> Generator[np.ndarray, None, None]:
        coded = self._coded.subquery()
        columns = [coded.c[self._names[a]] for a in attributes]
        query = select(*columns, func.count()).group_by(*columns).order_by(*columns)
        try:
            with self.engine.connect() as connection:
                result = connection.execution_options(stream_results=True, yield_per=chunk_rows).execute(query)
                for part in result.partitions(chunk_rows):
                    rows = np.array([tuple(r) for r in part], dtype=np.int64).reshape(len(part), len(columns) + 1)
                    if (rows[:, :-1] < 0).any():
                        raise self._outside(list(attributes))
                    yield rows
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def clipped_gradient_sums(self, query: GradientQuery) -> list[np.ndarray]:
        try:
            return self._gradients(query)
        except CodeOutsideDomain as exc:
            raise self._outside(exc.attributes) from None
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def row_count(self) -> int:
        try:
            with self.engine.connect() as connection:
                return int(connection.execute(select(func.count()).select_from(self._coded.subquery())).scalar_one())
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def outside_columns(self) -> list[str]:
        """The attributes with at least one value outside the spec, in any row (one scan)."""
        coded = self._rows.subquery()
        query = select(*(func.min(coded.c[c]) for c in self._names.values()))
        try:
            with self.engine.connect() as connection:
                minima = connection.execute(query).one()
        except SQLAlchemyError as exc:
            raise self._error(exc) from None
        return [a for a, m in zip(self._names, minima, strict=True) if m is not None and m < 0]

    def close(self) -> None:
        self._gradients.close()
        self.engine.dispose()

    def null_units(self) -> bool:
        """Whether some row's privacy unit is NULL (False without a unit)."""
        if self._unit is None:
            return False
        query = select(func.count()).select_from(self._table).where(self._table.c[self._unit].is_(None))
        try:
            with self.engine.connect() as connection:
                return int(connection.execute(query).scalar_one()) > 0
        except SQLAlchemyError as exc:
            raise self._error(exc) from None

    def check(self) -> int:
        """Read every row once and return the row count, as DuckDB's and Spark's ``check`` do: a NULL unit or a
        value outside the spec raises :class:`EngineError` here, naming the column."""
        if self.null_units():
            raise self._null_unit()
        outside = self.outside_columns()
        if outside:
            raise self._values_outside(outside)
        return self.row_count()

    def _outside(self, attributes: list[str]) -> EngineError:
        if self.null_units():
            return self._null_unit()
        return self._values_outside([a for a in self.outside_columns() if a in attributes] or attributes)

    def _null_unit(self) -> EngineError:
        return EngineError(f"dataset {self.label!r}: {null_unit_message(str(self._unit))}")

    def _values_outside(self, named: list[str]) -> EngineError:
        return EngineError(f"dataset {self.label!r}: column(s) {named} hold a value the binning spec cannot code; "
                           f"values outside the spec are {VALUE_REFUSAL}: widen the spec to count them")

    def _error(self, exc: SQLAlchemyError) -> EngineError:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return EngineError(f"dataset {self.label!r}: its database cannot be read: {reason}")


def open_foreign(location: Mapping[str, object], label: str, sizes: Mapping[str, int]) -> ForeignSqlTable:
    """The engine of an attached SQL table from its dataset's ``location`` (``url``, ``table``, ``spec``, and
    ``privacy_unit`` when set); an unreachable database or a missing table raises :class:`EngineError` naming the
    dataset."""
    from sqlalchemy import MetaData

    from db.engine import make_engine
    from workloads.binning import parse_spec

    spec = parse_spec(location["spec"], source=f"the binning spec of {label!r}")
    engine = make_engine(str(location["url"]))
    try:
        table = Table(str(location["table"]), MetaData(), autoload_with=engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise EngineError(f"dataset {label!r}: its table cannot be read: {reason}") from None
    unit = location.get("privacy_unit")
    if unit is not None and unit not in table.c:
        engine.dispose()
        raise EngineError(f"dataset {label!r}: its table has no column {unit!r} (its privacy unit)")
    return ForeignSqlTable(engine, table, spec_expressions(spec, table, engine.dialect.name), sizes, label,
                           privacy_unit=None if unit is None else str(unit))
