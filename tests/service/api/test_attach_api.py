"""``POST /datasets/attach`` and ``POST /datasets/{name}/migrate`` (issue 21, every engine through the API): a table
is attached through a source the operator registered, never a server path or a URL; a path that leaves the source's
folder (absolute, ``..``, a symlink, a glob's match) is refused naming the parameter; no error shows the folder, the
URL or its host; nothing is stored on any error."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.data import datasets
from service.data.attach.sources import add_source, get_source
from service.data.oracle import TableCountOracle
from tests.support.apihelpers import ATTACHABLE, World, attachable_copy, bearer, snapshot
from tests.support.binned import SPEC, expected_counts, one_row_per_unit, raw_frame
from tests.support.catalogs import CATALOGS, sqlite_with_every_catalog_table
from workloads.binning import apply_spec, parse_spec


def steward(world: World) -> dict[str, str]:
    return bearer(world.keys["steward"])


def _name() -> str:
    return f"att-{uuid.uuid4().hex[:8]}"


def _root(world: World) -> Path:
    return Path(str(get_source(world.engine, world.source).root))


def _outside(world: World) -> Path:
    """A folder beside the source's folder (outside it) holding a valid Parquet table."""
    outside = _root(world).parent / "outside"
    outside.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pandas(raw_frame(30, 1), preserve_index=False), outside / "secret.parquet")
    return outside


def _refused(client: TestClient, world: World, body: dict[str, object], status: int = 422,
             stored: str | None = None) -> dict[str, str]:
    """POST ``body`` (a new ``name`` added unless it has one), expect ``status``, check nothing was stored and no
    server path or URL is shown; the error body. ``stored``: the body names this existing dataset."""
    name = _name()
    before = snapshot(world.engine)
    response = client.post("/datasets/attach", headers=steward(world), json={"name": name, "bins": SPEC, **body})
    assert response.status_code == status, response.text
    assert snapshot(world.engine) == before
    if stored is None:
        assert client.get(f"/datasets/{name}", headers=steward(world)).status_code == 404
    for secret in (str(_root(world)), str(_root(world).parent), os.path.realpath(_root(world))):
        assert secret not in response.text, response.text
    return response.json()


def test_attach_through_a_folder_source_counts_its_rows(client: TestClient, world: World) -> None:
    name, copy = _name(), attachable_copy(world)
    response = client.post("/datasets/attach", headers=steward(world), json={
        "name": name, "source": world.source, "parquet": [f"{Path(copy).parent}/*.parquet"], "bins": SPEC})
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"/datasets/{name}"
    body = response.json()
    assert (body["name"], body["rows"], body["engine"]) == (name, 60, "duckdb")
    assert body["labels"]["age"] == ["[0, 18)", "[18, 40)", "[40, 65)", "[65, 120]"]
    assert str(_root(world)) not in response.text
    stored = datasets.get_dataset(world.engine, name)
    assert list(stored.location.parquet) == [str(_root(world) / copy)]  # the glob, expanded to what was checked
    with TableCountOracle(world.engine, stored) as oracle:
        expected = expected_counts(raw_frame(60, 5), ("age", "work"))
        np.testing.assert_array_equal(oracle.counts(("age", "work")), expected)
    analyst = client.get(f"/datasets/{name}", headers=bearer(world.keys["analyst"])).json()
    assert analyst["rows"] is None and analyst["engine"] == "duckdb"
    again = _refused(client, world, {"name": name, "source": world.source, "parquet": [ATTACHABLE]}, status=409,
                     stored=name)
    assert again["error"] == "duplicate_dataset"


@pytest.mark.parametrize("pattern, fragment", [
    ("{root}/" + ATTACHABLE, "must be a path relative to the source's folder"),
    ("/etc/passwd", "must be a path relative to the source's folder"),
    ("~/x.parquet", "must be a path relative to the source's folder"),
    ("../outside/secret.parquet", "must stay inside the source's folder (no '..')"),
    ("people/../../outside/secret.parquet", "must stay inside the source's folder (no '..')"),
    ("escape.parquet", "leads outside the source's folder"),  # a symlink to a file outside
    ("linked/*.parquet", "leads outside the source's folder"),  # a glob through a symlinked folder
    ("**/secret.parquet", "leads outside the source's folder"),  # a recursive glob reaching it
    ("people/missing.parquet", "no such file in source"),
    ("people/*.csv", "no file matches this pattern in source"),
])
def test_paths_that_leave_the_folder_are_refused_naming_the_parameter(
        client: TestClient, world: World, pattern: str, fragment: str) -> None:
    root, outside = _root(world), _outside(world)
    for link, target in (("escape.parquet", outside / "secret.parquet"), ("linked", outside)):
        if not (root / link).is_symlink():
            (root / link).symlink_to(target)
    try:
        error = _refused(client, world, {"source": world.source, "parquet": [pattern.replace("{root}", str(root))]})
    finally:
        for link in ("escape.parquet", "linked"):
            (root / link).unlink()
    assert error["message"].startswith("parameter parquet: "), error
    assert fragment in error["message"], error
    assert str(outside) not in error["message"]


