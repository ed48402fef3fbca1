"""The residual basis (estimators/residual/basis.py): subtraction matrices, Kronecker application, the decomposition
of a marginal into residuals, sensitivities and the closed-form variances, each checked against explicit matrices."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from estimators.residual import basis
from workloads.domain import Domain

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 4})


def _kron(matrices: list[np.ndarray]) -> np.ndarray:
    out = np.ones((1, 1))
    for m in matrices:
        out = np.kron(out, m)
    return out


def _projection(n: int) -> np.ndarray:
    return np.eye(n) - np.full((n, n), 1.0 / n)


@pytest.mark.parametrize("k", [2, 3, 7])
def test_subtraction_matrix_and_its_pseudo_inverse(k: int) -> None:
    sub = basis.subtraction_matrix(k)
    pinv = basis.subtraction_pinv(k)
    assert sub.shape == (k - 1, k)
    assert np.allclose(sub @ np.ones(k), 0)
    assert np.allclose(pinv, np.linalg.pinv(sub))
    assert np.allclose(sub @ pinv, np.eye(k - 1))
    assert np.allclose(pinv @ sub, _projection(k))


def test_kron_apply_matches_the_explicit_kronecker_product() -> None:
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(3, 2)), rng.normal(size=(1, 3)), rng.normal(size=(5, 4))]
    x = rng.normal(size=(2, 3, 4))
    expected = (_kron(mats) @ x.ravel()).reshape(3, 1, 5)
    assert np.allclose(basis.kron_apply(mats, x), expected)


def test_projection_and_subtraction_coordinates_are_inverse() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 4))
    beta = basis.project(x)
    assert np.allclose(beta.ravel(), _kron([_projection(2), _projection(3), _projection(4)]) @ x.ravel())
    omega = basis.to_subtraction_basis(beta)
    assert omega.shape == (1, 2, 3)
    subs = [basis.subtraction_matrix(n) for n in (2, 3, 4)]
    assert np.allclose(omega.ravel(), _kron(subs) @ x.ravel())  # R_A beta = R_A x
    assert np.allclose(basis.from_subtraction_basis(omega), beta)


def test_a_marginal_is_the_sum_of_its_expanded_residuals() -> None:
    rng = np.random.default_rng(2)
    m = rng.integers(0, 50, size=(2, 3, 4)).astype(float)
    clique = ("a", "b", "c")
    residuals = {}
    for k in range(4):
        for sub in itertools.combinations(clique, k):
            residuals[sub] = basis.project(basis.sum_to(m, clique, sub))
    assert np.allclose(basis.expand_residuals(DOMAIN, residuals, clique), m)
    assert np.allclose(basis.expand_residuals(DOMAIN, residuals, ("a", "c")), m.sum(axis=1))


@pytest.mark.parametrize("clique", [(), ("a",), ("b",), ("a", "b"), ("a", "b", "c")])
def test_residual_sensitivity_is_the_mahalanobis_norm_of_one_row(clique: tuple[str, ...]) -> None:
    """max over cells c of e_c^T R^T (R R^T)^-1 R e_c for R = kron(Sub), the squared sensitivity in the norm of the
    noise covariance sigma^2 R R^T, equals prod (n-1)/n exactly (as a rational: checked to float precision)."""
    sizes = [DOMAIN.size(a) for a in clique]
    r = _kron([basis.subtraction_matrix(n) for n in sizes])
    quad = r.T @ np.linalg.inv(r @ r.T) @ r
    expected = basis.residual_sensitivity(DOMAIN, clique)
    assert isinstance(expected, Fraction)
    assert np.allclose(np.diag(quad), float(expected), rtol=1e-12)  # the same for every cell: the max is attained


def test_cell_variance_matches_the_explicit_covariance() -> None:
    clique = ("a", "b", "c")
    scales = {sub: 1.0 + 3 * i for i, sub in enumerate(basis.downward_closure(DOMAIN, [clique]))}
    covariance = np.zeros((24, 24))
    for sub, s in scales.items():
        factors = [_projection(DOMAIN.size(a)) if a in sub else np.full((DOMAIN.size(a),) * 2, DOMAIN.size(a) ** -2.0)
                   for a in clique]
        covariance += s * _kron(factors)
    assert np.allclose(np.diag(covariance), basis.cell_variance(DOMAIN, clique, scales))
    exact = basis.cell_variance(DOMAIN, clique, {k: Fraction(v) for k, v in scales.items()})
    assert isinstance(exact, Fraction)


def test_query_coefficients_match_explicit_kronecker_queries() -> None:
    rng = np.random.default_rng(3)
    clique = ("b", "c")
    factors = [rng.normal(size=(2, 3)), rng.normal(size=(3, 4))]
    q = _kron(factors)
    rows = basis.query_row_coefficients(DOMAIN, clique, factors)
    totals = basis.query_total_coefficients(DOMAIN, clique, factors)
    for sub in basis.downward_closure(DOMAIN, [clique]):
        parts = [_projection(DOMAIN.size(a)) if a in sub else np.full((DOMAIN.size(a),) * 2, DOMAIN.size(a) ** -2.0)
                 for a in clique]
        cov = q @ _kron(parts) @ q.T
        assert np.allclose(rows[sub], np.diag(cov))
        assert np.isclose(totals[sub], np.trace(cov))
    identity = basis.query_row_coefficients(DOMAIN, clique)
    assert np.allclose(identity[("b",)], float(basis.residual_sensitivity(DOMAIN, ("b",))) / 16)


def test_closure_and_maximal_sets() -> None:
    closure = basis.downward_closure(DOMAIN, [("a", "b"), ("b", "c")])
    assert closure == ((), ("a",), ("b",), ("c",), ("a", "b"), ("b", "c"))
    assert basis.maximal_cliques(DOMAIN, closure) == (("a", "b"), ("b", "c"))


def test_unknown_or_repeated_attributes_are_named() -> None:
    with pytest.raises(basis.ResidualError, match="workload\\[0\\].*'zz'"):
        basis.canonical_clique(DOMAIN, ["a", "zz"], "workload[0]")
    with pytest.raises(basis.ResidualError, match="repeated"):
        basis.canonical_clique(DOMAIN, ["a", "a"], "workload[0]")
    with pytest.raises(basis.ResidualError, match="outside the measured closure"):
        basis.closure_clique(DOMAIN, {(): 1, ("a",): 1}, ["a", "b"])
