"""Issue 27, finding 2: a scoped steward cannot escape its scope through an attach. A key attaches only through the
sources its scope names (403 before the source is looked up: no answer says whether an out-of-scope source exists);
one location is one dataset (a table a dataset already reads is a 409 ``already_attached``, naming that dataset only
to a key whose scope covers it); the name is checked before any row is read; and an attach's answer goes to the key
that sent it only."""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.access import auth
from service.api import create_app
from service.data import datasets
from service.data.attach import tables
from service.data.attach.sources import add_source, get_source
from service.data.attach.tables import attach_parquet
from service.errors import Conflict
from tests.support.apihelpers import World, attachable_copy, bearer, finished_job, snapshot
from tests.support.binned import SPEC, write_spec

ASYNC = {"Prefer": "respond-async"}


def _name(prefix: str = "scope") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _root(world: World) -> Path:
    return Path(str(get_source(world.engine, world.source).root))


def _key(world: World, datasets_: list[str] | None = None, sources: list[str] | None = None) -> dict[str, str]:
    """A new steward key; ``sources`` is passed only when given, so the key of a test that names none is made the
    same way before and after source scopes existed."""
    scope = {} if sources is None else {"sources": sources}
    _, key = auth.create_key(world.engine, "steward", f"scoped {uuid.uuid4().hex[:6]}", datasets_, **scope)
    return bearer(key)


def _attach(client: TestClient, headers: dict[str, str], name: str, source: str, parquet: list[str],
            bins: dict[str, object] = SPEC) -> tuple[int, dict[str, object]]:
    response = client.post("/datasets/attach", headers=headers,
                           json={"name": name, "source": source, "parquet": parquet, "bins": bins})
    return response.status_code, response.json()


def _refused(client: TestClient, world: World, headers: dict[str, str], name: str, source: str,
             parquet: list[str], bins: dict[str, object] = SPEC) -> dict[str, object]:
    """The attach's error body, once it is checked to store nothing and to show no server path."""
    before = snapshot(world.engine)
    status, body = _attach(client, headers, name, source, parquet, bins)
    assert status >= 400, body
    assert snapshot(world.engine) == before
    assert str(_root(world)) not in str(body)
    return {"status": status, **body}


# sources in a key's scope ----------------------------------------------------------------------------------------
def test_a_key_scoped_to_datasets_attaches_through_no_source_unless_it_names_it(
        client: TestClient, world: World) -> None:
    """The audit's escape: a steward scoped to one dataset attached, through the operator's folder source, any file
    of it under its own name. Now such a key attaches through no source, and a key that names ``lake`` through that
    one only."""
    mine, copy = _name(), attachable_copy(world)
    datasets_only = _key(world, [mine])
    error = _refused(client, world, datasets_only, mine, world.source, [copy])
    assert (error["status"], error["error"]) == (403, "forbidden")
    assert error["message"] == f"this key may attach tables through no source, not through {world.source!r}"
    other = f"other-{uuid.uuid4().hex[:6]}"
    add_source(world.engine, other, parquet_root=_root(world))
    lake_only = _key(world, [mine], [world.source])
    error = _refused(client, world, lake_only, mine, other, [copy])
    assert (error["status"], error["error"]) == (403, "forbidden")
    assert error["message"] == f"this key may attach tables through the sources [{world.source!r}], not through " \
                               f"{other!r}"
    status, body = _attach(client, lake_only, mine, world.source, [copy])
    assert (status, body["name"], body["rows"]) == (201, mine, 60)


def test_an_out_of_scope_source_answers_as_a_missing_one(client: TestClient, world: World) -> None:
    """The source scope is checked before the source is looked up: an existing source outside the key's scope and a
    source that does not exist get the same 403, so the answers are no oracle of which sources exist."""
    mine = _name()
    headers = _key(world, [mine], ["somewhere-else"])
    answers = [_refused(client, world, headers, mine, source, [attachable_copy(world)])
               for source in (world.source, "no-such-source")]
    assert [(a["status"], a["error"]) for a in answers] == [(403, "forbidden")] * 2
    assert answers[0]["message"].replace(repr(world.source), "S") == answers[1]["message"].replace(
        "'no-such-source'", "S")
    unscoped = _refused(client, world, bearer(world.keys["steward"]), mine, "no-such-source", ["x.parquet"])
    assert (unscoped["status"], unscoped["error"]) == (404, "source_not_found")  # a key trusted with every source


