"""``Client.attach_dataset`` and ``Client.migrate_dataset`` over the in-process API (issue 21: every engine through
the client): a steward attaches Parquet files through a source the operator registered, sets a budget and releases
marginals from the attached table; migrates a SQL table to DuckDB; bad input raises the server's error, naming the
parameter, and stores nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.client.errors import MarginaliaError
from service.data import datasets
from service.data.attach.sources import add_source
from tests.support.binned import SPEC, raw_frame


def test_attach_then_release_through_the_client(engine, clients, tmp_path: Path) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    folder = tmp_path / "lake"
    (folder / "2026").mkdir(parents=True)
    frame = raw_frame(400, 8)
    for i, part in enumerate((frame.iloc[:150], frame.iloc[150:])):
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), folder / "2026" / f"part-{i}.parquet")
    shutil.copytree(folder / "2026", folder / "copy")  # one location is one dataset: the units read a copy
    add_source(engine, "lake", parquet_root=folder)
    attached = steward.attach_dataset("people", source="lake", parquet=["2026/part-*.parquet"], bins=SPEC)
    assert (attached["rows"], attached["engine"]) == (400, "duckdb")
    units = steward.attach_dataset("units", source="lake", parquet=["copy/*.parquet"], bins=SPEC, privacy_unit="other")
    assert units["rows"] == frame["other"].nunique() == 3
    assert [d["name"] for d in analyst.datasets()] == ["people", "units"]
    steward.set_budget("people", 1.0)
    release = steward.release_marginals("people", "laplace", [["age", "income"]], epsilon=1.0)
    table = analyst.marginal(release["release_id"], ["age", "income"])
    assert list(table.columns)[:3] == ["age", "income", "count"] and len(table) == 4 * 2
    assert set(table["age"]) == {"[0, 18)", "[18, 40)", "[40, 65)", "[65, 120]"}
    assert abs(float(np.sum(table["count"])) - 400) < 100  # Laplace noise of scale 1 per cell, 8 cells
    with pytest.raises(MarginaliaError) as caught:
        steward.attach_dataset("escape", source="lake", parquet=["../lake/2026/part-0.parquet"], bins=SPEC)
    assert caught.value.status == 422 and caught.value.message.startswith("parameter parquet: ")
    with pytest.raises(MarginaliaError) as caught:
        steward.attach_dataset("nowhere", source="sea", parquet=["x.parquet"], bins=SPEC)
    assert (caught.value.status, caught.value.code) == (404, "source_not_found")
    with pytest.raises(MarginaliaError) as caught:
        analyst.attach_dataset("mine", source="lake", parquet=["2026/part-0.parquet"], bins=SPEC)
    assert caught.value.status == 403
    assert [d.name for d in datasets.list_datasets(engine)] == ["people", "units"]


def test_migrate_through_the_client(engine, clients) -> None:  # noqa: ANN001
    steward = clients["steward"]
    steward.load_dataset("kept", "a,b\n0,1\n1,0\n2,1\n", domain={"a": 3, "b": 2}, engine="sql")
    moved = steward.migrate_dataset("kept")
    assert (moved["engine"], moved["rows"]) == ("duckdb", 3)
    assert datasets.get_dataset(engine, "kept").engine == "duckdb"
    with pytest.raises(MarginaliaError) as caught:
        steward.migrate_dataset("kept", engine="duckdb")
    assert (caught.value.status, caught.value.code) == (409, "already_there")


def test_attach_and_migrate_follow_a_background_job(engine, clients, tmp_path: Path) -> None:  # noqa: ANN001
    """Both read every row, so the client asks for the background (``Prefer: respond-async``) and follows the job, as
    for a release: ``progress`` sees the attach's phases and the rows copied, the answer is the job's result, and a
    refusal in the job is raised as the synchronous error would be."""
    steward = clients["steward"]
    folder = tmp_path / "lake"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(raw_frame(50, 2), preserve_index=False), folder / "part-0.parquet")
    add_source(engine, "lake", parquet_root=folder)
    reports: list[dict[str, object]] = []
    attached = steward.attach_dataset("people", source="lake", parquet=["part-0.parquet"], bins=SPEC,
                                      progress=reports.append)
    assert (attached["rows"], attached["engine"]) == (50, "duckdb")
    assert {r["kind"] for r in reports} == {"attach"} and reports[0]["state"] == "running"
    assert reports[-1]["state"] == "done" and reports[-1]["result"] == attached
    narrow = {"columns": {**SPEC["columns"], "age": {"edges": [0, 18, 40]}}}
    shutil.copyfile(folder / "part-0.parquet", folder / "copy.parquet")  # part-0 is attached: refused before its values
    with pytest.raises(MarginaliaError) as caught:
        steward.attach_dataset("narrow", source="lake", parquet=["copy.parquet"], bins=narrow,
                               progress=reports.append)
    assert (caught.value.status, caught.value.code) == (422, "invalid_value") and "column 'age'" in caught.value.message
    assert str(folder) not in caught.value.message and reports[-1]["state"] == "failed"
    steward.load_dataset("kept", "a,b\n0,1\n1,0\n2,1\n", domain={"a": 3, "b": 2}, engine="sql")
    reports.clear()
    moved = steward.migrate_dataset("kept", progress=reports.append)
    assert (moved["engine"], moved["rows"]) == ("duckdb", 3)
    assert reports[-1]["kind"] == "migrate" and reports[-1]["progress"] == {"done": 3, "total": 3,
                                                                          "message": "copying rows"}
    assert [d.name for d in datasets.list_datasets(engine)] == ["kept", "people"]
