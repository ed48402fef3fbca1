"""DP-IHT (Wang & Xu 2019, Alg. 3) in the central model: exact zCDP cost, clipping, noise scale, accuracy, checks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.central.dp_iht import (
    DPIHTLinearRegression,
    DPIHTLogisticRegression,
    clip_rows,
    clipped_gradient_sum,
    dp_iht_calibration,
)
from estimators.local.accuracy import relative_error
from estimators.local.sparse.synthetic import sparse_linear_data
from service.privacy.noise import NoiseSource


class RecordingNoise:
    """A noise callable that records every (sigma, size) it is asked for and returns seeded Gaussian draws."""

    def __init__(self, seed: int = 0, scale: float = 1.0) -> None:
        self.calls: list[tuple[float, int]] = []
        self.rng = np.random.default_rng(seed)
        self.scale = scale

    def __call__(self, sigma: float, size: int) -> np.ndarray:
        self.calls.append((sigma, size))
        return self.scale * self.rng.normal(0.0, sigma, size)


@pytest.mark.parametrize("rho", [0.1, Fraction(1, 3), 2, 0.030557])
@pytest.mark.parametrize("iterations", [1, 7, 400])
@pytest.mark.parametrize("given", [False, True])
def test_cost_is_exactly_rho_and_each_sigma_covers_its_share(rho: object, iterations: int, given: bool) -> None:
    calibration = dp_iht_calibration(rho, iterations, clip_norm=3.7, normalizer_given=given)
    exact_rho = rho if isinstance(rho, Fraction) else Fraction(repr(rho)) if isinstance(rho, float) else Fraction(rho)
    assert calibration.rho == exact_rho and calibration.rho_total == exact_rho  # what the accountant charges
    assert calibration.rho_count == (0 if given else exact_rho / 10)
    assert calibration.rho_per_iteration == (exact_rho - calibration.rho_count) / iterations
    # Gaussian mechanism: Delta^2 / (2 sigma^2) is the zCDP cost (Bun & Steinke 2016, Prop. 1.6), in exact arithmetic
    g = Fraction(3.7)
    per_iteration = g * g / (2 * Fraction(calibration.sigma_gradient) ** 2)
    assert per_iteration <= calibration.rho_per_iteration
    assert per_iteration > calibration.rho_per_iteration * (1 - Fraction(1, 10**12))  # and not wastefully above
    if given:
        assert calibration.sigma_count is None
    else:
        count = 1 / (2 * Fraction(calibration.sigma_count) ** 2)
        assert calibration.rho_count * (1 - Fraction(1, 10**12)) < count <= calibration.rho_count


def test_fit_draws_exactly_the_calibrated_noise_and_nothing_else() -> None:
    rng = np.random.default_rng(0)
    data = sparse_linear_data(500, 30, 3, rng)
    noise = RecordingNoise()
    model = DPIHTLinearRegression(sparsity=3, iterations=12, eta=0.5, rho=0.5, clip_norm=5.0).fit(data.X, data.y, noise)
    c = model.calibration_
    assert noise.calls == [(c.sigma_count, 1)] + [(c.sigma_gradient, 30)] * 12
    noise = RecordingNoise()
    DPIHTLinearRegression(3, 12, 0.5, 0.5, 5.0, normalizer=500.0).fit(data.X, data.y, noise)
    assert [size for _, size in noise.calls] == [30] * 12  # a public normalizer: no count is released


def test_released_noise_has_the_calibrated_scale() -> None:
    # T = 1, eta = 1, k = p, theta_0 = 0, public normalizer n: theta_1 = -(S + z) / n, so z = -n theta_1 - S.
    # The sample standard deviation of p draws has standard error sigma / sqrt(2p); allow 5 of them.
    rng = np.random.default_rng(1)
    n, p = 300, 4000
    X = rng.choice([-1.0, 1.0], size=(n, p)) / math.sqrt(p)
    y = rng.uniform(-1, 1, n)
    model = DPIHTLinearRegression(sparsity=p, iterations=1, eta=1.0, rho=0.2, clip_norm=1.0, normalizer=float(n))
    model.fit(X, y, NoiseSource(7).gaussian)
    exact_sum = clip_rows(X * (-y)[:, None], 1.0).sum(axis=0)
    z = -n * model.coef_ - exact_sum
    sigma = model.calibration_.sigma_gradient
    assert sigma == pytest.approx(1.0 / math.sqrt(2 * 0.2), rel=1e-12)
    assert abs(z.std() / sigma - 1) < 5 / math.sqrt(2 * p)
    assert abs(z.mean()) < 5 * sigma / math.sqrt(p)


def test_clipping_bounds_the_sensitivity_of_every_release() -> None:
    # Adding one row changes the noiseless step by at most eta * G / n_hat, whatever the row.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 6)) * 10
    y = rng.normal(size=50) * 10
    extra_x, extra_y = rng.normal(size=(1, 6)) * 1000, np.array([500.0])

    def zero(sigma: float, size: int) -> np.ndarray:
        return np.zeros(size)

    def step(rows: np.ndarray, labels: np.ndarray) -> np.ndarray:
        model = DPIHTLinearRegression(6, 1, 1.0, 1.0, clip_norm=2.5, normalizer=1.0, theta0=np.full(6, 0.3))
        return model.fit(rows, labels, zero).coef_

    difference = step(np.vstack([X, extra_x]), np.append(y, extra_y)) - step(X, y)
    assert np.linalg.norm(difference) <= 2.5 * (1 + 1e-12)
    np.testing.assert_allclose(np.linalg.norm(clip_rows(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0), axis=1), [1.0, 0.5])
    slopes = rng.normal(size=50) * 5
    np.testing.assert_allclose(  # the two-pass form equals clipping the n x p matrix of gradients
        clipped_gradient_sum(X, np.linalg.norm(X, axis=1), slopes, 2.5), clip_rows(X * slopes[:, None], 2.5).sum(axis=0)
    )


def test_linear_dp_iht_recovers_theta_star() -> None:
    rng = np.random.default_rng(3)
    data = sparse_linear_data(20_000, 200, 5, rng)
    clip = math.sqrt(200) * 1.0  # ||x|| = sqrt(p); residuals below 1 on this model are not clipped
    noise = RecordingNoise(seed=4)
    private = DPIHTLinearRegression(5, 20, 1.0, rho=0.1, clip_norm=clip).fit(data.X, data.y, noise)
    assert relative_error(private.coef_, data.theta_star) < 0.05  # observed 0.017-0.031 over seeds 3, 13, 23
    assert set(np.flatnonzero(private.coef_)) == set(np.flatnonzero(data.theta_star))


def test_logistic_dp_iht_approaches_the_sparse_optimum() -> None:
    rng = np.random.default_rng(5)
    n, p, k = 5_000, 50, 3
    X = rng.normal(size=(n, p)) / math.sqrt(p) * 3
    truth = np.zeros(p)
    truth[[2, 9, 30]] = [4.0, -3.0, 2.0]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ truth)), 1.0, -1.0)
    clip = float(np.linalg.norm(X, axis=1).max())

    def loss(theta: np.ndarray) -> float:
        return float(np.mean(np.logaddexp(0, -y * (X @ theta))) + 0.5e-3 * theta @ theta)

    settings = {"sparsity": k, "iterations": 100, "eta": 2.0, "clip_norm": clip, "l2": 1e-3}
    exact = DPIHTLogisticRegression(rho=1e9, **settings).fit(X, y, RecordingNoise(6))  # essentially no noise
    private = DPIHTLogisticRegression(rho=0.5, **settings).fit(X, y, RecordingNoise(7))
    gap = loss(private.coef_) - loss(exact.coef_)
    assert 0 <= gap < 0.05 * (loss(np.zeros(p)) - loss(exact.coef_))  # observed 0.002 of it, seeds 5, 15, 25
    assert set(np.flatnonzero(exact.coef_)) == {2, 9, 30}
    assert private.predict_proba(X[:2]).shape == (2, 2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"sparsity": 31}, "sparsity"), ({"iterations": 0}, "iterations"), ({"eta": 0.0}, "eta"),
     ({"rho": 0.0}, "rho"), ({"rho": float("inf")}, "rho"), ({"clip_norm": -1.0}, "clip_norm"),
     ({"count_fraction": Fraction(1)}, "count_fraction"), ({"normalizer": 0.0}, "normalizer"),
     ({"theta0": np.zeros(4)}, "theta0")],
)  # fmt: skip
def test_bad_settings_fail_before_any_noise_is_drawn(kwargs: dict, name: str) -> None:
    data = sparse_linear_data(100, 30, 3, np.random.default_rng(0))
    settings = {"sparsity": 3, "iterations": 5, "eta": 0.5, "rho": 0.5, "clip_norm": 5.0} | kwargs
    noise = RecordingNoise()
    with pytest.raises(EstimatorError, match=name):
        DPIHTLinearRegression(**settings).fit(data.X, data.y, noise)
    assert noise.calls == []


def test_bad_data_fails_before_any_noise_is_drawn() -> None:
    noise = RecordingNoise()
    X = np.ones((10, 4))
    with pytest.raises(EstimatorError, match="y must be a vector of 10"):
        DPIHTLinearRegression(2, 3, 0.5, 0.5, 1.0).fit(X, np.zeros(9), noise)
    with pytest.raises(EstimatorError, match=r"labels in \{-1, \+1\}"):
        DPIHTLogisticRegression(2, 3, 0.5, 0.5, 1.0).fit(X, np.zeros(10), noise)
    with pytest.raises(EstimatorError, match="l2"):
        DPIHTLogisticRegression(2, 3, 0.5, 0.5, 1.0, l2=-1.0).fit(X, np.ones(10), noise)
    assert noise.calls == []


@pytest.mark.parametrize("model_class", [DPIHTLinearRegression, DPIHTLogisticRegression])
def test_distinct_rows_with_counts_give_the_same_fit(model_class) -> None:
    """Full-batch iterations with per-example clipping: the count-weighted sum of the distinct rows' clipped
    gradients is the sum over the rows, and n is the sum of the counts, so with the same noise draws the fits agree
    to rounding. The clip norm is small enough that most gradients are clipped."""
    rng = np.random.default_rng(5)
    X = rng.integers(0, 3, size=(3000, 6)).astype(float)
    y = rng.choice([-1.0, 1.0], size=3000) if model_class is DPIHTLogisticRegression else rng.integers(0, 2, 3000) - 0.5
    unique, counts = np.unique(np.column_stack([X, y]), axis=0, return_counts=True)
    assert len(unique) < 1500
    settings = {"sparsity": 3, "iterations": 20, "eta": 0.05, "rho": 0.5, "clip_norm": 0.5}
    rows = model_class(**settings).fit(X, y, RecordingNoise(seed=9))
    weighted = model_class(**settings).fit(unique[:, :-1], unique[:, -1], RecordingNoise(seed=9), sample_weight=counts)
    assert weighted.normalizer_ == pytest.approx(rows.normalizer_, rel=1e-14)
    np.testing.assert_allclose(weighted.coef_, rows.coef_, rtol=0, atol=1e-10)
    assert np.count_nonzero(rows.coef_) == 3
    norms = np.linalg.norm(X, axis=1)
    assert np.mean(norms * 0.5 > settings["clip_norm"]) > 0.5  # clipping is exercised (|slope| >= 1/2 typically)


def test_fit_gradients_asks_the_first_sum_before_any_draw_and_checks_what_it_gets() -> None:
    """Where the rows live (a data engine) the first clipped sum is asked before any noise, so a table that cannot be
    read fails before the charge is spent; a sum of the wrong shape or not finite is refused. With the rows in memory
    (ArrayGradients) fit_gradients is fit."""
    from estimators.central.dp_iht import ArrayGradients

    draws: list[int] = []

    def noise(sigma: float, size: int) -> np.ndarray:
        draws.append(size)
        return np.zeros(size)

    def unreadable(theta: np.ndarray, bound: float) -> np.ndarray:
        raise OSError("the table cannot be read")

    model = DPIHTLinearRegression(sparsity=2, iterations=3, eta=0.5, rho=1.0, clip_norm=1.0)
    with pytest.raises(OSError, match="cannot be read"):
        model.fit_gradients(unreadable, 10, 3, noise)
    assert draws == []
    with pytest.raises(EstimatorError, match="must be 3 finite numbers"):
        model.fit_gradients(lambda theta, bound: np.zeros(2), 10, 3, noise)
    with pytest.raises(EstimatorError, match="must be 3 finite numbers"):
        model.fit_gradients(lambda theta, bound: np.full(3, np.nan), 10, 3, noise)
    X = np.random.default_rng(2).normal(size=(40, 3))
    y = X @ np.array([1.0, 0.0, -1.0])
    direct = DPIHTLinearRegression(sparsity=2, iterations=3, eta=0.5, rho=1.0, clip_norm=1.0).fit(
        X, y, NoiseSource(4).gaussian)
    through = DPIHTLinearRegression(sparsity=2, iterations=3, eta=0.5, rho=1.0, clip_norm=1.0).fit_gradients(
        ArrayGradients(X, y, "linear"), 40, 3, NoiseSource(4).gaussian)
    np.testing.assert_array_equal(direct.coef_, through.coef_)
