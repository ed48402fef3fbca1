"""``marginalia source add | list | remove`` (issue 21): the operator registers the folders, databases and Spark
session stewards may attach tables from over HTTP; a URL's password is never shown; bad input is one clear error and
stores nothing; removing a source leaves the datasets attached through it counting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from service.cli import app
from service.data import datasets
from service.data.attach.sources import list_sources
from service.data.attach.through_source import attach_from_source
from service.data.oracle import TableCountOracle
from tests.support.binned import SPEC, expected_counts, raw_frame

runner = CliRunner()


def _json(args: list[str], status: int = 0) -> object:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == status, result.output
    return json.loads(result.stdout)


def test_add_list_and_remove_sources(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    folder = tmp_path / "lake"
    folder.mkdir()
    assert _json(["source", "add", "lake", "--parquet-root", str(folder)]) == {
        "name": "lake", "kind": "parquet", "where": str(folder.resolve()), "principal": "cli", "removed": False,
        "datasets": []}
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "pa55word")
    url = "postgresql://reader@db.internal:5432/warehouse"
    added = _json(["source", "add", "warehouse", "--sql", url, "--password-env", "WAREHOUSE_PASSWORD", "--no-check"])
    assert (added["where"], added["password"]) == (url, "environment variable WAREHOUSE_PASSWORD")
    _json(["source", "add", "cluster", "--spark"])
    listed = _json(["source", "list"])
    assert [(s["name"], s["kind"]) for s in listed] == [("cluster", "spark"), ("lake", "parquet"),
                                                        ("warehouse", "sql")]
    human = runner.invoke(app, ["source", "list"])
    assert "pa55word" not in human.stdout + json.dumps(listed) and "warehouse" in human.stdout
    assert _json(["source", "remove", "cluster"]) == {"name": "cluster", "removed": True, "kept_for": []}
    assert [s.name for s in list_sources(engine)] == ["lake", "warehouse"]


def test_bad_sources_are_one_error_and_store_nothing(engine, tmp_path: Path) -> None:  # noqa: ANN001
    (tmp_path / "lake").mkdir()
    (tmp_path / "odd[1]").mkdir()
    for args, code, fragment in [
        (["x", "--parquet-root", str(tmp_path / "missing")], "missing_file", "no such folder"),
        (["x", "--parquet-root", str(tmp_path / "odd[1]")], "invalid_parameter", "which DuckDB reads as a glob"),
        (["x", "--parquet-root", "/"], "invalid_parameter", "the file system's root is not a source"),
        (["x", "--sql", "nosuchdriver://h/db"], "invalid_parameter", "--sql"),
        (["x", "--spark", "--parquet-root", str(tmp_path / "lake")], "invalid_parameter", "exactly one of"),
        (["x"], "invalid_parameter", "exactly one of"),
        (["bad/name", "--spark"], "invalid_name", "source name"),
    ]:
        body = _json(["source", "add", *args], status=2)
        assert body["error"] == code and fragment in body["message"], (args, body)
    assert list_sources(engine) == []
    _json(["source", "add", "lake", "--parquet-root", str(tmp_path / "lake")])
    body = _json(["source", "add", "lake", "--spark"], status=2)
    assert body["error"] == "duplicate_source"
    assert _json(["source", "remove", "nothing"], status=2)["error"] == "source_not_found"
    assert [(s.name, s.kind) for s in list_sources(engine)] == [("lake", "parquet")]


def test_a_dataset_attached_through_a_removed_source_keeps_counting(engine, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "lake"
    folder.mkdir()
    frame = raw_frame(50, 4)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "t.parquet")
    _json(["source", "add", "lake", "--parquet-root", str(folder)])
    attach_from_source(engine, "kept", "lake", parquet=["t.parquet"], bins=SPEC)
    _json(["source", "remove", "lake"])
    with TableCountOracle(engine, datasets.get_dataset(engine, "kept")) as oracle:
        np.testing.assert_array_equal(oracle.counts(("income",)), expected_counts(frame, ("income",)))


def test_a_url_the_service_cannot_open_is_refused_in_our_words(engine) -> None:  # noqa: ANN001
    """SQLAlchemy's own message ("Can't load plugin: ...") never reaches the operator; the URL is shown without its
    password."""
    body = _json(["source", "add", "x", "--sql", "nosuchdriver://reader@db.internal/warehouse"], status=2)
    assert body == {"error": "invalid_parameter", "message": (
        "--sql nosuchdriver://reader@db.internal/warehouse: not a database URL this service can open (a SQLAlchemy "
        "URL whose driver is installed, e.g. postgresql://user@host/database or sqlite:////path/to.db)")}
    assert list_sources(engine) == []


def test_dataset_attach_through_a_source_from_the_shell(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """``dataset attach NAME --source S --parquet P`` is ``POST /datasets/attach`` from the server's shell: paths inside
    the source's folder; a mix of --source with --sql or --spark, or with neither --table nor --parquet, is refused."""
    from tests.support.binned import write_spec

    folder = tmp_path / "lake"
    folder.mkdir()
    frame = raw_frame(30, 2)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "t.parquet")
    _json(["source", "add", "lake", "--parquet-root", str(folder)])
    spec = str(write_spec(tmp_path))
    assert _json(["dataset", "attach", "kept", "--source", "lake", "--parquet", "t.parquet", "--spec", spec])[
        "rows"] == 30
    for extra in (["--sql", "sqlite:////x.db", "--table", "t"], ["--spark", "t"], []):
        body = _json(["dataset", "attach", "other", "--source", "lake", *extra, "--spec", spec], status=2)
        assert body["error"] == "invalid_parameter" and "--source NAME goes with" in body["message"], (extra, body)
    outside = _json(["dataset", "attach", "other", "--source", "lake", "--parquet", "../t.parquet", "--spec", spec],
                    status=2)
    assert outside["error"] == "invalid_parameter" and "inside the source's folder" in outside["message"]
    assert [d.name for d in datasets.list_datasets(engine)] == ["kept"]
