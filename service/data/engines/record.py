"""What the service knows of one data engine: a :class:`DataEngine` record, and the typed locations its datasets
are stored at (:class:`Location`). The records are registered in :mod:`service.data.engines.registry`.

A record says, for its engine, where a dataset of it can live (its location types), how a table is attached there
(``attach``: the engine's own steps of ``marginalia dataset attach``, run by :mod:`service.data.attach.tables` between
the checks every engine shares), and which location ``dataset load`` and ``dataset migrate`` write (``stored``, for
the engines that keep a copy of the rows). How a table is opened for counting is its location's
(:meth:`Location.open`), since one engine may read from several kinds of place (DuckDB: a file the service stored,
or Parquet files attached where they live).

A location is a frozen value read from and written to ``datasets.location`` (JSON, never shown to analysts) with the
field names as keys, in field order, and ``privacy_unit`` only when set: exactly the JSON the service has always
written, so that every dataset stored before the types existed reads back (tests/service/data/test_locations.py).
Which type a stored JSON is, among its engine's, is said by the one key only that type has (:attr:`Location.TAG`;
``None``: the JSON is NULL).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

from sqlalchemy import Engine

from service.data.engines.base import TableEngine
from service.data.engines.claims import Claim
from workloads.binning import BinningSpec, parse_spec
from workloads.domain import Domain


class Opening(Protocol):
    """What opening a table needs of its dataset (a :class:`~service.data.datasets.StoredDataset` is one)."""

    name: str
    domain: Domain
    data_table: str
    sql_columns: dict[str, str]


class Stored(Opening, Protocol):
    """A stored dataset as :func:`~service.data.engines.registry.open_table` reads it: its engine and location too."""

    engine: str
    location: Location | None


class Location:
    """Where a dataset's rows live, for one engine (module docstring). Subclasses are frozen dataclasses whose last
    field is ``privacy_unit: str | None = None``: the column whose value is one person (``dataset attach
    --privacy-unit``; docs/privacy.md 1.1), None when every row is one."""

    #: the key only this type's JSON has (None: the location is stored as NULL)
    TAG: ClassVar[str | None]
    #: the fields written only when set (None is their default; rows stored before a field existed lack it)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("privacy_unit",)
    privacy_unit: str | None

    def to_json(self) -> dict[str, object] | None:
        """The JSON stored in ``datasets.location`` (module docstring)."""
        if self.TAG is None:
            return None
        out: dict[str, object] = {}
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if item.name in self.OPTIONAL and value is None:
                continue
            out[item.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, object] | None) -> Self:
        """The location stored as ``raw`` (a key absent is the field's default: older rows lack newer fields)."""
        raw = raw or {}
        given = {}
        for item in dataclasses.fields(cls):  # type: ignore[arg-type]
            if item.name in raw:
                value = raw[item.name]
                given[item.name] = tuple(value) if isinstance(value, list) else value
        return cls(**given)

    def open(self, service: Engine, dataset: Opening) -> TableEngine:
        """The engine counting ``dataset``'s rows here; ``service`` is the service database."""
        raise NotImplementedError

    def claims(self, service: Engine, data_table: str) -> set[Claim]:
        """What a dataset stored here reads (:mod:`service.data.attach.locations`: one location, one dataset);
        ``data_table`` is its ``data_<id>`` name."""
        raise NotImplementedError


def spec_of(spec: Mapping[str, object], label: str) -> BinningSpec:
    """The binning spec a location keeps, parsed (named after dataset ``label`` in an error)."""
    return parse_spec(dict(spec), source=f"the binning spec of {label!r}")


def spec_to_dict(spec: BinningSpec) -> dict[str, object]:
    """``spec`` as the mapping :func:`workloads.binning.parse_spec` reads back (what an attached location keeps)."""
    columns: dict[str, object] = {}
    for c in spec.columns:
        entry: dict[str, object] = {"kind": c.kind}
        if c.edges:
            entry["edges"] = list(c.edges)
        else:
            entry["values"] = list(c.values)
            if c.strip_suffix:
                entry["strip_suffix"] = c.strip_suffix
        columns[c.name] = entry
    return {"format": {"strip": spec.strip}, "columns": columns}


class Attaching(Protocol):
    """One attach of a table in one engine, once the engine has found the table (``DataEngine.attach``). The shared
    steps (:mod:`service.data.attach.tables`) then check that no dataset claims it, that it has the spec's columns,
    read every row once (:meth:`table`), and store :attr:`location`. Every message is ours and names ``where``."""

    #: how the caller named the table (``--parquet a.parquet``), the start of every message
    where: str
    #: what the table is called in a message about its columns (``"files"``, ``"table"``)
    what: str
    #: what the dataset records as its ``source``
    source: str
    #: what the table reads, each mapped to how the caller named it
    claims: Mapping[Claim, str]
    location: Location
    #: the start of a message about the checking scan, and the code of a scan the engine could not finish
    prefix: str
    unreadable: str

    def columns(self) -> list[str]:
        """The table's columns (its schema only)."""
        ...

    def table(self) -> TableEngine:
        """The engine over the table, for the one checking scan (it is closed after it)."""
        ...

    def close(self) -> None:
        """Release what :meth:`columns` opened, when the attach stops before :meth:`table`."""
        ...


#: ``attach(target, spec, privacy_unit, name)``: the engine's :class:`Attaching` of ``target`` (the command line's
#: ``--parquet`` paths, ``--sql`` URL and ``--table``, ``--spark`` table), checking where the table is without reading
#: a row; its refusals are :class:`~service.errors.InvalidInput`.
Attach = Callable[[object, BinningSpec, "str | None", str], Attaching]


@dataclass(frozen=True)
class DataEngine:
    """One data engine (module docstring): ``name`` is ``datasets.engine``; ``locations`` the types its datasets may
    be stored at; ``attach`` its part of ``dataset attach`` (None: tables cannot be attached to it); ``stored`` the
    location ``dataset load`` writes (None: the engine only reads tables where they live)."""

    name: str
    locations: Sequence[type[Location]]
    attach: Attach | None = None
    stored: type[Location] | None = None

    def read(self, raw: str | Mapping[str, object] | None) -> Location:
        """The location stored as ``raw`` (the JSON text of ``datasets.location``, or its parsed value)."""
        value = json.loads(raw) if isinstance(raw, str) else raw
        for kind in self.locations:
            if (value is None and kind.TAG is None) or (value is not None and kind.TAG in value):
                return kind.from_json(value)
        shape = "NULL" if value is None else sorted(value)
        raise ValueError(f"a {self.name} dataset's location must be one of "
                         f"{[k.TAG for k in self.locations]}, got {shape}")
