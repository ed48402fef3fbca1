"""A report on a public grid: unbiased randomized rounding of the clipped statistic, then exact integer noise.

Every additive-noise randomizer a participant runs ends here (``docs/privacy.md`` 8.7, "Floating point"):

1. **Grid.** A public step ``g``, a power of two (:func:`workloads.local.calibration.power_of_two_grid`), fixed by the
   campaign's public parameters: ``v / g`` and ``k g`` are exact in float64.
2. **Randomized rounding** (:func:`randomized_round`). A clipped value ``v`` with ``k g <= v < (k + 1) g`` becomes
   ``k + 1`` with probability ``v / g - k``, else ``k``: unbiased (``E[g K] = v``), and it stays in the grid interval
   ``[floor(low / g), ceil(high / g)]`` of the clipped range (:func:`workloads.local.calibration.grid_units`). It is
   pre-processing: the report's law is the mixture, over the rounded ``K``, of the laws of ``K + noise``; when every
   pair of possible ``K`` satisfies the DP inequality, so does every mixture (for each event ``S``,
   ``sum_k P(K = k | v) P[k + N in S] <= sum_k P(K = k | v) (e^eps P[k' + N in S] + delta)`` for any fixed ``k'``,
   then average over ``k'`` under ``v'``). So the sensitivity that matters is that of the rounded statistic, over
   the grid interval.
3. **Integer noise** (:class:`GridNoise`): discrete Laplace or discrete Gaussian in grid units, exact
   (:mod:`workloads.local.exact_noise`).
4. **Report** ``g (K + N)``: a float that is exactly a multiple of ``g``, for every input; the set of reports that
   can occur is the whole grid ``g Z`` (within float64's exact integers, ``|K + N| < 2^53``), the same for every
   input. The server checks both (:class:`workloads.local.protocols.base.FieldSchema`).

The rounding's coin is ``rng.random() < v / g - k``: its probability may differ from ``v / g - k`` by ``2^-53``
(a bias below ``2^-53 g``), which does not touch privacy (any rounding rule that stays in the grid interval is a
valid pre-processing). numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workloads.local.calibration import discrete_gaussian_units
from workloads.local.exact_noise import discrete_gaussian, discrete_laplace, discrete_laplace_variance
from workloads.parameters import ParameterError, check_count

#: Probability that the server refuses an honest report (union bound over the report's entries): the tail bound of
#: :meth:`GridNoise.tail_units` is set so that one entry exceeds it with probability at most this over the count.
FALSE_REFUSAL = 1e-9

KINDS = ("laplace", "gaussian")


@dataclass(frozen=True)
class GridNoise:
    """Integer noise in units of the grid step ``grid``.

    ``kind="laplace"``: ``P(n) proportional to exp(-|n| / t)`` (``c`` is 1); ``kind="gaussian"``:
    ``P(n) proportional to exp(-n^2 / (2 t c))``, the discrete Gaussian with ``sigma^2 = t c`` sampled with proposal
    scale ``t``."""

    grid: float
    kind: str
    t: int
    c: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError(f"kind must be one of {KINDS}, got {self.kind!r}")
        grid = float(self.grid)
        if not (grid > 0.0 and math.isfinite(grid) and math.frexp(grid)[0] == 0.5):
            raise ParameterError(f"grid must be a positive power of two, got {self.grid!r}")
        object.__setattr__(self, "t", check_count("t", self.t))
        object.__setattr__(self, "c", check_count("c", self.c))

    @property
    def scale(self) -> float:
        """The noise's scale parameter in the statistic's units: ``g t`` (Laplace) or ``g sqrt(t c)`` (Gaussian)."""
        return self.grid * (self.t if self.kind == "laplace" else math.sqrt(self.t * self.c))

    @property
    def variance(self) -> float:
        """The noise's variance in the statistic's units (Laplace: closed form; Gaussian: at most ``g^2 t c``, CKS)."""
        units = discrete_laplace_variance(self.t) if self.kind == "laplace" else float(self.t * self.c)
        return self.grid**2 * units

    def sample(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Integer noise of the given shape (int64, grid units)."""
        if self.kind == "laplace":
            return discrete_laplace(self.t, shape, rng)
        return discrete_gaussian(self.t * self.c, shape, rng, t=self.t)

    def tail_units(self, entries: int) -> int:
        """``M`` with ``P(|N| > M) <= FALSE_REFUSAL / entries`` for one entry, so that a report of ``entries`` entries
        has one outside ``[K - M, K + M]`` with probability at most :data:`FALSE_REFUSAL` (union bound).

        Laplace: ``P(|N| > M) = 2 q^(M+1) / (1 + q) < 2 exp(-M / t)``, ``q = exp(-1/t)``, so
        ``M = ceil(t ln(2 entries / FALSE_REFUSAL))``. Gaussian: the discrete Gaussian is ``sigma^2``-subgaussian,
        ``E[e^(lambda N)] <= e^(lambda^2 sigma^2 / 2)`` (CKS 2020; ``docs/privacy.md`` 8.7), so
        ``P(|N| > M) <= 2 exp(-M^2 / (2 sigma^2))`` and ``M = ceil(sigma sqrt(2 ln(2 entries / FALSE_REFUSAL)))``.
        One more unit covers the float rounding of the logarithm."""
        log_term = math.log(2.0 * check_count("entries", entries) / FALSE_REFUSAL)
        if self.kind == "laplace":
            return math.ceil(self.t * log_term) + 1
        return math.ceil(math.sqrt(2.0 * self.t * self.c * log_term)) + 1


def randomized_round(values: np.ndarray, grid: float, rng: np.random.Generator) -> np.ndarray:
    """``floor(v / g)`` plus a Bernoulli(``v / g - floor(v / g)``) coin per entry, as int64 grid units (unbiased)."""
    scaled = np.asarray(values, dtype=float) / grid  # exact: g is a power of two
    lower = np.floor(scaled)
    up = rng.random(scaled.shape) < (scaled - lower)  # the fractional part of a float is exact
    return lower.astype(np.int64) + up


def grid_report(values: np.ndarray, noise: GridNoise, rng: np.random.Generator) -> np.ndarray:
    """``g (round(v) + N)`` for clipped ``values`` (any shape): every entry an exact multiple of ``g``."""
    units = randomized_round(values, noise.grid, rng)
    return noise.grid * (units + noise.sample(units.shape, rng)).astype(float)


def gaussian_grid_noise(sigma: float, grid: float) -> GridNoise:
    """The discrete Gaussian in units of ``grid`` whose scale parameter ``g sqrt(t c)`` is at least ``sigma``
    (:func:`workloads.local.calibration.discrete_gaussian_units`)."""
    t, c = discrete_gaussian_units(sigma, grid)
    return GridNoise(grid, "gaussian", t, c)
