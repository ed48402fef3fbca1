"""PrivUnit2 (Bhowmick et al. 2018): its constants against scipy, unbiasedness, variance, laws and privacy ratio.

Statistical tolerances: 5 standard errors (false alarm below 1e-6 per check), KS tests at p > 1e-4; seeds are fixed,
so each run is reproducible. scipy (tests only; the randomizer itself is numpy + stdlib) gives independent values of
the cap fraction (``betainc``) and of the cosine's mean (``quad``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, special, stats

from workloads.local.randomizers import privunit as privunit_module
from workloads.local.randomizers.l2ball import exact_epsilon, l2_ball_output_norm
from workloads.local.randomizers.privunit import (
    PrivUnitParameters,
    cap_fraction_bounds,
    privunit2,
    privunit2_scaled,
    privunit_ball_output_norm,
    privunit_ball_randomize,
    privunit_output_density,
    privunit_parameters,
    privunit_variance,
)
from workloads.parameters import ParameterError


def _cap_fraction(d: int, gamma: float) -> float:
    """``P(<U, u> >= gamma)`` for ``gamma >= 0``: half a regularized incomplete beta (scipy)."""
    return 0.5 * special.betainc((d - 1) / 2, 0.5, (1 - gamma) * (1 + gamma))  # 1 - gamma^2 without cancellation


def _cosine_cdf(d: int, t: np.ndarray) -> np.ndarray:
    """``P(<U, u> <= t)`` for ``t`` in [-1, 1] (scipy)."""
    upper = 0.5 * special.betainc((d - 1) / 2, 0.5, 1 - t * t)
    return np.where(t >= 0, 1 - upper, upper)


def _mean_cosine_quad(d: int, p: float, gamma: float) -> float:
    """``E[<V, u>]`` by numerical integration of the cosine's density (scipy), independent of the closed form."""
    c = math.exp(special.gammaln(d / 2) - special.gammaln((d - 1) / 2)) / math.sqrt(math.pi)

    def density(t: float) -> float:
        return c * (1 - t * t) ** ((d - 3) / 2)

    q = _cap_fraction(d, gamma)
    inside = integrate.quad(lambda t: t * density(t), gamma, 1, epsabs=1e-14, epsrel=1e-12)[0]
    return p * inside / q - (1 - p) * inside / (1 - q)


# ------------------------------------------------------------------------------------------------ the constants
@pytest.mark.parametrize("d", [2, 3, 4, 5, 10, 11, 60, 61, 257])
@pytest.mark.parametrize("gamma", [0.0, 0.05, 0.3, 0.7])
def test_cap_fraction_enclosure_contains_scipys_value(d: int, gamma: float) -> None:
    lower, upper = cap_fraction_bounds(d, gamma)
    reference = _cap_fraction(d, gamma)
    assert isinstance(lower, Fraction) and lower <= upper
    assert upper - lower < Fraction(1, 10**40)  # a proven enclosure, far tighter than a float
    assert float(lower) == pytest.approx(reference, rel=1e-12, abs=1e-300)
    assert float(upper) == pytest.approx(reference, rel=1e-12, abs=1e-300)
    if gamma == 0.0:
        assert lower <= Fraction(1, 2) <= upper


def test_cap_fraction_known_closed_forms() -> None:
    for gamma in (0.1, 0.5, 0.9):
        g = Fraction(gamma)
        assert cap_fraction_bounds(3, gamma) == ((1 - g) / 2, (1 - g) / 2)  # Archimedes: exact
        assert cap_fraction_bounds(5, gamma)[0] == (1 - g) / 2 - g * (1 - g * g) / 4
        lower, upper = cap_fraction_bounds(2, gamma)  # arccos(gamma) / pi
        assert float(lower) == pytest.approx(math.acos(gamma) / math.pi, rel=1e-15)
        assert float(upper) == pytest.approx(math.acos(gamma) / math.pi, rel=1e-15)


