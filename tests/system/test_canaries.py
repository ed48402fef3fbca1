"""Nothing private leaves (issue 27, finding 1, made impossible to reintroduce): canaries planted in the private cells
of a table held in every engine the service has (tests/support/canary_tables.py), the table then changed where it
lives so that its values break the engines' casts; then every operation of the OpenAPI document is called by every
kind of caller, with valid and invalid bodies, synchronously and with ``Prefer: respond-async`` (each job followed),
and every command that reads a table is run. No answer's body or headers, no job record or stored row, no log record
of any logger and no command's output may hold a canary (tests/support/canaries.py: the cells' values in several
spellings; over HTTP and in job records also where the tables live), and no answer may be an undocumented 5xx.

New operations, engines, regression methods and commands are picked up from the OpenAPI document, the engine list
(``service/data/engines/registry.py`` ``ENGINES``), the methods' registry and the typer app: one without its entry in
tests/support/canary_requests.py, canary_tables.py or canary_commands.py fails here, naming it.

One world per service database (SQLite with every variant; PostgreSQL with its own SQL store, the one variant that
depends on the service database), built once for the module; each world is one test, so that a pytest-xdist worker
builds it once. Slow: Spark's local mode takes seconds to start, and the run makes about two thousand requests and a
hundred commands per world.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text
from typer.testing import CliRunner

from service.api import create_app
from service.cli import app as cli_app
from service.data.engines.base import SQL
from service.data.engines.registry import ENGINES
from service.regression import methods
from tests.support.apihelpers import BACKENDS, bearer, build_world, database_url, finished_job
from tests.support.canaries import Canaries, LogCapture, LogContext, capturing_logs, quiet_other_handlers
from tests.support.canary_commands import COMMANDS, command_paths
from tests.support.canary_console import walk_the_console
from tests.support.canary_findings import Findings
from tests.support.canary_requests import FIT_SETTINGS, LATE, NO_BODY, REQUESTS, Call, Context
from tests.support.canary_tables import (
    HEALTHY,
    NEW_TABLES,
    VARIANTS,
    CanaryTables,
    bad_cells,
    canary_frame,
    with_cells,
)
from tests.support.roles import CALLERS, ROLE_TABLE

#: The variants each service database's world builds: the SQL store is the one that lives in the service database.
WORLD_VARIANTS = {"sqlite": [v for vs in VARIANTS.values() for v in vs],
                  "postgresql": [v for v in VARIANTS[SQL] if v.name == "sql stored"]}
#: Stored columns that say where a table lives, by design (the operator's records): not searched for locations.
LOCATION_COLUMNS = {("datasets", "source"), ("datasets", "location"), ("attach_sources", "root"),
                    ("attach_sources", "url")}
runner = CliRunner()


@dataclass
class CanaryWorld:
    context: Context
    logs: LogCapture  # every log record since the world's first migration
    findings: Findings


@pytest.fixture(scope="module", params=BACKENDS)
def canary_world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 data_dir: Path) -> Iterator[CanaryWorld]:
    canaries = Canaries()
    folder = tmp_path_factory.mktemp(f"canaries-{canaries.location.value}-")
    try:
        postgres_admin: str | None = request.getfixturevalue("postgres_server").admin_url
    except pytest.skip.Exception:
        postgres_admin = None
    with pytest.MonkeyPatch.context() as env, capturing_logs() as logs:
        url = database_url(request.param, request, folder)
        env.setenv("MARGINALIA_DATABASE_URL", url)
        env.setenv("MARGINALIA_DATA_DIR", str(folder / "tables"))
        world = build_world(url, data_dir, folder=folder / "role-lake")
        tables = CanaryTables(world.engine, folder, canaries, postgres_admin=postgres_admin)
        tables.build(WORLD_VARIANTS[request.param])
        tables.tamper()
        engines = {**NEW_TABLES, **{v.name: v.engine for v in (*tables.built, HEALTHY)}}
        yield CanaryWorld(Context(world, tables), logs, Findings(canaries, engines))
        tables.close()
        world.engine.dispose()


# the registries: a new engine, operation, method or command fails until the suite covers it ------------------------
def test_every_engine_has_variants() -> None:
    assert set(VARIANTS) == set(ENGINES), f"engines without canary variants: {set(ENGINES) - set(VARIANTS)}"
    for engine, variants in VARIANTS.items():
        assert variants and all(v.engine == engine for v in variants), engine


def test_every_operation_has_requests() -> None:
    from db.engine import make_engine

    paths = create_app(make_engine("sqlite://")).openapi()["paths"]
    served = {(method.upper(), path) for path, operations in paths.items() for method in operations}
    assert served - set(REQUESTS) == set(), f"operations without canary requests: {sorted(served - set(REQUESTS))}"
    assert set(REQUESTS) - served == set(), f"canary requests of no operation: {sorted(set(REQUESTS) - served)}"


def test_every_fit_method_has_settings() -> None:
    assert set(FIT_SETTINGS) == set(methods.names())


def test_every_command_is_classified() -> None:
    commands = set(command_paths(cli_app))
    assert commands - set(COMMANDS) == set(), f"commands not classified: {sorted(commands - set(COMMANDS))}"
    assert set(COMMANDS) - commands == set(), f"classified commands that do not exist: {set(COMMANDS) - commands}"


# the run ------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_nothing_private_leaves(canary_world: CanaryWorld) -> None:
    """Every channel of every route and command, as every caller (module docstring); the failure lists each finding,
    grouped by engine, channel and route or command, with an excerpt."""
    quiet_other_handlers()
    _check_planted(canary_world.context.tables)
    _call_every_operation(canary_world)
    walk_the_console(canary_world.context, canary_world.findings)
    _run_every_command(canary_world)
    _search_stored_rows(canary_world)
    _search_logs(canary_world)
    findings = canary_world.findings
    assert not findings.items, findings.report()


def _check_planted(tables: CanaryTables) -> None:
    """What the suite searches for was planted (a search that finds nothing proves nothing otherwise): every cell
    canary is in the raw table, a tampered file or a bad upload. One test with the run, so that a worker builds the
    world once."""
    import pandas as pd

    texts = [(tables.folder / "raw.csv").read_text()]
    frame = canary_frame(tables.canaries)
    texts += [with_cells(frame, cells).to_csv(index=False) for cells in bad_cells(tables.canaries).values()]
    texts += [pd.read_parquet(path).to_csv(index=False) for path in tables.lake.rglob("*.parquet")]
    found = {leak.canary.label for said in texts for leak in tables.canaries.find(said)}
    assert found == {c.label for c in tables.canaries.cells()}


def _operations(client: TestClient) -> list[tuple[str, str, bool]]:
    """(method, path, takes Prefer) of every operation, in the document's order with :data:`LATE` last."""
    paths = client.app.openapi()["paths"]
    found = [(m.upper(), p, any(x["name"] == "Prefer" for x in op.get("parameters", [])))
             for p, ops in paths.items() for m, op in ops.items()]
    late = [next(o for o in found if o[:2] == key) for key in LATE]
    return [o for o in found if o[:2] not in LATE] + late


