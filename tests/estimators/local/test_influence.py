"""The projections and the deviation bound behind every fit's influence (issue 18 finding 6), against independent
computations: cvxpy for the projection onto {S PSD, tr S <= t}, brute force over corners for the deviation."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

from estimators.local.influence import field_deviation, linear_solve_shift, mean_shift, project_psd_trace
from workloads.local.protocols import FieldSchema


@pytest.mark.parametrize("seed", range(4))
def test_psd_trace_projection_is_cvxpys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(4, 4)) * 3
    matrix = (a + a.T) / 2
    bound = 2.0
    ours = project_psd_trace(matrix, bound)
    s = cp.Variable((4, 4), symmetric=True)
    cp.Problem(cp.Minimize(cp.sum_squares(s - matrix)), [s >> 0, cp.trace(s) <= bound]).solve(solver=cp.SCS,
                                                                                                eps=1e-9)
    np.testing.assert_allclose(ours, s.value, atol=1e-5)
    assert np.linalg.eigvalsh(ours).min() >= -1e-12 and np.trace(ours) <= bound + 1e-12


def test_a_matrix_inside_the_set_is_unchanged() -> None:
    inside = np.diag([0.5, 0.25, 0.0])
    np.testing.assert_allclose(project_psd_trace(inside, 1.0), inside, atol=1e-15)


def test_field_deviation_is_the_farthest_accepted_corner() -> None:
    field = FieldSchema("xy", (3,), -2.0, 5.0)
    point = np.array([0.5, -1.0, 4.0])
    corners = [np.array(c) for c in itertools.product((-2.0, 5.0), repeat=3)]
    assert field_deviation(field, point) == pytest.approx(max(np.linalg.norm(c - point) for c in corners), rel=1e-15)
    normed = FieldSchema("g", (3,), -2.0, 2.0, norm=1.0)
    assert field_deviation(normed, point) == pytest.approx(1.0 + np.linalg.norm(point))
    assert mean_shift(field, point, 9) == pytest.approx(field_deviation(field, point) / 10)


def test_the_solve_bound_holds_for_random_perturbations() -> None:
    rng = np.random.default_rng(5)
    matrix = np.diag([2.0, 1.0, 0.5])
    rhs = np.array([1.0, -1.0, 0.5])
    w = np.linalg.solve(matrix, rhs)
    dm, ds = 0.05, 0.1
    bound = linear_solve_shift(matrix, w, dm, ds)
    for _ in range(200):
        e = rng.normal(size=(3, 3))
        e = (e + e.T) / 2
        e *= ds / np.linalg.norm(e)
        d = rng.normal(size=3)
        d *= dm / np.linalg.norm(d)
        assert np.linalg.norm(np.linalg.solve(matrix + e, rhs + d) - w) <= bound
    assert linear_solve_shift(matrix, w, dm, 0.6) is None  # within one change of singular: no finite bound
