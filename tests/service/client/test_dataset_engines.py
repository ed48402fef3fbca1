"""The engine of a dataset through the API and the client (issue 21): ``POST /datasets`` and
``Client.load_dataset(engine=...)`` choose where the rows are kept (DuckDB by default, or SQL); every role that sees
a dataset sees its engine's name, never where its table lives; an unknown engine is refused and nothing stored."""

from __future__ import annotations

import json

import pytest

from service.client.errors import MarginaliaError
from service.data import datasets
from service.data.engines.store import data_folder


def test_load_through_the_client_chooses_the_engine(engine, clients) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    csv, domain = "a,b\n0,1\n1,0\n2,1\n", {"a": 3, "b": 2}
    assert steward.load_dataset("kept", csv, domain=domain)["engine"] == "duckdb"
    assert steward.load_dataset("in sql", csv, domain=domain, engine="sql")["engine"] == "sql"
    assert {d.name: d.engine for d in datasets.list_datasets(engine)} == {"kept": "duckdb", "in sql": "sql"}
    listed = {d["name"]: d for d in analyst.datasets()}
    assert {name: d["engine"] for name, d in listed.items()} == {"kept": "duckdb", "in sql": "sql"}
    shown = json.dumps(listed)
    assert "location" not in shown and str(data_folder(engine)) not in shown and ".parquet" not in shown
    with pytest.raises(MarginaliaError) as caught:
        steward.load_dataset("elsewhere", csv, domain=domain, engine="spark")
    assert caught.value.status == 422 and "engine" in str(caught.value)
    assert len(datasets.list_datasets(engine)) == 2
