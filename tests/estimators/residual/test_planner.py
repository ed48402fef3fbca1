"""ResidualPlanner's plan (estimators/residual/planner.py): exact zCDP cost, the closed form against cvxpy, the
max-variance program, the variances it reports, and its errors."""

from __future__ import annotations

import itertools
import json
import math
from decimal import Decimal
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

from estimators.residual.basis import ResidualError, residual_sensitivity
from estimators.residual.planner import KroneckerQuery, ResidualPlan, direct_residual_variances, plan_residuals
from estimators.residual.reconstruct import NoisyMarginal, residuals_from_marginals
from tests.support.paths import DATA
from workloads.domain import Domain
from workloads.marginals import Query


@pytest.fixture(scope="module")
def titanic() -> Domain:
    return Domain.from_sizes(json.loads((DATA / "titanic" / "titanic-domain.json").read_text()))


def _all_pairs(domain: Domain) -> list[tuple[str, ...]]:
    return list(itertools.combinations(domain.names, 2))


@pytest.mark.parametrize("rho", [Fraction(1, 10), 0.030557, 2, "0.5", Decimal("0.0004329"), Fraction(7, 3)])
@pytest.mark.parametrize("loss", ["sum_var", "max_var", "max_var_floor"])
def test_the_plan_costs_exactly_rho(titanic: Domain, rho: object, loss: str) -> None:
    plan = plan_residuals(titanic, _all_pairs(titanic), rho, loss=loss)
    expected = Fraction(rho)
    assert plan.rho == expected
    assert plan.cost() == expected  # exact rational arithmetic, no tolerance
    assert all(isinstance(v, Fraction) and v > 0 for v in plan.variances)
    assert sum(plan.residual_cost(r) for r in plan.residuals) == expected


def test_the_plan_covers_the_downward_closure(titanic: Domain) -> None:
    plan = plan_residuals(titanic, [("Survived", "Pclass", "Sex"), ("Age",)], Fraction(1))
    assert set(plan.residuals) == {
        (), ("Survived",), ("Pclass",), ("Sex",), ("Age",),
        ("Survived", "Pclass"), ("Survived", "Sex"), ("Pclass", "Sex"), ("Survived", "Pclass", "Sex"),
    }  # fmt: skip
    assert plan.maximal() == (("Age",), ("Survived", "Pclass", "Sex"))
    assert plan.sensitivity(("Survived", "Sex")) == Fraction(2, 3) * Fraction(1, 2)


def test_sampling_sigma_is_rounded_up(titanic: Domain) -> None:
    plan = plan_residuals(titanic, _all_pairs(titanic), Fraction(1, 3))
    for residual in plan.residuals:
        sigma = plan.sigma(residual)
        assert Fraction(sigma) ** 2 >= plan.variance(residual)
        assert Fraction(math.nextafter(sigma, 0)) ** 2 < plan.variance(residual)


def _cvxpy_sum_var(plan: ResidualPlan) -> tuple[float, np.ndarray]:
    """The sum-of-variances program solved numerically, for comparison with the closed form."""
    p = np.array([float(plan.sensitivity(r)) for r in plan.residuals])
    cells = {c: plan.domain.cells(c) for c, _ in plan.workload}
    # the loss is linear in u: recover its coefficients from the plan's own cell variances
    u = cp.Variable(len(p), pos=True)
    coefficients = np.zeros(len(p))
    for i, r in enumerate(plan.residuals):
        for clique, weight in plan.workload:
            if set(r) <= set(clique):
                divisor = math.prod(plan.domain.size(a) for a in clique if a not in r)
                coefficients[i] += weight * cells[clique] * p[i] / divisor**2
    problem = cp.Problem(cp.Minimize(coefficients @ u), [(p / 2) @ cp.inv_pos(u) <= float(plan.rho)])
    problem.solve(solver=cp.CLARABEL)
    assert problem.status == cp.OPTIMAL
    return float(problem.value), np.asarray(u.value)


@pytest.mark.parametrize("weights", ["equal", "unequal"])
def test_the_sum_of_variances_closed_form_is_the_convex_optimum(titanic: Domain, weights: str) -> None:
    pairs = _all_pairs(titanic)[:12]
    workload = [Query(p, 1.0 if weights == "equal" else 1.0 + (i % 4)) for i, p in enumerate(pairs)]
    plan = plan_residuals(titanic, workload, Fraction(1, 20))
    value, u = _cvxpy_sum_var(plan)
    assert plan.loss_value() == pytest.approx(value, rel=1e-6)
    assert np.allclose([float(v) for v in plan.variances], u, rtol=1e-3)
    # and the optimal loss is T^2 / (2 rho) with T = sum sqrt(p_A v_A)  (module docstring)
    assert plan.loss_value() >= value * (1 - 1e-9)


