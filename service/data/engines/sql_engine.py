"""The SQL engine's record: tables counted by a SQL database, the service's own or another.

Two locations: :class:`ServiceTable`, a dataset's ``data_<id>`` table in the service database, its columns already
coded (stored as NULL; :mod:`service.data.engines.sql`); and :class:`AttachedSql`, a table of another database
attached where it lives (``dataset attach --sql URL --table T --spec SPEC``, or through a ``sql`` attach source), coded
inside that database by the spec (``{"url": URL, "table": T, "schema": S, "spec": SPEC}``, with ``"source"``, the
attach source's id, when attached through one, and ``"privacy_unit"`` when set;
:mod:`service.data.engines.foreign_sql`).

No password is ever stored (:mod:`service.data.credentials`): a table attached through a source connects with the
source's URL and the password its reference names, read at each connection, so a rotated password or a moved
database is one ``marginalia source update`` for every dataset of the source; a URL given directly must hold none.

Attaching (:func:`attach`) opens the database and reads its catalog, never a row: the database must be reachable
(refused ``unreachable_database`` in our words: a driver's reason may name the host, the role or the URL), and the
table must be one of its own tables or views (:func:`_user_table`: never a catalog table such as ``sqlite_master``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

from sqlalchemy import Engine, Inspector, inspect

from db.engine import OPEN_ERRORS, DatabaseUnavailable, make_engine, safe_url, sqlite_file_missing
from service.data.credentials import SourceConnection, refuse_password, source_connection
from service.data.engines import claims as claiming
from service.data.engines.base import SQL, EngineError, TableEngine
from service.data.engines.claims import Claim
from service.data.engines.foreign_sql import open_foreign
from service.data.engines.record import Attaching, DataEngine, Location, Opening, spec_to_dict
from service.data.engines.sql import SqlTable
from service.errors import InvalidInput
from workloads.binning import BinningSpec
from workloads.domain import Domain

#: The refusal of a database that cannot be read: ours, never the driver's reason (which may name the host, the role
#: or the URL).
UNREACHABLE = ("the database cannot be reached or refused the connection (check the URL, that the server answers and "
               "that its role may read the table)")


@dataclass(frozen=True)
class ServiceTable(Location):
    """The dataset's ``data_<id>`` table in the service database (every table loaded before issue 21)."""

    TAG: ClassVar[str | None] = None
    privacy_unit: str | None = None

    def open(self, service: Engine, dataset: Opening) -> TableEngine:
        return SqlTable(service, dataset.data_table, dataset.sql_columns, dataset.domain.sizes(), dataset.name)

    def claims(self, service: Engine, data_table: str) -> set[Claim]:
        return {claiming.sql_claim(service.url.render_as_string(hide_password=False), data_table, None)}


@dataclass(frozen=True)
class AttachedSql(Location):
    """Table ``table`` (in ``schema``, as the URL's role reads it; None in rows stored before it was kept) of the
    database at ``url``, coded by the binning spec ``spec``."""

    TAG: ClassVar[str | None] = "url"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("source", "privacy_unit")
    url: str
    table: str
    schema: str | None = None
    spec: dict[str, object] = field(default_factory=dict)
    source: int | None = None
    privacy_unit: str | None = None

    def connection(self, service: Engine) -> SourceConnection:
        """How to connect: through the attach source the location names (its current URL and credentials), or with
        the stored URL itself."""
        return SourceConnection("", self.url) if self.source is None else source_connection(service, self.source)

    def open(self, service: Engine, dataset: Opening) -> TableEngine:
        return open_foreign(self.connection(service).connect_url(), self.table, self.spec, dataset.name,
                            dataset.domain.sizes(), privacy_unit=self.privacy_unit)

    def claims(self, service: Engine, data_table: str) -> set[Claim]:  # noqa: ARG002
        return {claiming.sql_claim(self.connection(service).url, self.table, self.schema)}


