"""Finding 1 of issue 27 through the HTTP API and the command line: a table broken where it lives (a canary string in
a column the spec bins as numbers, in a DuckDB glob or a PostgreSQL text column; a stored code outside its domain in
the service database) makes an analyst's ``objpert``, ``dp-iht`` and ``dd-ssp`` fits and a steward's Laplace release
answer 409 ``value_refused`` in our words (the table's data, not the request nor the server, stopped them) -- never
a 5xx, never the canary -- with the release refunded; so does the same request with ``Prefer: respond-async`` (the
job record), and ``marginalia release marginals`` and ``marginalia fit``. No log record, and no row of the service
database (jobs, releases, the ledger's refund reasons), holds the canary.

On f80d414 the DuckDB glob answered ``... Could not convert string 'Jane Doe HIV+ canary-5f1d' to DOUBLE``, the
PostgreSQL table ``invalid input syntax for type double precision: "Jane Doe HIV+ canary-5f1d"`` (and a 500 for the
counts, whose log line held the value), the stored code a 500 (numpy's ``index 31337 is out of bounds``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, inspect, text
from typer.testing import CliRunner

from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.cli import app
from service.data import datasets
from service.data.attach.tables import attach_parquet, attach_sql
from tests.conftest import new_postgres_database
from tests.support.apihelpers import bearer, finished_job
from tests.support.binned import raw_frame, sql_table, write_spec

CANARY = "Jane Doe HIV+ canary-5f1d"
NUMBER = "31337"
runner = CliRunner()


def _duckdb_glob(engine: Engine, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, object]:  # noqa: ARG001
    folder = tmp_path / "lake"
    folder.mkdir()
    for part in ("part-0", "part-1"):
        raw_frame(80, 2).to_parquet(folder / f"{part}.parquet", index=False)
    attach_parquet(engine, "broken", [str(folder / "*.parquet")], write_spec(tmp_path))
    frame = raw_frame(80, 2).astype({"age": str})
    frame.loc[7, "age"] = CANARY
    frame.to_parquet(folder / "part-1.parquet", index=False)
    return _regressions(target="age", label="income", features=["work", "income"])


def _postgres_text(engine: Engine, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, object]:
    url = new_postgres_database(request)
    lake = create_engine(url)
    sql_table(lake, raw_frame(80, 3), "people",
              {"age": "TEXT", "work": "VARCHAR(40)", "income": "VARCHAR(40)", "other": "INTEGER"})
    attach_sql(engine, "broken", url, "people", write_spec(tmp_path))
    with lake.begin() as connection:
        connection.execute(text("UPDATE people SET age = :v WHERE other = 1"), {"v": CANARY})
    lake.dispose()
    return _regressions(target="age", label="income", features=["work", "income"])


def _stored_code(engine: Engine, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, object]:  # noqa: ARG001
    rng = np.random.default_rng(5)
    sizes = {"a": 3, "b": 4, "c": 2}
    csv, domain = tmp_path / "rows.csv", tmp_path / "domain.json"
    csv.write_text("a,b,c\n" + "".join(f"{rng.integers(3)},{rng.integers(4)},{rng.integers(2)}\n" for _ in range(300)))
    domain.write_text(json.dumps(sizes))
    datasets.load_coded_csv(engine, "broken", csv, domain, store="sql")
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {datasets.get_dataset(engine, 'broken').data_table} SET c0 = {NUMBER} "
                                "WHERE c0 = 1"))
    return _regressions(target="a", label="c", features=["b", "c"])


def _regressions(target: str, label: str, features: list[str]) -> dict[str, object]:
    """The fits an analyst asks for, by route: a linear dd-ssp fit, logistic objpert and dp-iht fits."""
    other = [f for f in features if f != label] + [target]
    return {
        "dd-ssp": ("linear", {"target": target, "features": features, "method": "dd-ssp"}),
        "objpert": ("logistic", {"target": label, "features": other, "method": "objpert"}),
        "dp-iht": ("logistic", {"target": label, "features": other, "method": "dp-iht", "sparsity": 2}),
    }


TABLES: dict[str, Callable[[Engine, Path, pytest.FixtureRequest], dict[str, object]]] = {
    "duckdb-glob": _duckdb_glob, "postgres-text": _postgres_text, "sql-store": _stored_code}


@pytest.fixture(params=["duckdb-glob", pytest.param("postgres-text", marks=pytest.mark.postgres), "sql-store"])
def broken(request: pytest.FixtureRequest, engine: Engine, tmp_path: Path) -> dict[str, object]:
    """Dataset ``broken``, with a budget, whose table a canary broke after it was stored or attached; the fits to
    ask of it."""
    fits = TABLES[request.param](engine, tmp_path, request)
    accountant.set_budget(engine, "broken", "10", "1e-3")
    return fits


def _assert_clean(engine: Engine, caplog: pytest.LogCaptureFixture, *texts: str) -> None:
    """No canary in ``texts``, in any log record, or in any row of the service database but the table's own."""
    with engine.connect() as connection:
        stored = "\n".join(str(row) for table in inspect(engine).get_table_names() if not table.startswith("data_")
                           for row in connection.execute(text(f'SELECT * FROM "{table}"')).all())
    for canary in (CANARY, NUMBER):
        for where, found in [*(("answer", t) for t in texts), ("log", caplog.text), ("database", stored)]:
            assert canary not in found, (where, found)


