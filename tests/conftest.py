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
from sqlalchemy.exc import OperationalError

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


def start_test_postgres() -> PostgresServer:
    """A new throwaway PostgreSQL server, or the test skipped (MARGINALIA_TEST_POSTGRES=skip, or no PostgreSQL
    outside CI); in CI a server that cannot start fails the test."""
    if os.environ.get("MARGINALIA_TEST_POSTGRES") == "skip":
        pytest.skip("PostgreSQL tests disabled by MARGINALIA_TEST_POSTGRES=skip")
    try:
        return start_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """The throwaway PostgreSQL server of the session. Parquet tables of its databases go to a session folder
    (MARGINALIA_DATA_DIR, unless set), never to the working directory, the default beside no database file."""
    server = start_test_postgres()
    folder = str(tmp_path_factory.mktemp("postgres-tables"))
    previous = os.environ.setdefault("MARGINALIA_DATA_DIR", folder)
    yield server
    server.stop()
    if previous == folder:
        del os.environ["MARGINALIA_DATA_DIR"]


def new_postgres_database(request: pytest.FixtureRequest, template: str | None = None) -> str:
    """A new database of the session's server (a copy of ``template`` when given), its URL; dropped when the
    requesting test or fixture ends. Without the drop, every test's copy stays on disk until the session ends
    (1,500 copies of 8 MB on a full run), and the server's folder then took minutes to remove after the last test."""
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"t{os.getpid()}_{next(_counter)}"
    copy = f' TEMPLATE "{template}"' if template else ""
    _admin(server, f'CREATE DATABASE "{name}"{copy}')
    request.addfinalizer(lambda: _drop(server, name))
    return server.url(name)


def _admin(server: PostgresServer, statement: str) -> None:
    admin = create_engine(server.admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(statement))
    finally:
        admin.dispose()


def _drop(server: PostgresServer, name: str) -> None:
    """Drop a test's database, closing what still holds it (a server or CLI process the test started). A drop
    that fails leaves the database to the session's end, when the whole server folder goes: it is housekeeping,
    not a finding about the test."""
    try:
        _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except OperationalError:
        pass


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
def _postgres_template(request: pytest.FixtureRequest) -> str:
    """A PostgreSQL database at the newest migration, made once per session (per xdist worker), that the
    ``engine`` fixture copies with ``CREATE DATABASE ... TEMPLATE`` (as :func:`_sqlite_template`)."""
    url = new_postgres_database(request)
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
    return new_postgres_database(request, request.getfixturevalue("_postgres_template") if migrated else None)


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first, spread over the workers (stable otherwise), for the shortest makespan.

    ``make test`` runs ``pytest -n 2 --dist worksteal``: the controller gives each worker one contiguous share of
    this order (``len(rest) // workers_left`` each, in turn), and an idle worker steals from the *end* of another's
    share. So each share starts with its part of the slow tests (dealt round-robin, longest-first being the classic
    schedule) and ends with fast ones, which are what gets stolen: no minutes-long test is left to run alone at the
    end. Without workers, slow tests simply come first."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    fast = items[len(slow):]
    sizes, left = [], len(items)
    for share in range(workers):
        sizes.append(left // (workers - share))
        left -= sizes[-1]
    dealt = [slow[share::workers] for share in range(workers)]
    ordered: list[pytest.Item] = []
    for share, size in enumerate(sizes):
        take = max(0, size - len(dealt[share]))
        ordered += dealt[share] + fast[:take]
        fast = fast[take:]
    items[:] = ordered + fast


@pytest.fixture(autouse=True, scope="session")
def _built_cli_commands_are_reused() -> Iterator[None]:
    """Build each typer app's click command once per session, not once per ``CliRunner.invoke``.

    ``typer.testing.CliRunner.invoke`` rebuilds the whole command tree from the functions' signatures on every call
    (``typer.main.get_command``: about 0.1 s for ``marginalia``'s ~50 commands, type hints evaluated each time), and
    the suite invokes the CLI in-process hundreds of times. A built click command keeps no state between invocations
    (each gets its own context), so one per app is what every invocation would have built: the console script builds
    it once per process too. An app changed after its first invocation would need a fresh build; no test does that."""
    import typer.testing

    build = typer.testing._get_command  # noqa: SLF001
    built: dict[int, tuple[object, object]] = {}

    def cached(app):  # noqa: ANN001, ANN202
        entry = built.get(id(app))
        if entry is None or entry[0] is not app:
            entry = built[id(app)] = (app, build(app))
        return entry[1]

    typer.testing._get_command = cached  # noqa: SLF001
    yield
    typer.testing._get_command = build  # noqa: SLF001