def test_an_unscoped_steward_and_a_key_scoped_to_sources_only_attach_through_their_sources(
        client: TestClient, world: World) -> None:
    status, _ = _attach(client, bearer(world.keys["steward"]), _name(), world.source, [attachable_copy(world)])
    assert status == 201
    sources_only = _key(world, None, [world.source])
    status, _ = _attach(client, sources_only, _name(), world.source, [attachable_copy(world)])
    assert status == 201


# one location, one dataset -------------------------------------------------------------------------------------------
def test_a_file_a_dataset_reads_is_not_attached_again_under_another_name(client: TestClient, world: World) -> None:
    """The audit attached, under its own name, the very file behind a dataset its key could not read, and gave it a
    budget of its own. Any second attach of that file is a 409, whether named as such, by a glob, or through a
    symlink; the holder is named to a key whose scope covers it, and only to such a key."""
    holder, copy = _name("holder"), attachable_copy(world)
    status, _ = _attach(client, bearer(world.keys["steward"]), holder, world.source, [copy])
    assert status == 201
    link = f"links/{uuid.uuid4().hex[:8]}.parquet"
    (_root(world) / link).parent.mkdir(exist_ok=True)
    (_root(world) / link).symlink_to(_root(world) / copy)
    for parquet in ([copy], [f"{Path(copy).parent}/*.parquet"], [link]):
        error = _refused(client, world, bearer(world.keys["steward"]), _name(), world.source, parquet)
        assert (error["status"], error["error"]) == (409, "already_attached"), error
        assert error["message"] == (f"parameter parquet: {copy}: already attached as dataset {holder!r}; one location "
                                    "is one dataset (its budget belongs to the table, not to a name), so use that "
                                    "dataset; nothing was stored")
    mine = _name()
    scoped = _key(world, [mine], [world.source])
    error = _refused(client, world, scoped, mine, world.source, [copy])
    assert (error["status"], error["error"]) == (409, "already_attached")
    assert holder not in error["message"] and "another dataset (one this key's scope does not cover)" in \
        error["message"]
    sees_it = _key(world, [mine, holder], [world.source])
    assert holder in _refused(client, world, sees_it, mine, world.source, [copy])["message"]


def test_the_refusal_is_no_oracle_of_the_values(client: TestClient, world: World) -> None:
    """The audit found max(age) of a dataset it could not read with 8 attaches of its file, ``edges: [0, X]``: the
    refusal of a value outside the spec answered whether every age was below X. A file a dataset reads is refused
    before any row is read, with one answer whatever the spec."""
    holder, copy = _name("holder"), attachable_copy(world)
    assert _attach(client, bearer(world.keys["steward"]), holder, world.source, [copy])[0] == 201
    mine = _name()
    scoped = _key(world, [mine], [world.source])
    answers = set()
    for top in (10, 60, 119, 120, 500):
        bins = {"columns": {**SPEC["columns"], "age": {"edges": [0, top]}}}
        error = _refused(client, world, scoped, mine, world.source, [copy], bins)
        answers.add((error["status"], error["error"], error["message"]))
    assert len(answers) == 1 and next(iter(answers))[:2] == (409, "already_attached")


def test_a_file_a_stored_glob_matches_is_taken(client: TestClient, world: World, tmp_path: Path) -> None:
    """``dataset attach --parquet 'DIR/*.parquet'`` keeps the glob, so the dataset reads whatever it matches at each
    scan: a file it matches now is taken, even one that appeared after that attach."""
    folder = _root(world) / "globbed" / uuid.uuid4().hex[:8]
    folder.mkdir(parents=True)
    shutil.copyfile(_root(world) / attachable_copy(world), folder / "part-0.parquet")
    holder = _name("glob")
    attach_parquet(world.engine, holder, [str(folder / "*.parquet")], write_spec(tmp_path))
    shutil.copyfile(folder / "part-0.parquet", folder / "part-1.parquet")  # matched by the stored glob from now on
    relative = folder.relative_to(_root(world))
    for parquet in ([f"{relative}/part-0.parquet"], [f"{relative}/part-1.parquet"]):
        error = _refused(client, world, bearer(world.keys["steward"]), _name(), world.source, parquet)
        assert (error["status"], error["error"]) == (409, "already_attached"), error
        assert f"as dataset {holder!r}" in error["message"]