def _arctan_inverse(x: int, unity: int) -> int:
    """``atan(1/x) * unity`` by the alternating series, truncated (error below a few units)."""
    total, power, n, sign = 0, unity // x, 1, 1
    while power:
        total += sign * (power // n)
        power //= x * x
        n, sign = n + 2, -sign
    return total


def test_the_pi_enclosure_is_right() -> None:
    # Machin: pi = 16 atan(1/5) - 4 atan(1/239), in integers with 70 digits (error below 10^-65)
    unity = 10**70
    pi_scaled = 16 * _arctan_inverse(5, unity) - 4 * _arctan_inverse(239, unity)
    pi_low = privunit_module._PI_DIGITS
    assert pi_low * unity < pi_scaled - 10**5 and pi_scaled + 10**5 < (pi_low + Fraction(1, 10**50)) * unity


@pytest.mark.parametrize("d", [2, 3, 10, 30, 61, 200])
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0, 12.0, 30.0])
def test_parameters_guarantee_epsilon_exactly(d: int, epsilon: float) -> None:
    params = privunit_parameters(d, epsilon)
    assert params.dimension == d and params.requested_epsilon == epsilon
    # the guaranteed level: coin + log((1 - q_lower)/q_lower), at most epsilon, within 2^-30 of it
    assert params.epsilon <= epsilon and epsilon - params.epsilon < epsilon * 2**-30
    level_bound = params.cap_coin_epsilon + math.log((1 - params.q_lower) / params.q_lower)
    assert params.cap_epsilon == pytest.approx(level_bound - params.cap_coin_epsilon, rel=1e-12, abs=1e-12)
    assert level_bound == pytest.approx(params.epsilon, rel=1e-14)
    assert level_bound <= epsilon * (1 + 1e-15)
    # the coin: p = e^eps0 / (1 + e^eps0) with a dyadic eps0 (the exact coin's level)
    assert Fraction(params.cap_coin_epsilon).denominator <= 2**62
    assert exact_epsilon(params.cap_coin_epsilon) == Fraction(params.cap_coin_epsilon)  # the coin runs at it exactly
    assert params.p == pytest.approx(1 / (1 + math.exp(-params.cap_coin_epsilon)), rel=1e-15)
    # the level recomputed from scipy's cap fraction is the guaranteed one
    q = _cap_fraction(d, params.gamma)
    assert params.q_lower <= Fraction(q * (1 + 1e-12)) and Fraction(q * (1 - 1e-12)) <= params.q_upper
    assert params.q == pytest.approx(q, rel=1e-12)
    exact_level = params.cap_coin_epsilon + math.log((1 - q) / q)  # log(p / (1 - p)) loses 1 - p's digits
    assert exact_level == pytest.approx(epsilon, abs=1e-9)
    # gamma on the public 2^-40 grid, in [0, 1)
    assert 0 <= params.gamma < 1 and (params.gamma * 2**40).is_integer()


@pytest.mark.parametrize(
    ("d", "epsilon"), [(2, 1.0), (3, 2.0), (10, 0.5), (10, 4.0), (30, 8.0), (60, 2.0), (100, 16.0)]
)
def test_scale_is_the_inverse_mean_cosine_and_nearly_optimal(d: int, epsilon: float) -> None:
    params = privunit_parameters(d, epsilon)
    assert 1 / params.scale == pytest.approx(_mean_cosine_quad(d, params.p, params.gamma), rel=1e-8)
    # brute force over a dense gamma grid, each with the largest p the level allows (scipy): ours is within 0.1 %
    best = 0.0
    for gamma in np.linspace(0, 0.999, 4000):
        q = _cap_fraction(d, gamma)
        coin = epsilon - math.log((1 - q) / q)
        if coin > 0:
            p = 1 / (1 + math.exp(-coin))
            c = math.exp(math.lgamma(d / 2) - math.lgamma((d - 1) / 2)) / math.sqrt(math.pi)
            best = max(best, (p / q - (1 - p) / (1 - q)) * c * (1 - gamma * gamma) ** ((d - 1) / 2) / (d - 1))
    assert 1 / params.scale >= best * (1 - 1e-3)


@pytest.mark.parametrize("d", [10, 30, 60])
@pytest.mark.parametrize("epsilon", [1.0, 2.0, 4.0, 8.0])
def test_variance_is_below_the_l2_ball_randomizers(d: int, epsilon: float) -> None:
    # Asi, Feldman & Talwar 2022: PrivUnit2 is the optimal unbiased randomizer of the sphere; the l2-ball one is not
    params = privunit_parameters(d, epsilon)
    assert privunit_variance(params) == pytest.approx(params.scale**2 - 1)
    assert privunit_variance(params, 0.5) == pytest.approx(params.scale**2 - 0.25)
    assert privunit_variance(params) < l2_ball_output_norm(d, 1.0, epsilon) ** 2 - 1