def _unspent(engine: Engine) -> None:
    status = accountant.budget_status(engine, "broken")
    assert (status.epsilon_pure_spent, status.rho_spent) == (0, 0)  # every failed release was refunded


def test_fits_and_releases_on_a_broken_table_answer_without_the_canary(engine: Engine, broken: dict[str, object],
                                                                      caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    _, analyst = auth.create_key(engine, "analyst", "ann")
    _, steward = auth.create_key(engine, "steward", "sam")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    answers = []
    for task, body in broken.values():
        answers.append(client.post(f"/datasets/broken/fit/{task}", headers=bearer(analyst),
                                   json={**body, "epsilon": 1.0, "delta": 1e-6}))
    answers.append(client.post("/datasets/broken/releases/marginals", headers=bearer(steward),
                               json={"mechanism": "laplace", "workload": "all-1way", "epsilon": 0.5}))
    for response in answers:  # the data, not the request nor the server, stopped it: a 409, never a 5xx
        assert response.status_code == 409 and response.json()["error"] == "value_refused", response.text
        assert response.json()["message"].startswith("dataset 'broken': "), response.text
    _assert_clean(engine, caplog, *(r.text for r in answers))
    _unspent(engine)


def test_the_same_in_the_background_leaves_no_canary_in_the_job(engine: Engine, broken: dict[str, object],
                                                                 caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    _, analyst = auth.create_key(engine, "analyst", "ann")
    _, steward = auth.create_key(engine, "steward", "sam")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    later = {"Prefer": "respond-async"}
    started = [(analyst, client.post(f"/datasets/broken/fit/{task}", headers={**bearer(analyst), **later},
                                     json={**body, "epsilon": 1.0, "delta": 1e-6}))
               for task, body in broken.values()]
    started.append((steward, client.post("/datasets/broken/releases/marginals", headers={**bearer(steward), **later},
                                         json={"mechanism": "laplace", "workload": "all-1way", "epsilon": 0.5})))
    jobs = []
    for key, response in started:
        assert response.status_code == 202, response.text
        job = finished_job(client, key, response.json()["job_id"])
        assert (job["state"], job["status_code"], job["result"]["error"]) == ("failed", 409, "value_refused"), job
        jobs.append(json.dumps(job))
    _assert_clean(engine, caplog, *jobs)
    _unspent(engine)


def test_the_command_line_prints_no_canary(engine: Engine, broken: dict[str, object], caplog) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    outputs = []
    for as_json in ([], ["--json"]):
        release = runner.invoke(app, ["release", "marginals", "broken", "--mechanism", "laplace", "--workload",
                                      "all-1way", "--epsilon", "0.5", *as_json])
        assert release.exit_code == 2 and "value_refused" in release.output, release.output
        outputs.append(release.output)
        for task, body in broken.values():
            options = ["--target", body["target"], "--features", ",".join(body["features"]), "--method",
                       body["method"], "--epsilon", "1", "--delta", "1e-6"]
            if "sparsity" in body:
                options += ["--sparsity", str(body["sparsity"])]
            fitted = runner.invoke(app, ["fit", task, "broken", *options, *as_json])
            assert fitted.exit_code == 2 and "value_refused" in fitted.output, fitted.output
            outputs.append(fitted.output)
    _assert_clean(engine, caplog, *outputs)
    _unspent(engine)
