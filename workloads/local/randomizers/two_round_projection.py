"""The second-round randomizer of the 2-round Stein GLM protocol (Alg. 5 of the journal version).

Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in non-interactive local differential privacy with public
data" (journal version), App. E, Alg. 5, second round: the server publishes the first round's OLS estimate ``w``; each
participant computes ``t = <x, w>``, projects it onto a public interval and adds noise. Here ``x`` is first clipped
to the first round's ball (``||x|| <= r``), the interval is ``[-bound, bound]`` with ``bound`` published with ``w``,
and the noise is Laplace (epsilon-LDP, delta = 0) instead of the paper's Gaussian: for one number Laplace needs less
noise at every (epsilon, delta) the experiments use (``docs/privacy.md`` 8.7). The report is ``{"projection": ()}``.
"""

from __future__ import annotations

import numpy as np

from workloads.local.randomizers.laplace import randomize_interval_values
from workloads.local.randomizers.sufficient_statistics import clip_features
from workloads.parameters import check_positive


def randomize_projection(
    x: object,
    coef: object,
    *,
    norm_bound: float,
    bound: float,
    epsilon: float,
    norm: str = "l2",
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """``clip(<clip_r(x), coef>, -bound, bound) + Lap(2 bound / epsilon)`` per row of ``x``."""
    features = clip_features(x, norm_bound, norm)
    direction = np.asarray(coef, dtype=float)
    if direction.shape != features.shape[-1:] or not np.all(np.isfinite(direction)):
        raise ValueError(f"coef must be a finite vector of length {features.shape[-1]}, got shape {direction.shape}")
    half_width = check_positive("bound", bound)
    return randomize_interval_values(features @ direction, -half_width, half_width, epsilon, rng)