def test_max_variance_equalises_symmetric_marginals_and_beats_the_sum_plan(titanic: Domain) -> None:
    workload = [("Survived", "Pclass"), ("Pclass", "Embarked"), ("Survived", "Embarked")]  # sizes 3, 3, 3
    plan = plan_residuals(titanic, workload, Fraction(1, 10), loss="max_var")
    assert plan.solver.startswith("cvxpy")
    variances = [plan.cell_variance(w) for w in workload]
    assert max(variances) == pytest.approx(min(variances), rel=1e-5)
    assert plan.loss_value() == pytest.approx(max(variances), rel=1e-9)
    wide = _all_pairs(titanic)
    max_plan = plan_residuals(titanic, wide, Fraction(1, 10), loss="max_var")
    sum_plan = plan_residuals(titanic, wide, Fraction(1, 10), loss="sum_var")
    assert max(max_plan.cell_variance(w) for w in wide) < max(sum_plan.cell_variance(w) for w in wide)
    assert sum(titanic.cells(w) * sum_plan.cell_variance(w) for w in wide) < sum(
        titanic.cells(w) * max_plan.cell_variance(w) for w in wide
    )


def test_for_one_marginal_both_losses_agree(titanic: Domain) -> None:
    """With one marginal every cell has the same variance, so max and sum of variances have the same optimum."""
    workload = [("Pclass", "Age")]
    a = plan_residuals(titanic, workload, Fraction(1, 4), loss="sum_var")
    b = plan_residuals(titanic, workload, Fraction(1, 4), loss="max_var")
    assert b.loss_value() == pytest.approx(a.cell_variance(workload[0]), rel=1e-6)  # the optimal values agree
    assert np.allclose([float(v) for v in a.variances], [float(v) for v in b.variances], rtol=1e-3)


def test_direct_residual_variances_are_the_direct_release_read_as_a_plan(titanic: Domain) -> None:
    """The floors of ``max_var_floor``: the least-squares residuals of a direct Gaussian release (rho split by weight)
    have these variances, and they cost exactly rho (sum_{A <= S} p_A / prod_{S \\ A} n_i = 1 for every S)."""
    workload = [(("Survived", "Pclass"), 1.0), (("Pclass", "Sex"), 3.0), (("Age",), 2.0)]
    rho = 0.25
    floors = direct_residual_variances(titanic, workload, rho)
    measured = [NoisyMarginal(c, np.zeros(titanic.shape(list(c))), 6.0 / (2 * rho * w)) for c, w in workload]
    scales = residuals_from_marginals(titanic, measured).scales
    assert set(floors) == set(scales)
    assert all(floors[a] == pytest.approx(scales[a], rel=1e-12) for a in floors)
    cost = sum(float(residual_sensitivity(titanic, a)) / (2 * u) for a, u in floors.items())
    assert cost == pytest.approx(rho, rel=1e-12)


def test_the_floored_plan_keeps_the_low_orders_at_direct_precision_and_is_no_worse_than_direct(titanic: Domain) -> None:
    pairs = _all_pairs(titanic)
    rho = Fraction(1, 10)
    floored = plan_residuals(titanic, pairs, rho, loss="max_var_floor")
    free = plan_residuals(titanic, pairs, rho, loss="max_var")
    summed = plan_residuals(titanic, pairs, rho, loss="sum_var")
    floors = direct_residual_variances(titanic, [(c, 1.0) for c in pairs], rho)
    for residual, variance in zip(floored.residuals, floored.variances, strict=True):
        if len(residual) <= 1:  # the total and every 1-way residual: at most direct's variance
            assert float(variance) <= floors[residual] * (1 + 1e-6)
    for plan in (free, summed):  # the unfloored plans measure the total worse than direct does
        assert float(plan.variance(())) > 1.5 * floors[()]
    # no worse than direct in its own loss (direct is a feasible plan), no better than the unconstrained max_var
    direct_max = max(float(sum(floors[a] * c for a, c in _cell_coefficients(titanic, w).items())) for w in pairs)
    assert free.loss_value() * (1 - 1e-6) <= floored.loss_value() <= direct_max * (1 + 1e-6)


