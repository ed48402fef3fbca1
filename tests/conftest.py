"""Shared fixtures. ``engine`` is parametrised: every database-touching test runs on SQLite AND
on a real PostgreSQL server that this test session starts itself (see service/tools/pgserver.py).

Set ``MARGINALIA_TEST_POSTGRES=skip`` to run SQLite only (local iteration); CI runs both, and a
PostgreSQL that cannot start is then a failure, not a skip.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from service.tools.pgserver import PostgresServer, PostgresUnavailable, start_server
from tests.support.paths import DATA

_counter = itertools.count()

#: The unordered columns of the Adult table (the rest are ordinal), as in the DD-SSP paper's experiments.
ADULT_CATEGORICAL = [
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex", "native-country",
    "income>50K",
]  # fmt: skip


@pytest.fixture(scope="session")
def adult_domain():  # noqa: ANN201
    from workloads.domain import Domain

    return Domain.from_json((DATA / "adult" / "adult-domain.json").read_text(), ADULT_CATEGORICAL)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"shared data not found at {DATA} (set MARGINALIA_SHARED_DATA)")
    return DATA


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """The throwaway PostgreSQL server of the session. Parquet tables of its databases go to a session folder
    (MARGINALIA_DATA_DIR, unless set), never to the working directory, the default beside no database file."""
    if os.environ.get("MARGINALIA_TEST_POSTGRES") == "skip":
        pytest.skip("PostgreSQL tests disabled by MARGINALIA_TEST_POSTGRES=skip")
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    folder = str(tmp_path_factory.mktemp("postgres-tables"))
    previous = os.environ.setdefault("MARGINALIA_DATA_DIR", folder)
    yield server
    server.stop()
    if previous == folder:
        del os.environ["MARGINALIA_DATA_DIR"]


def new_postgres_database(server: PostgresServer, template: str | None = None) -> str:
    """A new database of ``server`` (a copy of ``template`` when given), its URL."""
    name = f"t{os.getpid()}_{next(_counter)}"
    admin = create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        copy = f' TEMPLATE "{template}"' if template else ""
        connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    admin.dispose()
    return server.url(name)


def _migrated(url: str) -> None:
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    engine = make_engine(url)
    upgrade_to_head(engine)
    engine.dispose()  # no session may stay on a PostgreSQL template while it is copied


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database at the newest migration, made once per session: the ``engine`` fixture starts from a
    copy (milliseconds) instead of running every migration for each test (a tenth of a second, 1,400 times)."""
    path = tmp_path_factory.mktemp("template") / "migrated.db"
    _migrated(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def _postgres_template(postgres_server: PostgresServer) -> str:
    """A PostgreSQL database at the newest migration, made once per session (per xdist worker), that the
    ``engine`` fixture copies with ``CREATE DATABASE ... TEMPLATE`` (as :func:`_sqlite_template`)."""
    url = new_postgres_database(postgres_server)
    _migrated(url)
    return url.rsplit("/", 1)[1]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh database URL on each backend: empty, or, for a test that uses ``engine`` (which would upgrade it
    anyway), a copy of a database at the newest migration. Parquet tables go to the folder next to a SQLite
    database (the default), and on PostgreSQL to MARGINALIA_DATA_DIR in the test's folder (seen by CLI calls and
    servers too)."""
    migrated = "engine" in request.fixturenames
    if request.param == "sqlite":
        monkeypatch.delenv("MARGINALIA_DATA_DIR", raising=False)
        path = tmp_path / "test.db"
        if migrated:
            shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        return f"sqlite:///{path}"
    monkeypatch.setenv("MARGINALIA_DATA_DIR", str(tmp_path / "tables"))
    server = request.getfixturevalue("postgres_server")
    return new_postgres_database(server, request.getfixturevalue("_postgres_template") if migrated else None)


@pytest.fixture
def engine(database_url: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """An engine on a fresh database upgraded to the newest migration; MARGINALIA_DATABASE_URL
    points at it so CLI calls in the same test see the same database."""
    from db.engine import make_engine
    from db.migrate import upgrade_to_head

    monkeypatch.setenv("MARGINALIA_DATABASE_URL", database_url)
    engine = make_engine(database_url)
    upgrade_to_head(engine)
    yield engine
    engine.dispose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first (stable otherwise): the workers of ``pytest -n`` share the long ones from the start instead
    of one worker finishing a minutes-long test alone at the end (longest first is the classic schedule for
    minimal makespan)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
