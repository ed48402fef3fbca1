"""``method="auto"`` for regressions (issue 30, point 4): the method chosen from the design's domain sizes and the
budget only (service/regression/choice.py), charged exactly as the chosen method's fit, said in every answer and dry
run (service, HTTP, command line), and refused with a release id, a mechanism or settings, before anything is
charged. How well it chooses is the benchmark's (docs/regression-results.md, "method auto")."""

from __future__ import annotations

import inspect
import json
from fractions import Fraction
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.accounting import accountant
from service.api import create_app
from service.cli import app as cli_app
from service.client import Client
from service.regression import choice
from service.regression.design import RegressionInputError, build_design
from service.regression.fit import fit as fit_regression
from service.regression.fit import plan_fit
from tests.support.apihelpers import bearer
from tests.support.campaign_keys import new_key
from tests.support.datasets import titanic_with_budget

pytestmark = pytest.mark.usefixtures("fresh_answer_caches")

NARROW = ("Pclass", ["Sex", "Survived"])  # few levels: the residual plan's X^T y noise is below AdaSSP's
FARE = ("Fare", ["Pclass", "Sex", "Age"])  # two ordinal columns of 32 and 91 levels: AdaSSP's is far below


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-3")


def _design(titanic, target: str, features: list[str], task: str = "linear"):  # noqa: ANN001, ANN202
    return build_design(titanic.domain, task, target, features, None, True)


def test_the_rule_reads_the_design_and_the_budget_only(titanic) -> None:  # noqa: ANN001
    assert list(inspect.signature(choice.method_for).parameters) == ["design", "epsilon", "rho"]
    narrow, fare = _design(titanic, *NARROW), _design(titanic, *FARE)
    for design in (narrow, fare):  # both noises scale as 1 / rho: their ratio is the design's
        ratios = [v / s for v, s in (choice.noise_ratio(design, Fraction(r)) for r in ("0.01", "0.5", "8"))]
        assert ratios == pytest.approx([ratios[0]] * 3, rel=1e-9)
    low, high = (choice.method_for(narrow, Fraction(1), Fraction(1, 10)),
                 choice.method_for(fare, Fraction(1), Fraction(1, 10)))
    assert (low.method, low.rule) == ("dd-ssp", "noise-ratio")
    assert low.figures["noise_ratio"] <= choice.NOISE_RATIO_LIMIT < high.figures["noise_ratio"]
    assert (high.method, high.rule) == ("adassp", "noise-ratio") and "AdaSSP" in high.reason


def test_logistic_auto_turns_to_objpert_at_its_epsilon(titanic) -> None:  # noqa: ANN001
    design = _design(titanic, "Sex", ["Pclass", "Fare", "Survived"], "logistic")
    limit = choice.LOGISTIC_OBJPERT_FROM
    picks = [choice.method_for(design, e, Fraction(1, 10)).method for e in (limit / 10, limit - Fraction(1, 100),
                                                                            limit, 2 * limit)]
    assert picks == ["dd-ssp", "dd-ssp", "objpert", "objpert"]


def test_a_wide_design_gets_dd_ssp_from_aim() -> None:
    from workloads.domain import Domain

    wide = Domain.from_sizes({f"c{i}": 60 for i in range(16)})
    design = build_design(wide, "linear", "c0", None, None, False)
    picked = choice.method_for(design, Fraction(1), Fraction(1, 10))
    assert (picked.method, picked.rule) == ("dd-ssp", "wide-design")
    assert choice.marginal_mechanism_for(design, "dd-ssp", None, None) == "aim"


@pytest.mark.parametrize("question", [NARROW, FARE], ids=["dd-ssp", "adassp"])
def test_an_auto_fit_is_the_chosen_methods_fit_and_says_so(engine, titanic, question) -> None:  # noqa: ANN001
    target, features = question
    plan = plan_fit(engine, "titanic", "linear", target, features, None, "auto", "1", "1e-5")
    chosen = plan.auto.method
    assert plan.method == chosen and plan.to_json()["auto"] == plan.auto.to_json()
    assert plan.describe().startswith(f"auto chose {chosen}: ")
    before = accountant.budget_status(engine, "titanic")
    outcome = fit_regression(engine, "titanic", "linear", target, features, None, "auto", "1", "1e-5")
    assert outcome.method == chosen and outcome.to_json()["auto"]["method"] == chosen
    assert outcome.cost == plan.release.quote.cost  # charged as the plan said, the chosen method's release
    assert outcome.release_kind == ("marginals" if chosen == "dd-ssp" else "gram")
    assert accountant.budget_status(engine, "titanic") != before
    again = fit_regression(engine, "titanic", "linear", target, features, None, chosen, "1", "1e-5")
    assert again.reused and again.release_id == outcome.release_id  # the named method finds the same release


@pytest.mark.parametrize(("extra", "match"), [
    ({"release_id": 1, "epsilon": None, "delta": None}, "with release_id, name the method"),
    ({"mechanism": "aim"}, "takes no mechanism or options"),
    ({"options": {"rounds": 3}}, "takes no mechanism or options"),
])
def test_auto_refuses_what_it_would_choose_itself_before_charging(engine, titanic, extra, match) -> None:  # noqa: ANN001
    before = accountant.budget_status(engine, "titanic")
    arguments = {"epsilon": "1", "delta": "1e-5", **extra}
    with pytest.raises(RegressionInputError, match=match):
        fit_regression(engine, "titanic", "linear", *NARROW, method="auto", **arguments)
    assert accountant.budget_status(engine, "titanic") == before


def test_the_api_and_the_command_line_say_what_auto_chose(engine, titanic) -> None:  # noqa: ANN001
    _, analyst = new_key(engine, "analyst", "analyst")
    http = TestClient(create_app(engine))
    body = {"target": FARE[0], "features": FARE[1], "method": "auto", "epsilon": 1.0, "delta": 1e-5}
    plan = http.post("/datasets/titanic/fit/linear/plan", json=body, headers=bearer(analyst))
    assert plan.status_code == 200, plan.text
    made = http.post("/datasets/titanic/fit/linear", json=body, headers=bearer(analyst))
    assert made.status_code == 200, made.text
    assert made.json()["method"] == plan.json()["auto"]["method"] == made.json()["auto"]["method"] == "adassp"
    fitted = Client("http://testserver", analyst, http=http).fit_linear("titanic", NARROW[0], NARROW[1],
                                                                       method="auto", epsilon=1.0, delta=1e-5)
    assert fitted.method == fitted.auto["method"] == "dd-ssp" and fitted.auto["rule"] == "noise-ratio"
    runner = CliRunner()
    shown = runner.invoke(cli_app, ["fit", "linear", "titanic", "--target", NARROW[0], "--features",
                                    ",".join(NARROW[1]), "--method", "auto", "--epsilon", "1", "--delta", "1e-5",
                                    "--dry-run"])
    assert shown.exit_code == 0, shown.output
    assert "auto chose dd-ssp: the residual plan's X^T y noise is" in shown.output
    answered = runner.invoke(cli_app, ["fit", "linear", "titanic", "--target", NARROW[0], "--features",
                                       ",".join(NARROW[1]), "--method", "auto", "--epsilon", "1", "--delta", "1e-5",
                                       "--json", "--quiet"])
    assert answered.exit_code == 0, answered.output
    assert json.loads(answered.output)["auto"]["rule"] == "noise-ratio"
