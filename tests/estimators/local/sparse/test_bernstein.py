"""The Local Bernstein Mechanism's server side (Wang, Gaboardi & Xu 2018, Alg. 2 and 3): approximation, minimisation."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.sparse.bernstein import (
    BernsteinSurface,
    LocalBernsteinLinearRegression,
    aggregate_one_bit_reports,
    assign_grid_points,
    bernstein_basis,
    minimize_on_box,
)
from workloads.local.randomizers.bernstein import (
    bernstein_grid,
    one_bit_report,
    public_laplace_strings,
    randomize_grid_losses,
)


def smooth(points: np.ndarray) -> np.ndarray:
    return np.exp(points[:, 0]) * (np.sin(2 * points[:, 1]) if points.shape[1] > 1 else 1.0)


def test_basis_is_a_partition_of_unity() -> None:
    basis = bernstein_basis(np.linspace(0, 1, 7), 9)
    np.testing.assert_allclose(basis.sum(axis=1), 1.0)
    assert np.all(basis >= 0)


@pytest.mark.parametrize("dimension", [1, 2])
@pytest.mark.parametrize("order", [1, 2, 3])
def test_iterated_bernstein_error_falls_like_k_to_the_minus_h(dimension: int, order: int) -> None:
    # Thm. 2 (Micchelli 1973): |f - B_k^(h) f| = O(k^-h) for smooth f; doubling k divides the error by about 2^h.
    points = np.random.default_rng(0).random((2000, dimension))
    errors = []
    for k in (16, 32, 64):
        surface = BernsteinSurface(smooth(bernstein_grid(k, dimension)), k, dimension, order)
        errors.append(np.max(np.abs(surface(points) - smooth(points))))
    for coarse, fine in zip(errors, errors[1:], strict=False):
        assert 0.8 * 2**order < coarse / fine < 1.2 * 2**order  # observed 1.98-2.0, 3.8-3.97, 6.7-7.8 for h = 1, 2, 3
    if dimension == 1 and order == 1:  # Voronovskaya: |B_k f - f| <= max|f''| / (8k) = e / 128 at k = 16
        assert errors[0] <= np.e / 128


def test_bernstein_reproduces_linear_functions_and_tensor_grid_agrees() -> None:
    grid = bernstein_grid(5, 3)
    linear = 2 * grid[:, 0] - 3 * grid[:, 1] + 0.5 * grid[:, 2] + 1
    surface = BernsteinSurface(linear, 5, 3, order=1)
    points = np.random.default_rng(1).random((50, 3))
    np.testing.assert_allclose(surface(points), points @ [2, -3, 0.5] + 1, atol=1e-12)
    axes = [np.linspace(0, 1, 4), np.linspace(0.2, 0.9, 3), np.array([0.5])]
    mesh = np.stack([a.ravel() for a in np.meshgrid(*axes, indexing="ij")], axis=1)
    np.testing.assert_allclose(surface.on_tensor_grid(axes).ravel(), surface(mesh), atol=1e-12)


def test_minimize_on_box_finds_interior_and_boundary_minima() -> None:
    def quadratic(center: np.ndarray):  # noqa: ANN202
        return lambda axes: (axes[0][:, None] - center[0]) ** 2 + 2 * (axes[1][None, :] - center[1]) ** 2

    lower, upper = np.zeros(2), np.ones(2)
    np.testing.assert_allclose(minimize_on_box(quadratic(np.array([0.3, 0.7])), lower, upper), [0.3, 0.7], atol=1e-6)
    np.testing.assert_allclose(minimize_on_box(quadratic(np.array([1.4, 0.2])), lower, upper), [1.0, 0.2], atol=1e-6)
    np.testing.assert_allclose(
        minimize_on_box(quadratic(np.array([0.3, 0.7])), np.array([0.5, 0.0]), upper), [0.5, 0.7], atol=1e-6
    )


def _regression_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(-1, 1, size=(n, 1))
    return X, np.clip(0.6 * X[:, 0] + 0.1 * rng.normal(size=n), -1, 1)


def _grid_losses(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    thetas = -1 + 2 * bernstein_grid(k, X.shape[1])  # parameter box [-1, 1]
    return np.clip((X @ thetas.T - y[:, None]) ** 2 / 4.0, 0, 1)  # residuals at most 2: scale 4 never clips


def _excess_risk(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    best = np.linalg.lstsq(X, y, rcond=None)[0]
    return float(np.mean((X @ theta - y) ** 2) - np.mean((X @ best - y) ** 2)) / 4.0


def test_exact_grid_values_give_the_empirical_risk_minimiser() -> None:
    X, y = _regression_data(20_000, np.random.default_rng(2))
    losses = _grid_losses(X, y, 8).mean(axis=0)
    model = LocalBernsteinLinearRegression(degree=8, dimension=1, order=2, lower=-1, upper=1)
    model._fit_grid_values(losses, None)
    assert model.coef_[0] == pytest.approx(np.linalg.lstsq(X, y, rcond=None)[0][0], abs=0.02)
    constrained = LocalBernsteinLinearRegression(8, 1, 2, -1, 1, constraint_lower=-1, constraint_upper=0.2)
    constrained._fit_grid_values(losses, None)
    assert constrained.coef_[0] == pytest.approx(0.2, abs=1e-9)  # the constraint binds


def test_private_reports_give_a_small_excess_risk() -> None:
    rng = np.random.default_rng(0)
    n, k, eps = 200_000, 6, 4.0
    X, y = _regression_data(n, rng)
    losses = _grid_losses(X, y, k)
    full = LocalBernsteinLinearRegression(k, 1, 2, -1, 1).fit(randomize_grid_losses(losses, eps, rng))
    grid_size = k + 1
    assignment = assign_grid_points(n, grid_size, rng)
    strings = public_laplace_strings(n, eps, rng)
    bits = one_bit_report(losses[np.arange(n), assignment], strings, eps, rng)
    one_bit = LocalBernsteinLinearRegression(k, 1, 2, -1, 1).fit_one_bit(bits, strings, assignment)
    trivial = _excess_risk(np.zeros(1), X, y)  # 0.030
    assert _excess_risk(full.coef_, X, y) < 0.005  # observed 2e-5 to 1.9e-3 over seeds 0-5
    assert _excess_risk(one_bit.coef_, X, y) < 0.01  # observed 2e-9 to 4.9e-3 over seeds 0-5
    assert trivial > 0.025


def test_one_bit_aggregation_is_two_times_the_mean_of_b_y() -> None:
    values = aggregate_one_bit_reports([1, 0, 1, 1], [2.0, 5.0, -1.0, 3.0], [0, 0, 1, 1], 2)
    np.testing.assert_allclose(values, [2 * (2.0 + 0.0) / 2, 2 * (-1.0 + 3.0) / 2])
    with pytest.raises(EstimatorError, match="no participant"):
        aggregate_one_bit_reports([1, 0], [1.0, 1.0], [0, 0], 2)
    with pytest.raises(EstimatorError, match="bits must be 0 or 1"):
        aggregate_one_bit_reports([2, 0], [1.0, 1.0], [0, 1], 2)
    with pytest.raises(EstimatorError, match="cannot cover"):
        assign_grid_points(3, 5, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"dimension": 4}, "dimension must be at most 3"), ({"degree": 0}, "degree"), ({"order": 0}, "order"),
     ({"lower": 1.0, "upper": 1.0}, "lower < upper"), ({"constraint_upper": 5.0}, "constraint_upper")],
)  # fmt: skip
def test_bad_settings_are_named(kwargs: dict, name: str) -> None:
    settings = {"degree": 3, "dimension": 1} | kwargs
    p = min(settings["dimension"], 3)
    reports = np.zeros((10, (settings["degree"] + 1) ** p if settings["degree"] > 0 else 1))
    with pytest.raises(EstimatorError, match=name):
        LocalBernsteinLinearRegression(**settings).fit(reports)
