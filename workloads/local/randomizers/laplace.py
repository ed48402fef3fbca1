"""The 1-dimensional Laplace randomizer of LDP-AVG.

Wang, Gaboardi & Xu 2018, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS), Alg. 1 (1-dim LDP-AVG): a participant holding ``v in [0, b]`` sends ``z = v + Lap(b / epsilon)``; the
server averages. Here the interval is any public ``[lower, upper]``: the value is first clipped into it (so every
participant sends a report from the same output space whatever her value; ``docs/privacy.md`` 8.7), then
``Lap((upper - lower) / epsilon)`` is added, which is epsilon-LDP because any two clipped values are within
``upper - lower`` of each other. ``E[z] = clip(v)``; ``Var[z] = 2 scale^2``.

Vectorised: ``values`` of any shape, one independent draw per entry (one entry = one participant's report), so the
same function serves a device (a scalar) and a simulator (an array).
"""

from __future__ import annotations

import numpy as np

from workloads.local.calibration import laplace_scale
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_positive


def interval_scale(lower: float, upper: float, epsilon: float) -> float:
    """The Laplace scale ``(upper - lower) / epsilon``, rounded up."""
    return laplace_scale(epsilon, interval_width(lower, upper))


def interval_width(lower: float, upper: float) -> float:
    lower_value = float(lower)
    upper_value = float(upper)
    if not (np.isfinite(lower_value) and np.isfinite(upper_value)) or upper_value <= lower_value:
        raise ParameterError(f"lower < upper must be finite numbers, got lower={lower!r}, upper={upper!r}")
    return check_positive("upper - lower", upper_value - lower_value)


def randomize_interval_values(
    values: object, lower: float, upper: float, epsilon: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """``clip(v, lower, upper) + Lap((upper - lower) / epsilon)`` for every entry of ``values``."""
    scale = interval_scale(lower, upper, epsilon)
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise ValueError("values must be finite numbers")
    clipped = np.clip(array, float(lower), float(upper))
    return clipped + generator_or_device(rng).laplace(0.0, scale, size=clipped.shape)