@dataclass
class _SqlAttach:
    """:class:`~service.data.engines.record.Attaching` of a table of another database (module docstring)."""

    where: str
    location: AttachedSql
    present: list[str]
    name: str
    domain: Domain
    connect_url: str = field(repr=False, default="")
    what: str = "table"
    unreadable: str = "unreachable_database"

    @property
    def source(self) -> str:
        return f"{safe_url(self.location.url)} table {self.location.table}"

    @property
    def prefix(self) -> str:
        return f"{self.where}: "

    @property
    def claims(self) -> dict[Claim, str]:
        return {claiming.sql_claim(self.location.url, self.location.table, self.location.schema): self.where}

    def columns(self) -> list[str]:
        return self.present

    def table(self) -> TableEngine:
        try:
            return open_foreign(self.connect_url, self.location.table, self.location.spec, self.name,
                                self.domain.sizes(), privacy_unit=self.location.privacy_unit)
        except EngineError as exc:
            raise InvalidInput(f"{self.where}: {exc.message}; nothing was stored",
                               code="unreachable_database") from None

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class SqlTarget:
    """What :func:`attach` reads: table ``table`` of the database at ``url`` (a URL without a password), or, when
    ``source`` is given, of that attach source's database (its URL and credentials)."""

    url: str
    table: str
    source: int | None = None
    connection: SourceConnection | None = field(default=None, repr=False)


def attach(target: object, spec: BinningSpec, unit: str | None, name: str) -> Attaching:
    """The attach of ``target``, a :class:`SqlTarget` (module docstring); a URL given directly that holds a password
    is refused (:func:`~service.data.credentials.refuse_password`)."""
    assert isinstance(target, SqlTarget)  # noqa: S101 - attach_sql builds it
    url, table_name = target.url, target.table
    where = f"--sql {safe_url(url)} --table {table_name}"
    if target.connection is None:
        refuse_password(url, "--sql")
    connect = url if target.connection is None else target.connection.connect_url()
    with _catalog(connect, where, "nothing was stored") as inspector:
        table_name = _user_table(inspector, table_name, where)
        schema = inspector.default_schema_name
        present = [c["name"] for c in inspector.get_columns(table_name)]
    location = AttachedSql(url, table_name, schema, spec_to_dict(spec), target.source, unit)
    return _SqlAttach(where, location, present, name, spec.domain(), connect)


def listed_table(url: str, table: str, where: str) -> str:
    """``table`` as the database at ``url`` lists it among its own tables (:func:`_user_table`), reading its catalog
    only; refusals in our words, after ``where``."""
    with _catalog(url, where, "nothing was changed") as inspector:
        return _user_table(inspector, table, where)


@contextmanager
def _catalog(url: str, where: str, outcome: str) -> Iterator[Inspector]:
    """An inspector of the database at ``url`` (closed after), reading its catalog only; a SQLite file that does not
    exist (opening it would create an empty one), a URL this service cannot open and a database that does not answer
    are ``unreachable_database`` in our words, after ``where`` and ending with ``outcome``."""
    if sqlite_file_missing(url):
        raise InvalidInput(f"{where}: no such database file; {outcome}", code="unreachable_database")
    try:
        foreign = make_engine(url)
    except DatabaseUnavailable:
        raise InvalidInput(f"{where}: not a database URL this service can open (a SQLAlchemy URL whose driver is "
                           f"installed); {outcome}", code="unreachable_database") from None
    try:
        yield inspect(foreign)
    except OPEN_ERRORS:
        raise InvalidInput(f"{where}: {UNREACHABLE}; {outcome}", code="unreachable_database") from None
    finally:
        foreign.dispose()


def _user_table(inspector: Inspector, table: str, where: str) -> str:
    """``table`` as the database lists it among its own tables, views and materialized views (the URL role's default
    schema), or ``missing_table``: the catalog (``sqlite_master``, ``sqlite_sequence``, ``sqlite_stat1``,
    ``pg_catalog``'s and ``information_schema``'s tables) is never listed, whatever the dialect. SQLite's names are
    case-insensitive, so there the listed spelling is taken."""
    listed = [*inspector.get_table_names(), *inspector.get_view_names()]
    try:
        listed += inspector.get_materialized_view_names()
    except NotImplementedError:  # a dialect without materialized views (SQLite)
        pass
    if table in listed:
        return table
    if inspector.dialect.name == "sqlite":
        for name in listed:
            if name.casefold() == table.casefold():
                return name
    raise InvalidInput(f"{where}: no such table (only the database's own tables and views can be attached, never its "
                       "catalog: sqlite_master, pg_catalog, information_schema); nothing was stored",
                       code="missing_table")


ENGINE = DataEngine(SQL, locations=(ServiceTable, AttachedSql), attach=attach, stored=ServiceTable)
