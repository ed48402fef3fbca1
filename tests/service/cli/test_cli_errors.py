"""One-paragraph errors instead of tracebacks, for what a new steward types: huge budgets, unwritable
output files, bad database URLs, malformed raw files; uploads that do not show the server's paths;
and the command line's small manners (overwrite only with --force, no ``<bool>`` in help, ledger
numbers never cut, ``--json`` meaning the same everywhere)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
from fastapi.testclient import TestClient
from rich.console import Console
from typer.testing import CliRunner

from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.cli import app
from service.data import datasets
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget

MARGINALIA = str(Path(sys.executable).with_name("marginalia"))
runner = CliRunner()


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "4", "1e-5")


def _error(result, status: int = 2) -> dict[str, object]:  # noqa: ANN001
    assert result.exit_code == status, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("amount", ["1e7", "1e9", "1e30"])
def test_a_huge_budget_or_charge_is_a_clear_error(engine, titanic, amount: str) -> None:  # noqa: ANN001
    """SQLite overflowed at 1e7 and PostgreSQL at 1e9 (the ledger's 64-bit units); both are refused first."""
    body = _error(runner.invoke(app, ["budget", "set", "titanic", "--epsilon", amount, "--delta", "1e-5", "--json"]))
    assert body["error"] == "invalid_input" and "epsilon must be at most 1e+06" in body["message"]
    body = _error(runner.invoke(app, ["release", "marginals", "titanic", "--mechanism", "laplace", "--workload",
                                      "all-1way", "--epsilon", amount, "--json"]))
    assert body["error"] == "invalid_parameter" and "epsilon" in body["message"]
    assert accountant.budget_status(engine, "titanic").epsilon_total == 4


def test_synth_refuses_an_output_it_cannot_or_must_not_write(engine, titanic, tmp_path: Path) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.1").release_id
    body = _error(runner.invoke(app, ["synth", str(release), "--rows", "5", "--out", "/nonexistent/dir/x.csv",
                                      "--json"]))
    assert "--out" in body["message"] and "/nonexistent/dir" in body["message"]
    human = runner.invoke(app, ["synth", str(release), "--rows", "5", "--out", "/nonexistent/dir/x.csv"])
    assert human.exit_code == 2 and "does not exist" in human.stderr and "Traceback" not in human.output
    out = tmp_path / "rows.csv"
    out.write_text("precious\n")
    body = _error(runner.invoke(app, ["synth", str(release), "--rows", "5", "--out", str(out), "--json"]))
    assert body["error"] == "file_exists" and "--force" in body["message"] and out.read_text() == "precious\n"
    done = runner.invoke(app, ["synth", str(release), "--rows", "5", "--out", str(out), "--force", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["rows"] == 5 and len(out.read_text().splitlines()) == 6
    assert _error(runner.invoke(app, ["synth", str(release), "--rows", "5", "--out", str(tmp_path), "--json"]))[
        "error"] == "invalid_parameter"


@pytest.mark.parametrize(("url", "fragment"), [
    ("postgres://someone:secret@127.0.0.1:1/db", "cannot open the database postgresql+psycopg://someone:***@"),
    ("postgresql://someone@127.0.0.1:1/db", "127.0.0.1"),
    ("sqlite:////nonexistent/folder/x.db", "does the file's folder exist"),
    ("not a url", "is not a database URL"),
    ("mysql://u@localhost/db", "is not a database URL"),
])
def test_a_bad_database_url_is_one_paragraph(url: str, fragment: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MARGINALIA_DATABASE_URL", url)
    for args in (["init", "--json"], ["dataset", "list", "--json"]):
        body = _error(runner.invoke(app, args))
        assert body["error"] == "database_unavailable" and fragment in body["message"], body
        assert "secret" not in body["message"]


def test_a_database_newer_than_the_code_is_refused_by_name_and_left_alone(engine) -> None:  # noqa: ANN001
    """A newer marginalia upgraded the schema: every command names both revisions and what to do, exits 2 (not a
    "bug in marginalia" with status 1, as before) and changes nothing, not even the version row."""
    from sqlalchemy import text

    from db.migrate import head_revision

    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099_from_a_newer_release'"))
    for args in (["init", "--json"], ["dataset", "list", "--json"], ["ledger", "titanic", "--json"]):
        result = runner.invoke(app, args)
        body = _error(result)
        assert result.exit_code == 2 and body["error"] == "schema_too_new", body
        assert "'0099_from_a_newer_release'" in body["message"] and repr(head_revision()) in body["message"]
        assert "Downgrading a schema is not supported" in body["message"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == (
            "0099_from_a_newer_release")


def test_no_traceback_reaches_the_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "MARGINALIA_DATABASE_URL": "postgres://u:pw@127.0.0.1:1/db"}
    env.pop("MARGINALIA_DEBUG", None)
    done = subprocess.run([MARGINALIA, "ledger", "adult"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "database_unavailable" in done.stderr


def test_a_bug_is_one_paragraph_with_status_1(engine, titanic, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The paragraph names the exception's type, never its message: an exception that is not the project's own may
    quote a cell value (a driver's, numpy's). (On f80d414 it printed ``RuntimeError: <its message>``; this test then
    asserted the message was shown.)"""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something impossible: Jane Doe HIV+")

    monkeypatch.setattr(accountant, "ledger_rows", broken)
    monkeypatch.delenv("MARGINALIA_DEBUG", raising=False)
    body = _error(runner.invoke(app, ["ledger", "titanic", "--json"]), status=1)
    assert body["error"] == "internal_error" and "Jane Doe" not in body["message"]
    assert body["message"].startswith("RuntimeError (its message is withheld")
    assert "MARGINALIA_DEBUG=1" in body["message"]
    human = runner.invoke(app, ["ledger", "titanic"])
    assert human.exit_code == 1 and "RuntimeError" in human.stderr and "Jane Doe" not in human.output


@pytest.mark.parametrize("error", [ValueError("invalid literal for int() with base 10: 'Jane Doe HIV+'"),
                                   json.JSONDecodeError("Expecting value: Jane Doe HIV+", "x", 0),
                                   TypeError("unsupported operand: 'Jane Doe HIV+'")])
def test_a_foreign_value_error_is_a_bug_without_its_message(engine, titanic, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                           error: Exception) -> None:
    """Only a ValueError of the project's own packages is ``invalid_input`` with its message (as the API's 422); a
    library's (numpy's ``invalid literal for int()`` quotes the cell) is a bug paragraph without it. On f80d414 any
    package's ValueError or TypeError was printed whole as ``invalid_input``."""
    def broken(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(accountant, "ledger_rows", broken)
    monkeypatch.delenv("MARGINALIA_DEBUG", raising=False)
    body = _error(runner.invoke(app, ["ledger", "titanic", "--json"]), status=1)
    assert body["error"] == "internal_error" and "Jane Doe" not in body["message"], body
    assert type(error).__name__ in body["message"]


def test_our_own_value_error_is_invalid_input_with_its_message(engine, titanic,  # noqa: ANN001
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from workloads.parameters import ParameterError

    def broken(*args: object, **kwargs: object) -> None:
        raise ParameterError("epsilon must be a finite number")

    monkeypatch.setattr(accountant, "ledger_rows", broken)
    body = _error(runner.invoke(app, ["ledger", "titanic", "--json"]))
    assert body == {"error": "invalid_input", "message": "epsilon must be a finite number"}


def test_marginalia_debug_lets_the_whole_traceback_reach_the_terminal(engine, titanic,  # noqa: ANN001
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``MARGINALIA_DEBUG=1`` is the operator asking, on the machine that holds the data, for everything."""
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something impossible: Jane Doe HIV+")

    monkeypatch.setattr(accountant, "ledger_rows", broken)
    monkeypatch.setenv("MARGINALIA_DEBUG", "1")
    result = runner.invoke(app, ["ledger", "titanic", "--json"])
    assert isinstance(result.exception, RuntimeError) and "Jane Doe" in str(result.exception)


# files with the wrong number of fields ----------------------------------------------------------------
SPEC = {"format": {"header": False, "names": ["a", "b"], "comment": "|"},
        "columns": {"a": {"kind": "ordinal", "edges": [0, 10, 20]}, "b": {"values": ["x", "y"]}}}


def _load_raw(engine, tmp_path: Path, text: str) -> str:  # noqa: ANN001
    (tmp_path / "raw.csv").write_text(text)
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    with pytest.raises(Exception) as caught:
        datasets.load_raw_csv(engine, "raw", [tmp_path / "raw.csv"], tmp_path / "spec.json")
    return caught.value.message


def test_an_extra_field_is_reported_on_its_own_line(engine, tmp_path: Path) -> None:  # noqa: ANN001
    message = _load_raw(engine, tmp_path, "1, x\n" * 100 + "2, y, surplus\n" + "3, x\n" * 5)
    assert "line 101: 3 fields, but every row needs 2" in message
    message = _load_raw(engine, tmp_path, "1, x\n" * 10 + "2\n")
    assert "line 11: 1 fields, but every row needs 2" in message


def test_a_bad_value_is_reported_on_its_file_line_after_comments(engine, tmp_path: Path) -> None:  # noqa: ANN001
    message = _load_raw(engine, tmp_path, "|a preamble, as in adult.test\n\n1, x\n2, y\n3, z\n")
    assert "column 'b'" in message and "first on line 5" in message and "'z'" not in message


def test_a_coded_file_with_an_extra_field(engine, tmp_path: Path) -> None:  # noqa: ANN001
    (tmp_path / "d.json").write_text(json.dumps({"a": 3, "b": 2}))
    (tmp_path / "c.csv").write_text("a,b\n" + "0,1\n" * 50 + "1,0,7\n")
    with pytest.raises(Exception, match="line 52: 3 fields, but every row needs 2"):
        datasets.load_coded_csv(engine, "coded", tmp_path / "c.csv", tmp_path / "d.json")


def test_an_upload_error_does_not_show_the_servers_files(engine) -> None:  # noqa: ANN001
    _, key = auth.create_key(engine, "steward", "sam")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    body = {"name": "up", "csv": "a,b\n0,1\n5,1\n", "domain": {"a": 3, "b": 2}}
    answer = client.post("/datasets", json=body, headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 422
    message = answer.json()["message"]
    assert message.startswith("the uploaded csv, column 'a'") and "marginalia-upload" not in message
    assert "/tmp" not in message and "upload.csv" not in message


def test_shipped_specs_load_from_any_folder(engine, data_dir: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    raw = data_dir / "adult_uci_raw" / "adult.test"
    for name in ("adult-uci", "specs/adult-uci.yml"):
        info = datasets.load_raw_csv(engine, f"adult-{len(name)}", [raw], Path(name))
        assert info.rows == 16281 and info.labels["sex"] == ["Female", "Male"]
    with pytest.raises(Exception, match="nor the name of a shipped spec \\(adult-uci\\)"):
        datasets.load_raw_csv(engine, "nope", [raw], Path("no-such-spec"))


# manners ---------------------------------------------------------------------------------------------------
def _commands(command: click.Command, path: tuple[str, ...] = ()):  # noqa: ANN202
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    yield path, command


def test_help_describes_every_argument_and_shows_no_bool() -> None:
    for path, command in _commands(typer.main.get_command(app)):
        undocumented = [p.name for p in command.params if not getattr(p, "help", None)]
        assert not undocumented, f"marginalia {' '.join(path)}: {undocumented} have no help"
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "160"})
        assert shown.exit_code == 0 and "<bool>" not in shown.output, f"marginalia {' '.join(path)} --help"


def test_ledger_numbers_are_never_cut_at_80_columns(engine, titanic, monkeypatch) -> None:  # noqa: ANN001
    release_engine.release_marginals(engine, "titanic", "gaussian", "all-1way", epsilon="0.7", delta="1e-6", seed=1)
    release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.123456", seed=1)
    from service.cli import budgets

    buffer = io.StringIO()
    monkeypatch.setattr(budgets, "stdout", Console(file=buffer, width=80, force_terminal=False))
    result = runner.invoke(app, ["ledger", "titanic"])
    assert result.exit_code == 0, result.output
    printed = buffer.getvalue()
    assert "…" not in printed
    for row in accountant.ledger_rows(engine, "titanic"):
        for key in ("epsilon", "rho", "epsilon_priced", "epsilon_spent_after"):
            assert format(row[key], ".6g") in printed, (key, row[key], printed)
