"""Issue 18, finding 1: every noise a device adds is exact integer noise on a public grid, so the set of reports that
can occur does not depend on the participant's value (Mironov 2012). Contrasted with the float Laplace of before.

The float mechanism replaced here (``clip(v) + numpy laplace``) is re-created below only to show what it leaked: for
each of its reports of ``v = 1`` we search the 53-bit uniforms numpy's Laplace sampler could have drawn
(``U = k 2^-53``; ``loc + scale log(2U)`` for ``U < 1/2``, ``loc - scale log(2 - U - U)`` otherwise, numpy's
``random_laplace``) for one that yields the same float under ``v = 0``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.local.calibration import grid_units
from workloads.local.protocols import LdpAverageSpec, SteinGlmSpec, TwoRoundSteinSpec
from workloads.local.protocols.bernstein import BernsteinSpec
from workloads.local.protocols.label_ldp import LabelLdpSpec
from workloads.local.randomizers.bernstein import grid_loss_noise, randomize_grid_losses
from workloads.local.randomizers.gaussian_label import label_noise, randomize_labels
from workloads.local.randomizers.laplace import interval_noise, randomize_interval_values
from workloads.local.randomizers.sufficient_statistics import noise_scales, randomize_sufficient_statistics

_UNIT = 2.0**-53


def _numpy_laplace_noise(k: int, scale: float) -> float:
    """numpy's ``random_laplace(loc=0, scale)`` for the uniform ``U = k 2^-53`` (same float operations)."""
    u = k * _UNIT
    return -(scale * math.log(2.0 - u - u)) if u >= 0.5 else scale * math.log(u + u)


def _float_report_possible(z: float, value: float, scale: float, width: int = 64) -> bool:
    """Whether ``fl(value + noise)`` equals ``z`` for some uniform numpy's Laplace sampler can draw."""
    n = z - value
    u = 1.0 - math.exp(-n / scale) / 2.0 if n >= 0 else math.exp(n / scale) / 2.0
    centre = int(round(u / _UNIT))
    for k in range(max(1, centre - width), min(2**53 - 1, centre + width) + 1):
        if value + _numpy_laplace_noise(k, scale) == z:
            return True
    return False


def test_float_laplace_reports_reveal_the_input_and_grid_reports_do_not() -> None:
    """ldp-avg on [0, 1] at epsilon 1: most float reports of v = 1 are impossible under v = 0 (the audit measured
    82 %); every grid report of v = 1 is ``g k`` with an integer ``k``, and the discrete Laplace gives every integer
    a positive probability under v = 0 as well (``P = (1 - q)/(1 + q) q^|k - L|``, finite log)."""
    rng = np.random.default_rng(18)
    count = 1500
    scale = 1.0  # the float mechanism's scale: Delta_1 / epsilon = 1 / 1
    float_reports = 1.0 + rng.laplace(0.0, scale, size=count)
    assert all(_float_report_possible(float(z), 1.0, scale) for z in float_reports[:200])  # the emulation is numpy's
    impossible = np.mean([not _float_report_possible(float(z), 0.0, scale) for z in float_reports])
    assert impossible > 0.5

    noise = interval_noise(0.0, 1.0, 1.0)
    low, high = grid_units(0.0, 1.0, noise.grid)
    for value, other in ((1.0, 0.0), (0.0, 1.0)):
        reports = randomize_interval_values(np.full(100_000, value), 0.0, 1.0, 1.0, rng)
        units = reports / noise.grid
        assert np.array_equal(units, np.floor(units))  # every report on the public grid
        rounded_other = low if other == 0.0 else high  # 0 and 1 are on the grid: rounding is exact there
        log_pmf_other = -np.abs(units - rounded_other) / noise.t + math.log(math.tanh(0.5 / noise.t))
        assert np.all(np.isfinite(log_pmf_other)) and log_pmf_other.min() > -1e3  # possible under the other input


