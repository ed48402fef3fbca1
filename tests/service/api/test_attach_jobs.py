"""``POST /datasets/attach`` and ``POST /datasets/{name}/migrate`` in the background (``Prefer: respond-async``): both
read every row, so a large table would hold the request open for minutes. With the header: 202 and a job
(``Location: /jobs/{id}``) whose progress is the attach's phases or the rows copied, and whose answer is exactly the
synchronous route's, an error included (same status, code and redacted message; nothing stored). A job is its
owner's and its dataset's stewards': an analyst or an auditor never reads a steward's attach."""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from db.engine import transaction
from db.models import Job
from service.api import jobs, routes_attach
from service.data import relocate
from service.data.attach import through_source
from service.data.attach.sources import add_source, get_source
from tests.support.apihelpers import ATTACHABLE, World, attachable_copy, bearer, finished_job, snapshot
from tests.support.binned import SPEC

ASYNC = {"Prefer": "respond-async"}


def _name() -> str:
    return f"bg-{uuid.uuid4().hex[:8]}"


def _steward(world: World, *extra: dict[str, str]) -> dict[str, str]:
    headers = bearer(world.keys["steward"])
    for more in extra:
        headers = {**headers, **more}
    return headers


def _job_count(world: World) -> int:
    with transaction(world.engine) as session:
        return session.execute(select(func.count()).select_from(Job)).scalar_one()


