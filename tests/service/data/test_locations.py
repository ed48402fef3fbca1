"""Typed locations read the JSON the service stored before they existed (issue 28): for each engine, the
``datasets.location`` a dataset of each shape holds (copied from rows written by the code of commit ec11ea7) reads
back as its frozen value, with the privacy unit as a field, and is written back as the same JSON, key for key."""

from __future__ import annotations

import dataclasses
import json

import pytest

from service.data.engines.duckdb_engine import ParquetFiles, StoredFile
from service.data.engines.registry import ENGINES, read_location, store_engines
from service.data.engines.spark_engine import SparkTableName
from service.data.engines.sql_engine import AttachedSql, ServiceTable

SPEC = ('{"format": {"strip": true}, "columns": {"age": {"kind": "ordinal", "edges": [0.0, 25.0, 100.0]}, '
        '"sex": {"kind": "categorical", "values": ["F", "M"]}}}')
#: (engine, stored JSON, the type it reads as, its privacy unit), as ec11ea7 wrote them
STORED = [
    ("duckdb", '{"file": "data-98ec52a6a1cb4ce3848635326d061f10.parquet"}', StoredFile, None),
    ("duckdb", f'{{"parquet": ["/tmp/er_json/w/t.parquet"], "spec": {SPEC}}}', ParquetFiles, None),
    ("duckdb", f'{{"parquet": ["/tmp/er_json/w/u.parquet"], "spec": {SPEC}, "privacy_unit": "ssn"}}', ParquetFiles,
     "ssn"),
    ("sql", None, ServiceTable, None),
    ("sql", f'{{"url": "sqlite:////tmp/er_json/w/f.db", "table": "people", "schema": "main", "spec": {SPEC}}}',
     AttachedSql, None),
    ("sql", f'{{"url": "sqlite:////tmp/er_json/w/f.db", "table": "people2", "schema": "main", "spec": {SPEC}, '
            '"privacy_unit": "ssn"}', AttachedSql, "ssn"),
    ("spark", f'{{"spark": "parquet.`/data/adult`", "spec": {SPEC}}}', SparkTableName, None),
    ("spark", f'{{"spark": "db.people", "spec": {SPEC}, "privacy_unit": "ssn"}}', SparkTableName, "ssn"),
]


@pytest.mark.parametrize(("engine", "raw", "kind", "unit"), STORED)
def test_a_stored_location_reads_back_and_is_written_as_before(engine: str, raw: str | None, kind: type,
                                                                unit: str | None) -> None:
    location = read_location(engine, raw)
    assert type(location) is kind and location.privacy_unit == unit
    with pytest.raises(dataclasses.FrozenInstanceError):
        location.privacy_unit = "other"  # type: ignore[misc]
    written = location.to_json()
    assert (None if written is None else json.dumps(written)) == raw  # the same keys, in the same order
    assert read_location(engine, written) == location


def test_the_fields_of_each_shape() -> None:
    files = read_location("duckdb", STORED[2][1])
    assert files == ParquetFiles(("/tmp/er_json/w/u.parquet",), json.loads(SPEC), "ssn")
    table = read_location("sql", STORED[5][1])
    assert (table.url, table.table, table.schema) == ("sqlite:////tmp/er_json/w/f.db", "people2", "main")
    assert read_location("sql", '{"url": "sqlite:///x.db", "table": "t", "spec": {}}').schema is None  # older rows


def test_a_location_no_type_of_its_engine_reads_is_refused_naming_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"a spark dataset's location must be one of \['spark'\], got \['file'\]"):
        read_location("spark", '{"file": "x.parquet"}')
    with pytest.raises(ValueError, match=r"engine must be one of \['sql', 'duckdb', 'spark'\], got 'cobol'"):
        read_location("cobol", None)


def test_the_registry_lists_the_engines_and_what_they_store() -> None:
    assert ENGINES.names() == ["sql", "duckdb", "spark"]
    assert store_engines() == ["sql", "duckdb"]
    assert {e.name: [k.TAG for k in e.locations] for e in ENGINES.entries()} == {
        "sql": [None, "url"], "duckdb": ["file", "parquet"], "spark": ["spark"]}
