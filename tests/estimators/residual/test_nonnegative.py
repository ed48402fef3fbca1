"""Non-negative, consistent marginals (estimators/residual/nonnegative.py): the dual solver against cvxpy, the
workload metric's identity, non-negativity and consistency on real data, determinism and errors."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

from estimators.residual import basis
from estimators.residual.basis import ResidualError
from estimators.residual.measure import measure_residuals
from estimators.residual.nonnegative import _workload_scales, nonnegative_marginals
from estimators.residual.planner import plan_residuals
from estimators.residual.reconstruct import NoisyResiduals
from tests.support.paths import DATA
from workloads.domain import Domain

SMALL = Domain.from_sizes({"a": 3, "b": 4, "c": 2})
SMALL_WORKLOAD = [("a", "b"), ("b", "c"), ("a", "c")]


def _small_release(seed: int = 1) -> NoisyResiduals:
    rng = np.random.default_rng(seed)
    rows = 200
    data = {k: rng.integers(0, SMALL.size(k), rows) for k in SMALL.names}
    data["b"] = np.minimum(data["b"], data["a"])  # structural zeros: many empty cells

    def counts(attrs: tuple[str, ...]) -> np.ndarray:
        shape = SMALL.shape(attrs)
        index = np.ravel_multi_index([data[a] for a in attrs], shape)
        return np.bincount(index, minlength=math.prod(shape)).reshape(shape).astype(float)

    plan = plan_residuals(SMALL, SMALL_WORKLOAD, Fraction(1, 20))
    return measure_residuals(plan, counts, lambda sigma, size: rng.normal(0, sigma, size))


def _cvxpy_solution(residuals: NoisyResiduals, scales: dict) -> dict[tuple[str, ...], np.ndarray]:
    """The same quadratic program with explicit matrices, solved by Clarabel."""
    domain = residuals.domain
    variables, constraints, objective = {}, [], 0
    for a in residuals.residuals:
        size = domain.cells(a)
        x = cp.Variable(size)
        projection = np.ones((1, 1))
        for attr in a:
            n = domain.size(attr)
            projection = np.kron(projection, np.eye(n) - 1 / n)
        constraints.append(projection @ x == x)
        objective += cp.sum_squares(x - residuals.values[a].ravel()) / (2 * scales[a])
        variables[a] = x
    for target in SMALL_WORKLOAD:
        mu = 0
        for a in basis.downward_closure(domain, [target]):
            expand = np.ones((1, 1))
            for attr in target:
                n = domain.size(attr)
                expand = np.kron(expand, np.eye(n) if attr in a else np.ones((n, 1)) / n)
            mu = mu + expand @ variables[a]
        constraints.append(mu >= 0)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.CLARABEL)
    assert problem.status == cp.OPTIMAL
    return {a: np.asarray(x.value).reshape(domain.shape(a)) for a, x in variables.items()}


@pytest.mark.parametrize(("metric", "order_factor"), [("likelihood", 1.0), ("workload", 1.0), ("workload", 100.0)])
def test_the_dual_solver_finds_the_quadratic_programs_optimum(metric: str, order_factor: float) -> None:
    release = _small_release()
    result = nonnegative_marginals(
        release, metric=metric, order_factor=order_factor, tolerance=1e-7, gap_tolerance=1e-10, max_iterations=20000
    )
    assert result.converged
    base = release.scales if metric == "likelihood" else _workload_scales(release, result.targets)
    reference = _cvxpy_solution(release, {a: base[a] * order_factor ** len(a) for a in base})
    total = float(release.values[()])
    for target in SMALL_WORKLOAD:
        expected = basis.expand_residuals(SMALL, reference, target)
        # Clarabel's accuracy (~1e-8 relative) bounds the agreement, not our solver
        assert np.allclose(result.marginal(target), np.maximum(expected, 0), atol=1e-5 * total), target
    assert np.min(basis.expand_residuals(SMALL, _small_release().values, ("a", "b"))) < 0  # the problem is not moot


def test_the_workload_metric_is_the_distance_between_workload_marginals() -> None:
    """sum_A ||d_A||^2 / s'_A == sum_T ||mu_T(d)||^2 / v_T for any residual difference d in range(P)."""
    release = _small_release()
    targets = tuple(SMALL_WORKLOAD)
    scales = _workload_scales(release, targets)
    rng = np.random.default_rng(3)
    diff = {a: basis.project(rng.normal(size=SMALL.shape(a))) for a in release.residuals}
    left = sum(float((d * d).sum()) / scales[a] for a, d in diff.items())
    right = sum(
        float((basis.expand_residuals(SMALL, diff, t) ** 2).sum()) / release.cell_variance(t) for t in targets
    )
    assert left == pytest.approx(right, rel=1e-10)