@pytest.fixture
def reports(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Every progress report of every job, as ``GET /jobs/{id}`` showed it right after (none is skipped)."""
    seen: list[dict[str, object]] = []
    write = jobs.JobProgress.__call__

    def recording(self: jobs.JobProgress, done: int, total: int, message: str) -> None:
        self.seconds = 0.0
        write(self, done, total, message)
        seen.append(jobs.get(self.engine, self.job_id).to_json())

    monkeypatch.setattr(jobs.JobProgress, "__call__", recording)
    return seen


def _accepted(client: TestClient, world: World, url: str, body: dict[str, object]) -> dict[str, object]:
    """POST in the background: the 202's job (checked), then the finished job."""
    response = client.post(url, headers=_steward(world, ASYNC), json=body)
    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/jobs/{job['job_id']}"
    assert response.headers["preference-applied"] == "respond-async"
    assert job["state"] == "running" and job["result"] is None
    return finished_job(client, world.keys["steward"], job["job_id"])


def test_an_attach_in_the_background_answers_202_then_the_synchronous_answer(
        client: TestClient, world: World, reports: list[dict[str, object]]) -> None:
    name, twin = _name(), _name()
    body = {"source": world.source, "bins": SPEC, "privacy_unit": "other"}

    def glob_of_a_copy() -> list[str]:  # one location is one dataset: the twin attaches a copy of the same rows
        return [f"{Path(attachable_copy(world)).parent}/*.parquet"]

    job = _accepted(client, world, "/datasets/attach", {"name": name, **body, "parquet": glob_of_a_copy()})
    assert (job["kind"], job["dataset"], job["state"], job["status_code"]) == ("attach", name, "done", 201)
    synchronous = client.post("/datasets/attach", headers=_steward(world),
                              json={"name": twin, **body, "parquet": glob_of_a_copy()})
    assert synchronous.status_code == 201, synchronous.text
    assert job["result"] == {**synchronous.json(), "name": name}
    assert client.get(f"/datasets/{name}", headers=_steward(world)).json() == job["result"]
    phases = [r["progress"] for r in reports if r["dataset"] == name]
    assert phases == [{"done": i, "total": 2, "message": m} for i, m in enumerate(through_source.PHASES)]
    assert job["progress"] == phases[-1]


@pytest.mark.parametrize("case", ["value outside the spec", "unknown source", "path escape", "symlink escape",
                                  "unreachable database", "duplicate name"])
def test_a_refused_attach_job_fails_with_the_synchronous_error_and_stores_nothing(
        client: TestClient, world: World, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(str(get_source(world.engine, world.source).root))
    outside = tmp_path / "outside.parquet"
    outside.write_bytes((root / ATTACHABLE).read_bytes())
    name, source = _name(), world.source
    body: dict[str, object] = {"parquet": [ATTACHABLE], "bins": SPEC}
    secrets = [str(root), os.path.realpath(root), str(tmp_path)]
    if case == "value outside the spec":
        body["bins"] = {"columns": {**SPEC["columns"], "age": {"edges": [0, 18, 40]}}}
    elif case == "unknown source":
        source = "nowhere"
    elif case == "path escape":
        body["parquet"] = ["../outside/secret.parquet"]
    elif case == "symlink escape":
        (root / f"{name}.parquet").symlink_to(outside)
        body["parquet"] = [f"{name}.parquet"]
    elif case == "unreachable database":
        source = f"down-{uuid.uuid4().hex[:6]}"
        monkeypatch.setenv("DOWN_PASSWORD", "s3cret-pw")
        add_source(world.engine, source, sql="postgresql://reader@127.0.0.1:9/warehouse",
                   password_env="DOWN_PASSWORD", check=False)
        body = {"table": "people", "bins": SPEC}
        secrets += ["127.0.0.1", "s3cret-pw", "reader"]
    else:
        name = world.dataset
    request = {"name": name, "source": source, **body}
    before = snapshot(world.engine)
    synchronous = client.post("/datasets/attach", headers=_steward(world), json=request)
    assert synchronous.status_code in (404, 409, 422), synchronous.text
    job = _accepted(client, world, "/datasets/attach", request)
    assert (job["state"], job["status_code"]) == ("failed", synchronous.status_code)
    assert job["result"] == synchronous.json()
    assert snapshot(world.engine) == before
    if case != "duplicate name":
        assert client.get(f"/datasets/{name}", headers=_steward(world)).status_code == 404
    shown = client.get(f"/jobs/{job['job_id']}", headers=_steward(world)).text
    for secret in secrets:
        assert secret not in shown, (secret, shown)


def _sql_dataset(client: TestClient, world: World, rows: int = 5) -> str:
    name = _name()
    csv = "a,b\n" + "".join(f"{i % 3},{i % 2}\n" for i in range(rows))
    assert client.post("/datasets", headers=_steward(world), json={
        "name": name, "csv": csv, "domain": {"a": 3, "b": 2}, "engine": "sql"}).status_code == 201
    return name


def test_a_migration_in_the_background_reports_the_rows_copied_and_answers_as_the_route(
        client: TestClient, world: World, reports: list[dict[str, object]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routes_attach, "migrate_dataset", functools.partial(relocate.migrate_dataset, chunk_rows=2))
    name, twin = _sql_dataset(client, world), _sql_dataset(client, world)
    job = _accepted(client, world, f"/datasets/{name}/migrate", {"engine": "duckdb"})
    assert (job["kind"], job["dataset"], job["state"], job["status_code"]) == ("migrate", name, "done", 200)
    synchronous = client.post(f"/datasets/{twin}/migrate", headers=_steward(world), json={"engine": "duckdb"})
    assert synchronous.status_code == 200, synchronous.text
    assert job["result"] == {**synchronous.json(), "name": name}
    assert (job["result"]["engine"], job["result"]["rows"]) == ("duckdb", 5)
    copied = [r["progress"] for r in reports if r["dataset"] == name]
    assert copied == [{"done": done, "total": 5, "message": routes_attach.COPYING} for done in (2, 4, 5)]
    before = snapshot(world.engine)
    for url, status, code in [(f"/datasets/{name}/migrate", 409, "already_there"),
                              ("/datasets/nothing-here/migrate", 404, "dataset_not_found")]:
        synchronous = client.post(url, headers=_steward(world), json={"engine": "duckdb"})
        failed = _accepted(client, world, url, {"engine": "duckdb"})
        assert (failed["state"], failed["status_code"], failed["result"]) == ("failed", status, synchronous.json())
        assert (synchronous.status_code, synchronous.json()["error"]) == (status, code)
    assert snapshot(world.engine) == before


def test_a_stewards_attach_job_is_not_an_analysts(client: TestClient, world: World) -> None:
    """The route is stewards' (an analyst's 202 never happens: 403 before any job), and its job is read by its owner
    and the stewards whose scope covers its dataset; to an analyst, an auditor or a steward scoped elsewhere it is a
    404, as an id never used."""
    name = _name()
    job = _accepted(client, world, "/datasets/attach",
                    {"name": name, "source": world.source, "parquet": [attachable_copy(world)], "bins": SPEC})
    assert job["state"] == "done"
    url = f"/jobs/{job['job_id']}"
    assert client.get(url, headers=bearer(world.keys["steward"])).json()["result"]["rows"] == 60
    for caller in ("analyst", "auditor", "scoped_steward"):
        response = client.get(url, headers=bearer(world.keys[caller]))
        assert (response.status_code, response.json()["error"]) == (404, "job_not_found"), caller
        assert "rows" not in response.text
    for caller in ("participant", "gateway"):
        assert client.get(url, headers=bearer(world.keys[caller])).status_code == 403
    jobs_before = _job_count(world)
    for caller in ("analyst", "auditor"):
        refused = client.post("/datasets/attach", headers={**bearer(world.keys[caller]), **ASYNC},
                              json={"name": _name(), "source": world.source, "parquet": [ATTACHABLE], "bins": SPEC})
        assert refused.status_code == 403
        refused = client.post(f"/datasets/{world.sql_dataset}/migrate", headers={**bearer(world.keys[caller]), **ASYNC},
                              json={"engine": "duckdb"})
        assert refused.status_code == 403
    scoped = client.post("/datasets/attach", headers={**bearer(world.keys["scoped_steward"]), **ASYNC},
                         json={"name": name + "-x", "source": world.source, "parquet": [ATTACHABLE], "bins": SPEC})
    assert scoped.status_code == 403
    assert _job_count(world) == jobs_before
