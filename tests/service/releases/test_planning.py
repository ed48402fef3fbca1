"""Dry runs (issue 29, section 1): a plan quotes exactly the charge its release then makes, and writes nothing.

For every mechanism and every regression method that charges, in every budget state (empty, after a pure-DP release,
after a zCDP release), the plan's ledger row (the exact integer units) and its budget effect equal those of the real
release made next, and the plan leaves the ledger, the releases, the jobs and the idempotency keys as they were. A
plan that does not fit carries the refusal the release meets, word for word. The tables are tiny (4 columns, 240
rows) so that every mechanism runs in a fraction of a second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from service.accounting import accountant
from service.errors import BudgetExceeded, InvalidInput, ServiceError
from service.mechanisms import registry
from service.regression import methods
from service.regression.fit import fit as fit_regression
from service.regression.fit import plan_fit
from service.releases import answers, planning
from service.releases import engine as release_engine
from service.releases.planning import TARGET_DIGITS
from tests.support.backends import ON_SQLITE
from tests.support.dry_runs import TINY, WORKLOAD, charge_row, load_tiny, snapshot


@dataclass(frozen=True)
class Case:
    """A charging request: its plan, and the release it plans."""

    plan: Callable[[object], object]
    run: Callable[[object], tuple[int, accountant.BudgetEffect]]


def _marginals(mechanism: str, **request: object) -> Case:
    workload = request.pop("workload", WORKLOAD)

    def plan(engine):  # noqa: ANN001, ANN202
        return planning.plan_marginals(engine, TINY, mechanism, workload, **request)

    def run(engine):  # noqa: ANN001, ANN202
        outcome = release_engine.release_marginals(engine, TINY, mechanism, workload, seed=1, **request)
        return outcome.release_id, outcome.budget

    return Case(plan, run)


def _fit(method: str, task: str, target: str, **settings: object) -> Case:
    request = {"features": ["a", "b"], "method": method, "epsilon": "1", "delta": "1e-6",
               "options": settings or None}

    def plan(engine):  # noqa: ANN001, ANN202
        return plan_fit(engine, TINY, task, target, **request)

    def run(engine):  # noqa: ANN001, ANN202
        outcome = fit_regression(engine, TINY, task, target, seed=1, **request)
        assert not outcome.reused
        return outcome.release_id, outcome.budget

    return Case(plan, run)


#: Every registered mechanism and every regression method (each makes a release when none answers it).
CASES: dict[str, Case] = {
    "laplace": _marginals("laplace", epsilon="0.5"),
    "gaussian": _marginals("gaussian", epsilon="1", delta="1e-6"),
    "residual": _marginals("residual", rho="0.02"),
    "mst": _marginals("mst", workload="all-1way", rho="0.02", options={"iters": 20}),
    "aim": _marginals("aim", epsilon="1", delta="1e-6", options={"rounds": 5, "iters": 20, "round_iters": 10}),
    "auto": _marginals("auto", epsilon="1", delta="1e-6"),  # chooses among the four from public inputs
    "fit dd-ssp": _fit("dd-ssp", "linear", "y"),
    "fit aim-synth": _fit("aim-synth", "linear", "y", rounds=5),
    "fit adassp": _fit("adassp", "linear", "y"),
    "fit objpert": _fit("objpert", "logistic", "s"),
    "fit dp-iht": _fit("dp-iht", "linear", "y", sparsity=1, iterations=3),
}
#: What a budget has spent before the request: nothing, a pure-DP release, a zCDP release (which fixed the anchor).
STATES: dict[str, Callable[[object], None]] = {
    "empty": lambda engine: None,
    "after pure DP": lambda engine: release_engine.release_marginals(engine, TINY, "laplace", [["a"]], epsilon="0.3",
                                                                     seed=2),
    "after zCDP": lambda engine: release_engine.release_marginals(engine, TINY, "gaussian", [["a"]], rho="0.01",
                                                                  seed=2),
}


def test_every_mechanism_and_method_is_covered() -> None:
    charged = {case.removeprefix("fit ") for case in CASES}
    assert set(registry.names()) - {"adassp", "objpert", "dp-iht"} <= charged  # those three are made by their fits
    assert set(methods.names()) <= charged


def _quote(plan: object) -> accountant.ChargeQuote:
    release = getattr(plan, "release", None)
    return (release if release is not None else plan).quote  # a fit's plan holds its release's


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("case", list(CASES))
def test_a_plan_quotes_exactly_the_charge_its_release_makes(engine, tmp_path: Path, case: str, state: str) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    STATES[state](engine)
    before = snapshot(engine)
    plan = CASES[case].plan(engine)
    assert snapshot(engine) == before, "a dry run wrote something"
    quote = _quote(plan)
    assert quote.fits and plan.fits
    release_id, effect = CASES[case].run(engine)
    assert quote.ledger_units() == charge_row(engine, release_id)  # the exact stored units
    assert quote.effect() == effect  # before -> after and the note, exactly
    assert quote.fixes_anchor == (state != "after zCDP" and quote.rho_units > 0)
    assert (quote.effect().note != "") == (quote.rho_units > 0 or (state == "after zCDP" and quote.epsilon_units > 0
                                                                  and quote.priced_units < quote.epsilon_units))


@pytest.mark.parametrize(("case", "delta"), [("laplace", "1e-5"), ("gaussian", "1e-5"), ("fit objpert", "1e-5"),
                                           ("fit adassp", "1e-5"), ("gaussian", "0")])
def test_a_plan_that_does_not_fit_carries_the_releases_own_refusal(engine, tmp_path: Path, case: str,
                                                                   delta: str) -> None:  # noqa: ANN001
    """Budget (0.3, delta) holds none of these requests; with delta 0 no zCDP release fits at all (no anchor)."""
    load_tiny(engine, tmp_path, epsilon="0.3", delta=delta)
    before = snapshot(engine)
    plan = CASES[case].plan(engine)
    assert snapshot(engine) == before
    assert not plan.fits and not _quote(plan).fits
    refusal = _quote(plan).refusal
    with pytest.raises(BudgetExceeded) as refused:
        CASES[case].run(engine)
    assert (refusal.code, refusal.message) == (refused.value.code, refused.value.message)
    assert refusal.code == "budget_exceeded" and plan.to_json()["refusal"] == refused.value.to_json()
    assert snapshot(engine) == before


@ON_SQLITE
def test_a_plan_without_a_budget_is_refused_as_the_release_is(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM budgets"))
    for case in ("laplace", "fit dd-ssp"):
        with pytest.raises(ServiceError) as planned:
            CASES[case].plan(engine)
        with pytest.raises(ServiceError) as released:
            CASES[case].run(engine)
        assert (planned.value.code, planned.value.message) == (released.value.code, released.value.message)
        assert planned.value.code == "no_budget"


@ON_SQLITE
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian", "residual"])
def test_the_forecast_standard_error_is_the_answers(engine, tmp_path: Path, mechanism: str) -> None:  # noqa: ANN001
    """The closed-form standard error a plan shows is the one the release's answers then carry."""
    load_tiny(engine, tmp_path)
    request = {"epsilon": "0.7"} if mechanism == "laplace" else {"epsilon": "0.7", "delta": "1e-6"}
    plan = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, **request)
    assert plan.accuracy is not None and plan.accuracy.rows == 240 and plan.accuracy_note == ""
    outcome = release_engine.release_marginals(engine, TINY, mechanism, WORKLOAD, seed=3, **request)
    for error in plan.accuracy.errors:
        answer = answers.answer_marginal(engine, outcome.release_id, list(error.attributes), allow_seeded=True)
        assert np.allclose(answer["standard_errors"], error.standard_error, rtol=1e-9)
        assert error.expected_l1_normalised(240) == pytest.approx(error.cells * error.mean_absolute_error / 240)


