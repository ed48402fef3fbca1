"""What backs an answer: the parts a release measured and the parts its model extrapolates (marginals,
regressions), and the labels of a raw table's codes (marginals, synthetic rows; CLI, API, client)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.cli import app
from service.client import Client, ExtrapolationWarning
from service.data import datasets
from service.regression.design import ReleaseCannotAnswer
from service.regression.fit import fit as fit_regression
from service.releases import answers
from service.releases import engine as release_engine
from service.releases.coverage import coverage, measured_cliques
from tests.support.datasets import titanic_with_budget
from workloads.binning import ColumnBins

SMALL = [["Sex"], ["Pclass", "Survived"]]
SPEC = {
    "format": {"header": False, "names": ["age", "work", "income"]},
    "columns": {"age": {"kind": "ordinal", "edges": [0, 30, 60, 100]},
                "work": {"kind": "categorical", "values": ["Private", "State-gov", "?"]},
                "income": {"kind": "categorical", "values": ["<=50K", ">50K"], "strip_suffix": "."}},
}
RAW = "25, Private, <=50K\n45, State-gov, >50K.\n70, ?, <=50K\n31, Private, >50K\n" * 25


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-5")


@pytest.fixture
def raw(engine, tmp_path: Path):  # noqa: ANN001, ANN201
    (tmp_path / "raw.csv").write_text(RAW)
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))
    datasets.load_raw_csv(engine, "raw", [tmp_path / "raw.csv"], tmp_path / "spec.json")
    accountant.set_budget(engine, "raw", "100", "1e-5")
    return release_engine.release_marginals(engine, "raw", "gaussian", "all-2way", rho="1")


# coverage of marginals ------------------------------------------------------------------------------
def test_a_marginal_says_what_its_release_measured(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.5").release_id
    measured = answers.answer_marginal(engine, release, ["Survived", "Pclass"])["coverage"]
    assert measured == {"measured": True, "measured_cliques": [["Survived", "Pclass"]], "unmeasured_attributes": [],
                        "unmeasured_pairs": [], "warning": None}
    guessed = answers.answer_marginal(engine, release, ["Survived", "Sex"])["coverage"]
    assert not guessed["measured"] and guessed["unmeasured_pairs"] == [["Survived", "Sex"]]
    assert "extrapolation" in guessed["warning"] and f"release {release}" in guessed["warning"]
    unknown = answers.answer_marginal(engine, release, ["Age"])["coverage"]
    assert unknown["unmeasured_attributes"] == ["Age"] and "never measured" in unknown["warning"]


def test_measured_cliques_by_mechanism() -> None:
    names = ("a", "b", "c", "d")
    workload = {"workload": [{"attributes": ["a", "b"], "weight": 1}, {"attributes": ["c", "d"], "weight": 1}]}
    # a direct release: only what its model was fitted to (a measured marginal left out of the model does not count)
    assert measured_cliques("gaussian", workload, {"model_cliques": [["a", "b"]]}, names) == [("a", "b")]
    # MST: every 1-way marginal and its tree
    assert measured_cliques("mst", {"workload": []}, {"tree": [["a", "c"]]}, names) == [
        ("a",), ("a", "c"), ("b",), ("c",), ("d",)]
    # AIM: its workload, its initial cliques and what it selected
    aim = measured_cliques("aim", workload, {"initial_cliques": [["a"]], "selected": [["b", "c"]]}, names)
    assert aim == [("a",), ("a", "b"), ("b", "c"), ("c", "d")]
    three = coverage(7, aim, ["a", "b", "c"])
    assert not three.measured and three.unmeasured_pairs == (("a", "c"),) and three.unmeasured_attributes == ()
    assert coverage(7, [("a", "b"), ("b", "c"), ("a", "c")], ["a", "b", "c"]).warning().endswith(
        "never all of them together (their joint dependence is the model's extrapolation)")


def test_the_cli_and_the_client_warn_about_extrapolated_marginals(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.5").release_id
    shown = CliRunner().invoke(app, ["marginal", str(release), "Survived", "Sex"])
    assert shown.exit_code == 0 and "warning" in shown.stderr and "extrapolation" in shown.stderr
    quiet = CliRunner().invoke(app, ["marginal", str(release), "Pclass", "Survived"])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    _, key = auth.create_key(engine, "analyst", "ada")
    analyst = Client("http://testserver", key, http=TestClient(create_app(engine)))
    with pytest.warns(ExtrapolationWarning, match="Survived"):
        table = analyst.marginal(release, ["Survived", "Sex"])
    assert table.attrs["coverage"]["unmeasured_pairs"] == [["Survived", "Sex"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analyst.marginal(release, ["Pclass", "Survived"])


# regressions refuse unmeasured pairs ---------------------------------------------------------------------
def test_dd_ssp_from_a_release_that_never_measured_its_pairs_is_refused(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.5").release_id
    with pytest.raises(ReleaseCannotAnswer, match=r"Fit anyway with allow_unmeasured") as refused:
        fit_regression(engine, "titanic", "linear", "Fare", ["Age", "Sex"], release_id=release)
    assert "['Fare', 'Age']" in refused.value.message or "never measured" in refused.value.message
    fitted = fit_regression(engine, "titanic", "linear", "Fare", ["Age", "Sex"], release_id=release,
                            allow_unmeasured=True)
    assert fitted.details["coverage"]["unmeasured_attributes"] == ["Age", "Fare"]
    assert any("extrapolation" in note for note in fitted.notes)
    # the slopes on never-measured columns are what the issue saw: no information at all
    assert np.all(np.abs(fitted.model.coef_) < 1e-6)
    # a covered question is answered without notes
    covered = fit_regression(engine, "titanic", "linear", "Pclass", ["Survived"], release_id=release)
    assert covered.details["coverage"]["measured"] and covered.notes == ()


def test_the_cli_and_the_api_refuse_unless_asked(engine, titanic) -> None:  # noqa: ANN001
    release = release_engine.release_marginals(engine, "titanic", "gaussian", SMALL, rho="0.5").release_id
    args = ["fit", "linear", "titanic", "--target", "Fare", "--features", "Age,Sex", "--release", str(release),
            "--json", "--quiet"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and json.loads(refused.stdout)["error"] == "release_cannot_answer"
    allowed = CliRunner().invoke(app, [*args, "--allow-unmeasured"])
    assert allowed.exit_code == 0 and json.loads(allowed.stdout)["details"]["coverage"]["unmeasured_pairs"]
    _, key = auth.create_key(engine, "analyst", "ada")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    body = {"target": "Fare", "features": ["Age", "Sex"], "release": release}
    answer = client.post("/datasets/titanic/fit/linear", json=body, headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 422 and answer.json()["error"] == "release_cannot_answer"
    answer = client.post("/datasets/titanic/fit/linear", json={**body, "allow_unmeasured": True},
                         headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200 and answer.json()["notes"]


def test_a_reused_release_says_the_mechanism_asked_for_was_not_used(engine, titanic) -> None:  # noqa: ANN001
    first = fit_regression(engine, "titanic", "linear", "Fare", ["Pclass"], epsilon="1", delta="1e-5",
                           mechanism="gaussian")
    again = fit_regression(engine, "titanic", "linear", "Fare", ["Pclass"], epsilon="1", delta="1e-5",
                           mechanism="mst")
    assert again.reused and again.release_id == first.release_id
    assert any("mechanism 'mst' applies only to a new release" in note for note in again.notes)


# labels of raw tables -------------------------------------------------------------------------------------
def test_bins_have_labels() -> None:
    assert ColumnBins("age", "ordinal", edges=(0, 30, 60, 100)).labels == ("[0, 30)", "[30, 60)", "[60, 100]")
    assert ColumnBins("x", "ordinal", edges=(float("-inf"), 0.5, float("inf"))).labels == (
        "[-inf, 0.5)", "[0.5, inf]")
    assert ColumnBins("w", "categorical", values=("a", "b")).labels == ("a", "b")


def test_raw_tables_answer_with_their_labels(engine, raw) -> None:  # noqa: ANN001
    answer = answers.answer_marginal(engine, raw.release_id, ["work", "age"])
    assert answer["labels"] == {"work": ["Private", "State-gov", "?"], "age": ["[0, 30)", "[30, 60)", "[60, 100]"]}
    sample = answers.synthetic_frame(engine, raw.release_id, 200, seed=1, labels=True)
    assert set(sample["income"]) <= {"<=50K", ">50K"} and set(sample["age"]) <= set(answer["labels"]["age"])
    codes = answers.synthetic_frame(engine, raw.release_id, 5, seed=1)
    assert codes["income"].dtype.kind == "i"
    # the CLI shows them in marginals and writes them in synthetic rows (codes on request)
    shown = CliRunner().invoke(app, ["marginal", str(raw.release_id), "income", "--json"])
    assert json.loads(shown.stdout)["labels"] == {"income": ["<=50K", ">50K"]}
    table = CliRunner().invoke(app, ["marginal", str(raw.release_id), "age", "work"], env={"COLUMNS": "200"})
    assert "[30, 60)" in table.stdout and "State-gov" in table.stdout


def test_the_cli_writes_labels_and_the_api_and_client_give_them(engine, raw, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "rows.csv"
    written = CliRunner().invoke(app, ["synth", str(raw.release_id), "--rows", "50", "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert set(out.read_text().splitlines()[1:]) <= {f"{a},{w},{i}" for a in ("[0, 30)", "[30, 60)", "[60, 100]")
                                                     for w in ("Private", "State-gov", "?") for i in ("<=50K", ">50K")
                                                     } | {f'"{a}",{w},{i}' for a in ("[0, 30)", "[30, 60)",
                                                                                       "[60, 100]")
                                                          for w in ("Private", "State-gov", "?")
                                                          for i in ("<=50K", ">50K")}
    as_codes = CliRunner().invoke(app, ["synth", str(raw.release_id), "--rows", "5", "--out", str(out), "--codes",
                                        "--force"])
    assert as_codes.exit_code == 0 and out.read_text().splitlines()[1].replace(",", "").isdigit()
    _, key = auth.create_key(engine, "analyst", "ada")
    http = TestClient(create_app(engine))
    body = http.post(f"/releases/{raw.release_id}/synthetic", json={"rows": 5},
                     headers={"Authorization": f"Bearer {key}"}).json()
    # issue 29 section 4: the rows hold the labels by default (were codes), and `codes` gives the codes alone
    assert body["labels"]["work"] == ["Private", "State-gov", "?"] and set(body["data"]["work"]) <= {
        "Private", "State-gov", "?"}
    coded = http.post(f"/releases/{raw.release_id}/synthetic", json={"rows": 5, "codes": True},
                      headers={"Authorization": f"Bearer {key}"}).json()
    assert coded["labels"] == {} and all(isinstance(c, int) for c in coded["data"]["work"])
    assert body["cost"] == coded["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert http.get("/datasets/raw", headers={"Authorization": f"Bearer {key}"}).json()["labels"]["income"] == [
        "<=50K", ">50K"]
    client = Client("http://testserver", key, http=http)
    assert set(client.synthetic(raw.release_id, rows=20)["income"]) <= {"<=50K", ">50K"}
    assert set(client.synthetic(raw.release_id, rows=20, labels=False)["income"]) <= {0, 1}
    table = client.marginal(raw.release_id, ["income", "work"])
    assert list(table["income"].unique()) == ["<=50K", ">50K"] and table["count"].sum() == pytest.approx(100, abs=60)


# seeded releases (issue 11): coverage and labels never open a way around the refusal ---------------------------
def test_a_seeded_release_answers_with_coverage_and_labels_only_where_seeds_are_allowed(engine, raw) -> None:  # noqa: ANN001
    seeded = release_engine.release_marginals(engine, "raw", "gaussian", [["age", "work"]], rho="1", seed=1).release_id
    with pytest.raises(answers.SeededReleaseError):
        answers.answer_marginal(engine, seeded, ["work", "income"])
    with pytest.raises(answers.SeededReleaseError):
        answers.synthetic_frame(engine, seeded, 5, labels=True)
    with pytest.raises(answers.SeededReleaseError):  # the seed is refused before coverage could allow anything
        fit_regression(engine, "raw", "linear", "age", ["work", "income"], release_id=seeded, allow_unmeasured=True)
    # in-process tests and benchmarks that allow it get the same answer as from any release
    answer = answers.answer_marginal(engine, seeded, ["work", "income"], allow_seeded=True)
    assert answer["coverage"]["unmeasured_attributes"] == ["income"] and answer["labels"]["work"][0] == "Private"
    assert set(answers.synthetic_frame(engine, seeded, 5, labels=True, allow_seeded=True)["income"]) <= {
        "<=50K", ">50K"}
    # the command line: refused, unless the unsafe switch is on; then the coverage warning is printed as usual
    refused = CliRunner().invoke(app, ["marginal", str(seeded), "work", "income", "--json"])
    assert refused.exit_code == 2 and json.loads(refused.stdout)["error"] == "seeded_release"
    allowed = CliRunner().invoke(app, ["marginal", str(seeded), "work", "income"],
                                 env={"MARGINALIA_UNSAFE_SEEDED_RELEASES": "1", "COLUMNS": "200"})
    assert allowed.exit_code == 0 and "State-gov" in allowed.stdout and "never measured" in allowed.stderr
    # HTTP: 409, with nothing of the answer (no coverage, no labels, no counts)
    _, key = auth.create_key(engine, "analyst", "ada")
    http = TestClient(create_app(engine), raise_server_exceptions=False)
    for route, body in (("marginal", {"attributes": ["work", "income"]}), ("synthetic", {"rows": 5})):
        response = http.post(f"/releases/{seeded}/{route}", json=body, headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 409 and set(response.json()) == {"error", "message"}, response.text