def test_an_unknown_source_is_404_and_stores_nothing(client: TestClient, world: World) -> None:
    error = _refused(client, world, {"source": "nowhere", "parquet": [ATTACHABLE]}, status=404)
    assert error["error"] == "source_not_found" and "'nowhere'" in error["message"]


def test_parquet_columns_that_do_not_match_the_spec_are_refused(client: TestClient, world: World) -> None:
    spec = {"columns": {**SPEC["columns"], "education": {"values": ["HS", "BSc"]}}}
    error = _refused(client, world, {"source": world.source, "parquet": [ATTACHABLE], "bins": spec})
    assert error["error"] == "column_mismatch"
    assert error["message"].startswith(f"parameter parquet: {ATTACHABLE}: the spec's column(s) ['education']")


def test_a_value_outside_the_spec_and_a_file_that_is_not_parquet_are_refused(
        client: TestClient, world: World) -> None:
    narrow = {"columns": {**SPEC["columns"], "age": {"edges": [0, 18, 40]}}}
    error = _refused(client, world, {"source": world.source, "parquet": [ATTACHABLE], "bins": narrow})
    assert error["error"] == "invalid_value" and "column 'age'" in error["message"]
    (_root(world) / "people" / "notes.parquet").write_text("not parquet")
    try:
        error = _refused(client, world, {"source": world.source, "parquet": ["people/notes.parquet"]})
    finally:
        (_root(world) / "people" / "notes.parquet").unlink()
    assert error["error"] == "invalid_file" and error["message"].startswith("parameter parquet: people/notes.parquet")


def test_the_body_must_fit_the_source(client: TestClient, world: World) -> None:
    error = _refused(client, world, {"source": world.source, "table": "people"})
    assert error["message"].startswith("parameter parquet: source 'lake' is a folder of Parquet files")
    error = _refused(client, world, {"source": world.source, "parquet": [ATTACHABLE], "table": "t"})
    assert error["fields"] == ["body"] and "exactly one of parquet" in error["message"]
    error = _refused(client, world, {"source": world.source})
    assert "exactly one of parquet" in error["message"]


def test_a_sql_source_attaches_a_table_and_never_shows_its_url(
        client: TestClient, world: World, tmp_path: Path) -> None:
    import sqlite3

    foreign = tmp_path / "warehouse.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE people (age REAL, work TEXT, income TEXT)")
        connection.executemany("INSERT INTO people VALUES (?, ?, ?)",
                               raw_frame(40, 3)[["age", "work", "income"]].itertuples(index=False))
    source = f"warehouse-{uuid.uuid4().hex[:6]}"
    add_source(world.engine, source, sql=f"sqlite:///{foreign}")
    name = _name()
    response = client.post("/datasets/attach", headers=steward(world),
                           json={"name": name, "source": source, "table": "people", "bins": SPEC})
    assert response.status_code == 201 and response.json()["rows"] == 40, response.text
    assert str(foreign) not in response.text
    for body, code in [({"table": "nobody"}, "missing_table"), ({"parquet": ["x.parquet"]}, "invalid_parameter")]:
        error = _refused(client, world, {"source": source, **body})
        assert error["error"] == code and str(tmp_path) not in error["message"], error
    assert error["message"].startswith(f"parameter table: source {source!r} is a sql source")
    error = _refused(client, world, {"source": source, "table": "nobody"})
    assert error["message"] == (f"source {source!r}, table nobody: no such table (only the database's own tables and "
                                "views can be attached, never its catalog: sqlite_master, pg_catalog, "
                                "information_schema); nothing was stored")


