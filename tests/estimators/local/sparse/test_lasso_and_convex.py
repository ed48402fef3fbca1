"""The label-private Lasso (Wang & Xu 2019, Sec. 5) and the cvxpy helper's refusal of non-optimal statuses."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.accuracy import relative_error
from estimators.local.sparse.convex import ConvexSolverError, solve_convex
from estimators.local.sparse.dr_erm import recover_from_projection
from estimators.local.sparse.lasso import (
    LabelPrivateLasso,
    default_lasso_penalty,
    lasso_from_moments,
    lasso_least_squares,
    refit_on_support,
)
from estimators.local.sparse.synthetic import sparse_linear_data
from workloads.local.randomizers.gaussian_label import label_noise_sigma, randomize_labels
from workloads.local.randomizers.random_projection_statistics import random_projection

THETA = np.zeros(50)
THETA[[3, 11, 20, 31, 47]] = [0.6, -0.5, 0.4, 0.3, -0.35]
THETA /= np.linalg.norm(THETA)


def test_lasso_recovers_the_support_at_large_n() -> None:
    rng = np.random.default_rng(1)
    data = sparse_linear_data(100_000, 50, 5, rng, theta_star=THETA)
    bound = float(np.abs(THETA).sum()) + data.noise_bound
    noisy = randomize_labels(data.y, bound, 2.0, 1e-3, rng)
    model = LabelPrivateLasso(epsilon=2.0, delta=1e-3, label_bound=bound).fit(data.X, noisy)
    support = np.flatnonzero(THETA)
    off_support = np.delete(np.abs(model.coef_), support)
    assert np.min(np.abs(model.coef_[support])) > 10 * np.max(off_support)  # observed: off-support all below 1e-6
    assert np.all(np.sign(model.coef_[support]) == np.sign(THETA[support]))
    assert relative_error(model.coef_, THETA) < 0.3  # observed 0.11; the l1 penalty shrinks every coefficient
    assert model.alpha_ == pytest.approx(default_lasso_penalty(label_noise_sigma(bound, 2.0, 1e-3), 100_000, 50))


def test_lasso_without_noise_matches_a_known_answer() -> None:
    # Orthogonal design (X^T X / n = I): the Lasso is soft thresholding of X^T y / n at lambda.
    n, p, lam = 64, 8, 0.1
    hadamard = np.array([[1.0]])
    while hadamard.shape[0] < n:
        hadamard = np.block([[hadamard, hadamard], [hadamard, -hadamard]])
    X = hadamard[:, 1 : p + 1]
    truth = np.array([0.5, -0.3, 0.05, 0.0, 0.2, 0.0, -0.08, 0.0])
    coef = lasso_least_squares(X, X @ truth, lam, "test Lasso")
    expected = np.sign(truth) * np.maximum(np.abs(truth) - lam, 0.0)
    np.testing.assert_allclose(coef, expected, atol=1e-7)


def test_lasso_alpha_override_and_validation() -> None:
    X = np.random.default_rng(0).choice([-1.0, 1.0], size=(200, 5))
    y = X[:, 0]
    model = LabelPrivateLasso(epsilon=1.0, delta=1e-3, label_bound=1.0, alpha=0.01).fit(X, y)
    assert model.alpha_ == 0.01 and model.coef_[0] == pytest.approx(0.99, abs=1e-5)
    with pytest.raises(EstimatorError, match="alpha"):
        LabelPrivateLasso(epsilon=1.0, delta=1e-3, label_bound=1.0, alpha=0.0).fit(X, y)
    with pytest.raises(EstimatorError, match="noisy_y"):
        LabelPrivateLasso(epsilon=1.0, delta=1e-3, label_bound=1.0).fit(X, y[:-1])
    with pytest.raises(ValueError, match="delta"):
        LabelPrivateLasso(epsilon=1.0, delta=0.0, label_bound=1.0).fit(X, y)
    assert default_lasso_penalty(2.0, 100, 50) == pytest.approx(2.0 * math.sqrt(2 * math.log(50) / 100))


def test_solver_statuses_other_than_optimal_are_named_errors() -> None:
    x = cp.Variable(2)
    with pytest.raises(ConvexSolverError, match="'unbounded'") as unbounded:
        solve_convex(cp.Problem(cp.Minimize(cp.sum(x))), "unbounded test")
    assert unbounded.value.status == "unbounded"
    with pytest.raises(ConvexSolverError, match="'infeasible'"):
        solve_convex(cp.Problem(cp.Minimize(cp.sum(x)), [x >= 1, cp.sum(x) <= 0]), "infeasible test")
    with pytest.raises(ConvexSolverError, match="'solver_error'"):
        solve_convex(cp.Problem(cp.Minimize(cp.sum_squares(x))), "missing solver", solvers=("MOSEK",))
    with pytest.raises(ConvexSolverError, match="CLARABEL: 'infeasible', HIGHS: 'infeasible'") as both:
        solve_convex(cp.Problem(cp.Minimize(cp.sum(x)), [x >= 1, cp.sum(x) <= 0]), "LP", solvers=("CLARABEL", "HIGHS"))
    assert both.value.statuses == {"CLARABEL": "infeasible", "HIGHS": "infeasible"}
    # a solver that fails hands over to the next one
    fallback = solve_convex(cp.Problem(cp.Minimize(cp.sum_squares(x - 2))), "fallback", solvers=("MOSEK", "CLARABEL"))
    assert fallback == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(EstimatorError, match="not convex"):
        solve_convex(cp.Problem(cp.Maximize(cp.sum_squares(x)), [x <= 1]), "non-convex")
    assert solve_convex(cp.Problem(cp.Minimize(cp.sum_squares(x - 1))), "fine") == pytest.approx(0.0, abs=1e-9)


def test_an_infeasible_simplex_recovery_is_reported_not_answered() -> None:
    phi = np.abs(random_projection(5, 40, 1))  # non-negative entries: Phi w >= 0 for every w in the simplex cone
    with pytest.raises(ConvexSolverError, match="DR-ERM recovery \\(simplex\\).*'infeasible'"):
        recover_from_projection(phi, -np.ones(5), constraint="simplex")


def test_refit_on_support_is_least_squares_on_the_lasso_support_and_removes_its_shrinkage() -> None:
    """Post-Lasso (issue 20): on the Lasso's support S the refit solves G_SS theta_S = b_S exactly and is 0 off S;
    with noiseless moments of a sparse theta it recovers theta exactly where the Lasso is shrunk by about lambda."""
    rng = np.random.default_rng(8)
    x = rng.choice([-1.0, 1.0], size=(4000, 50))
    gram, moment = x.T @ x / x.shape[0], x.T @ (x @ THETA) / x.shape[0]
    lasso = lasso_from_moments(gram, moment, 0.05, "t")
    refit = refit_on_support(gram, moment, lasso)
    support = np.flatnonzero(np.abs(lasso) > 1e-6 * np.abs(lasso).max())
    assert set(support) == {3, 11, 20, 31, 47}
    np.testing.assert_allclose(refit, THETA, atol=1e-9)
    assert np.linalg.norm(lasso - THETA) > 0.05  # the shrinkage the refit removes
    np.testing.assert_array_equal(refit_on_support(gram, moment, np.zeros(50)), np.zeros(50))