@ON_SQLITE
@pytest.mark.parametrize(("mechanism", "unit"), [("laplace", "epsilon"), ("gaussian", "rho")])
def test_a_plan_at_the_edge_of_vanishing_noise_is_finite_and_beyond_it_refused_as_the_release_is(
        engine, tmp_path: Path, mechanism: str, unit: str) -> None:  # noqa: ANN001
    """The canary suite's epsilon of 1e6 on one marginal made the plan route answer 500 (a kurtosis of 0/0)."""
    load_tiny(engine, tmp_path, epsilon="1000000")
    plan = planning.plan_marginals(engine, TINY, mechanism, [["s"]], **{unit: "600"})
    error = plan.accuracy.errors[0]
    assert 0 < error.mean_absolute_error < error.standard_error < 1e-100 and math.isfinite(error.excess_kurtosis)
    json.dumps(plan.to_json())
    for amount in ("800", "1000000"):
        with pytest.raises(InvalidInput, match="noise would be 0") as planned:
            planning.plan_marginals(engine, TINY, mechanism, [["s"]], **{unit: amount})
        with pytest.raises(InvalidInput) as released:
            release_engine.release_marginals(engine, TINY, mechanism, [["s"]], seed=1, **{unit: amount})
        assert planned.value.message == released.value.message


