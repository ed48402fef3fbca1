"""Reconstruction (estimators/residual/reconstruct.py): residuals from a direct release of noisy marginals (the
generalised least-squares estimate), against an explicit least-squares solve, exactness, variances and errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from estimators.residual import basis
from estimators.residual.basis import ResidualError
from estimators.residual.reconstruct import NoisyMarginal, NoisyResiduals, drop_insignificant, residuals_from_marginals
from workloads.domain import Domain

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 4, "d": 2})
MEASURED = [(("a", "b"), 4.0), (("b", "c"), 9.0), (("a", "c"), 1.0), (("b",), 0.5), (("a", "b"), 2.0)]


def _table(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 20, size=DOMAIN.shape(DOMAIN.names)).astype(float)


def _marginal(table: np.ndarray, clique: tuple[str, ...]) -> np.ndarray:
    return basis.sum_to(table, DOMAIN.names, clique)


def _measurement_matrix(clique: tuple[str, ...]) -> np.ndarray:
    """The matrix taking the full data vector to the marginal of ``clique``."""
    out = np.ones((1, 1))
    for a in DOMAIN.names:
        n = DOMAIN.size(a)
        out = np.kron(out, np.eye(n) if a in clique else np.ones((1, n)))
    return out


def test_exact_marginals_give_exact_answers_for_the_whole_closure() -> None:
    table = _table()
    measurements = [NoisyMarginal(c, _marginal(table, c), v) for c, v in MEASURED]
    residuals = residuals_from_marginals(DOMAIN, measurements)
    for clique in basis.downward_closure(DOMAIN, [c for c, _ in MEASURED]):
        assert np.allclose(residuals.marginal(clique), _marginal(table, clique)), clique


def test_least_squares_residuals_equal_the_explicit_weighted_least_squares_solution() -> None:
    rng = np.random.default_rng(1)
    table = _table(1)
    measurements = [
        NoisyMarginal(c, _marginal(table, c) + rng.normal(0, math.sqrt(v), DOMAIN.shape(c)), v) for c, v in MEASURED
    ]
    residuals = residuals_from_marginals(DOMAIN, measurements)
    # explicit GLS on the full data vector: x-hat = argmin sum_S ||M_S x - y_S||^2 / v_S (min-norm solution); every
    # marginal of the closure is estimable, so M_T x-hat does not depend on the choice of solution.
    design = np.vstack([_measurement_matrix(m.attributes) / math.sqrt(m.variance) for m in measurements])
    target = np.concatenate([m.values.ravel() / math.sqrt(m.variance) for m in measurements])
    x_hat = np.linalg.lstsq(design, target, rcond=None)[0]
    precision = np.linalg.pinv(design.T @ design)
    for clique in basis.downward_closure(DOMAIN, [c for c, _ in MEASURED]):
        m = _measurement_matrix(clique)
        assert np.allclose(residuals.marginal(clique).ravel(), m @ x_hat, atol=1e-8), clique
        assert np.allclose(np.diag(m @ precision @ m.T), residuals.cell_variance(clique), rtol=1e-8), clique


def test_measurement_axes_in_any_order_and_size_one_attributes() -> None:
    domain = Domain.from_sizes({"a": 2, "one": 1, "b": 3})
    table = np.arange(6, dtype=float).reshape(2, 1, 3)
    transposed = basis.sum_to(table, ("a", "one", "b"), ("a", "b")).T  # axes (b, a)
    residuals = residuals_from_marginals(domain, [NoisyMarginal(("b", "a"), transposed, 1.0)])
    assert ("one",) not in residuals.values
    assert np.allclose(residuals.marginal(("a", "b")), transposed.T)
    assert np.allclose(residuals.marginal(("a", "one")), table.sum(axis=2))


def test_marginals_outside_the_closure_are_refused() -> None:
    residuals = residuals_from_marginals(DOMAIN, [NoisyMarginal(("a", "b"), np.ones((2, 3)), 1.0)])
    with pytest.raises(ResidualError, match=r"marginal \['a', 'c'\] is outside the measured closure"):
        residuals.marginal(("a", "c"))
    with pytest.raises(ResidualError, match="unknown attribute 'zz'"):
        residuals.marginal(("zz",))


@pytest.mark.parametrize(
    ("measurements", "message"),
    [
        ([], "measurements is empty"),
        ([NoisyMarginal(("a", "b"), np.ones((3, 2)), 1.0)], r"measurements\[0\]: values have shape \(3, 2\)"),
        ([NoisyMarginal(("a",), np.ones(2), 0.0)], r"measurements\[0\]: variance must be a positive"),
        ([NoisyMarginal(("a",), np.array([1.0, np.inf]), 1.0)], r"measurements\[0\]: values must be finite"),
        ([NoisyMarginal(("a", "x"), np.ones((2, 2)), 1.0)], r"measurements\[0\]: unknown attribute 'x'"),
    ],
)
def test_bad_measurements_name_the_entry(measurements: list, message: str) -> None:
    with pytest.raises(ResidualError, match=message):
        residuals_from_marginals(DOMAIN, measurements)


def test_noisy_residuals_are_validated_and_read_only() -> None:
    with pytest.raises(ResidualError, match="same residuals"):
        NoisyResiduals(DOMAIN, {(): np.array(1.0)}, {})
    with pytest.raises(ResidualError, match=r"residual \['a'\]: shape"):
        NoisyResiduals(DOMAIN, {("a",): np.ones(3)}, {("a",): 1.0})
    with pytest.raises(ResidualError, match="noise scale"):
        NoisyResiduals(DOMAIN, {("a",): np.ones(2)}, {("a",): -1.0})
    residuals = NoisyResiduals(DOMAIN, {(): np.array(5.0), ("a",): np.array([1.0, -1.0])}, {(): 1.0, ("a",): 1.0})
    with pytest.raises(ValueError):
        residuals.values[("a",)][0] = 3.0
    assert residuals.marginal(("a",)).tolist() == [3.5, 1.5]
    assert residuals.cell_variance(("a",)) == pytest.approx(1 / 4 + 1 / 2)
    assert list(itertools.chain(residuals.residuals)) == [(), ("a",)]


def test_direct_release_variances_hold_for_laplace_noise() -> None:
    """The least-squares variances use only second moments, so they hold for Laplace noise too (variance 2 b^2)."""
    rng = np.random.default_rng(5)
    table = _table(2)
    repetitions = 2000
    closure = basis.downward_closure(DOMAIN, [c for c, _ in MEASURED])
    estimates: dict[tuple[str, ...], list[np.ndarray]] = {c: [] for c in closure}
    for _ in range(repetitions):
        measurements = [
            NoisyMarginal(c, _marginal(table, c) + rng.laplace(0, math.sqrt(v / 2), DOMAIN.shape(c)), v)
            for c, v in MEASURED
        ]
        residuals = residuals_from_marginals(DOMAIN, measurements)
        for c in closure:
            estimates[c].append(residuals.marginal(c).ravel())
    # sd of a sample variance: sigma^2 sqrt(2/(R-1) + kappa/R) with excess kurtosis kappa <= 3 (Laplace's; averages
    # of Laplace noise have less), so relative tolerance 4.5 sqrt(5/R).
    tolerance = 4.5 * math.sqrt(5 / repetitions)
    for c in closure:
        values = np.array(estimates[c])
        expected = residuals.cell_variance(c)
        assert np.abs(values.var(axis=0, ddof=1) / expected - 1).max() < tolerance, c
        z = (values.mean(axis=0) - _marginal(table, c).ravel()) / math.sqrt(expected / repetitions)
        assert np.abs(z).max() < 4.5, c


def test_drop_insignificant_zeroes_only_weak_interactions() -> None:
    """A pure-noise interaction (beta = 0) has E||b||^2 = s d; with threshold 4 it is dropped unless the noise is
    more than 4 times its mean (chi-square with 6 degrees of freedom above 24: probability < 1e-3, fixed seed), while
    a strong interaction (100 noise sd per cell) and every 1-way residual and the total are kept as they are."""
    domain = Domain.from_sizes({"a": 3, "b": 4, "c": 2})
    rng = np.random.default_rng(5)
    strong = basis.project(rng.normal(0.0, 100.0, (3, 2)))
    values = {(): np.asarray(50.0), ("a",): basis.project(rng.normal(0, 1, 3)),
              ("b",): basis.project(rng.normal(0, 1, 4)),
              ("c",): basis.project(rng.normal(0, 1, 2)), ("a", "b"): basis.project(rng.normal(0.0, 1.0, (3, 4))),
              ("a", "c"): strong}
    release = NoisyResiduals(domain, values, {a: 1.0 for a in values})
    out = drop_insignificant(release, 4.0)
    assert not out.values[("a", "b")].any()
    np.testing.assert_array_equal(out.values[("a", "c")], strong)
    for a in [(), ("a",), ("b",), ("c",)]:
        np.testing.assert_array_equal(out.values[a], release.values[a])
    unchanged = drop_insignificant(release, 0.0)
    np.testing.assert_array_equal(unchanged.values[("a", "b")], release.values[("a", "b")])
    with pytest.raises(ResidualError, match="threshold"):
        drop_insignificant(release, -1.0)