def _call_every_operation(cw: CanaryWorld) -> None:
    with TestClient(create_app(cw.context.world.engine), raise_server_exceptions=False) as client:  # one event loop
        _call_with(client, cw)


def _call_with(client: TestClient, cw: CanaryWorld) -> None:
    ctx, findings, logs = cw.context, cw.findings, cw.logs
    keys = {**ctx.world.keys, "no_key": None}
    for method, route, takes_prefer in _operations(client):
        where = f"{method} {route}"
        for caller in CALLERS:
            calls = REQUESTS[(method, route)](ctx, caller)
            if _refused(method, route, caller):
                calls = _first_target(calls)
            followed: set[str | None] = set()  # one valid call per canary dataset also runs as a job
            for call in calls:
                async_too = takes_prefer and call.valid and call.variant not in followed
                if async_too:
                    followed.add(call.variant)
                modes = [{}, {"Prefer": "respond-async"}] if async_too else [{}]
                for extra in modes:
                    label = f"{call.label}{' (async)' if extra else ''}: {call.url}"
                    with logs.during(LogContext(where, caller, call.variant, label)):
                        headers = {**bearer(keys[caller]), **extra}
                        kwargs = {} if call.body is NO_BODY else {"json": call.body}
                        response = client.request(method, call.url, headers=headers, **kwargs)
                        findings.response(response, where, caller, call.variant, label)
                        if response.status_code == 202:
                            job = _followed(client, keys[caller], response.json()["job_id"])
                            findings.leaks(json.dumps(job, ensure_ascii=False), "job answer", where, caller,
                                           call.variant, label, kinds=("cell", "location"))


