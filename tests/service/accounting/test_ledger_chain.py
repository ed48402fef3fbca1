"""A tamper-evident ledger (issue 31, point 8): every entry is chained; an edited entry, a removed one and a
rolled-back ledger (an older backup restored) are each detected; auditors can check the chain in plain SQL on
PostgreSQL; the CLI prints the head to publish and verifies against it."""

from __future__ import annotations

import json
import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from db import ledger_chain
from db.engine import make_engine
from service.accounting import accountant
from service.cli import app
from service.privacy.cost import PrivacyCost
from tests.support.backends import ON_SQLITE
from tests.support.datasets import load_titanic

runner = CliRunner()
DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


@pytest.fixture
def spent(engine, data_dir: Path):  # noqa: ANN001, ANN201
    """titanic with a budget, two charges and a refund: four entries."""
    load_titanic(engine, data_dir)
    accountant.set_budget(engine, "titanic", 2.0, 1e-6)
    first, charge = accountant.reserve_release(engine, "titanic", "marginals", "laplace",
                                               PrivacyCost(epsilon=Fraction(1, 10)), {}, "test")
    accountant.reserve_release(engine, "titanic", "marginals", "gaussian", PrivacyCost(rho=Fraction(1, 20)), {},
                               "test")
    accountant.refund(engine, charge, "failed before noise")
    return engine


def _without_triggers(engine, statement: str, **values: object) -> None:  # noqa: ANN001
    """What someone holding the database file could do: the triggers dropped, a row edited, the triggers back."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.execute(text("DROP TRIGGER ledger_no_update"))
            connection.execute(text("DROP TRIGGER ledger_no_delete"))
            connection.execute(text("DROP TRIGGER ledger_hashes_no_delete"))
        else:
            connection.execute(text("ALTER TABLE ledger_entries DISABLE TRIGGER USER"))
            connection.execute(text("ALTER TABLE ledger_hashes DISABLE TRIGGER USER"))
        connection.execute(text(statement), values)


def test_an_intact_ledger_verifies_and_its_head_is_its_last_entry(spent) -> None:  # noqa: ANN001
    verdict = accountant.verify_ledger(spent, "titanic")
    rows = accountant.ledger_rows(spent, "titanic")
    assert verdict.ok and verdict.head.entries == len(rows) == 4 and verdict.head.entry_id == rows[-1]["entry_id"]
    assert accountant.verify_ledger(spent, "titanic", verdict.head).ok


def test_the_chain_is_append_only_too(spent) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match="append-only"), spent.begin() as connection:
        connection.execute(text("UPDATE ledger_hashes SET entry_hash = :h"), {"h": "f" * 64})


def test_an_edited_entry_breaks_the_chain(spent) -> None:  # noqa: ANN001
    target = accountant.ledger_rows(spent, "titanic")[1]["entry_id"]
    _without_triggers(spent, "UPDATE ledger_entries SET epsilon_units = 1 WHERE id = :i", i=target)
    verdict = accountant.verify_ledger(spent, "titanic")
    assert not verdict.ok and verdict.problems == (f"entry {target} does not hash to its link: a column of it was "
                                                   "changed",)


def test_a_removed_entry_breaks_the_chain(spent) -> None:  # noqa: ANN001
    """The gaussian charge removed with its link (the refund after it stays): its successor no longer follows."""
    rows = accountant.ledger_rows(spent, "titanic")
    target, successor = rows[2]["entry_id"], rows[3]["entry_id"]
    _without_triggers(spent, "DELETE FROM ledger_hashes WHERE entry_id = :i", i=target)
    with spent.begin() as connection:
        connection.execute(text("DELETE FROM ledger_entries WHERE id = :i"), {"i": target})
    problems = accountant.verify_ledger(spent, "titanic").problems
    assert len(problems) == 1 and problems[0].startswith(f"entry {successor} follows "), problems


@ON_SQLITE
def test_a_restored_older_backup_is_detected_by_the_published_head(spent, tmp_path: Path) -> None:  # noqa: ANN001
    """The backup's chain is valid on its own: only the head published after it tells the rollback."""
    database = Path(spent.url.database)
    backup = tmp_path / "backup.db"
    spent.dispose()
    shutil.copyfile(database, backup)
    accountant.reserve_release(spent, "titanic", "marginals", "laplace", PrivacyCost(epsilon=Fraction(1, 5)), {},
                               "test")
    published = accountant.ledger_head(spent, "titanic")
    spent.dispose()
    shutil.copyfile(backup, database)  # the restore
    restored = make_engine(f"sqlite:///{database}")
    assert accountant.verify_ledger(restored, "titanic").ok  # consistent in itself
    verdict = accountant.verify_ledger(restored, "titanic", published)
    assert not verdict.ok and "rolled back" in verdict.problems[0] and f"entry {published.entry_id}" in (
        verdict.problems[0])
    restored.dispose()


@ON_SQLITE
def test_the_cli_prints_the_head_and_verifies_against_it(spent, tmp_path: Path) -> None:  # noqa: ANN001
    head = runner.invoke(app, ["ledger", "titanic", "--head", "--json"])
    assert head.exit_code == 0, head.output
    (tmp_path / "head.json").write_text(head.stdout)
    checked = runner.invoke(app, ["ledger", "titanic", "--verify", "--published", str(tmp_path / "head.json"),
                                  "--json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["ok"] is True
    forged = {**json.loads(head.stdout), "entry_hash": "0" * 64}
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    refused = runner.invoke(app, ["ledger", "titanic", "--verify", "--published", str(tmp_path / "forged.json"),
                                  "--json"])
    assert refused.exit_code == 2 and json.loads(refused.stdout)["error"] == "ledger_broken"
    (tmp_path / "bad.json").write_text('{"dataset": "titanic", "entry_id": "x"}')
    bad = runner.invoke(app, ["ledger", "titanic", "--verify", "--published", str(tmp_path / "bad.json"), "--json"])
    assert bad.exit_code == 2 and "published: entry_id" in json.loads(bad.stdout)["message"]


def test_the_auditors_sql_recipe_agrees_with_the_chain(spent) -> None:  # noqa: ANN001
    """docs/operations.md's recipe, run as written (PostgreSQL: SQLite has no SHA-256 in SQL)."""
    if spent.dialect.name != "postgresql":
        pytest.skip("the recipe uses PostgreSQL's sha256(); on SQLite auditors run `marginalia ledger --verify`")
    recipe = re.search(r"```sql\n(-- the ledger's chain.*?)```", DOCS.read_text(), re.S).group(1)
    with spent.connect() as connection:
        rows = connection.execute(text(recipe)).all()
    assert len(rows) == 4 and all(row.link_ok for row in rows)
    target = rows[1].entry_id
    _without_triggers(spent, "UPDATE ledger_entries SET note = 'edited' WHERE id = :i", i=target)
    with spent.connect() as connection:
        broken = {row.entry_id: row.link_ok for row in connection.execute(text(recipe))}
    assert [i for i, ok in broken.items() if not ok] == [target]
    assert ledger_chain.GENESIS == "0" * 64
