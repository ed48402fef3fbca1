"""LDP-IHT and Label-LDP-IHT (Wang & Xu 2019, Alg. 1 and 2): the step, the rounds, and recovery of a known theta*."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.accuracy import relative_error
from estimators.local.sparse.iht import (
    LabelLDPIHTRegression,
    LDPIHTRegression,
    SimulatedIHTParticipants,
    hard_threshold,
    iht_step,
    label_iht,
    round_groups,
    run_ldp_iht,
)
from estimators.local.sparse.synthetic import sparse_linear_data, sparse_theta
from workloads.local.randomizers.gaussian_label import randomize_labels
from workloads.local.randomizers.iht_gradient import worst_case_residual_bound


def test_hard_threshold_keeps_the_largest_magnitudes() -> None:
    np.testing.assert_array_equal(hard_threshold(np.array([0.1, -3.0, 2.0, -0.5]), 2), [0.0, -3.0, 2.0, 0.0])
    np.testing.assert_array_equal(hard_threshold(np.array([1.0, -1.0, 1.0]), 2), [1.0, -1.0, 0.0])  # ties: low index


def test_iht_step_is_gradient_step_truncation_projection() -> None:
    theta = np.array([0.5, 0.0, 0.0, 0.2])
    gradient = np.array([-1.0, -3.0, 0.1, 0.0])
    # theta - 0.5 g = [1.0, 1.5, -0.05, 0.2] -> keep two -> [1.0, 1.5, 0, 0] -> norm 1.803 -> project on B_1
    expected = np.array([1.0, 1.5, 0.0, 0.0]) / math.hypot(1.0, 1.5)
    np.testing.assert_allclose(iht_step(theta, gradient, eta=0.5, s=2), expected)
    np.testing.assert_allclose(iht_step(theta, gradient, eta=0.5, s=2, radius=5.0), [1.0, 1.5, 0.0, 0.0])


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"s": 5}, "sparsity"), ({"s": 0}, "sparsity"), ({"eta": 0.0}, "eta"), ({"eta": -1}, "eta"),
     ({"mean_gradient_report": np.zeros(3)}, "mean_gradient_report"), ({"radius": 0}, "radius")],
)  # fmt: skip
def test_iht_step_rejects_bad_parameters(kwargs: dict, name: str) -> None:
    call = {"theta_prev": np.zeros(4), "mean_gradient_report": np.ones(4), "eta": 0.1, "s": 2} | kwargs
    with pytest.raises(EstimatorError, match=name):
        iht_step(**call)


def test_round_groups_follow_alg_1() -> None:
    groups = round_groups(10, 3)
    assert [list(g) for g in groups] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert sum(len(g) for g in round_groups(1001, 7)) == 1001
    with pytest.raises(EstimatorError, match="rounds"):
        round_groups(5, 0)
    with pytest.raises(EstimatorError, match="rounds must be at most"):
        round_groups(5, 6)


def _exact_collector(X: np.ndarray, y: np.ndarray, rounds: int, noise_std: float = 0.0, seed: int = 0):  # noqa: ANN202
    """Round t returns group t's exact mean gradient, plus optional N(0, noise_std^2) noise."""
    groups = round_groups(X.shape[0], rounds)
    rng = np.random.default_rng(seed)

    def collect(t: int, theta: np.ndarray) -> np.ndarray:
        rows = slice(groups[t - 1].start, groups[t - 1].stop)
        gradient = X[rows].T @ (X[rows] @ theta - y[rows]) / (rows.stop - rows.start)
        return gradient + noise_std * rng.normal(size=theta.size)

    return collect


@pytest.mark.parametrize(("noise_std", "tolerance"), [(0.0, 1e-6), (0.01, 0.05)])
def test_ldp_iht_driver_recovers_theta_star(noise_std: float, tolerance: float) -> None:
    rng = np.random.default_rng(1)
    data = sparse_linear_data(3000, 50, 5, rng, noise_bound=0.0)
    model = LDPIHTRegression(sparsity=5, rounds=30, eta=1.0).fit(_exact_collector(data.X, data.y, 30, noise_std), 50)
    assert relative_error(model.coef_, data.theta_star) < tolerance
    assert len(model.history_) == 31 and np.count_nonzero(model.coef_) <= 5
    assert model.predict(data.X[:3]).shape == (3,)