def test_parameters_are_deterministic_and_large_dimensions_work() -> None:
    assert privunit_parameters(20, 2.0) == privunit_parameters(20, 2.0)
    big = privunit_parameters(2000, 1.0)
    assert big.epsilon <= 1.0 and math.isfinite(big.scale)
    assert big.scale == pytest.approx(1 / _mean_cosine_quad(2000, big.p, big.gamma), rel=1e-6)


# ------------------------------------------------------------------------------------------------ the sampler
def _unit(d: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=d)
    return v / np.linalg.norm(v)


@pytest.mark.parametrize(("d", "epsilon"), [(2, 1.0), (3, 4.0), (10, 1.0), (10, 8.0), (40, 2.0)])
def test_reports_are_unbiased_with_the_closed_form_variance(d: int, epsilon: float) -> None:
    rng = np.random.default_rng(100 * d + int(epsilon))
    params = privunit_parameters(d, epsilon)
    u = _unit(d, d)
    n = 100_000
    reports = privunit2(np.tile(u, (n, 1)), params, rng)
    assert reports.shape == (n, d)
    # every report has norm m (up to the 2^-32 grid rounding)
    np.testing.assert_allclose(np.linalg.norm(reports, axis=1), params.scale, rtol=math.sqrt(d) * 2**-31)
    standard_error = reports.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(reports.mean(axis=0) - u) < 5 * standard_error)
    # covariance trace m^2 - 1: the mean of ||R - u||^2, whose standard error comes from its sample spread
    spread = np.sum((reports - u) ** 2, axis=1)
    assert abs(spread.mean() - privunit_variance(params)) < 5 * spread.std() / math.sqrt(n) + 1e-9


@pytest.mark.parametrize(("d", "epsilon"), [(3, 0.5), (30, 0.5), (10, 1.0), (10, 8.0), (60, 6.0)])
def test_the_cap_coin_and_the_cosine_law(d: int, epsilon: float) -> None:
    rng = np.random.default_rng(7 * d)
    params = privunit_parameters(d, epsilon)
    u = _unit(d, 1)
    n = 60_000
    cosines = privunit2(np.tile(u, (n, 1)), params, rng) @ u / params.scale
    in_cap = cosines >= params.gamma
    # the coin: P(cap) = p exactly (chi-square on the two cells)
    observed = np.array([in_cap.sum(), n - in_cap.sum()])
    expected = n * np.array([params.p, 1 - params.p])
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # within each side, the cosine follows c_d (1 - t^2)^((d-3)/2) restricted to the side (the cap's Beta proposal
    # at epsilon 0.5, its power proposal elsewhere)
    g, q = params.gamma, _cap_fraction(d, params.gamma)
    cap = stats.kstest(cosines[in_cap], lambda t: (_cosine_cdf(d, np.minimum(t, 1.0)) - (1 - q)) / q)
    rest = stats.kstest(cosines[~in_cap], lambda t: _cosine_cdf(d, np.minimum(t, g)) / (1 - q))
    assert cap.pvalue > 1e-4 and rest.pvalue > 1e-4


def _angle_histogram(reports: np.ndarray, bins: int) -> np.ndarray:
    angles = np.arctan2(reports[:, 1], reports[:, 0])
    return np.histogram(angles, bins=bins, range=(-math.pi, math.pi))[0]


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_empirical_privacy_ratio_on_the_circle(epsilon: float) -> None:
    rng = np.random.default_rng(int(10 * epsilon))
    params = privunit_parameters(2, epsilon)
    n, bins = 200_000, 36
    u = np.array([math.cos(0.3), math.sin(0.3)])
    inputs = {"u": u, "opposite": -u, "orthogonal": np.array([-u[1], u[0]])}
    counts = {name: _angle_histogram(privunit2(np.tile(v, (n, 1)), params, rng), bins) for name, v in inputs.items()}
    for a in counts:
        for b in counts:
            if a == b:
                continue
            ratio = np.log(counts[a] / counts[b])
            tolerance = 5 * np.sqrt(1 / counts[a] + 1 / counts[b])
            assert np.all(ratio <= params.epsilon + tolerance), (a, b)
    # opposite inputs attain epsilon: some bin lies in the cap of u and outside the cap of -u
    ratio = np.log(counts["u"] / counts["opposite"])
    tolerance = 5 * np.sqrt(1 / counts["u"] + 1 / counts["opposite"])
    assert np.max(ratio + tolerance) >= params.epsilon
    assert np.max(ratio) >= params.epsilon - 0.15


