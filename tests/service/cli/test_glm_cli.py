"""The ``glm`` campaign on the command line: a public table, ``campaign create --protocol glm``, ``simulate``,
``campaign fit`` for two links from one collection, with an intercept and standard errors; a bad option is one
paragraph naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import app
from tests.support.cli import run, runner, write_public_and_people


@pytest.mark.slow
def test_glm_on_the_command_line(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("MARGINALIA_UNSAFE_SEEDED_RELEASES", "1")  # --seed on simulate (and fitting its campaign)
    write_public_and_people(tmp_path, 20_000)
    run("public", "load", "pub", "--csv", str(tmp_path / "public.csv"))
    created = run("campaign", "create", "moments", "--protocol", "glm", "--features", "a,b,c", "--target", "y",
                  "--public", "pub", "--epsilon", "4", "--participants", "20000")
    assert created["spec"]["randomizer"] == "privunit" and created["delta"] == 0.0
    assert len(created["spec"]["center"]) == 3 and len(created["spec"]["matrix"]) == 3  # public constants, published
    run("simulate", "moments", "--csv", str(tmp_path / "people.csv"), "--seed", "3", "--quiet")
    fit = run("campaign", "fit", "moments", "--model", "logistic")
    assert list(fit["coefficients"]) == ["a", "b", "c", "(intercept)"] and fit["cost"]["epsilon"] == 0.0
    assert set(fit["standard_errors"]) == set(fit["coefficients"]) and fit["kind"] == "classifier"
    for name, value in zip(["a", "b", "c", "(intercept)"], [1.0, -1.0, 0.5, 0.0], strict=True):
        assert abs(fit["coefficients"][name] - value) < 4 * fit["standard_errors"][name], name
    assert run("campaign", "fit", "moments", "--model", "probit")["model"] == "probit"
    human = runner.invoke(app, ["campaign", "fit", "moments", "--model", "linear"])
    assert human.exit_code == 0 and "(intercept)" in human.output
    # issue 29 section 7: no bound is derived for glm; the fit says what that means instead of "see --json"
    assert "see --json" not in human.output and "forged report" in " ".join(human.output.split())
    assert any("no bound on how far one report can move" in note for note in fit["notes"])

    bad = runner.invoke(app, ["campaign", "create", "bad", "--protocol", "glm", "--features", "a,b,c", "--target",
                              "y", "--public", "pub", "--epsilon", "1", "--option", "randomizer=gaussian"])
    assert bad.exit_code == 2 and ("protocol 'glm': delta must be in (0, 1) with the gaussian randomizer"
                                   in " ".join(bad.output.split()))
    assert "Traceback" not in bad.output