@ON_SQLITE
@pytest.mark.parametrize("mechanism", ["mst", "aim"])
def test_a_plan_says_when_no_closed_form_exists(engine, tmp_path: Path, mechanism: str) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    plan = planning.plan_marginals(engine, TINY, mechanism, "all-1way", rho="0.01")
    assert plan.accuracy is None and "no closed form" in plan.accuracy_note
    assert plan.to_json()["accuracy"] is None and "no closed form" in plan.describe()
    with pytest.raises(InvalidInput, match="closed-form accuracy"):
        planning.plan_marginals(engine, TINY, mechanism, "all-1way", delta="1e-6", target_error=0.1)


@ON_SQLITE
@pytest.mark.parametrize(("mechanism", "delta"), [("laplace", None), ("gaussian", "1e-6"), ("residual", "1e-6")])
def test_target_error_gives_the_smallest_epsilon_that_meets_it(engine, tmp_path: Path, mechanism: str,
                                                               delta: str | None) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    plan = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, delta=delta, target_error=0.2)
    target = plan.target
    assert target is not None and target.expected_error <= 0.2
    assert max(e.expected_l1_normalised(240) for e in plan.accuracy.errors) == target.expected_error
    assert len(str(float(target.epsilon)).replace(".", "").strip("0")) <= TARGET_DIGITS
    # one unit less in the last digit does not meet it: the smallest such epsilon
    digits = f"{float(target.epsilon):.{TARGET_DIGITS - 1}e}"
    mantissa, exponent = digits.split("e")
    lower = f"{float(mantissa) - 10 ** -(TARGET_DIGITS - 1):.{TARGET_DIGITS - 1}f}e{exponent}"
    below = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, epsilon=lower, delta=delta)
    assert max(e.expected_l1_normalised(240) for e in below.accuracy.errors) > 0.2
    # the plan is made at the solved epsilon: its charge is that epsilon's
    at = planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, epsilon=str(float(target.epsilon)), delta=delta)
    assert at.quote.ledger_units() == plan.quote.ledger_units()


@ON_SQLITE
def test_target_error_is_refused_with_a_reason(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    for request, fragment in (
        ({"mechanism": "gaussian", "target_error": 0.1}, "give delta"),
        ({"mechanism": "laplace", "target_error": 0.1, "epsilon": "1"}, "omit epsilon"),
        ({"mechanism": "laplace", "target_error": -1}, "positive number"),
        ({"mechanism": "laplace", "target_error": True}, "positive number"),
        ({"mechanism": "residual", "delta": "1e-6", "target_error": 1e-300}, "no epsilon up to"),
        # the discrete noise vanishes (its release refused) before so small an error is reached
        ({"mechanism": "laplace", "target_error": 1e-200}, "above it, and a release at epsilon 10000 is refused"),
    ):
        mechanism = request.pop("mechanism")
        with pytest.raises(InvalidInput, match=fragment):
            planning.plan_marginals(engine, TINY, mechanism, WORKLOAD, **request)


@ON_SQLITE
def test_a_fit_answered_by_a_stored_release_plans_no_charge(engine, tmp_path: Path) -> None:  # noqa: ANN001
    load_tiny(engine, tmp_path)
    first = fit_regression(engine, TINY, "linear", "y", ["a", "b"], method="dd-ssp", epsilon="1", delta="1e-6")
    before = snapshot(engine)
    plan = plan_fit(engine, TINY, "linear", "y", ["a", "b"], method="dd-ssp", epsilon="1", delta="1e-6")
    assert plan.answered_by == first.release_id and plan.release is None and plan.fits
    assert plan.to_json()["cost"] == {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    assert snapshot(engine) == before