def _cell_coefficients(domain: Domain, marginal: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """``Var_S = sum_{A <= S} u_A p_A / prod_{S \\ A} n_i^2`` (planner module docstring), as coefficients of u_A."""
    out = {}
    for k in range(len(marginal) + 1):
        for sub in itertools.combinations(marginal, k):
            p = float(residual_sensitivity(domain, sub))
            if p > 0:
                out[sub] = p / math.prod(domain.size(a) ** 2 for a in marginal if a not in sub)
    return out


def test_max_variance_solver_failure_reports_the_status(titanic: Domain, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: cp.Problem, *args: object, **kwargs: object) -> None:
        self._status = cp.INFEASIBLE_INACCURATE

    monkeypatch.setattr(cp.Problem, "solve", fail)
    with pytest.raises(ResidualError, match="max_var.*infeasible_inaccurate"):
        plan_residuals(titanic, _all_pairs(titanic)[:3], Fraction(1), loss="max_var")


def test_kronecker_queries_enter_the_loss_and_report_their_variance(titanic: Domain) -> None:
    rng = np.random.default_rng(0)
    factors = (rng.normal(size=(2, 3)), rng.normal(size=(4, 3)))  # e.g. encoded blocks of X^T X
    query = KroneckerQuery(("Survived", "Pclass"), factors, weight=50.0)
    workload = _all_pairs(titanic)
    plain = plan_residuals(titanic, workload, Fraction(1, 10))
    tilted = plan_residuals(titanic, workload, Fraction(1, 10), queries=[query])
    assert tilted.cost() == Fraction(1, 10)
    assert tilted.query_variances(query).sum() < plain.query_variances(query).sum()
    # the reported variances are those of the explicit query matrix applied to the reconstruction
    q = np.kron(factors[0], factors[1])
    s = {r: float(v) for r, v in zip(tilted.residuals, tilted.variances, strict=True)}
    cov = np.zeros((9, 9))
    for r in [(), ("Survived",), ("Pclass",), ("Survived", "Pclass")]:
        parts = [np.eye(3) - 1 / 3 if a in r else np.full((3, 3), 1 / 9) for a in ("Survived", "Pclass")]
        cov += s[r] * np.kron(parts[0], parts[1])
    assert np.allclose(tilted.query_variances(query), np.diag(q @ cov @ q.T))


def test_attributes_of_size_one_are_not_measured() -> None:
    domain = Domain.from_sizes({"a": 3, "one": 1, "b": 2})
    plan = plan_residuals(domain, [("a", "one"), ("a", "b")], Fraction(1, 2))
    assert ("one",) not in plan.residuals and ("a", "one") not in plan.residuals
    assert plan.cost() == Fraction(1, 2)
    assert plan.cell_variance(("a", "one")) == pytest.approx(plan.cell_variance(("a",)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workload": [("Survived", "Nope")]}, r"workload\[0\]: unknown attribute 'Nope'"),
        ({"workload": []}, "workload is empty"),
        ({"workload": [Query(("Survived",), -1.0)]}, r"workload\[0\]: weight must be a positive"),
        ({"rho": 0}, "rho must be > 0"),
        ({"rho": -0.5}, "rho must be > 0"),
        ({"rho": float("nan")}, "rho must be finite"),
        ({"rho": True}, "rho must be a number"),
        ({"rho": "abc"}, "rho must be a finite number"),
        ({"loss": "l1"}, "loss must be one of"),
        ({"queries": [KroneckerQuery(("Survived",), (np.ones((1, 2)),))]}, r"queries\[0\].*3 columns"),
        ({"queries": [KroneckerQuery(("Age",), (np.ones((1, 91)),))]}, r"queries\[0\].*not inside the workload"),
    ],
)
def test_bad_inputs_name_the_parameter(titanic: Domain, kwargs: dict, message: str) -> None:
    args = {"workload": [("Survived", "Pclass")], "rho": Fraction(1)} | kwargs
    with pytest.raises(ResidualError, match=message):
        plan_residuals(titanic, args.pop("workload"), args.pop("rho"), **args)


def test_a_mapping_domain_and_an_unknown_residual(titanic: Domain) -> None:
    plan = plan_residuals({"x": 2, "y": 5}, [["y", "x"]], 1)
    assert plan.residuals == ((), ("x",), ("y",), ("x", "y"))
    with pytest.raises(ResidualError, match="not part of this plan"):
        plan_residuals(titanic, [("Sex",)], 1).variance(("Age",))
