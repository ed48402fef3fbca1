"""Error bars on the marginals of graphical-model releases (issue 29): a marginal MST or AIM measured gets its
measurement's standard error, one they did not measure a parametric bootstrap on request (stored once), and a release
stored before the measurements were kept still answers, without error bars. Through the service, the CLI, the
HTTP route (the roles that may ask, and those refused), the client, and a statistical check of the bootstrap
against repeated releases."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text, update
from typer.testing import CliRunner

from db.engine import transaction
from db.models import Release
from estimators.graphical import bootstrap, mbi_adapter
from estimators.graphical.mirror_descent import Measurement
from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.cli import app
from service.client import Client, ExtrapolationWarning
from service.data import datasets
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget
from workloads.domain import Domain

WORKLOAD = [["Sex", "Pclass"], ["Pclass", "Survived"]]


pytestmark = pytest.mark.usefixtures("fresh_answer_caches")


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")

def _aim(engine, seed: int = 3) -> int:  # noqa: ANN001
    return release_engine.release_marginals(engine, "titanic", "aim", WORKLOAD, rho="0.5", seed=seed).release_id


def test_a_measured_marginal_of_aim_and_mst_gets_its_measurements_standard_error(engine, titanic) -> None:  # noqa: ANN001
    """The stored noise scales give the answer's SE: summed cells add variances, measurements combine by inverse
    variance (on main an MST or AIM answer had standard_errors null)."""
    for mechanism in ("aim", "mst"):
        release = release_engine.release_marginals(engine, "titanic", mechanism, WORKLOAD, rho="0.5", seed=2)
        stored = answers.get_release(engine, release.release_id).payload
        measurements = mbi_adapter.measurements_from_bytes(stored)
        assert measurements and all(m.stddev > 0 for m in measurements)
        pair = next(m for m in measurements if len(m.attributes) == 2)
        answer = answers.answer_marginal(engine, release.release_id, list(pair.attributes), allow_seeded=True)
        assert answer["error_basis"] == "measurement"
        containing = [m for m in measurements if set(pair.attributes) <= set(m.attributes)]
        expected = sum(m.stddev ** -2 for m in containing) ** -0.5
        assert np.allclose(answer["standard_errors"], expected)
        one = pair.attributes[0]
        oneway = answers.answer_marginal(engine, release.release_id, [one], allow_seeded=True)
        cells = titanic.domain.cells
        precision = sum(1 / (m.stddev ** 2 * cells(m.attributes) / cells((one,)))
                        for m in measurements if one in m.attributes)
        assert np.allclose(oneway["standard_errors"], precision ** -0.5)
        assert np.shape(oneway["standard_errors"]) == tuple(oneway["shape"])


def test_measured_standard_error_sums_cells_and_pools_measurements() -> None:
    domain = Domain.from_sizes({"a": 2, "b": 3})
    measurements = [Measurement(("a", "b"), np.zeros((2, 3)), 2.0), Measurement(("a",), np.zeros(2), 3.0),
                    Measurement(("a", "b"), np.zeros((2, 3)), 2.0)]
    # (a, b) twice: 1/4 + 1/4; a: those summed over 3 cells (variance 12 each) and its own 9
    assert bootstrap.measured_standard_error(domain, measurements, ("b", "a")) == pytest.approx(math.sqrt(2))
    assert bootstrap.measured_standard_error(domain, measurements, ("a",)) == pytest.approx(
        (2 / 12 + 1 / 9) ** -0.5)
    assert bootstrap.measured_standard_error(domain, measurements[1:2], ("b",)) is None


def test_an_unmeasured_marginal_gets_a_bootstrap_on_request_stored_once(engine, titanic, small_bootstrap) -> None:  # noqa: ANN001
    release = _aim(engine)
    question = ["Sex", "Survived"]  # AIM measured Sex x Pclass and Pclass x Survived at most
    plain = answers.answer_marginal(engine, release, question, allow_seeded=True)
    assert not plain["coverage"]["measured"]
    assert plain["standard_errors"] is None and plain["error_basis"] == "none"
    asked = answers.answer_marginal(engine, release, question, allow_seeded=True, bootstrap=True, bootstrap_seed=5)
    assert asked["error_basis"] == f"parametric bootstrap, {bootstrap.DEFAULT_REPLICATES} replicates"
    errors = np.asarray(asked["standard_errors"])
    assert errors.shape == tuple(asked["shape"]) and np.all(errors > 0)
    assert asked["counts"] == plain["counts"]  # the bootstrap changes the error bars, never the answer
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM release_bootstraps")).scalar_one() == 1
    answers.clear_caches()  # another process: reads the stored replicates, whatever seed it would have used
    again = answers.answer_marginal(engine, release, question, allow_seeded=True, bootstrap=True, bootstrap_seed=99)
    assert np.allclose(again["standard_errors"], errors)
    measured = answers.answer_marginal(engine, release, ["Pclass"], allow_seeded=True, bootstrap=True)
    assert measured["error_basis"] == "measurement"  # a measured marginal keeps its measurement's error


def test_a_release_stored_before_its_measurements_were_kept_answers_without_error_bars(engine, titanic) -> None:  # noqa: ANN001
    release = _aim(engine)
    model = mbi_adapter.model_from_bytes(answers.get_release(engine, release).payload, titanic.domain)
    with transaction(engine) as session:  # the payload as MST and AIM stored it before issue 29 (format 2)
        session.execute(update(Release).where(Release.id == release).values(payload=mbi_adapter.model_to_bytes(model)))
    for question in (["Pclass"], ["Sex", "Survived"]):
        answer = answers.answer_marginal(engine, release, question, allow_seeded=True, bootstrap=True)
        assert answer["standard_errors"] is None and answer["error_basis"] == "none"
        assert np.all(np.isfinite(answer["counts"]))


def test_a_residual_release_states_its_basis(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", WORKLOAD, rho="0.5").release_id
    inside = answers.answer_marginal(engine, release, ["Sex", "Pclass"])
    outside = answers.answer_marginal(engine, release, ["Sex", "Survived"], bootstrap=True)
    assert inside["error_basis"] == "measurement" and inside["standard_errors"] is not None
    assert outside["error_basis"] == "none" and outside["standard_errors"] is None


def test_the_cli_prints_the_standard_errors_and_their_basis(engine, titanic, small_bootstrap) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "aim", WORKLOAD, rho="0.5").release_id
    runner = CliRunner()
    measured = runner.invoke(app, ["marginal", str(release), "Pclass"])
    assert measured.exit_code == 0, measured.output
    assert "standard error of each cell (from the release's measurements" in _words(measured.output)
    plain = runner.invoke(app, ["marginal", str(release), "Sex", "Survived"])
    assert plain.exit_code == 0 and "--bootstrap gives them" in _words(plain.output)
    asked = runner.invoke(app, ["marginal", str(release), "Sex", "Survived", "--bootstrap"])
    assert asked.exit_code == 0, asked.output
    assert f"standard error of each cell (parametric bootstrap, {bootstrap.DEFAULT_REPLICATES} replicates)" in \
        _words(asked.output)
    body = json.loads(runner.invoke(app, ["marginal", str(release), "Sex", "Survived", "--bootstrap",
                                          "--json"]).output)
    assert body["error_basis"].startswith("parametric bootstrap") and np.all(np.asarray(body["standard_errors"]) > 0)


def _words(output: str) -> str:
    return " ".join(output.split())  # the console wraps lines at its width


@pytest.mark.slow
def test_the_bootstrap_standard_error_matches_the_spread_over_repeated_releases(engine, tmp_path: Path) -> None:  # noqa: ANN001
    """On a small table with a dependence MST measures on a chain (a-b, b-c), the bootstrap SE of the unmeasured
    a x c marginal is within a factor 2 of the empirical SD of that marginal over 12 repeated releases."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 4000)
    b = np.where(rng.random(4000) < 0.8, a, 1 - a)
    c = np.where(rng.random(4000) < 0.8, b, 1 - b)
    (tmp_path / "t.csv").write_text("a,b,c\n" + "\n".join(f"{x},{y},{z}" for x, y, z in zip(a, b, c, strict=True)))
    (tmp_path / "t.json").write_text(json.dumps({"a": 2, "b": 2, "c": 2}))
    datasets.load_coded_csv(engine, "chain", tmp_path / "t.csv", tmp_path / "t.json", ())
    accountant.set_budget(engine, "chain", "1000", "1e-5")
    values, bootstrap_errors = [], []
    for seed in range(12):
        release = release_engine.release_marginals(engine, "chain", "aim", [["a", "b"], ["b", "c"]],
                                                   rho=Fraction(1, 50), seed=seed).release_id
        answer = answers.answer_marginal(engine, release, ["a", "c"], allow_seeded=True, bootstrap=seed < 2,
                                         bootstrap_seed=seed)
        assert not answer["coverage"]["measured"]
        values.append(np.asarray(answer["counts"]))
        if seed < 2:
            bootstrap_errors.append(np.asarray(answer["standard_errors"]))
    empirical = np.stack(values).std(axis=0, ddof=1)
    ratio = np.mean(bootstrap_errors, axis=0) / empirical
    assert np.all((ratio > 0.5) & (ratio < 2.0)), (ratio, empirical)