@pytest.mark.parametrize(
    ("name", "draw", "grids"),
    [
        ("bernstein", lambda v, rng: {"r": randomize_grid_losses(np.full((20_000, 4), v), 0.7, rng)},
         lambda: {"r": grid_loss_noise(4, 0.7).grid}),
        ("label", lambda v, rng: {"r": randomize_labels(np.full(20_000, 3.0 * (2 * v - 1)), 1.0, 2.0, 1e-5, rng)},
         lambda: {"r": label_noise(1.0, 2.0, 1e-5).grid}),
        ("stein", lambda v, rng: randomize_sufficient_statistics(
            np.full((20_000, 3), 2 * v - 1.0), np.full(20_000, 2 * v - 1.0), norm_bound=1.0, label_bound=1.0,
            epsilon=1.0, delta=1e-6, rng=rng),
         lambda: {"xx": noise_scales(3, 1.0, 1.0, 1.0, 1e-6).xx_noise.grid,
                  "xy": noise_scales(3, 1.0, 1.0, 1.0, 1e-6).xy_noise.grid}),
    ],
)
def test_every_additive_randomizer_reports_on_its_grid_for_extreme_inputs(name: str, draw, grids) -> None:  # noqa: ANN001
    """Bernstein's grid losses, label-ldp's labels, stein-glm's statistics: reports of the two extreme inputs are all
    multiples of the public grid step, so (the noise having all of Z as support) each is possible under the other."""
    rng = np.random.default_rng(7)
    steps = grids()
    for value in (0.0, 1.0):
        for field, reports in draw(value, rng).items():
            units = np.asarray(reports) / steps[field]
            assert np.array_equal(units, np.floor(units)), (name, field)
            assert np.all(np.abs(units) < 2.0**52)


def test_the_charge_per_report_is_the_rounds_epsilon_and_delta() -> None:
    """Exact noise changes no cost: each report still spends its round's (epsilon, delta) as the spec states."""
    assert LdpAverageSpec(0.0, 1.0, 1.0).participant_cost("all") == (1.0, 0.0)
    assert SteinGlmSpec(3, 1.0, 1.0, 2.0, 1e-6).participant_cost("all") == (2.0, 1e-6)
    assert TwoRoundSteinSpec.split_budget(3, 1.0, 1.0, 2.0, 1e-6).participant_cost("all") == (2.0, 1e-6)
    assert BernsteinSpec(1, 4, 2, -1.0, 1.0, 4.0, 0.8).participant_cost("all") == (0.8, 0.0)
    label = LabelLdpSpec(3, 1.0, 1.0, 1.5, 1e-5, sparsity=2, iterations=5, eta=0.5)
    assert label.participant_cost("all") == (1.5, 1e-5)


def test_l2_ball_hemisphere_coin_is_exact_at_a_dyadic_epsilon_below_the_stated_one() -> None:
    """The l2-ball randomizer has no additive noise; its float outputs have the same support for every input
    (``docs/privacy.md`` 8.7), and its one privacy-critical probability, the hemisphere's ``e^eps / (1 + e^eps)``, is
    drawn exactly at ``eps' <= eps`` (40 significant bits), where a float comparison would round it to 1 above
    epsilon 37."""
    from workloads.local.randomizers.l2ball import exact_epsilon, hemisphere_coin, hemisphere_probability

    for eps in (0.1, 1.0, 3.7, 40.0):
        value = exact_epsilon(eps)
        assert value <= eps and float(value) >= eps * (1 - 2.0**-38) and value.denominator <= 2**62
    assert 1e-9 * (1 - 1e-9) <= exact_epsilon(1e-9) <= 1e-9  # the denominator caps at 2^62
    rng = np.random.default_rng(12)
    count = 400_000
    for eps in (0.7, 40.0):
        coins = hemisphere_coin(count, eps, rng)
        p = hemisphere_probability(eps)
        assert abs(coins.mean() - p) <= 4 * math.sqrt(p * (1 - p) / count) + 1 / count
    assert 1.0 / (1.0 + math.exp(-40.0)) == 1.0  # the float probability the randomizer compared with before