def test_output_density_ratio_is_e_epsilon() -> None:
    params = privunit_parameters(5, 1.5)
    rng = np.random.default_rng(2)
    directions = rng.normal(size=(5000, 5))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    inputs = [_unit(5, seed) for seed in range(10)] + [-_unit(5, 0)]
    densities = np.array([privunit_output_density(directions, v, params) for v in inputs])
    assert np.max(densities[:, np.newaxis] / densities[np.newaxis]) <= math.exp(params.epsilon) * (1 + 1e-9)
    assert densities[0].max() / densities[-1].min() == pytest.approx(math.exp(params.epsilon), rel=1e-9)
    # the density integrates to one: p/q on a set of measure q, (1-p)/(1-q) on the rest
    assert np.mean(densities[0]) == pytest.approx(1.0, abs=0.05)


def test_reports_lie_on_the_public_grid_whatever_the_input() -> None:
    # u = e_1 would put the float cosine itself in the first coordinate; after rounding every coordinate of every
    # report is m times a multiple of 2^-32
    rng = np.random.default_rng(4)
    params = privunit_parameters(6, 3.0)
    for u in (np.eye(6)[0], np.eye(6)[3], _unit(6, 9)):
        reports = privunit2(np.tile(u, (2000, 1)), params, rng)
        units = reports / params.scale * 2**32
        np.testing.assert_allclose(units, np.round(units), atol=1e-3)


def test_scaled_inputs_are_unbiased_for_s_z() -> None:
    rng = np.random.default_rng(8)
    d, n = 8, 100_000
    params = privunit_parameters(d, 2.0)
    z = np.tile(_unit(d, 3), (n, 1))
    for s in (-0.6, 0.0, 0.3, 1.0):
        reports = privunit2_scaled(z, np.full(n, s), params, rng)
        standard_error = reports.std(axis=0) / math.sqrt(n)
        assert np.all(np.abs(reports.mean(axis=0) - s * z[0]) < 5 * standard_error)
        spread = np.sum((reports - s * z[0]) ** 2, axis=1)
        assert abs(spread.mean() - privunit_variance(params, s)) < 5 * spread.std() / math.sqrt(n) + 1e-9
    one = privunit2_scaled(z[0], 0.5, params, rng)
    assert one.shape == (d,)


def test_same_seed_same_reports_and_a_single_vector() -> None:
    params = privunit_parameters(7, 2.0)
    units = np.vstack([_unit(7, seed) for seed in range(50)])
    first = privunit2(units, params, np.random.default_rng(3))
    second = privunit2(units, params, np.random.default_rng(3))
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, privunit2(units, params, np.random.default_rng(4)))
    assert privunit2(units[0], params, np.random.default_rng(3)).shape == (7,)
    assert privunit2(units[0], params).shape == (7,)  # the device's own generator


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf"), True, "1", None])
def test_bad_epsilon_is_refused(epsilon: object) -> None:
    with pytest.raises(ParameterError, match="epsilon"):
        privunit_parameters(5, epsilon)  # type: ignore[arg-type]


@pytest.mark.parametrize("dimension", [0, 1, -3, 2.5, True, "4"])
def test_bad_dimension_is_refused(dimension: object) -> None:
    with pytest.raises(ParameterError, match="dimension"):
        privunit_parameters(dimension, 1.0)  # type: ignore[arg-type]


def test_bad_inputs_name_the_row_and_draw_nothing() -> None:
    params = privunit_parameters(3, 1.0)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    units = np.tile(np.array([1.0, 0.0, 0.0]), (5, 1))
    units[3] = [0.6, 0.6, 0.0]
    with pytest.raises(ParameterError, match="units row 3 must be a unit vector"):
        privunit2(units, params, rng)
    with pytest.raises(ParameterError, match="units must have 3 entries"):
        privunit2(np.ones((2, 4)) / 2, params, rng)
    with pytest.raises(ParameterError, match="units must be finite"):
        privunit2([1.0, float("nan"), 0.0], params, rng)
    with pytest.raises(ParameterError, match="parameters"):
        privunit2(units[:3], {"scale": 2.0}, rng)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="scalars entry 1 must lie in"):
        privunit2_scaled(units[:3], [0.5, 1.5, 0.0], params, rng)
    with pytest.raises(ParameterError, match="one entry per row"):
        privunit2_scaled(units[:3], [0.5, 0.5], params, rng)
    with pytest.raises(ParameterError, match="vectors row 3"):
        privunit2_scaled(units, np.zeros(5), params, rng)
    with pytest.raises(ParameterError, match="rng"):
        privunit2(units[:3], params, 42)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="gamma"):
        cap_fraction_bounds(3, 1.5)
    assert rng.bit_generator.state == before
    assert isinstance(params, PrivUnitParameters)


