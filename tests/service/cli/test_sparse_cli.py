"""The sparse-regression campaigns on the command line (create, simulate, campaign fit)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from service.cli import app

runner = CliRunner()


def run(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_ldp_iht_and_label_ldp_on_the_command_line(engine, tmp_path: Path,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate: tests only
    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 1.0], size=(3000, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=x @ [0.6, 0.0, -0.8])
    frame.to_csv(tmp_path / "people.csv", index=False)
    created = run("campaign", "create", "iht", "--protocol", "ldp-iht", "--features", "a,b,c", "--target", "y",
                  "--epsilon", "2", "--participants", "3000", "--option", "sparsity=2", "--option", "rounds=3")
    assert created["spec"]["steps"] == 3 and [r["expected_reports"] for r in created["rounds"]] == [1000] * 3
    assert run("simulate", "iht", "--csv", str(tmp_path / "people.csv"), "--seed", "1", "--quiet")["reports"] == {
        "0": 1000, "1": 1000, "2": 1000}
    fit = run("campaign", "fit", "iht", "--model", "iht")
    assert list(fit["coefficients"]) == ["a", "b", "c", "(intercept)"] and fit["details"]["rounds_used"] == 3
    assert fit["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}

    frame[["a", "b", "c"]].to_csv(tmp_path / "public.csv", index=False)
    run("public", "load", "pub", "--csv", str(tmp_path / "public.csv"))
    run("campaign", "create", "labels", "--protocol", "label-ldp", "--features", "a,b,c", "--target", "y",
        "--public", "pub", "--epsilon", "2", "--delta", "1e-6", "--option", "sparsity=2", "--option",
        "standardize=false")
    run("simulate", "labels", "--csv", str(tmp_path / "people.csv"), "--seed", "2", "--quiet")
    for model in ("iht", "lasso"):
        assert run("campaign", "fit", "labels", "--model", model)["model"] == model

    bad = runner.invoke(app, ["campaign", "create", "bad", "--protocol", "ldp-iht", "--features", "a,b,c",
                              "--target", "y", "--epsilon", "1", "--option", "sparsity=2", "--option", "eta=0",
                              "--option", "rounds=2"])
    assert bad.exit_code == 2 and "option eta must be a finite positive number" in bad.output
    assert "Traceback" not in bad.output


def test_linear_ssp_on_the_command_line(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Create (norm bound from the public table), simulate, fit with an intercept and standard errors; a delta with
    the pure default randomizer is refused naming it."""
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate: tests only
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4000, 2))
    frame = pd.DataFrame(x, columns=["a", "b"]).assign(y=0.5 + x @ [0.3, -0.2])
    frame.to_csv(tmp_path / "people.csv", index=False)
    frame[["a", "b"]].to_csv(tmp_path / "public.csv", index=False)
    run("public", "load", "pub", "--csv", str(tmp_path / "public.csv"))
    created = run("campaign", "create", "ssp", "--protocol", "linear-ssp", "--features", "a,b", "--target", "y",
                  "--public", "pub", "--epsilon", "4", "--participants", "4000", "--option", "label_bound=2")
    assert created["spec"]["randomizer"] == "l2ball" and created["delta"] == 0
    assert run("simulate", "ssp", "--csv", str(tmp_path / "people.csv"), "--seed", "1", "--quiet")["reports"] == {
        "0": 4000}
    fit = run("campaign", "fit", "ssp", "--model", "linear")
    assert list(fit["coefficients"]) == ["a", "b", "(intercept)"] and fit["protocol"] == "linear-ssp"
    assert set(fit["standard_errors"]) == {"a", "b", "(intercept)"} and min(fit["standard_errors"].values()) > 0
    assert fit["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    bad = runner.invoke(app, ["campaign", "create", "bad", "--protocol", "linear-ssp", "--features", "a,b",
                              "--target", "y", "--public", "pub", "--epsilon", "1", "--delta", "1e-6"])
    assert bad.exit_code == 2 and ("protocol 'linear-ssp': delta must be 0 with the l2ball randomizer"
                                   in " ".join(bad.output.split()))
    assert "Traceback" not in bad.output
