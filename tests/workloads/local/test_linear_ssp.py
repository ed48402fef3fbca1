"""The ``linear-ssp`` device side: the statistics vector and its radius, the two randomizers of its table (the
l2-ball's norm, unbiasedness, per-entry variance and density ratio; the Gaussian's grid and calibration), the spec's
rounds and charge, and the schema against honest and forged reports.

Tolerances: an l2-ball report has ``E[Z Z^T] = B^2 I / D`` exactly, so a coordinate of the mean of ``N`` reports of one
vector has standard error at most ``B / sqrt(D N)``; 5 of those per coordinate. Seeds are fixed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.conversions import cdp_rho
from workloads.local.protocols import PROTOCOLS, ProtocolError, ReportError, RoundState, spec_from_json
from workloads.local.protocols.linear_ssp import LinearSspSpec
from workloads.local.randomizers.l2ball import l2_ball_output_density
from workloads.local.randomizers.regression_statistics import (
    STATISTICS_RANDOMIZERS,
    randomize_regression_statistics,
    regression_statistics,
    statistics_length,
    statistics_noise,
    statistics_radius,
    unpack_statistics,
)
from workloads.parameters import ParameterError

STATE = RoundState(0, {})


def test_the_statistics_rebuild_the_gram_matrix_and_moment_exactly() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-0.5, 0.5, size=(50, 3)), rng.uniform(-1, 1, size=50)
    s = regression_statistics(x, y, norm_bound=2.0, label_bound=1.0)
    assert s.shape == (50, statistics_length(3)) == (50, 13)
    gram, moment = unpack_statistics(s.mean(axis=0), 3)
    tilde = np.column_stack([np.ones(50), x])
    np.testing.assert_allclose(gram, tilde.T @ tilde / 50, atol=1e-12)
    np.testing.assert_allclose(moment, tilde.T @ y / 50, atol=1e-12)


def test_the_radius_is_the_largest_norm_and_is_attained() -> None:
    r, b = 1.7, 0.6
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2000, 2)) * rng.uniform(0, 3, size=(2000, 1))  # many outside the ball: scaled in
    y = rng.uniform(-2, 2, size=2000)  # many clipped
    norms = np.linalg.norm(regression_statistics(x, y, r, b), axis=1)
    radius = statistics_radius(r, b)
    assert radius == pytest.approx(math.sqrt((1 + r * r) * (r * r + b * b)), rel=1e-15)
    assert norms.max() <= radius
    # ||x|| = r and |y| = B attain it (any direction: ||svec(x x^T)|| = ||x||^2 always)
    extreme = regression_statistics(np.array([r, 0.0]) @ np.array([[0.6, 0.8], [-0.8, 0.6]]), -b, r, b)
    assert np.linalg.norm(extreme) == pytest.approx(radius, rel=1e-12)


def test_l2ball_reports_have_one_norm_and_are_unbiased_with_the_stated_variance() -> None:
    spec = LinearSspSpec(dimension=2, norm_bound=1.5, label_bound=1.0, epsilon=1.0)
    x, y = np.array([0.9, -0.3]), 0.4
    rng = np.random.default_rng(2)
    count = 100_000
    reports = spec.randomize(0, STATE, {"x": np.tile(x, (count, 1)), "y": np.full(count, y)}, rng)["statistics"]
    np.testing.assert_allclose(np.linalg.norm(reports, axis=1), spec.report_norm, rtol=1e-12)
    truth = regression_statistics(x, y, 1.5, 1.0)
    error = 5 * spec.report_norm / math.sqrt(spec.length * count)
    np.testing.assert_array_less(np.abs(reports.mean(axis=0) - truth), error)
    # E[Z_k^2] = B^2 / D for every entry, whatever the input (report_variance is this bound)
    assert spec.report_variance == pytest.approx(spec.report_norm**2 / spec.length)
    second = (reports**2).mean(axis=0) / spec.report_variance
    np.testing.assert_allclose(second, 1.0, atol=5 * math.sqrt(2.0 / count) * spec.length)


def test_l2ball_density_ratio_between_extreme_participants_is_at_most_e_eps() -> None:
    """The report's law is the l2-ball law of s: its density ratio between the s of two participants at opposite
    extremes is at most e^eps, and reaches it."""
    r, b, eps = 1.0, 1.0, 0.8
    first = regression_statistics(np.array([r, 0.0]), b, r, b)
    second = regression_statistics(np.array([-r, 0.0]), -b, r, b)
    radius = statistics_radius(r, b)
    directions = np.random.default_rng(3).normal(size=(20_000, first.size))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    ratio = (l2_ball_output_density(directions, first, radius, eps)
             / l2_ball_output_density(directions, second, radius, eps))
    assert ratio.max() <= math.exp(eps) * (1 + 1e-12) and ratio.min() >= math.exp(-eps) * (1 - 1e-12)


def test_gaussian_reports_are_on_the_grid_and_calibrated() -> None:
    eps, delta = 1.0, 1e-6
    spec = LinearSspSpec(dimension=2, norm_bound=1.0, label_bound=1.0, epsilon=eps, delta=delta,
                         randomizer="gaussian")
    noise = spec.noise
    assert noise == statistics_noise(2, 1.0, 1.0, eps, delta)
    # the scale parameter covers the rounded vectors' diameter: g sqrt(t c) >= (2 R_s + 2 g sqrt(D)) / sqrt(2 rho)
    diameter = 2 * spec.radius + 2 * noise.grid * math.sqrt(spec.length)
    assert noise.scale >= diameter / math.sqrt(2 * cdp_rho(eps, delta))
    assert noise.grid <= min(noise.scale, 2 * spec.radius / math.sqrt(spec.length)) / 2**10
    rng = np.random.default_rng(4)
    count = 20_000
    x = np.tile([0.5, -0.5], (count, 1))
    reports = spec.randomize(0, STATE, {"x": x, "y": np.full(count, 0.25)}, rng)["statistics"]
    assert np.all(reports / noise.grid == np.floor(reports / noise.grid))
    truth = regression_statistics(x[0], 0.25, 1.0, 1.0)
    spread = math.sqrt(noise.variance + noise.grid**2)
    np.testing.assert_array_less(np.abs(reports.mean(axis=0) - truth), 5 * spread / math.sqrt(count))
    np.testing.assert_allclose(reports.var(axis=0) / noise.variance, 1.0, atol=0.05)
    spec.report_schema(0, STATE).validate({"statistics": reports})  # every honest report accepted


def test_the_charge_is_the_stated_epsilon_and_delta() -> None:
    pure = LinearSspSpec(dimension=1, norm_bound=1.0, label_bound=1.0, epsilon=0.7)
    assert [(r.group, r.epsilon, r.delta) for r in pure.rounds()] == [("all", 0.7, 0.0)]
    assert pure.max_participant_cost() == (0.7, 0.0)
    gaussian = LinearSspSpec(dimension=1, norm_bound=1.0, label_bound=1.0, epsilon=0.7, delta=1e-7,
                             randomizer="gaussian")
    assert gaussian.max_participant_cost() == (0.7, 1e-7)
    assert PROTOCOLS.get("linear-ssp") is LinearSspSpec and spec_from_json(gaussian.to_json()) == gaussian
    assert sorted(STATISTICS_RANDOMIZERS) == ["gaussian", "l2ball"] and STATISTICS_RANDOMIZERS["l2ball"].pure


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"delta": 1e-6}, "delta must be 0 with the l2ball randomizer"),
        ({"randomizer": "gaussian"}, "delta must be"),
        ({"randomizer": "privunit"}, "randomizer must be one of"),
        ({"ridge": -0.1}, "ridge"),
        ({"norm_bound": 0.0}, "norm_bound"),
        ({"epsilon": float("nan")}, "epsilon"),
    ],
)
def test_bad_specs_are_refused(kwargs: dict[str, object], pattern: str) -> None:
    settings = {"dimension": 2, "norm_bound": 1.0, "label_bound": 1.0, "epsilon": 1.0, **kwargs}
    with pytest.raises(ProtocolError, match=pattern):
        LinearSspSpec(**settings)  # type: ignore[arg-type]


def test_forged_reports_are_refused_and_the_output_support_does_not_depend_on_the_input() -> None:
    spec = LinearSspSpec(dimension=2, norm_bound=1.0, label_bound=1.0, epsilon=2.0)
    schema = spec.report_schema(0, STATE)
    rng = np.random.default_rng(5)
    low = spec.randomize(0, STATE, {"x": np.zeros((50, 2)), "y": np.zeros(50)}, rng)["statistics"]
    high = spec.randomize(0, STATE, {"x": np.ones((50, 2)), "y": np.ones(50)}, rng)["statistics"]
    np.testing.assert_allclose(np.linalg.norm(low, axis=1), np.linalg.norm(high, axis=1), rtol=1e-12)
    schema.validate({"statistics": np.vstack([low, high])})
    forged = low.copy()
    forged[3] *= 1.001  # a report moved off the sphere (entries still in range): further than any honest one
    with pytest.raises(ReportError, match="report 3: field 'statistics' has l2 norm") as refused:
        schema.validate({"statistics": forged})
    assert refused.value.field == "statistics" and refused.value.index == 3
    forged = low.copy()
    forged[0, 0] = np.nan
    with pytest.raises(ReportError, match="not a finite number"):
        schema.validate({"statistics": forged})
    gaussian = LinearSspSpec(dimension=2, norm_bound=1.0, label_bound=1.0, epsilon=2.0, delta=1e-6,
                             randomizer="gaussian")
    honest = gaussian.randomize(0, STATE, {"x": np.zeros((3, 2)), "y": np.zeros(3)}, rng)["statistics"]
    honest[1, 2] += gaussian.noise.grid / 2  # off the grid
    with pytest.raises(ReportError, match="report 1: field 'statistics' .* not a multiple of its grid step"):
        gaussian.report_schema(0, STATE).validate({"statistics": honest})


def test_participant_data_is_checked() -> None:
    spec = LinearSspSpec(dimension=2, norm_bound=1.0, label_bound=1.0, epsilon=1.0)
    with pytest.raises(ProtocolError, match="participant data 'x' must have shape"):
        spec.randomize(0, STATE, {"x": [1.0, 2.0, 3.0], "y": 1.0})
    with pytest.raises(ProtocolError, match="participant data 'y' must be finite"):
        spec.randomize(0, STATE, {"x": [1.0, 2.0], "y": float("inf")})
    with pytest.raises(ParameterError, match="randomizer must be one of"):
        randomize_regression_statistics([1.0], [1.0], norm_bound=1.0, label_bound=1.0, epsilon=1.0,
                                        randomizer="laplace")
