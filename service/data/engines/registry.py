"""The data engines, registered: one :class:`~service.data.engines.record.DataEngine` per engine, by the name
``datasets.engine`` holds (``sql``, ``duckdb``, ``spark``), in the project's one generic registry
(:class:`workloads.registry.Registry`).

A new engine is one module (its :class:`~service.data.engines.base.TableEngine`, its location types with how each
opens, its part of ``dataset attach``: :mod:`service.data.engines.duckdb_engine` is the model) and one line below;
``tests/service/data/test_engine_contract.py`` then names what its author still has to give (a fixture variant of
the contract; docs/engines.md, "Adding an engine").
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Engine

from service.data.engines import duckdb_engine, spark_engine, sql_engine
from service.data.engines.base import TableEngine
from service.data.engines.record import DataEngine, Location, Stored
from workloads.registry import Registry


def _unknown(name: object, choices: list[str]) -> Exception:
    return ValueError(f"engine must be one of {choices}, got {name!r}")


#: Every data engine, in the order the service lists them.
ENGINES: Registry[DataEngine] = Registry("data engine", _unknown)
for _record in (sql_engine.ENGINE, duckdb_engine.ENGINE, spark_engine.ENGINE):
    ENGINES.register(_record.name, _record)

#: The engine ``marginalia dataset load`` stores a new table in unless told otherwise.
DEFAULT_ENGINE = duckdb_engine.ENGINE.name


def store_engines() -> list[str]:
    """The engines ``dataset load`` and ``dataset migrate`` can store rows in (those with a ``stored`` location)."""
    return [e.name for e in ENGINES.entries() if e.stored is not None]


def read_location(engine: str, raw: str | Mapping[str, object] | None) -> Location:
    """The typed location of a dataset of ``engine`` stored as ``raw`` (``datasets.location``); a
    :class:`ValueError` for an engine not registered or a JSON none of its locations reads."""
    return ENGINES.get(engine).read(raw)


def open_table(engine: Engine, dataset: Stored) -> TableEngine:
    """The :class:`~service.data.engines.base.TableEngine` counting ``dataset``'s rows where its location says;
    ``engine`` is the service database."""
    record = ENGINES.find(dataset.engine)
    if record is None:
        raise ValueError(f"dataset {dataset.name!r} names an unknown engine {dataset.engine!r}")
    location = dataset.location if dataset.location is not None else record.read(None)
    return location.open(engine, dataset)
