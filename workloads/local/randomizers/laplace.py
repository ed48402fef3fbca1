"""The 1-dimensional Laplace randomizer of LDP-AVG, on a public grid with exact discrete Laplace noise.

Wang, Gaboardi & Xu 2018, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS), Alg. 1 (1-dim LDP-AVG): a participant holding ``v in [0, b]`` sends ``z = v + Lap(b / epsilon)``; the
server averages. Here the interval is any public ``[lower, upper]``, and the noise is exact
(``docs/privacy.md`` 8.7, "Floating point"; :mod:`workloads.local.randomizers.grid`):

1. ``v`` is clipped into ``[lower, upper]`` (every participant sends a report from the same output space);
2. it is rounded, unbiasedly at random, to the public power-of-two grid ``g`` (:func:`interval_noise`: ``g`` is at
   most ``2^-12`` of the smaller of the width and the Laplace scale ``(upper - lower) / epsilon``), landing in the
   grid interval ``[L, U] = [floor(lower / g), ceil(upper / g)]``;
3. discrete Laplace noise ``P(n) proportional to exp(-|n| / t)`` is added in grid units, ``t = ceil((U - L) /
   epsilon)``: two rounded values differ by at most ``U - L`` units, so the pmf ratio is at most
   ``exp((U - L) / t) <= e^epsilon``: **epsilon-LDP** exactly (the geometric mechanism of Ghosh, Roughgarden &
   Sundararajan 2012; sampler: Canonne, Kamath & Steinke 2020, Alg. 2).

The report is ``g (K + N)``, a multiple of ``g``. ``E[z] = clip(v)``; ``Var[z] <= g^2 / 4 + 2 q / (1 - q)^2 g^2``
with ``q = exp(-1/t)`` (about ``2 (g t)^2``; ``g t`` is at most ``2^-12`` relatively above ``(upper - lower) /
epsilon``).

Vectorised: ``values`` of any shape, one independent draw per entry (one entry = one participant's report), so the
same function serves a device (a scalar) and a simulator (an array). ``entries > 1`` calibrates one report of that
many entries in ``[lower, upper]`` each (l1 sensitivity ``entries (U - L)``: the Bernstein mechanism's grid losses).
"""

from __future__ import annotations

import numpy as np

from workloads.local.calibration import (
    LAPLACE_GRID_STEPS,
    discrete_laplace_units,
    grid_units,
    power_of_two_grid,
)
from workloads.local.randomizers.grid import GridNoise, grid_report
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive


def interval_noise(lower: float, upper: float, epsilon: float, entries: int = 1) -> GridNoise:
    """The grid and the discrete Laplace noise of a report of ``entries`` values in ``[lower, upper]`` at epsilon."""
    width = interval_width(lower, upper)
    count = check_count("entries", entries)
    continuous_scale = count * width / check_positive("epsilon", epsilon)
    grid = power_of_two_grid(min(width, continuous_scale), LAPLACE_GRID_STEPS)
    low, high = grid_units(lower, upper, grid)
    return GridNoise(grid, "laplace", discrete_laplace_units(count * (high - low), epsilon))


def interval_scale(lower: float, upper: float, epsilon: float) -> float:
    """The Laplace scale of a report in ``[lower, upper]``: ``g t``, at least ``(upper - lower) / epsilon``."""
    return interval_noise(lower, upper, epsilon).scale


def interval_width(lower: float, upper: float) -> float:
    lower_value = float(lower)
    upper_value = float(upper)
    if not (np.isfinite(lower_value) and np.isfinite(upper_value)) or upper_value <= lower_value:
        raise ParameterError(f"lower < upper must be finite numbers, got lower={lower!r}, upper={upper!r}")
    return check_positive("upper - lower", upper_value - lower_value)


def randomize_interval_values(
    values: object, lower: float, upper: float, epsilon: float, rng: np.random.Generator | None = None,
    entries: int = 1,
) -> np.ndarray:
    """``g (round(clip(v, lower, upper)) + N)`` for every entry of ``values`` (:func:`interval_noise`)."""
    noise = interval_noise(lower, upper, epsilon, entries)
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise ValueError("values must be finite numbers")
    clipped = np.clip(array, float(lower), float(upper))
    return grid_report(clipped, noise, generator_or_device(rng))
