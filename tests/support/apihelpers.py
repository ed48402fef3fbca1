"""Shared set-up for the API tests: a database with the titanic table, a budget, one release and a
key of every kind, plus a snapshot of what the database holds (to check that bad input stores
nothing)."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, inspect, literal, select, union_all
from sqlalchemy import table as sql_table

from db.engine import make_engine, transaction
from db.migrate import upgrade_to_head
from db.models import ApiKey, Budget, Dataset, IdempotencyRecord, LedgerEntry, Release
from service.access import auth
from service.accounting import accountant
from service.api import jobs
from service.campaigns import gateways
from service.data import datasets
from service.releases import engine as release_engine
from tests.conftest import new_postgres_database
from tests.support.datasets import load_titanic

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
# One cheap release for the tests to answer from: two small marginals of titanic, Laplace.
SMALL_WORKLOAD = [["Sex"], ["Pclass", "Survived"]]


@dataclass
class World:
    engine: Engine
    url: str
    keys: dict[str, str]  # role label -> key; "revoked" is a revoked analyst key
    key_ids: dict[str, int]
    dataset: str
    release_id: int
    job_id: int
    public_table: str = "households"
    campaign: str = "average"  # an ldp-avg campaign with reports (fits answer)
    closing_campaign: str = "closing"  # one the closing routes may close
    marginals_campaign: str = "survey"  # a marginals campaign with reports (marginals and synthetic rows answer)
    source: str = "lake"  # a folder source holding ATTACHABLE (tests.support.binned's raw rows and SPEC)
    sql_dataset: str = "titanic-sql"  # titanic kept in the service database (the migrate route moves it)


#: The Parquet file of the world's folder source, relative to its folder.
ATTACHABLE = "people/part-0.parquet"


def database_url(backend: str, request: pytest.FixtureRequest, folder: Path) -> str:
    """A fresh database on ``backend`` (a module-scoped fixture's counterpart of conftest's)."""
    if backend == "sqlite":
        return f"sqlite:///{folder / 'api.db'}"
    return new_postgres_database(request)


def titanic_upload(data_dir: Path, name: str = "titanic") -> dict[str, object]:
    """The JSON body of ``POST /datasets`` for the titanic table."""
    folder = data_dir / "titanic"
    return {
        "name": name,
        "csv": (folder / "titanic.csv").read_text(),
        "domain": json.loads((folder / "titanic-domain.json").read_text()),
        "categorical": ["Sex", "Embarked"],
    }


def make_keys(engine: Engine) -> tuple[dict[str, str], dict[str, int]]:
    keys, ids = {}, {}
    for label, role, scope in [
        ("steward", "steward", None),
        ("scoped_steward", "steward", ["elsewhere"]),
        ("analyst", "analyst", None),
        ("auditor", "auditor", None),
        ("revoked", "analyst", None),
        ("participant", "participant", None),
        ("gateway", "gateway", None),
    ]:
        info, key = auth.create_key(engine, role, f"test {label}", scope)
        keys[label], ids[label] = key, info.id
    auth.revoke_key(engine, ids["revoked"])
    return keys, ids


def build_world(url: str, data_dir: Path, budget: float = 5.0, folder: Path | None = None) -> World:
    """The world over a fresh database at ``url``; its source's folder is ``folder`` (default: a new temporary
    folder)."""
    engine = make_engine(url)
    upgrade_to_head(engine)
    load_titanic(engine, data_dir)
    datasets.load_coded_csv(engine, "titanic-sql", data_dir / "titanic" / "titanic.csv",
                            data_dir / "titanic" / "titanic-domain.json", ("Sex", "Embarked"), store="sql")
    accountant.set_budget(engine, "titanic", budget, 1e-6)
    keys, ids = make_keys(engine)
    outcome = release_engine.release_marginals(engine, "titanic", "laplace", SMALL_WORKLOAD, epsilon=0.1)
    job_id = jobs.create(engine, "titanic", "release", ids["steward"])  # a finished background release
    jobs.finish(engine, job_id, "done", 201, {"release_id": outcome.release_id})
    world = World(engine, url, keys, ids, "titanic", outcome.release_id, job_id)
    add_collections(engine, world.public_table, world.campaign, world.closing_campaign, world.marginals_campaign)
    gateways.set_scope(engine, ids["gateway"], world.campaign, 1000)  # a steward opens the campaign to the gateway
    add_folder_source(engine, world.source, Path(tempfile.mkdtemp(prefix="marginalia-lake-")) if folder is None
                      else folder)
    return world


def add_folder_source(engine: Engine, name: str, folder: Path, rows: int = 60) -> Path:
    """A folder source ``name`` over ``folder``, holding :data:`ATTACHABLE` (``rows`` raw rows that
    :data:`tests.support.binned.SPEC` codes); returns the folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from service.data.attach.sources import add_source
    from tests.support.binned import raw_frame

    (folder / ATTACHABLE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(raw_frame(rows, 5), preserve_index=False), folder / ATTACHABLE)
    add_source(engine, name, parquet_root=folder)
    return folder