def test_an_unreachable_database_is_refused_without_its_host_or_password(
        client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    source = f"down-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("DOWN_PASSWORD", "s3cret-pw")
    add_source(world.engine, source, sql="postgresql://reader@127.0.0.1:9/warehouse", password_env="DOWN_PASSWORD",
               check=False)
    error = _refused(client, world, {"source": source, "table": "people"})
    assert error["error"] == "unreachable_database", error
    for secret in ("127.0.0.1", "s3cret-pw", "reader", "postgresql", "MARGINALIA_DATABASE_URL"):
        assert secret not in error["message"], error
    assert f"source {source!r}" in error["message"]


def test_a_spark_source_takes_catalog_names_only(client: TestClient, world: World) -> None:
    """A path Spark reads (``parquet.`/etc`) would reach the server's files: refused before any session starts."""
    source = f"spark-{uuid.uuid4().hex[:6]}"
    add_source(world.engine, source, spark=True)
    for table in ("parquet.`/etc`", "delta.`/data`", "a b", "x; DROP TABLE y"):
        error = _refused(client, world, {"source": source, "table": table})
        assert error["message"].startswith(f"parameter table: {table!r} is not a Spark catalog name"), error


def test_migrate_moves_a_sql_table_to_duckdb(client: TestClient, world: World) -> None:
    name = _name()
    csv = "a,b\n0,1\n1,0\n2,1\n1,1\n"
    assert client.post("/datasets", headers=steward(world),
                       json={"name": name, "csv": csv, "domain": {"a": 3, "b": 2}, "engine": "sql"}).status_code == 201
    response = client.post(f"/datasets/{name}/migrate", headers=steward(world), json={"engine": "duckdb"})
    assert response.status_code == 200, response.text
    assert (response.json()["engine"], response.json()["rows"]) == ("duckdb", 4)
    with TableCountOracle(world.engine, datasets.get_dataset(world.engine, name)) as oracle:
        np.testing.assert_array_equal(oracle.counts(("a",)), [1, 2, 1])
    before = snapshot(world.engine)
    again = client.post(f"/datasets/{name}/migrate", headers=steward(world), json={"engine": "duckdb"})
    assert (again.status_code, again.json()["error"]) == (409, "already_there")
    for url, body, status in [(f"/datasets/{name}/migrate", {"engine": "spark"}, 422),
                              (f"/datasets/{name}/migrate", {}, 422),
                              ("/datasets/nothing-here/migrate", {"engine": "duckdb"}, 404)]:
        assert client.post(url, headers=steward(world), json=body).status_code == status
    assert snapshot(world.engine) == before


def test_a_privacy_unit_over_http_counts_one_row_per_unit(client: TestClient, world: World) -> None:
    """The CLI's ``--privacy-unit`` through the route: the world's table has 60 rows of 3 units (column ``other``)."""
    name = _name()
    response = client.post("/datasets/attach", headers=steward(world), json={
        "name": name, "source": world.source, "parquet": [attachable_copy(world)], "bins": SPEC,
        "privacy_unit": "other"})
    assert response.status_code == 201 and response.json()["rows"] == 3, response.text
    # the unit is public (it says what every count is about); the row count is not
    shown = client.get(f"/datasets/{name}", headers=bearer(world.keys["auditor"])).json()
    assert (shown["privacy_unit"], shown["rows"]) == ("other", None)
    rows_table = client.get(f"/datasets/{world.dataset}", headers=bearer(world.keys["auditor"])).json()
    assert rows_table["privacy_unit"] is None
    frame = raw_frame(60, 5)
    spec = parse_spec(SPEC)
    names = [c.name for c in spec.columns]
    kept = one_row_per_unit(apply_spec(spec, frame.astype(str)), names, frame["other"].to_numpy())
    with TableCountOracle(world.engine, datasets.get_dataset(world.engine, name)) as oracle:
        np.testing.assert_array_equal(oracle.counts(("income",)), np.bincount(kept["income"], minlength=2))
    error = _refused(client, world, {"source": world.source, "parquet": [ATTACHABLE], "privacy_unit": "person"})
    assert error["error"] == "column_mismatch"
    assert error["message"].startswith(f"parameter parquet: {ATTACHABLE}: the privacy unit 'person' is not a column")


def test_a_glob_matching_too_many_files_is_refused_before_the_walk_ends(
        client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.data.attach import through_source

    monkeypatch.setattr(through_source, "MAX_FILES", 0)
    error = _refused(client, world, {"source": world.source, "parquet": ["people/*.parquet"]})
    assert error["message"].startswith("parameter parquet: 'people/*.parquet' matches more than 0 paths"), error


@pytest.mark.parametrize("pattern", ["a" * 300 + ".parquet", "people/" + "b" * 300 + ".parquet",
                                     "people/denied.parquet", "loop/part-0.parquet"])
def test_a_path_the_file_system_refuses_is_missing_file_and_never_shows_the_folder(
        client: TestClient, world: World, pattern: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 27, finding 5: a 300-character name (``ENAMETOOLONG``), a folder the service may not read (``EACCES``,
    simulated: the tests run as root) or a symlink loop (``ELOOP``) is a 422 ``missing_file`` naming the parameter
    and the pattern; no 500, and no log line shows the source's folder."""
    real_is_file = Path.is_file

    def is_file(path: Path) -> bool:
        if path.name == "denied.parquet":
            raise PermissionError(13, "Permission denied", str(path))
        return real_is_file(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    loop = _root(world) / "loop"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    with caplog.at_level(logging.DEBUG):
        error = _refused(client, world, {"source": world.source, "parquet": [pattern]})
    assert error["error"] == "missing_file", error
    assert error["message"].startswith(f"parameter parquet: {pattern!r}: "), error
    assert str(_root(world)) not in caplog.text and os.path.realpath(_root(world)) not in caplog.text


def test_a_privacy_unit_that_is_a_column_of_the_spec_is_refused_over_http(client: TestClient, world: World) -> None:
    """Issue 27, finding 7: the unit is never coded nor released, so it cannot be one of the spec's columns."""
    error = _refused(client, world, {"source": world.source, "parquet": [ATTACHABLE], "privacy_unit": "work"})
    assert error["error"] == "invalid_parameter"
    assert error["message"].startswith("privacy_unit 'work' is a column of the spec: a privacy unit is never coded "
                                       "nor released"), error


def test_a_sql_source_never_attaches_a_catalog_table(client: TestClient, world: World, tmp_path: Path) -> None:
    """Issue 27, finding 9: ``sqlite_master`` and the other catalog tables of SQLite are refused (``missing_table``)
    with the same answer as a table that does not exist; specs they would fit are sent, so only the rule refuses."""
    foreign = sqlite_with_every_catalog_table(tmp_path / "warehouse.db")
    source = f"catalog-{uuid.uuid4().hex[:6]}"
    add_source(world.engine, source, sql=f"sqlite:///{foreign}")
    for table, columns in CATALOGS["sqlite"]:
        error = _refused(client, world, {"source": source, "table": table, "bins": {"columns": columns}})
        assert error["error"] == "missing_table", error
        assert error["message"].startswith(f"source {source!r}, table {table}: no such table (only the database's own "
                                           "tables and views can be attached, never its catalog"), error
        assert str(tmp_path) not in error["message"]


def test_a_release_whose_source_password_is_not_yet_named_is_a_503_and_refunded(
        client: TestClient, world: World, tmp_path: Path) -> None:
    """After migration 0016 took a warehouse's password out of the service database, and until the operator names
    its place (``source update``), a release through that source fails before any noise: 503
    ``credentials_unavailable`` naming the source and the command, the charge refunded."""
    import sqlite3

    from sqlalchemy import update

    from db.models import AttachSource

    foreign = tmp_path / "warehouse.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE people (age REAL, work TEXT, income TEXT)")
        connection.executemany("INSERT INTO people VALUES (?, ?, ?)",
                               raw_frame(40, 3)[["age", "work", "income"]].itertuples(index=False))
    source, name = f"warehouse-{uuid.uuid4().hex[:6]}", _name()
    add_source(world.engine, source, sql=f"sqlite:///{foreign}")
    assert client.post("/datasets/attach", headers=steward(world),
                       json={"name": name, "source": source, "table": "people", "bins": SPEC}).status_code == 201
    assert client.put(f"/datasets/{name}/budget", headers=steward(world), json={"epsilon": 1}).status_code == 200
    with world.engine.begin() as connection:
        connection.execute(update(AttachSource).where(AttachSource.name == source).values(needs_credentials=True))
    response = client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                           json={"mechanism": "laplace", "epsilon": 0.5, "workload": "all-1way"})
    assert response.status_code == 503 and response.json()["error"] == "credentials_unavailable", response.text
    assert f"source update {source} --password-env" in response.json()["message"]
    assert str(foreign) not in response.text
    assert client.get(f"/datasets/{name}/budget", headers=steward(world)).json()["epsilon_spent"] == 0
