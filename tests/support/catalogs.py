"""The catalog tables of SQLite and PostgreSQL that no attach may read (issue 27, finding 9), each with a spec its
rows would fit (so that only the rule refuses them), and a SQLite database that has every one of them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

_KINDS = {"type": {"values": ["table", "index", "view", "trigger"]}}
_RELKINDS = {"relkind": {"values": list("rivmcfpIS")}}
_TABLE_TYPES = {"table_type": {"values": ["BASE TABLE", "VIEW"]}}

#: dialect -> [(catalog table, the spec's columns)]
CATALOGS: dict[str, list[tuple[str, dict[str, object]]]] = {
    "sqlite": [("sqlite_master", _KINDS), ("sqlite_schema", _KINDS), ("SQLITE_MASTER", _KINDS),
               ("sqlite_temp_master", _KINDS), ("sqlite_sequence", {"name": {"values": ["counter"]}}),
               ("sqlite_stat1", {"tbl": {"values": ["counter"]}})],
    "postgresql": [("pg_class", _RELKINDS),
                   ("pg_tables", {"schemaname": {"values": ["pg_catalog", "information_schema", "public"]}}),
                   ("pg_catalog.pg_class", _RELKINDS), ("information_schema.tables", _TABLE_TYPES),
                   ("tables", _TABLE_TYPES)],
}


def sqlite_with_every_catalog_table(path: Path) -> Path:
    """A SQLite database at ``path`` with one table, ``counter`` (20 rows), an AUTOINCREMENT key (so
    ``sqlite_sequence`` exists), an index and ANALYZE's statistics (``sqlite_stat1``)."""
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY AUTOINCREMENT, age REAL)")
        connection.execute("CREATE INDEX counter_age ON counter (age)")
        connection.executemany("INSERT INTO counter (age) VALUES (?)", [(a,) for a in range(20)])
        connection.execute("ANALYZE")
    return path