def attachable_copy(world: World) -> str:
    """A new copy of :data:`ATTACHABLE` in the world's folder source, as a path relative to its folder (the file
    alone in a folder of its own, so ``FOLDER/*.parquet`` matches it only). One location is one dataset: a test that
    attaches a table attaches a copy of its own, which is another location."""
    import shutil
    import uuid

    from service.data.attach.sources import get_source

    root = Path(str(get_source(world.engine, world.source).root))
    copy = Path("copies") / uuid.uuid4().hex[:12] / "part-0.parquet"
    (root / copy).parent.mkdir(parents=True)
    shutil.copyfile(root / ATTACHABLE, root / copy)
    return str(copy)


def add_collections(engine: Engine, public_table: str = "households", campaign: str = "average",
                    closing_campaign: str = "closing", marginals_campaign: str | None = None) -> None:
    """A public table, an ldp-avg campaign with 50 simulated reports, a second campaign to close and (named) a
    marginals campaign over three small attributes with 60 simulated reports."""
    import numpy as np

    from service.campaigns import campaigns, public_tables, simulate

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "households.csv"
        path.write_text("income,age\n30.5,41\n52.0,35\n")
        public_tables.load_public_csv(engine, public_table, path)
    for name in (campaign, closing_campaign):
        campaigns.create_campaign(engine, name, "ldp-avg", ["value"], None, None, 1.0, 0.0, {"lower": 0, "upper": 1})
    simulate.simulate(engine, campaign, np.linspace(0, 1, 50)[:, None])
    if marginals_campaign is not None:
        campaigns.create_campaign(engine, marginals_campaign, "marginals", ["a", "b", "c"], None, None, 1.0, 0.0,
                                  {"domain": {"a": 3, "b": 2, "c": 4}, "way": 2})
        rows = np.stack([np.arange(60) % 3, np.arange(60) % 2, np.arange(60) % 4], axis=1)
        simulate.simulate(engine, marginals_campaign, rows)


def bearer(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


def finished_job(client: TestClient, key: str, job_id: int, seconds: float = 120) -> dict[str, object]:
    """Poll ``GET /jobs/{job_id}`` with ``key`` until the job is no longer running; its last state."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}", headers=bearer(key)).json()
        if job["state"] != "running":
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still running: {job}")


def table_counts(engine: Engine, tables: list[str] | None = None) -> dict[str, int]:
    """The row count of each of ``tables`` (default: every table of the database but alembic's), in one query: the
    API's writes and everything else (jobs, campaigns, reports, sources...), for checks that a refused request stored
    nothing anywhere."""
    if tables is None:
        tables = [t for t in inspect(engine).get_table_names() if t != "alembic_version"]
    query = union_all(*(select(literal(t), func.count()).select_from(sql_table(t)) for t in tables))
    with engine.connect() as connection:
        return dict(connection.execute(query).all())


def snapshot(engine: Engine) -> dict[str, object]:
    """Row counts of every table the API can write, and the per-dataset data tables."""
    counts: dict[str, object] = {}
    with transaction(engine) as session:
        for model in (Dataset, Budget, Release, LedgerEntry, ApiKey, IdempotencyRecord):
            counts[model.__tablename__] = session.execute(select(func.count()).select_from(model)).scalar_one()
        counts["budget_units"] = sorted(session.execute(select(Budget.epsilon_units, Budget.delta_units)).all())
    counts["data_tables"] = sorted(t for t in inspect(engine).get_table_names() if t.startswith("data_"))
    return counts