def test_a_sql_table_is_one_dataset_whatever_url_reaches_it(client: TestClient, world: World, tmp_path: Path) -> None:
    """One database reached by two sources (two URLs of one file) and by the command line: one dataset."""
    import sqlite3

    from tests.support.binned import raw_frame

    foreign = tmp_path / "warehouse.db"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE people (age REAL, work TEXT, income TEXT)")
        connection.executemany("INSERT INTO people VALUES (?, ?, ?)",
                               raw_frame(40, 3)[["age", "work", "income"]].itertuples(index=False))
    first, second = f"wh-{uuid.uuid4().hex[:6]}", f"wh-{uuid.uuid4().hex[:6]}"
    add_source(world.engine, first, sql=f"sqlite:///{foreign}")
    (tmp_path / "link").symlink_to(tmp_path)
    add_source(world.engine, second, sql=f"sqlite:///{tmp_path / 'link' / 'warehouse.db'}")
    holder = _name("sql")
    response = client.post("/datasets/attach", headers=bearer(world.keys["steward"]),
                           json={"name": holder, "source": first, "table": "people", "bins": SPEC})
    assert response.status_code == 201, response.text
    for table in ("people", "PEOPLE"):  # SQLite's names are case-insensitive: one table
        before = snapshot(world.engine)
        again = client.post("/datasets/attach", headers=bearer(world.keys["steward"]),
                            json={"name": _name(), "source": second, "table": table, "bins": SPEC})
        assert (again.status_code, again.json()["error"]) == (409, "already_attached"), again.text
        assert f"as dataset {holder!r}" in again.json()["message"] and str(tmp_path) not in again.text
        assert snapshot(world.engine) == before
    with pytest.raises(Conflict) as caught:
        tables.attach_sql(world.engine, _name(), f"sqlite:///{foreign}", "people", write_spec(tmp_path))
    assert caught.value.code == "already_attached" and f"as dataset {holder!r}" in caught.value.message


def test_two_concurrent_attaches_of_one_file_make_one_dataset(
        client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both attaches pass the first check (neither is stored yet) and both finish their scan before either registers:
    the registration, serialized and checking again, lets exactly one through."""
    copy = attachable_copy(world)
    both_scanned = threading.Barrier(2, timeout=120)
    scan = tables._checked_rows

    def scan_then_wait(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        rows = scan(*args, **kwargs)
        both_scanned.wait()
        return rows

    monkeypatch.setattr(tables, "_checked_rows", scan_then_wait)
    names = [_name("race"), _name("race")]
    answers: dict[str, tuple[int, dict[str, object]]] = {}

    def attach(name: str) -> None:
        answers[name] = _attach(TestClient(create_app(world.engine)), bearer(world.keys["steward"]), name,
                                world.source, [copy])

    threads = [threading.Thread(target=attach, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(status for status, _ in answers.values())
    assert statuses == [201, 409], answers
    refused = next(body for status, body in answers.values() if status == 409)
    stored = [d.name for d in datasets.list_datasets(world.engine) if d.name in names]
    assert refused["error"] == "already_attached" and len(stored) == 1
    assert f"as dataset {stored[0]!r}" in refused["message"]


# the name first; the answer to its key only --------------------------------------------------------------------------
def test_the_name_is_checked_before_any_row_is_read(client: TestClient, world: World) -> None:
    """The audit's oracle worked under an existing name, because values were checked before the duplicate name: now
    a taken name is a 409 whatever the values (a spec no row fits included)."""
    narrow = {"columns": {**SPEC["columns"], "age": {"edges": [0, 1]}}}
    error = _refused(client, world, bearer(world.keys["steward"]), world.dataset, world.source,
                     [attachable_copy(world)], narrow)
    assert (error["status"], error["error"]) == (409, "duplicate_dataset"), error


def test_an_attach_job_is_read_by_its_key_only(client: TestClient, world: World) -> None:
    """An attach answers whether every value of a source's table fits the spec, and its row count: a steward whose
    dataset scope covers the name, but whose key may not attach through the source, does not read the job."""
    name = _name()
    owner = _key(world, [name], [world.source])
    response = client.post("/datasets/attach", headers={**owner, **ASYNC},
                           json={"name": name, "source": world.source, "parquet": [attachable_copy(world)],
                                 "bins": {"columns": {**SPEC["columns"], "age": {"edges": [0, 50]}}}})
    assert response.status_code == 202, response.text
    job = finished_job(client, owner["Authorization"].split()[1], response.json()["job_id"])
    assert (job["state"], job["result"]["error"]) == ("failed", "invalid_value")
    for other in (_key(world, [name]), bearer(world.keys["steward"])):
        shown = client.get(f"/jobs/{job['job_id']}", headers=other)
        assert (shown.status_code, shown.json()["error"]) == (404, "job_not_found")
        assert "column" not in shown.text