def test_the_marginal_route_and_the_client_answer_error_bars(engine, titanic, small_bootstrap) -> None:  # noqa: ANN001
    """Analysts and stewards get the standard errors and their basis (``bootstrap`` in the body); an auditor, a
    participant and a gateway are refused (403) and nothing is computed for them."""
    release = release_engine.release_marginals(engine, "titanic", "aim", WORKLOAD, rho="0.5").release_id
    roles = ("steward", "analyst", "auditor", "participant", "gateway")
    keys = {role: auth.create_key(engine, role, f"test {role}")[1] for role in roles}
    http = TestClient(create_app(engine), raise_server_exceptions=False)
    path = f"/releases/{release}/marginal"
    for role in ("auditor", "participant", "gateway"):
        refused = http.post(path, json={"attributes": ["Sex", "Survived"], "bootstrap": True},
                            headers={"Authorization": f"Bearer {keys[role]}"})
        assert refused.status_code == 403, refused.text
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM release_bootstraps")).scalar_one() == 0
    for role in ("steward", "analyst"):
        headers = {"Authorization": f"Bearer {keys[role]}"}
        measured = http.post(path, json={"attributes": ["Pclass"]}, headers=headers).json()
        assert measured["error_basis"] == "measurement" and np.all(np.asarray(measured["standard_errors"]) > 0)
        plain = http.post(path, json={"attributes": ["Sex", "Survived"]}, headers=headers).json()
        assert plain["error_basis"] == "none" and plain["standard_errors"] is None
        asked = http.post(path, json={"attributes": ["Sex", "Survived"], "bootstrap": True}, headers=headers).json()
        assert asked["error_basis"] == "parametric bootstrap, 4 replicates"
        assert np.shape(asked["standard_errors"]) == tuple(asked["shape"])
    bad = http.post(path, json={"attributes": ["Sex"], "bootstrap": "yes"},
                    headers={"Authorization": f"Bearer {keys['analyst']}"})
    assert bad.status_code == 422
    client = Client("http://testserver", keys["analyst"], http=TestClient(create_app(engine)))
    with pytest.warns(ExtrapolationWarning):
        frame = client.marginal(release, ["Sex", "Survived"], bootstrap=True)
    expected = answers.answer_marginal(engine, release, ["Sex", "Survived"], bootstrap=True)
    assert frame.attrs["error_basis"] == expected["error_basis"]
    assert np.allclose(frame["standard_error"], np.asarray(expected["standard_errors"]).ravel())
    with pytest.warns(ExtrapolationWarning):
        plain_frame = client.marginal(release, ["Sex", "Survived"])
    assert "standard_error" not in plain_frame.columns and plain_frame.attrs["error_basis"] == "none"
