"""The device's exact samplers (CKS 2020, Algs. 1-3, vectorised): laws against their closed forms.

Fixed seeds; tolerances of 4 standard errors of the statistic under the stated law, or a chi-square p-value floor of
1e-4 against the exact pmf (cells with expected count below 5 merged into the tails).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from workloads.local.exact_noise import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    discrete_laplace_tail,
    discrete_laplace_variance,
)
from workloads.parameters import ParameterError

Z = 4.0
P_FLOOR = 1e-4


def _chi_square_pvalue(draws: np.ndarray, log_weights) -> float:  # noqa: ANN001
    """Chi-square test of integer draws against the pmf proportional to ``exp(log_weights(k))``."""
    span = int(np.abs(draws).max()) + 50
    support = np.arange(-span, span + 1)
    pmf = np.exp(log_weights(support) - log_weights(support).max())
    pmf /= pmf.sum()
    expected = pmf * draws.size
    observed = np.bincount(draws + span, minlength=support.size).astype(float)
    keep = expected >= 5
    first, last = np.flatnonzero(keep)[[0, -1]]
    obs = np.concatenate([[observed[:first + 1].sum()], observed[first + 1:last], [observed[last:].sum()]])
    exp = np.concatenate([[expected[:first + 1].sum()], expected[first + 1:last], [expected[last:].sum()]])
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize(("num", "den"), [(0, 1), (1, 3), (1, 1), (5, 2), (37, 10)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(num: int, den: int) -> None:
    rng = np.random.default_rng(num * 10 + den)
    count = 200_000
    draws = bernoulli_exp(np.full(count, num), den, rng)
    p = math.exp(-num / den)
    assert draws.dtype == bool and abs(draws.mean() - p) <= Z * math.sqrt(p * (1 - p) / count) + 1e-12


@pytest.mark.parametrize("t", [1, 3, 40, 4096])
def test_discrete_laplace_matches_its_pmf_mean_and_variance(t: int) -> None:
    rng = np.random.default_rng(t)
    count = 300_000
    draws = discrete_laplace(t, count, rng)
    assert draws.dtype == np.int64
    variance = discrete_laplace_variance(t)
    assert abs(draws.mean()) <= Z * math.sqrt(variance / count)
    # the sample variance's standard error: sqrt((mu_4 - sigma^4) / N), mu_4 <= 6 sigma^4 for this law
    assert abs(draws.var() - variance) <= Z * math.sqrt(5 * variance**2 / count)
    assert _chi_square_pvalue(draws, lambda k: -np.abs(k) / t) > P_FLOOR
    m = 3 * t
    tail = discrete_laplace_tail(m, t)
    assert abs(np.mean(np.abs(draws) >= m) - tail) <= Z * math.sqrt(tail / count)


def test_discrete_laplace_with_rational_scale() -> None:
    """Scale t/s = 7/3: P(x) proportional to exp(-3 |x| / 7)."""
    draws = discrete_laplace(7, 200_000, np.random.default_rng(11), s=3)
    assert _chi_square_pvalue(draws, lambda k: -3 * np.abs(k) / 7) > P_FLOOR


@pytest.mark.parametrize(("sigma2", "t"), [(Fraction(1, 2), None), (4, None), (30, 6), (1_000_000, 1000),
                                           (2 * 3**12, 3**6)])
def test_discrete_gaussian_matches_its_pmf_and_variance(sigma2, t) -> None:  # noqa: ANN001
    rng = np.random.default_rng(int(sigma2 * 2))
    count = 300_000
    draws = discrete_gaussian(sigma2, count, rng, t=t)
    s2 = float(sigma2)
    assert abs(draws.mean()) <= Z * math.sqrt(s2 / count)
    support = np.arange(-int(40 * math.sqrt(s2)) - 5, int(40 * math.sqrt(s2)) + 6)
    weights = np.exp(-support.astype(float) ** 2 / (2 * s2))
    variance = float(np.sum(support**2 * weights) / weights.sum())  # the exact variance (below sigma^2)
    assert variance <= s2 * (1 + 1e-12)
    assert abs(draws.var() - variance) <= Z * variance * math.sqrt(2 / count) + 1e-9
    assert _chi_square_pvalue(draws, lambda k: -k.astype(float) ** 2 / (2 * s2)) > P_FLOOR


def test_samplers_are_reproducible_with_a_seeded_generator_and_vectorised_shapes() -> None:
    first = discrete_gaussian(900, (4, 5), np.random.default_rng(3))
    assert first.shape == (4, 5)
    assert np.array_equal(first, discrete_gaussian(900, (4, 5), np.random.default_rng(3)))
    assert discrete_laplace(5, (), np.random.default_rng(1)).shape == ()


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda rng: discrete_laplace(0, 3, rng), "t"),
        (lambda rng: discrete_laplace(3, -1, rng), "size"),
        (lambda rng: discrete_gaussian(0.5, 3, rng), "sigma2"),
        (lambda rng: discrete_gaussian(-2, 3, rng), "sigma2"),
        (lambda rng: bernoulli_exp(-1, 2, rng), "num"),
        (lambda rng: discrete_laplace(3, 3, 7), "rng"),
    ],
)
def test_bad_parameters_are_refused(call, name: str) -> None:  # noqa: ANN001
    with pytest.raises(ParameterError, match=name):
        call(np.random.default_rng(0))
