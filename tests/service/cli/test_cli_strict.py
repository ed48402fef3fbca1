"""Issue 18, careless use of the command line: an epsilon below the ledger's unit refused up front and the cost
shown equal to the cost charged; campaign options and counts checked naming the option; ``marginalia ledger``
readable at 80 columns (a pipe's width); ``campaign create --help`` listing every protocol; messages that read as
sentences."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from service.accounting import accountant
from service.campaigns.protocols import CAMPAIGN_PROTOCOLS
from service.cli import app
from service.mechanisms import direct
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget
from workloads.local.protocols import PROTOCOLS

runner = CliRunner()


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "4", "1e-5")


def _json(*args: str, status: int = 0) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == status and "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


def _charges(engine) -> list[dict[str, object]]:  # noqa: ANN001
    return [row for row in accountant.ledger_rows(engine, "titanic") if row["entry"] == "charge"]


@pytest.mark.parametrize("epsilon", ["5e-324", "1e-16", "1e-13"])
def test_an_epsilon_below_the_ledger_unit_is_refused_up_front(engine, titanic, epsilon: str) -> None:  # noqa: ANN001
    body = _json("release", "marginals", "titanic", "--mechanism", "laplace", "--workload", "all-1way",
                 "--epsilon", epsilon, status=2)
    assert body["error"] == "invalid_parameter" and "below the accountant's resolution of 1e-12" in body["message"]
    assert _charges(engine) == [] and answers.list_releases(engine, "titanic") == []


def test_the_cost_printed_is_the_cost_charged(engine, titanic) -> None:  # noqa: ANN001
    body = _json("release", "marginals", "titanic", "--mechanism", "laplace", "--workload", "all-1way",
                 "--epsilon", "1.5e-12")
    (charge,) = _charges(engine)
    assert body["cost"]["epsilon"] == charge["epsilon"] == 1e-12


@pytest.mark.parametrize("args, fragment", [
    (["--participants", str(10**30)], "option participants must be at most 2^53"),
    (["--option", "participants=1e30"], "option participants must be a positive integer, got 1e+30"),
    (["--option", "participants=100000000000000000000000000000"], "option participants must be at most 2^53"),
    (["--option", "participants=many"], "option participants must be a positive integer, got the string 'many'"),
])
def test_a_huge_count_is_an_error_naming_the_option(engine, args: list[str], fragment: str) -> None:  # noqa: ANN001
    """``participants = 10**30`` was an OverflowError in the database driver (a traceback, exit 1)."""
    body = _json("campaign", "create", "avg", "--protocol", "ldp-avg", "--features", "v", "--epsilon", "1",
                 "--lower", "0", "--upper", "1", *args, status=2)
    assert body["error"] == "invalid_parameter" and fragment in body["message"], body
    assert _json("campaign", "list") == []


def test_option_values_are_read_as_json_numbers_and_booleans(engine) -> None:  # noqa: ANN001
    created = _json("campaign", "create", "glm", "--protocol", "stein-glm", "--features", "a,b", "--target", "y",
                    "--epsilon", "1", "--delta", "1e-6", "--option", "norm_bound=3", "--option", "gram=false",
                    "--option", "participants=1000", "--option", "norm=l1")
    assert created["spec"]["norm_bound"] == 3 and created["spec"]["gram"] is False
    assert created["spec"]["participants"] == 1000 and created["spec"]["norm"] == "l1"


# ------------------------------------------------------------------------------------------------------------ ledger
def _failed_after_noise(engine, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    original = direct.run_laplace

    def fails_after_noise(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # draws the noise
        raise RuntimeError("disk full")

    monkeypatch.setattr(direct, "run_laplace", fails_after_noise)
    with pytest.raises(RuntimeError):
        release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.01", seed=2)
    monkeypatch.setattr(direct, "run_laplace", original)


def test_the_ledger_is_readable_at_80_columns(engine, titanic, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """At 80 columns (what a pipe gets) the table squeezed entry, status and mechanism to nothing; now every entry's
    kind, release, status and mechanism, and every figure, is printed whole."""
    release_engine.release_marginals(engine, "titanic", "gaussian", "all-1way", epsilon="0.7", delta="1e-6", seed=1)
    release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.123456", seed=1)
    _failed_after_noise(engine, monkeypatch)
    from service.cli import budgets

    buffer = io.StringIO()
    monkeypatch.setattr(budgets, "stdout", Console(file=buffer, width=80, force_terminal=False))
    result = runner.invoke(app, ["ledger", "titanic"])
    assert result.exit_code == 0, result.output
    printed = buffer.getvalue()
    assert "…" not in printed and max(len(line) for line in printed.splitlines()) <= 80
    rows = accountant.ledger_rows(engine, "titanic")
    assert {r["release_status"] for r in rows} >= {"complete", "failed_after_noise"}
    for row in rows:
        assert f"#{row['entry_id']} {row['entry']}" in printed, printed
        assert str(row["mechanism"]) in printed
        if row["release_id"]:
            assert f"release {row['release_id']}" in printed and str(row["release_status"]) in printed
        for key in ("epsilon", "rho", "epsilon_priced", "epsilon_spent_after"):
            assert format(row[key], ".6g") in printed, (key, row[key], printed)


def test_the_ledger_keeps_its_wide_table_when_the_terminal_holds_it(engine, titanic,  # noqa: ANN001
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.1", seed=1)
    from service.cli import budgets

    buffer = io.StringIO()
    monkeypatch.setattr(budgets, "stdout", Console(file=buffer, width=200, force_terminal=False))
    assert runner.invoke(app, ["ledger", "titanic"]).exit_code == 0
    header = next(line for line in buffer.getvalue().splitlines() if "eps spent after" in line)
    assert all(name in header for name in ("entry", "release", "status", "mechanism", "epsilon", "delta", "rho"))


# -------------------------------------------------------------------------------------------------------------- help
def test_campaign_create_help_lists_every_registered_protocol() -> None:
    """The help listed 5 of the 8 protocols; it is now written from the protocol registry."""
    shown = runner.invoke(app, ["campaign", "create", "--help"], env={"COLUMNS": "400"})
    assert shown.exit_code == 0
    assert set(PROTOCOLS) == set(CAMPAIGN_PROTOCOLS)  # every protocol a campaign can run
    missing = [name for name in PROTOCOLS if name not in shown.output]
    assert not missing, shown.output