@pytest.fixture(scope="module")
def titanic_release() -> tuple[Domain, NoisyResiduals, list]:
    sizes = json.loads((DATA / "titanic" / "titanic-domain.json").read_text())
    frame = pd.read_csv(DATA / "titanic" / "titanic.csv")
    domain = Domain.from_sizes(sizes)

    def counts(attrs: tuple[str, ...]) -> np.ndarray:
        shape = domain.shape(attrs)
        index = np.ravel_multi_index([frame[a].to_numpy() for a in attrs], shape)
        return np.bincount(index, minlength=math.prod(shape)).reshape(shape).astype(float)

    workload = list(itertools.combinations(domain.names, 2))
    plan = plan_residuals(domain, workload, Fraction(1, 100))
    rng = np.random.default_rng(11)
    return domain, measure_residuals(plan, counts, lambda sigma, size: rng.normal(0, sigma, size)), workload


def test_answers_are_non_negative_and_consistent_on_real_data(titanic_release: tuple) -> None:
    domain, release, workload = titanic_release
    assert min(float(release.marginal(w).min()) for w in workload) < -10  # the unbiased answers are negative
    result = nonnegative_marginals(release)
    assert result.converged and 0 <= result.mixing < 1e-3
    total = float(result.marginal(()))
    closure = basis.downward_closure(domain, workload)
    answers = {c: result.marginal(c) for c in closure}
    for clique, values in answers.items():
        assert values.min() >= 0, clique
        assert float(values.sum()) == pytest.approx(total, rel=1e-12), clique
    for left, right in itertools.combinations(workload, 2):
        shared = tuple(a for a in left if a in right)
        assert np.allclose(basis.sum_to(answers[left], left, shared), basis.sum_to(answers[right], right, shared),
                           rtol=1e-10, atol=1e-9 * total)


def test_results_are_deterministic(titanic_release: tuple) -> None:
    _, release, workload = titanic_release
    first = nonnegative_marginals(release)
    second = nonnegative_marginals(release)
    assert first.iterations == second.iterations
    for w in workload:
        assert np.array_equal(first.marginal(w), second.marginal(w))


def test_non_negative_input_is_left_alone_and_a_negative_total_gives_zeros() -> None:
    table = np.arange(24, dtype=float).reshape(3, 4, 2)
    closure = basis.downward_closure(SMALL, SMALL_WORKLOAD)
    values = {a: basis.project(basis.sum_to(table, SMALL.names, a)) for a in closure}
    exact = NoisyResiduals(SMALL, values, {a: 1.0 for a in values})
    result = nonnegative_marginals(exact)
    assert result.iterations == 0 and result.mixing == 0
    assert np.allclose(result.marginal(("a", "b")), table.sum(axis=2))
    negative = NoisyResiduals(SMALL, values | {(): np.array(-5.0)}, {a: 1.0 for a in values})
    zero = nonnegative_marginals(negative, max_iterations=5)
    assert np.array_equal(zero.marginal(("a", "c")), np.zeros((3, 2)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metric": "l2"}, "metric must be one of"),
        ({"order_factor": 0.5}, "order_factor must be a finite number >= 1"),
        ({"tolerance": 0}, "tolerance must be a positive"),
        ({"gap_tolerance": float("nan")}, "gap_tolerance must be a positive"),
        ({"max_iterations": 0}, "max_iterations must be a positive integer"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs: dict, message: str) -> None:
    with pytest.raises(ResidualError, match=message):
        nonnegative_marginals(_small_release(), **kwargs)
    with pytest.raises(ResidualError, match="residuals must be NoisyResiduals"):
        nonnegative_marginals({"a": 1})  # type: ignore[arg-type]
