"""The randomizers participants run: their noise distributions, unbiasedness, variances and privacy ratios.

Statistical checks use fixed seeds and tolerances of 4 standard errors computed from the known distribution (a
correct randomizer fails such a check with probability about 6e-5), or a p-value floor of 1e-4 for KS tests.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from tests.support.worst_case import attaining_pair, statistic
from workloads.conversions import cdp_delta, cdp_rho
from workloads.local.randomizers.laplace import interval_scale, randomize_interval_values
from workloads.local.randomizers.sufficient_statistics import (
    clip_features,
    default_xy_ratio,
    noise_scales,
    randomize_sufficient_statistics,
    sufficient_statistics,
)
from workloads.local.randomizers.two_round_projection import randomize_projection
from workloads.local.rng import device_rng, generator_or_device
from workloads.parameters import ParameterError

Z = 4.0
P_FLOOR = 1e-4


# ------------------------------------------------------------------------------------------------------- Laplace
def test_laplace_reports_are_unbiased_with_the_stated_variance() -> None:
    rng = np.random.default_rng(1)
    lower, upper, epsilon, count = -2.0, 3.0, 0.7, 400_000
    scale = interval_scale(lower, upper, epsilon)
    assert scale * epsilon >= upper - lower
    reports = randomize_interval_values(np.full(count, 1.25), lower, upper, epsilon, rng)
    assert abs(reports.mean() - 1.25) <= Z * math.sqrt(2) * scale / math.sqrt(count)
    # variance 2 b^2; the sample variance has standard error sqrt((mu_4 - sigma^4) / N), mu_4 = 24 b^4
    assert abs(reports.var() - 2 * scale**2) <= Z * math.sqrt(20 * scale**4 / count)
    assert stats.kstest(reports - 1.25, stats.laplace(scale=scale).cdf).pvalue > P_FLOOR


def test_laplace_values_are_clipped_into_the_interval_first() -> None:
    rng = np.random.default_rng(2)
    count = 200_000
    reports = randomize_interval_values(np.full(count, 40.0), 0.0, 1.0, 2.0, rng)
    assert abs(reports.mean() - 1.0) <= Z * math.sqrt(2) * 0.5 / math.sqrt(count)


def test_laplace_density_ratio_is_at_most_e_to_the_epsilon() -> None:
    """Exactly: the log ratio of the report's densities under any two inputs is (|z - v'| - |z - v|) / b, at most
    (upper - lower) / b <= epsilon, with b the scale the randomizer draws with."""
    lower, upper, epsilon = 0.0, 1.0, 1.3
    scale = interval_scale(lower, upper, epsilon)
    assert (upper - lower) / scale <= epsilon  # the exact statement; below, a numerical look (float rounding 1e-12)
    z = np.linspace(-20, 20, 100_001)
    for v, v_prime in [(lower, upper), (0.3, 0.9), (upper, lower)]:
        log_ratio = stats.laplace(v, scale).logpdf(z) - stats.laplace(v_prime, scale).logpdf(z)
        assert log_ratio.max() <= epsilon + 1e-12


def test_laplace_empirical_privacy_ratio() -> None:
    """The frequencies of the randomizer's own outputs under the two extreme inputs, binned, never differ by more than
    e^epsilon beyond sampling error (log ratio standard error sqrt(1/c1 + 1/c2) per bin)."""
    rng = np.random.default_rng(3)
    epsilon, count = 1.0, 500_000
    low = randomize_interval_values(np.zeros(count), 0.0, 1.0, epsilon, rng)
    high = randomize_interval_values(np.ones(count), 0.0, 1.0, epsilon, rng)
    edges = np.linspace(-4, 5, 46)
    c_low, _ = np.histogram(low, edges)
    c_high, _ = np.histogram(high, edges)
    keep = (c_low > 500) & (c_high > 500)
    log_ratio = np.abs(np.log(c_low[keep] / c_high[keep]))
    error = np.sqrt(1 / c_low[keep] + 1 / c_high[keep])
    assert np.all(log_ratio <= epsilon + Z * error)
    assert np.max(log_ratio) >= epsilon - 0.1  # the tails attain the bound (the mechanism is not over-noised)


# ---------------------------------------------------------------------------------------------- sufficient statistics
def test_sufficient_statistics_layout() -> None:
    x = np.array([1.0, 2.0, 3.0])
    out = sufficient_statistics(x, 0.5)
    assert out["xx"].tolist() == [1.0, 2.0, 3.0, 4.0, 6.0, 9.0]
    assert out["xy"].tolist() == [0.5, 1.0, 1.5]
    assert list(sufficient_statistics(x, 0.5, gram=False)) == ["xy"]


def test_clipping_scales_rows_into_the_ball() -> None:
    x = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    l2 = clip_features(x, 1.0, "l2")
    assert np.linalg.norm(l2[0]) <= 1.0 and np.linalg.norm(l2[0]) == pytest.approx(1.0, rel=1e-12)
    assert np.allclose(l2[0], [0.6, 0.8]) and np.array_equal(l2[1:], x[1:])
    l1 = clip_features(x, 1.0, "l1")
    assert np.abs(l1[0]).sum() <= 1.0 and np.allclose(l1[0], [3 / 7, 4 / 7])


def test_gaussian_reports_are_unbiased_with_the_stated_variances() -> None:
    rng = np.random.default_rng(4)
    count, r, b, epsilon, delta = 200_000, 2.0, 1.0, 2.0, 1e-6
    x = np.array([0.5, -1.0, 0.8])
    reports = randomize_sufficient_statistics(np.tile(x, (count, 1)), np.full(count, 0.7), norm_bound=r,
                                              label_bound=b, epsilon=epsilon, delta=delta, rng=rng)
    scales = noise_scales(3, r, b, epsilon, delta)
    assert scales.xy == pytest.approx(default_xy_ratio(r, b) * scales.xx, rel=2.0**-9)  # each rounded to its grid
    sigma = np.array([scales.xx] * 6 + [scales.xy] * 3)
    exact = sufficient_statistics(x, 0.7)
    noise = np.concatenate([reports["xx"] - exact["xx"], reports["xy"] - exact["xy"]], axis=1)
    assert np.all(np.abs(noise.mean(axis=0)) <= Z * sigma / math.sqrt(count))
    # sample variance of Gaussian noise: standard error sigma^2 sqrt(2 / N) (the discrete Gaussian's variance is
    # sigma^2 up to e^(-2 pi^2 sigma_units^2), and rounding adds at most g^2 / 4 = 2^-22 sigma^2)
    assert np.all(np.abs(noise.var(axis=0) - sigma**2) <= Z * sigma**2 * math.sqrt(2 / count))
    # independent entries: correlations are N(0, 1/N)
    correlation = np.corrcoef(noise.T) - np.eye(noise.shape[1])
    assert np.abs(correlation).max() <= (Z + 1) / math.sqrt(count)
    assert stats.kstest(noise[:, 0] / scales.xx, "norm").pvalue > P_FLOOR
    assert stats.kstest(noise[:, -1] / scales.xy, "norm").pvalue > P_FLOOR


def test_gram_free_reports_have_less_noise() -> None:
    rng = np.random.default_rng(5)
    out = randomize_sufficient_statistics(np.zeros((100_000, 4)), np.zeros(100_000), norm_bound=5.0, label_bound=1.0,
                                          epsilon=1.0, delta=1e-6, gram=False, rng=rng)
    sigma = noise_scales(4, 5.0, 1.0, 1.0, 1e-6, gram=False).xy
    assert list(out) == ["xy"] and noise_scales(4, 5.0, 1.0, 1.0, 1e-6, gram=False).xx is None
    assert sigma < noise_scales(4, 5.0, 1.0, 1.0, 1e-6).xy
    assert np.all(np.abs(out["xy"].std(axis=0) - sigma) <= Z * sigma / math.sqrt(2 * 100_000))


def test_participants_outside_the_bounds_report_their_clipped_values() -> None:
    """No ⊥: a participant with a large x and y sends a report from the same output space, centred on the clipped
    statistic."""
    rng = np.random.default_rng(6)
    count = 100_000
    x = np.array([30.0, 40.0])  # norm 50, bound 5
    reports = randomize_sufficient_statistics(np.tile(x, (count, 1)), np.full(count, 9.0), norm_bound=5.0,
                                              label_bound=1.0, epsilon=3.0, delta=1e-5, rng=rng)
    expected = sufficient_statistics(np.array([3.0, 4.0]), 1.0)
    scales = noise_scales(2, 5.0, 1.0, 3.0, 1e-5)
    for name, sigma in (("xx", scales.xx), ("xy", scales.xy)):
        assert np.all(np.abs(reports[name].mean(axis=0) - expected[name]) <= Z * sigma / math.sqrt(count))


@pytest.mark.parametrize("ratio", [None, 0.3, 4.0])
@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 0.01), (0.5, 1e-6), (8.0, 1e-7)])
def test_gaussian_report_calibration_is_exact_in_grid_units(ratio: float | None, epsilon: float, delta: float) -> None:
    """The discrete mechanism's zCDP, computed from the noise it actually draws: for the pair of inputs attaining the
    weighted diameter, rounded the worst way (each entry one grid step further apart), the shift in units of each
    entry's discrete Gaussian scale has ``mu^2 / 2 <= cdp_rho(epsilon, delta)`` (so (epsilon, delta)-LDP by CKS
    Cor. 13), and without the rounding allowance ``mu^2 / 2`` is within 1 % of it (calibrated tightly)."""
    dimension, r, b = 3, 1.5, 1.0
    weight = 1.0 / (default_xy_ratio(r, b) if ratio is None else ratio)
    x, _, x_prime, _ = attaining_pair(dimension, r, b * weight)  # extremal in the weighted space
    noise = noise_scales(dimension, r, b, epsilon, delta, xy_ratio=ratio)
    parts = [noise.xx_noise] * 6 + [noise.xy_noise] * 3
    grid = np.array([part.grid for part in parts])
    sigma = grid * np.sqrt([part.t * part.c for part in parts])  # exact scale parameters of the draws
    shift = np.abs(statistic(x, b) - statistic(x_prime, -b))
    rho = cdp_rho(epsilon, delta)
    assert float(np.sum(((shift + 2 * grid) / sigma) ** 2)) / 2 <= rho
    assert float(np.sum((shift / sigma) ** 2)) / 2 >= 0.99 * rho
    assert cdp_delta(float(np.sum(((shift + 2 * grid) / sigma) ** 2)) / 2, epsilon) <= delta


def test_gaussian_reports_are_on_each_parts_grid_for_every_input() -> None:
    rng = np.random.default_rng(10)
    reports = randomize_sufficient_statistics(rng.normal(size=(5000, 3)) * 3, rng.normal(size=5000), norm_bound=2.0,
                                              label_bound=1.0, epsilon=1.0, delta=1e-6, rng=rng)
    noise = noise_scales(3, 2.0, 1.0, 1.0, 1e-6)
    for name, part in (("xx", noise.xx_noise), ("xy", noise.xy_noise)):
        units = reports[name] / part.grid
        assert np.array_equal(units, np.floor(units))


# -------------------------------------------------------------------------------------------------- projection
def test_projection_reports() -> None:
    rng = np.random.default_rng(8)
    count, bound, epsilon = 300_000, 1.5, 1.0
    x = np.array([[2.0, 0.0], [0.1, 0.2]])
    coef = np.array([1.0, -1.0])
    rows = np.repeat(x, count, axis=0)
    out = randomize_projection(rows, coef, norm_bound=1.0, bound=bound, epsilon=epsilon, rng=rng)
    scale = interval_scale(-bound, bound, epsilon)
    # row 0 is clipped to norm 1 (projection ~1.0), row 1 projects to -0.1
    for index, expected in enumerate([1.0 * (1 - 2.0**-50), -0.1]):
        block = out[index * count:(index + 1) * count]
        assert abs(block.mean() - expected) <= Z * math.sqrt(2) * scale / math.sqrt(count)
    far = randomize_projection(np.array([[0.0, 1.0]]) * np.ones((count, 1)), np.array([0.0, 10.0]), norm_bound=1.0,
                               bound=bound, epsilon=epsilon, rng=rng)
    assert abs(far.mean() - bound) <= Z * math.sqrt(2) * scale / math.sqrt(count)  # clipped to the interval


# ------------------------------------------------------------------------------------------------------------ rng
def test_device_generator_is_unpredictable_and_seeded_ones_are_reproducible() -> None:
    assert device_rng().integers(0, 2**63) != device_rng().integers(0, 2**63)
    first = randomize_interval_values(0.5, 0.0, 1.0, 1.0, np.random.default_rng(9))
    assert first == randomize_interval_values(0.5, 0.0, 1.0, 1.0, np.random.default_rng(9))
    assert isinstance(generator_or_device(None), np.random.Generator)
    with pytest.raises(ParameterError, match="rng"):
        generator_or_device(42)  # type: ignore[arg-type]
    assert np.isfinite(randomize_interval_values(0.5, 0.0, 1.0, 1.0))  # rng=None: the device's source


def _participant_calls() -> dict[str, object]:
    """One call of every participant-side randomizer, without a generator."""
    from workloads.local.randomizers.bernstein import one_bit_report, public_laplace_strings, randomize_grid_losses
    from workloads.local.randomizers.gaussian_label import randomize_labels
    from workloads.local.randomizers.iht_gradient import ldp_iht_report
    from workloads.local.randomizers.l2ball import l2_ball_randomize
    from workloads.local.randomizers.random_projection_statistics import projected_statistics_report

    return {
        "interval": lambda: randomize_interval_values(0.5, 0.0, 1.0, 1.0),
        "projection": lambda: randomize_projection([0.3, 0.4], [1.0, 0.0], norm_bound=1.0, bound=1.0, epsilon=1.0),
        "sufficient statistics": lambda: randomize_sufficient_statistics([0.3, 0.4], 0.5, norm_bound=1.0,
                                                                         label_bound=1.0, epsilon=1.0, delta=1e-5),
        "l2 ball": lambda: l2_ball_randomize([0.1, 0.2], 1.0, 1.0),
        "gaussian label": lambda: randomize_labels([0.1], 1.0, 1.0, 1e-3),
        "iht gradient": lambda: ldp_iht_report(np.zeros(2), [0.3, 0.4], 0.5, 1.0, 1.0, 1.0),
        "projected statistics": lambda: projected_statistics_report([0.3, 0.4], 0.5, np.eye(2) / np.sqrt(2), 1.0,
                                                                    1.0, 1.0),
        "bernstein losses": lambda: randomize_grid_losses([0.2, 0.4], 1.0),
        "bernstein strings": lambda: public_laplace_strings(3, 1.0),
        "bernstein bit": lambda: one_bit_report(0.3, 0.1, 1.0),
    }


@pytest.mark.parametrize("name", list(_participant_calls()))
def test_every_randomizer_draws_from_the_device_source_without_a_generator(name: str, monkeypatch) -> None:
    """Called without ``rng`` (as client code must), each randomizer takes a fresh ``device_rng()``: one call, one
    new generator, and nothing else."""
    import workloads.local.rng as rng_module

    made = []

    def counting_device_rng() -> np.random.Generator:
        made.append(1)
        return np.random.default_rng(len(made))

    monkeypatch.setattr(rng_module, "device_rng", counting_device_rng)
    report = _participant_calls()[name]()
    assert made == [1]
    parts = report.values() if isinstance(report, dict) else [report]
    assert all(np.all(np.isfinite(np.asarray(part, dtype=float))) for part in parts)


def test_participant_side_imports_no_server_stack() -> None:
    """What a device runs imports numpy only: no scipy, FastAPI, SQLAlchemy, JAX or the service."""
    code = ("import sys, workloads.local.protocols, workloads.local.randomizers.laplace, "
            "workloads.local.randomizers.sufficient_statistics, workloads.local.randomizers.two_round_projection; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'scipy', 'fastapi', 'sqlalchemy', 'jax', 'service', 'estimators', 'db', 'pandas'}); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