# ----------------------------------------------------------------------------------- the l2-ball interface (protocols)
def test_ball_reports_are_unbiased_with_the_stated_norm_and_variance() -> None:
    from workloads.local.randomizers.privunit import (
        cached_privunit_parameters,
        privunit_ball_output_norm,
        privunit_ball_randomize,
    )

    rng = np.random.default_rng(11)
    d, radius, eps, n = 5, 2.0, 2.0, 60_000
    v = np.array([0.6, -0.3, 0.0, 0.9, 0.2])  # inside the ball
    reports = privunit_ball_randomize(np.tile(v, (n, 1)), radius, eps, rng)
    norm = privunit_ball_output_norm(d, radius, eps)
    assert np.allclose(np.linalg.norm(reports, axis=1), norm, rtol=1e-6)
    standard_error = norm / np.sqrt(d * n)
    assert np.all(np.abs(reports.mean(axis=0) - v) < 5 * standard_error)
    trace = float(np.sum(reports.var(axis=0)))
    expected = radius**2 * cached_privunit_parameters(d, eps).scale ** 2 - float(v @ v)
    assert abs(trace - expected) < 0.03 * expected


def test_ball_clips_long_rows_and_handles_the_zero_vector() -> None:
    from workloads.local.randomizers.privunit import privunit_ball_randomize

    rng = np.random.default_rng(12)
    n = 40_000
    long_row = np.array([30.0, 40.0])  # norm 50, clipped to radius 1: (0.6, 0.8)
    reports = privunit_ball_randomize(np.tile(long_row, (n, 1)), 1.0, 4.0, rng)
    assert np.allclose(reports.mean(axis=0), [0.6, 0.8], atol=0.05)
    zero = privunit_ball_randomize(np.zeros((n, 3)), 1.0, 4.0, rng)
    assert np.all(np.abs(zero.mean(axis=0)) < 0.05)
    single = privunit_ball_randomize(np.array([0.1, 0.2, 0.3]), 1.0, 1.0, rng)
    assert single.shape == (3,)


@pytest.mark.parametrize(("dimension", "epsilon"), [(2, 1.0), (5, 2.0), (11, 4.0), (30, 8.0)])
def test_direction_moments_match_the_sampled_second_moment(dimension: int, epsilon: float) -> None:
    from workloads.local.randomizers.privunit import privunit_direction_moments

    parameters = privunit_parameters(dimension, epsilon)
    alpha, beta = privunit_direction_moments(parameters)
    assert alpha + (dimension - 1) * beta == pytest.approx(1.0)
    unit = np.zeros(dimension)
    unit[0] = 1.0
    directions = privunit2(np.tile(unit, (80_000, 1)), parameters, np.random.default_rng(5)) / parameters.scale
    assert np.mean(directions[:, 0] ** 2) == pytest.approx(alpha, abs=0.01)
    assert np.mean(directions[:, 1:] ** 2) == pytest.approx(beta, abs=0.01 / dimension + 0.002)


@pytest.mark.parametrize("d", [2, 4, 17])
def test_a_very_large_epsilon_gives_parameters_not_an_overflow(d: int) -> None:
    """epsilon 1000 (a benchmark's noise-free setting): the search's ``1 / (1 + e^epsilon)`` is computed without
    overflowing; the level is still at most epsilon and the reports nearly unit (``m`` near 1)."""
    parameters = privunit_parameters(d, 1000.0)
    assert parameters.epsilon <= 1000.0 and 1.0 <= parameters.scale < 1.001
    reports = privunit_ball_randomize(np.eye(d)[:2] * 0.5, 1.0, 1000.0, np.random.default_rng(0))
    np.testing.assert_allclose(np.linalg.norm(reports, axis=1), privunit_ball_output_norm(d, 1.0, 1000.0), rtol=1e-8)