def _followed(client: TestClient, key: str | None, job_id: int) -> dict[str, object]:
    """The job's final state, once its thread (service/api/background.py names it ``job-<id>``) has ended."""
    for thread in threading.enumerate():
        if thread.name == f"job-{job_id}":
            thread.join(timeout=120)
    return finished_job(client, key, job_id)


def _refused(method: str, route: str, caller: str) -> bool:
    """Whether ``caller`` is refused this route whatever it points at (401/403 in the role table): one target is
    then enough (the others would be refused alike), with every body."""
    statuses = ROLE_TABLE.get((method, route))
    return statuses is not None and statuses[CALLERS.index(caller)] in (401, 403)


def _first_target(calls: list[Call]) -> list[Call]:
    """What a refused caller sends: each valid request and each bad path once (at the first target they name), and
    the first invalid body (a key that may not call the route is refused whatever the body: the rest would be refused
    alike)."""
    kept: dict[str, Call] = {}
    for call in calls:
        if call.valid or call.label.startswith("a bad"):
            kept.setdefault(call.label, call)
    return [*kept.values(), *[c for c in calls if not c.valid and not c.label.startswith("a bad")][:1]]


def _run_every_command(cw: CanaryWorld) -> None:
    ctx, findings, logs = cw.context, cw.findings, cw.logs
    for command, runs in COMMANDS.items():
        if isinstance(runs, str):
            continue
        where = f"cli: {command}"
        for run in runs(ctx):
            label = run.label
            with logs.during(LogContext(where, "operator", run.variant, " ".join(run.args))):
                result = runner.invoke(cli_app, run.args)
            output = result.output  # stdout and stderr, as a terminal shows them
            if result.exit_code not in (0, 2):  # 2: refused, as it should be; 1: a bug; anything else: odd
                findings.failure("cli status", where, run.variant, label,
                                 f"exit status {result.exit_code} ({result.exception!r}): {output[:300]}")
            findings.leaks(output, "cli output", where, "operator", run.variant, label)


def _search_stored_rows(cw: CanaryWorld) -> None:
    """Every text of every table of the service database but the sensitive tables themselves (``data_<id>``): job
    records, releases, ledger notes, idempotency records... Locations too, except where the operator records them."""
    engine, findings = cw.context.world.engine, cw.findings
    inspector = inspect(engine)
    with engine.connect() as connection:
        names = dict(connection.execute(text("SELECT id, name FROM datasets")).all())
    for table in inspector.get_table_names():
        if table.startswith("data_") or table == "alembic_version":
            continue
        columns = [c["name"] for c in inspector.get_columns(table)]
        quoted = ", ".join(f'"{c}"' for c in columns)
        with engine.connect() as connection:
            found = connection.execute(text(f'SELECT {quoted} FROM "{table}"'))
            rows = [dict(zip(columns, r, strict=True)) for r in found]
        channel = "job record" if table == "jobs" else "stored row"
        for row in rows:
            dataset = _dataset_of(table, row, names)
            for column, value in row.items():
                if isinstance(value, str):
                    kinds = ("cell",) if (table, column) in LOCATION_COLUMNS else ("cell", "location")
                    findings.leaks(value, channel, f"table {table}.{column}", "-",
                                   cw.context.variant_of(dataset), f"row id {row.get('id')}", kinds=kinds)


def _dataset_of(table: str, row: dict[str, object], names: dict[int, str]) -> str:
    """The dataset a stored row is about (its name), or "" when none is known."""
    if table == "jobs":
        return str(row.get("dataset"))
    if table == "datasets":
        return str(row.get("name"))
    return names.get(row.get("dataset_id"), "")  # type: ignore[arg-type]


def _search_logs(cw: CanaryWorld) -> None:
    for context, record in cw.logs.records:
        cw.findings.leaks(record, "log", context.where, context.caller, context.variant, context.label)


def test_the_search_finds_every_spelling() -> None:
    """The search can fail the suite: each canary is found in each of its spellings, inside JSON and a traceback,
    and a number is not found inside a longer number."""
    canaries = Canaries()
    for canary in canaries.values:
        for spelling in canary.spellings():
            for said in (f"value {spelling} here", json.dumps({"message": f"x {spelling} y"}),
                         f"Traceback ...\n  psycopg.errors.InvalidTextRepresentation: {spelling!r}\n"):
                assert [leak.canary for leak in canaries.find(said, kinds=("cell", "location"))] == [canary], said
    assert canaries.find("counts [37.12345671, 137.1234567, 1234567890]") == []
