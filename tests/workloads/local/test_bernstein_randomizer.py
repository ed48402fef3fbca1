"""The participant's side of the Local Bernstein Mechanism (Alg. 2) and of its 1-bit variant (Alg. 3).

Privacy is checked exactly (density and probability ratios over grids of inputs and outputs); unbiasedness and noise
scale by simulation with 5 standard errors (the standard error of a mean is estimated from the same draws).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from scipy import stats

from workloads.local.randomizers.bernstein import (
    bernstein_grid,
    grid_loss_noise,
    one_bit_coin_probability,
    one_bit_exact_parameters,
    one_bit_laplace_epsilon,
    one_bit_ldp_epsilon,
    one_bit_probability,
    one_bit_report,
    public_laplace_strings,
    randomize_grid_losses,
    squared_loss_on_grid,
)
from workloads.parameters import ParameterError


def test_grid_layout() -> None:
    grid = bernstein_grid(3, 2)
    assert grid.shape == (16, 2)
    np.testing.assert_allclose(grid[:4], [[0, 0], [0, 1 / 3], [0, 2 / 3], [0, 1]])  # last coordinate fastest
    assert bernstein_grid(4, 3).shape == (125, 3)
    with pytest.raises(ParameterError, match="dimension must be at most 3"):
        bernstein_grid(2, 4)


def test_grid_reports_are_unbiased_with_the_laplace_scale() -> None:
    rng = np.random.default_rng(4)
    n, grid_size, eps = 100_000, 9, 2.0
    values = np.linspace(-0.5, 1.5, grid_size)  # clipped to [0, 1] first
    reports = randomize_grid_losses(np.tile(values, (n, 1)), eps, rng)
    scale = grid_loss_noise(grid_size, eps).scale  # g t, at least G / eps (l1 sensitivity G of [0, 1]^G)
    assert scale == grid_size / eps
    standard_error = math.sqrt(2) * scale / math.sqrt(n)
    assert np.max(np.abs(reports.mean(axis=0) - np.clip(values, 0, 1))) < 5 * standard_error
    variance = reports.var(axis=0)  # Laplace(b) has variance 2 b^2; a sample variance has s.e. ~ sqrt(20/n) b^2
    assert np.max(np.abs(variance / (2 * scale**2) - 1)) < 5 * math.sqrt(5 / n)


def test_grid_reports_pmf_ratio_is_at_most_e_epsilon() -> None:
    """Exactly, in grid units: rounded losses lie in ``{0..U}^G`` (``U = 1/g``) and the discrete Laplace pmf ratio of
    an output ``k`` under two rounded vectors ``a, b`` is ``exp((|k - b|_1 - |k - a|_1) / t) <= exp(G U / t) <= e^eps``
    (integer arithmetic; the bound is attained below 0 everywhere)."""
    rng = np.random.default_rng(5)
    grid_size, eps = 6, 1.3
    noise = grid_loss_noise(grid_size, eps)
    top = round(1 / noise.grid)
    assert noise.grid * top == 1.0 and noise.t * eps >= grid_size * top  # t >= Delta_1 / eps, in exact integers
    inputs = [np.zeros(grid_size, dtype=np.int64), np.full(grid_size, top), rng.integers(0, top + 1, grid_size)]
    outputs = rng.integers(-3 * noise.t, 3 * noise.t, size=(2000, grid_size))
    worst = max(int((np.abs(outputs - b).sum(axis=1) - np.abs(outputs - a).sum(axis=1)).max())
                for a in inputs for b in inputs)
    assert worst <= grid_size * top <= eps * noise.t
    attained = int(np.abs(-1 - inputs[1]).sum() - np.abs(-1 - inputs[0]).sum())
    assert attained == grid_size * top and attained / noise.t >= eps * (1 - 2.0**-12)  # not over-noised


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0])
def test_one_bit_probability_ratio_is_exactly_e_epsilon(epsilon: float) -> None:
    y = np.linspace(-6, 7, 5201)
    v = np.linspace(0, 1, 201)
    p = np.array([one_bit_probability(np.full(y.size, value), y, epsilon) for value in v])  # (values, strings)
    assert np.all((p > 0) & (p < 1))
    log_ratio_one = np.log(p.max(axis=0) / p.min(axis=0)).max()
    log_ratio_zero = np.log((1 - p.min(axis=0)) / (1 - p.max(axis=0))).max()
    assert max(log_ratio_one, log_ratio_zero) <= epsilon + 1e-9
    assert log_ratio_zero == pytest.approx(epsilon, rel=1e-9)  # attained by v = 0 vs 1 at y >= 1


def test_the_printed_one_bit_calibration_is_not_epsilon_ldp() -> None:
    # Alg. 3 / Thm. 4 as printed: Laplace parameter = epsilon <= ln 2. The exact level is -ln(2 - e^eps).
    assert one_bit_ldp_epsilon(0.5) == pytest.approx(-math.log(2 - math.exp(0.5)))
    assert one_bit_ldp_epsilon(0.5) > 1.04
    assert one_bit_ldp_epsilon(math.log(2)) == math.inf
    for eps in (0.01, 0.5, 2.0, 10.0):
        a = one_bit_laplace_epsilon(eps)
        assert a < min(eps, math.log(2))
        assert one_bit_ldp_epsilon(a) == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("value", [0.0, 0.3, 1.0, 1.7])
def test_one_bit_estimate_is_unbiased(value: float) -> None:
    rng = np.random.default_rng(int(10 * value) + 1)
    n, eps = 400_000, 1.0
    strings = public_laplace_strings(n, eps, rng)
    bits = one_bit_report(np.full(n, value), strings, eps, rng)
    assert set(np.unique(bits)) <= {0, 1}
    samples = 2.0 * bits * strings
    assert abs(samples.mean() - min(value, 1.0)) < 5 * samples.std() / math.sqrt(n)


class _NoFloatGenerator(np.random.Generator):
    """A generator whose float uniforms fail: the exact coin must decide with integers only."""

    def random(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        raise AssertionError("the 1-bit coin drew a float uniform")


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_one_bit_coin_has_its_exact_probability(epsilon: float) -> None:
    """Chi-square of the bits' counts against the coin's law over (v, y) cells (the statistic sums the cells'
    squared standardized deviations: chi-square with one degree of freedom per cell), drawn with integers only."""
    values = np.array([0.0, 0.3, 1.0, 0.5, 0.77, 0.2, 1.0])
    strings = np.array([2.5, 0.5, -0.4, 0.0, 0.9, -3.0, 1.0])
    n = 60_000
    rng = _NoFloatGenerator(np.random.PCG64(int(epsilon * 10)))
    bits = one_bit_report(np.repeat(values, n), np.repeat(strings, n), epsilon, rng).reshape(values.size, n)
    p = one_bit_coin_probability(values, strings, epsilon)
    statistic = float((((bits.sum(axis=1) - n * p) ** 2) / (n * p * (1 - p))).sum())
    assert stats.chi2.sf(statistic, values.size) > 1e-4


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 3.0, 8.0])
def test_one_bit_coin_law_is_algorithm_3_and_epsilon_ldp(epsilon: float) -> None:
    """The coin's law is Alg. 3's within 2^-19 relative; a'' < ln(2 - e^-eps') (50 digits); the rounded law's
    largest log-ratio between two inputs is at most eps (bit 0: attained within 1e-6 at v = 0 vs 1, y >= 1)."""
    eps, a = one_bit_exact_parameters(epsilon)
    assert eps <= epsilon and float(eps) == pytest.approx(epsilon, rel=2.0**-39)
    with localcontext() as context:
        context.prec = 50
        exact_a = (2 - (-Decimal(eps.numerator) / Decimal(eps.denominator)).exp()).ln()
        assert Decimal(a.numerator) / Decimal(a.denominator) < exact_a
    y = np.linspace(-3, 3, 1201)
    v = np.linspace(0, 1, 101)
    p = np.array([one_bit_coin_probability(np.full(y.size, value), y, epsilon) for value in v])
    intended = np.array([one_bit_probability(np.full(y.size, value), y, epsilon) for value in v])
    assert np.max(np.abs(p / intended - 1)) < 2.0**-19
    log_ratio_one = np.log(p.max(axis=0) / p.min(axis=0)).max()
    log_ratio_zero = np.log((1 - p.min(axis=0)) / (1 - p.max(axis=0))).max()
    assert max(log_ratio_one, log_ratio_zero) <= epsilon * (1 + 1e-12)
    assert log_ratio_zero == pytest.approx(epsilon, rel=1e-6)


def test_squared_loss_on_grid() -> None:
    grid = bernstein_grid(2, 2)
    loss = squared_loss_on_grid(grid, [1.0, -1.0], 0.5, lower=-1.0, upper=1.0, scale=16.0)
    thetas = -1.0 + 2.0 * grid
    np.testing.assert_allclose(loss, (thetas @ [1.0, -1.0] - 0.5) ** 2 / 16.0)
    with pytest.raises(ParameterError, match="x must have 2 entries"):
        squared_loss_on_grid(grid, [1.0], 0.5, -1.0, 1.0, 16.0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda rng: randomize_grid_losses([0.1, 0.2], 0.0, rng), "epsilon"),
        (lambda rng: randomize_grid_losses([0.1, np.nan], 1.0, rng), "loss_values"),
        (lambda rng: public_laplace_strings(0, 1.0, rng), "count"),
        (lambda rng: one_bit_report([0.1, 0.2], [1.0], 1.0, rng), "public_string"),
        (lambda rng: one_bit_report([0.1], [1.0], -1.0, rng), "epsilon"),
    ],
)
def test_bad_parameters_fail_before_any_draw(call, name: str) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(ParameterError, match=name):
        call(rng)
    assert rng.bit_generator.state == before
