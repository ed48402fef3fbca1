"""The deployment guide's PostgreSQL roles and grants, run as written (issue 31, point 10): docs/operations.md's three
SQL blocks on a throwaway PostgreSQL, the service working as its own role (not a superuser, so every refusal is
real), a warehouse read through its read-only role, the auditor's SQL as the auditor, and what each role is
refused."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from db.migrate import open_database
from service.accounting import accountant
from service.data import datasets
from service.data.attach.sources import add_source
from service.data.attach.through_source import attach_from_source
from service.releases import engine as release_engine
from tests.support.datasets import load_titanic
from tests.support.paths import REPO

GUIDE = REPO / "docs" / "operations.md"


def _block(name: str) -> list[str]:
    """The statements of the SQL block after ``<!-- deployment: NAME -->``."""
    found = re.search(rf"<!-- deployment: {name} -->\n```sql\n(.*?)```", GUIDE.read_text(), re.S)
    assert found is not None, f"docs/operations.md has no deployment block {name!r}"
    return [s.strip() for s in found.group(1).split(";") if s.strip()]


def _run(url: str, statements: list[str]) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")  # CREATE DATABASE runs outside a transaction
    try:
        with engine.connect() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def _refused(url: str, statement: str) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    except DBAPIError as exc:
        return "permission denied" in str(exc.orig)
    finally:
        engine.dispose()
    return False


@pytest.mark.slow  # creates roles and databases on the session's PostgreSQL
def test_the_guides_roles_and_grants_work_as_written(postgres_server, tmp_path: Path, data_dir: Path,  # noqa: ANN001
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    admin = postgres_server.admin_url
    host = admin.split("@", 1)[1].rsplit("/", 1)[0]
    _run(admin, _block("cluster"))
    _run(admin, ["CREATE DATABASE sales"])
    sales_admin = admin.rsplit("/", 1)[0] + "/sales"
    _run(sales_admin, ["CREATE TABLE people (age INTEGER, sex TEXT)",
                       "INSERT INTO people VALUES (23, '0'), (41, '1'), (35, '1'), (67, '0')",
                       "CREATE TABLE salaries (pay INTEGER)"])
    _run(sales_admin, _block("warehouse"))

    monkeypatch.setenv("MARGINALIA_DATA_DIR", str(tmp_path / "tables"))
    service_url = f"postgresql+psycopg://marginalia_service:service-secret@{host}/marginalia"
    service = open_database(service_url)  # marginalia init, as the service's own role
    load_titanic(service, data_dir)
    datasets.load_coded_csv(service, "rows-inside", data_dir / "titanic" / "titanic.csv",
                            data_dir / "titanic" / "titanic-domain.json", ("Sex", "Embarked"), store="sql")
    with service.connect() as connection:  # a table whose rows live in the service database
        rows_table = connection.execute(text("SELECT data_table FROM datasets WHERE name = 'rows-inside'")).scalar_one()
    accountant.set_budget(service, "titanic", 2.0, 1e-6)
    release_engine.release_marginals(service, "titanic", "laplace", [["Sex", "Survived"]], epsilon=0.5)
    monkeypatch.setenv("SALES_PASSWORD", "reader-secret")  # the password's place, as docs/operations.md says
    add_source(service, "sales", sql=f"postgresql+psycopg://marginalia_reader@{host}/sales",
               password_env="SALES_PASSWORD")
    attached = attach_from_source(service, "people", "sales", table="people",
                                  bins={"columns": {"age": {"edges": [0, 30, 60, 120]}, "sex": {"values": ["0", "1"]}}})
    assert attached.name == "people"
    _run(service_url, _block("auditor"))
    with service.connect() as connection:  # no table of the service database holds the warehouse's password
        stored = [connection.execute(text(f"SELECT * FROM {t}")).all() for t in ("attach_sources", "datasets")]
    assert "reader-secret" not in repr(stored) and "env:SALES_PASSWORD" in repr(stored)
    service.dispose()

    reader = f"postgresql+psycopg://marginalia_reader:reader-secret@{host}/sales"
    assert _refused(reader, "SELECT * FROM salaries") and _refused(reader, "INSERT INTO people VALUES (1, '0')")

    auditor = f"postgresql+psycopg://marginalia_auditor:auditor-secret@{host}/marginalia"
    engine = create_engine(auditor)
    with engine.connect() as connection:
        audit = connection.execute(text("SELECT dataset, agrees FROM budget_audit ORDER BY dataset")).all()
        names = connection.execute(text("SELECT name FROM datasets ORDER BY name")).scalars().all()
        links = connection.execute(text("SELECT COUNT(*) FROM ledger_hashes")).scalar_one()
        entries = connection.execute(text("SELECT COUNT(*) FROM ledger_entries")).scalar_one()
    engine.dispose()
    assert [row.agrees for row in audit] == [1] and names == ["people", "rows-inside", "titanic"]
    assert links == entries == 2  # the budget and the charge
    for statement in ("SELECT location FROM datasets", "SELECT * FROM api_keys", "SELECT * FROM attach_sources",
                      "SELECT * FROM releases", f"SELECT * FROM {rows_table}"):
        assert _refused(auditor, statement), statement
    assert os.environ["MARGINALIA_DATA_DIR"] == str(tmp_path / "tables")
