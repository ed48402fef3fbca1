"""The command line of the collections: public tables, campaigns, the simulator (CSV, stored dataset, design), fits
with ``marginalia fit``'s JSON shape, caps; errors are one paragraph with exit status 2 and store nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from service.cli import app
from service.data import datasets
from tests.support.campaign_data import FEATURES
from tests.support.cli import run, runner, write_public_and_people


def fail(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_a_campaign_on_the_command_line(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate (and fitting its campaign)
    write_public_and_people(tmp_path, 30_000)
    assert run("public", "load", "pub", "--csv", str(tmp_path / "public.csv"))["rows"] == 3000
    assert [t["name"] for t in run("public", "list")] == ["pub"]
    assert len(run("public", "show", "pub", "--rows", "2")["first_rows"]) == 2
    created = run("campaign", "create", "glm", "--protocol", "stein-glm", "--features", "a,b,c", "--target", "y",
                  "--public", "pub", "--epsilon", "8", "--delta", "1e-6", "--norm-bound", "4", "--option",
                  "gram=false", "--option", "variant=paper", "--participants", "30000")
    assert created["spec"]["norm_bound"] == 4 and created["spec"]["gram"] is False
    simulated = run("simulate", "glm", "--csv", str(tmp_path / "people.csv"), "--seed", "3", "--quiet")
    assert simulated["reports"] == {"0": 30_000}
    fits = {model: run("campaign", "fit", "glm", "--model", model) for model in ("linear", "logistic", "probit")}
    for model, answer in fits.items():
        assert list(answer["coefficients"]) == [*FEATURES, "(intercept)"] and answer["campaign"] == "glm"
        assert answer["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0} and answer["model"] == model
    # Remark 16: the links differ by their constants only, so every GLM is a multiple of the OLS direction
    ols = np.array([fits["linear"]["coefficients"][f] for f in FEATURES])
    for model in ("logistic", "probit"):
        ratio = np.array([fits[model]["coefficients"][f] for f in FEATURES]) / ols
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    assert fits["logistic"]["coefficients"]["a"] > 0 > fits["logistic"]["coefficients"]["b"]
    shown = run("campaign", "show", "glm")
    assert shown["status"] == "closed" and shown["rounds"][0]["reports"] == 30_000
    assert run("campaign", "list")[0]["name"] == "glm"
    with engine.connect() as connection:
        spent = connection.execute(text("SELECT MAX(epsilon), COUNT(*) FROM participant_local_spend")).one()
    assert float(spent[0]) == 8 and int(spent[1]) == 30_000


def test_errors_name_the_parameter_and_store_nothing(engine, tmp_path: Path) -> None:  # noqa: ANN001
    error = fail("campaign", "create", "c", "--protocol", "stein-glm", "--features", "a,b", "--target", "y",
                 "--epsilon", "0", "--delta", "1e-6", "--norm-bound", "3")
    assert error["error"] == "invalid_parameter" and "epsilon" in error["message"]
    error = fail("campaign", "create", "c", "--protocol", "stein-glm", "--features", "a,b", "--target", "y",
                 "--epsilon", "1", "--delta", "1.5", "--norm-bound", "3")
    assert "delta" in error["message"]
    assert "KEY=VALUE" in fail("campaign", "create", "c", "--protocol", "ldp-avg", "--features", "a", "--epsilon",
                               "1", "--option", "lower")["message"]
    assert "no campaign named 'nope'" in fail("simulate", "nope", "--design", "gaussian", "--n", "5", "--p", "2")[
        "message"]
    run("campaign", "create", "avg", "--protocol", "ldp-avg", "--features", "v", "--epsilon", "1", "--lower", "0",
        "--upper", "10")
    assert "exactly one of --csv, --table or --design" in fail("simulate", "avg")["message"]
    assert "has no reports yet" in fail("campaign", "fit", "avg", "--model", "mean")["message"]
    assert run("campaign", "list")[0]["name"] == "avg" and len(run("campaign", "list")) == 1


def test_simulating_from_a_stored_dataset_and_closing(engine, data_dir: Path) -> None:  # noqa: ANN001
    datasets.load_coded_csv(engine, "titanic", data_dir / "titanic/titanic.csv",
                            data_dir / "titanic/titanic-domain.json", categorical=("Sex", "Embarked"))
    run("budget", "set", "titanic", "--epsilon", "10", "--delta", "1e-6")
    run("campaign", "create", "fare", "--protocol", "ldp-avg", "--features", "Fare", "--epsilon", "2", "--lower", "0",
        "--upper", "10")
    result = run("simulate", "fare", "--table", "titanic", "--rows", "500", "--quiet")
    assert result["reports"] == {"0": 500} and result["cost"]["epsilon"] == 2 and result["dataset"] == "titanic"
    renamed = run("simulate", "fare", "--table", "titanic", "--features", "Pclass", "--rows", "20", "--quiet")
    assert renamed["reports"] == {"0": 20}
    assert "dataset 'titanic' has no column 'Wealth'" in fail("simulate", "fare", "--table", "titanic", "--features",
                                                              "Wealth", "--quiet")["message"]
    mean = run("campaign", "fit", "fare", "--model", "mean")
    assert mean["reports"] == 520 and mean["kind"] == "mean"
    closed = run("campaign", "close", "fare")
    assert closed["status"] == "closed" and run("campaign", "close", "fare")["status"] == "closed"
    assert fail("simulate", "fare", "--table", "titanic", "--rows", "5")["error"] == "campaign_closed"
    assert run("budget", "show", "titanic")["epsilon_spent"] == 4  # the two runs; not the refused ones
    assert run("campaign", "cap")["epsilon"] == 10
    assert run("campaign", "cap", "--epsilon", "3", "--delta", "1e-6") == {"epsilon": 3.0, "delta": 1e-6}


def test_error_paragraphs_keep_their_brackets(engine) -> None:  # noqa: ANN001
    """A message holding ``[...]`` (a list of choices, ``E[slope(c t)]``) is printed as written, not as markup."""
    result = runner.invoke(app, ["campaign", "create", "c", "--protocol", "stein-glm", "--features", "a", "--target",
                                 "y", "--epsilon", "1", "--delta", "1e-6", "--norm-bound", "2", "--option",
                                 "norm=[bold]l3"])
    assert result.exit_code == 2
    assert "['l2', 'l1']" in " ".join(result.output.split()) and "[bold]l3" in result.output