def test_ldp_iht_end_to_end_with_the_l2_ball_randomizer() -> None:
    rng = np.random.default_rng(2)
    p, s, eps = 6, 2, 4.0
    data = sparse_linear_data(200_000, p, s, rng)
    c = worst_case_residual_bound(s, 1.0, math.sqrt(s) + data.noise_bound)
    participants = SimulatedIHTParticipants(data.X, data.y, 5, eps, c, math.sqrt(p), rng)
    model = LDPIHTRegression(sparsity=s, rounds=5, eta=1.0).fit(participants, p)
    assert participants.collected == [1, 2, 3, 4, 5]
    assert relative_error(model.coef_, data.theta_star) < 0.25  # observed 0.02-0.11 over seeds 0-3
    assert set(np.flatnonzero(model.coef_)) == set(np.flatnonzero(data.theta_star))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"sparsity": 60}, "sparsity"), ({"rounds": 0}, "rounds"), ({"eta": 0.0}, "eta"),
     ({"theta0": np.zeros(3)}, "theta0"), ({"radius": -1.0}, "radius")],
)  # fmt: skip
def test_bad_settings_fail_before_any_round_is_collected(kwargs: dict, name: str) -> None:
    calls = []
    settings = {"sparsity": 5, "rounds": 3, "eta": 0.5} | kwargs
    with pytest.raises(EstimatorError, match=name):
        LDPIHTRegression(**settings).fit(lambda t, theta: calls.append(t) or np.zeros(50), 50)
    assert calls == []


def test_a_malformed_round_report_names_the_round() -> None:
    with pytest.raises(EstimatorError, match="round 2"):
        run_ldp_iht(lambda t, theta: np.zeros(4) if t == 1 else np.zeros(3), 4, 2, 3, 0.5)
    with pytest.raises(EstimatorError, match="round 1"):
        run_ldp_iht(lambda t, theta: np.full(4, np.nan), 4, 2, 3, 0.5)


def test_simulated_participants_refuse_a_round_twice() -> None:
    rng = np.random.default_rng(0)
    data = sparse_linear_data(100, 4, 1, rng)
    participants = SimulatedIHTParticipants(data.X, data.y, 2, 1.0, 2.0, 2.0, rng)
    participants(1, np.zeros(4))
    with pytest.raises(EstimatorError, match="round 1"):
        participants(1, np.zeros(4))


def test_label_iht_steps_down_the_gradient() -> None:
    # Alg. 2 as printed steps up the gradient; one step from 0 must move towards theta*, not away.
    rng = np.random.default_rng(3)
    data = sparse_linear_data(5000, 20, 3, rng, noise_bound=0.0)
    first = label_iht(data.X, data.y, sparsity=3, iterations=1, eta=0.5).theta
    assert first @ data.theta_star > 0
    assert np.linalg.norm(first - data.theta_star) < np.linalg.norm(data.theta_star)


def test_label_ldp_iht_recovers_theta_star_without_and_with_label_noise() -> None:
    rng = np.random.default_rng(4)
    data = sparse_linear_data(20_000, 50, 5, rng)
    exact = LabelLDPIHTRegression(sparsity=5, iterations=20, eta=1.0).fit(data.X, data.y)
    assert relative_error(exact.coef_, data.theta_star) < 0.01  # observed 3e-4 to 6e-4 (seeds 4-9): model noise only
    noisy = randomize_labels(data.y, math.sqrt(5) + data.noise_bound, 4.0, 1e-3, rng)
    private = LabelLDPIHTRegression(sparsity=5, iterations=20, eta=1.0).fit(data.X, noisy)
    assert relative_error(private.coef_, data.theta_star) < 0.25  # observed 0.036-0.093 over seeds 4-9


def test_label_ldp_iht_rejects_bad_settings() -> None:
    X = np.ones((10, 4))
    with pytest.raises(EstimatorError, match="sparsity"):
        LabelLDPIHTRegression(sparsity=5, iterations=3, eta=0.1).fit(X, np.zeros(10))
    with pytest.raises(EstimatorError, match="noisy_labels"):
        LabelLDPIHTRegression(sparsity=2, iterations=3, eta=0.1).fit(X, np.zeros(9))
    with pytest.raises(EstimatorError, match="rounds"):
        LabelLDPIHTRegression(sparsity=2, iterations=0, eta=0.1).fit(X, np.zeros(10))


def test_synthetic_model_of_section_7_1() -> None:
    rng = np.random.default_rng(5)
    theta = sparse_theta(100, 10, rng, normalize=False)
    assert np.count_nonzero(theta) == 10 and theta.min() >= 0 and theta.max() <= 1
    data = sparse_linear_data(1000, 100, 10, rng)
    assert np.linalg.norm(data.theta_star) == pytest.approx(1.0)
    assert set(np.unique(data.X)) == {-1.0, 1.0}
    assert np.max(np.abs(data.y - data.X @ data.theta_star)) <= 0.05
    assert np.max(np.abs(data.y)) <= data.label_bound
