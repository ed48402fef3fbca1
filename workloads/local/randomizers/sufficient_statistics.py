"""The Gaussian randomizer of a participant's sufficient statistics ``(x x^T, x y)`` for the Stein-lemma GLMs.

Wang, Hu, Zhang, Gaboardi & Xu, "Generalized linear models in non-interactive local differential privacy with public
data" (ALT 2021, and its journal version), Algs. 1-4: every participant releases ``x x^T + E_1`` (``E_1`` symmetric,
its upper triangle i.i.d. Gaussian) and ``x y + E_2``. Two departures, derived in ``docs/privacy.md`` 8.7:

* **No ⊥.** Alg. 1 lets a participant whose ``||x||`` exceeds the bound ``r`` release ⊥; whether she does depends on
  her private ``x``, which is not locally private. Here every participant clips: ``x <- x min(1, r / ||x||)`` (in the
  l2 norm for Algs. 1 and 3, in the l1 norm for Algs. 2 and 4) and ``y <- clip(y, -B, B)``, then adds noise, so the
  report has the same output space for every input.
* **Calibration.** The report is one Gaussian mechanism over the concatenated vector ``(upper triangle of x x^T,
  x y)`` of length ``p (p + 1) / 2 + p``: noise of scale ``sigma_xx`` on the first part and ``sigma_xy = ratio
  sigma_xx`` on the second. That is the mechanism ``(u, x y / ratio) + noise(sigma_xx)`` followed by multiplying the
  second part by ``ratio`` (post-processing), so ``sigma_xx`` is calibrated to the exact l2 diameter of
  ``(u, x y / ratio)``, :func:`~workloads.local.calibration.sufficient_statistics_sensitivity` with the label bound
  ``B / ratio``. The default ``ratio = sqrt(2) B / r`` makes each part's noise proportional to its own diameter
  (``sqrt(2) r^2`` for the triangle, ``2 r B`` for ``x y``), the split of the paper, whose
  ``sigma^2 = 32 r^4 log(2.5 / delta) / epsilon^2`` (and ``32 r^2 ...`` for ``x y``) is the classical mechanism per
  part at (epsilon/2, delta/2), valid only for epsilon < 2.
* **Exact noise** (``docs/privacy.md`` 8.7). Each part is rounded, unbiasedly at random, to its own power-of-two grid
  (``g_xx``, ``g_xy``: at most ``2^-10`` of the finer of the part's noise and its share ``Delta / sqrt(d)`` of the
  diameter), and discrete Gaussian noise is added in grid units (:mod:`workloads.local.randomizers.grid`). Rounding
  moves each entry by less than one step, so the rounded ``(u, x y / ratio)`` has diameter at most
  ``Delta' = Delta + 2 sqrt(d_xx g_xx^2 + p (g_xy / ratio)^2)``; with scale parameters ``g_xx sigma_u,xx >= sigma``
  and ``g_xy sigma_u,xy >= ratio sigma``, ``sigma = Delta' / sqrt(2 rho)``, the report is rho-zCDP (the discrete
  Gaussian's Renyi divergence is at most the continuous one's, coordinate by coordinate: Canonne, Kamath & Steinke
  2020) and (epsilon, delta)-LDP for ``rho = cdp_rho(epsilon, delta)`` (their Cor. 13), for every epsilon > 0.

The report is ``{"xx": (p (p + 1) / 2,), "xy": (p,)}``, the upper triangle in ``numpy.triu_indices(p)`` order.
Each entry is an exact multiple of its part's grid step and an unbiased estimate of the participant's clipped statistic
(variance at most ``sigma_xx^2`` or ``sigma_xy^2`` plus a quarter grid step squared).

With ``gram=False`` the report is ``{"xy": (p,)}`` alone, calibrated to its own diameter ``2 r B`` (plus rounding)
(:func:`~workloads.local.calibration.moment_sensitivity`): when the server estimates ``X^T X`` from public unlabeled
rows (Remark 11 taken to its end: ``X^T X`` needs no labels), the ``x x^T`` part only costs noise on ``x y``. For
``r`` large against ``B`` (Gaussian features) this divides the noise by about ``r / (sqrt(2) B)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workloads.local.calibration import (
    GAUSSIAN_GRID_STEPS,
    moment_sensitivity,
    power_of_two_grid,
    round_up,
    sufficient_statistics_sensitivity,
    zcdp_gaussian_sigma,
)
from workloads.local.randomizers.grid import GridNoise, gaussian_grid_noise, grid_report
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: The norms a feature bound can be stated in: l2 (Algs. 1, 3) or l1 (Algs. 2, 4).
NORMS = ("l2", "l1")
#: Clipped vectors are shrunk by this factor more, so rounding never leaves them a hair outside the ball.
_CLIP_MARGIN = 1.0 - 2.0**-50


def triangle_size(dimension: int) -> int:
    """Entries in the upper triangle (diagonal included) of a ``p x p`` matrix."""
    p = check_count("dimension", dimension)
    return p * (p + 1) // 2


@dataclass(frozen=True)
class StatisticsNoise:
    """The grids and discrete Gaussian noises of one report's parts: ``xx_noise`` (``None`` when the report has no
    ``x x^T`` part) and ``xy_noise``."""

    xx_noise: GridNoise | None
    xy_noise: GridNoise

    @property
    def xx(self) -> float | None:
        """The scale parameter of the noise on each triangle entry (``None`` without the triangle)."""
        return None if self.xx_noise is None else self.xx_noise.scale

    @property
    def xy(self) -> float:
        """The scale parameter of the noise on each entry of ``x y``."""
        return self.xy_noise.scale


def default_xy_ratio(norm_bound: float, label_bound: float) -> float:
    """``sqrt(2) B / r``: the ratio of the diameters of ``x y`` alone (``2 r B``) and of the triangle alone
    (``sqrt(2) r^2``), so that each part's noise is proportional to its own sensitivity."""
    return math.sqrt(2.0) * check_positive("label_bound", label_bound) / check_positive("norm_bound", norm_bound)


def _part_grid(sigma: float, sensitivity: float, entries: int, weight: float) -> float:
    """A part's grid: ``2^-10`` of the finer of its noise and its share ``Delta / sqrt(d)`` of the sensitivity."""
    return power_of_two_grid(weight * min(sigma, sensitivity / math.sqrt(entries)), GAUSSIAN_GRID_STEPS)


def noise_scales(
    dimension: int, norm_bound: float, label_bound: float, epsilon: float, delta: float, gram: bool = True,
    xy_ratio: float | None = None,
) -> StatisticsNoise:
    """The noise of one report (module docstring): grids ``g_xx``, ``g_xy`` and discrete Gaussians whose scale
    parameters are at least ``sigma`` and ``ratio sigma``, ``sigma = Delta' / sqrt(2 rho)``, ``Delta'`` the l2
    diameter of ``(u, x y / ratio)`` after rounding; with ``gram=False``, ``x y`` alone (``Delta = 2 r B``)."""
    p = check_count("dimension", dimension)
    ratio = 1.0 if not gram else (
        default_xy_ratio(norm_bound, label_bound) if xy_ratio is None else check_positive("xy_ratio", xy_ratio))
    if gram:
        diameter = sufficient_statistics_sensitivity(p, norm_bound, label_bound / ratio)
        parts = [(triangle_size(p), 1.0), (p, ratio)]
    else:
        diameter = moment_sensitivity(norm_bound, label_bound)
        parts = [(p, 1.0)]
    entries = sum(count for count, _ in parts)
    first = zcdp_gaussian_sigma(epsilon, delta, diameter)
    grids = [_part_grid(first, diameter, entries, weight) for _, weight in parts]
    # rounding moves each entry by less than its grid step: the rounded vectors' diameter grows by at most twice the
    # norm of the largest rounding error (weighted); 2^-40 relative covers the float error of the statistic itself
    pairs = list(zip(parts, grids, strict=True))
    rounding = math.sqrt(math.fsum(count * (grid / weight) ** 2 for (count, weight), grid in pairs))
    sigma = zcdp_gaussian_sigma(epsilon, delta, round_up(diameter * (1.0 + 2.0**-40) + 2.0 * rounding))
    noises = [gaussian_grid_noise(round_up(sigma * weight), grid) for (_, weight), grid in pairs]
    return StatisticsNoise(noises[0], noises[1]) if gram else StatisticsNoise(None, noises[0])


def statistics_ranges(norm_bound: float, label_bound: float) -> dict[str, tuple[float, float]]:
    """The range of every entry of the clipped statistic: ``|x_i x_j| <= ||x||_2^2 <= r^2``, ``|x_i y| <= r B``."""
    square = check_positive("norm_bound", norm_bound) ** 2
    product = norm_bound * check_positive("label_bound", label_bound)
    return {"xx": (-square, square), "xy": (-product, product)}


def clip_features(x: object, norm_bound: float, norm: str = "l2") -> np.ndarray:
    """Rows of ``x`` (shape ``(p,)`` or ``(k, p)``) scaled into the ball ``||x|| <= norm_bound`` of the given norm."""
    if norm not in NORMS:
        raise ParameterError(f"norm must be one of {NORMS}, got {norm!r}")
    bound = check_positive("norm_bound", norm_bound)
    array = np.asarray(x, dtype=float)
    if array.ndim not in (1, 2) or not np.all(np.isfinite(array)):
        raise ValueError(f"x must be a finite vector or matrix of feature rows, got shape {array.shape}")
    lengths = np.linalg.norm(array, ord=2 if norm == "l2" else 1, axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        factor = np.where(lengths > bound, bound / np.where(lengths > 0, lengths, 1.0) * _CLIP_MARGIN, 1.0)
    return array * factor


def clip_labels(y: object, label_bound: float) -> np.ndarray:
    bound = check_positive("label_bound", label_bound)
    array = np.asarray(y, dtype=float)
    if not np.all(np.isfinite(array)):
        raise ValueError("y must be finite")
    return np.clip(array, -bound, bound)


def sufficient_statistics(x: object, y: object, gram: bool = True) -> dict[str, np.ndarray]:
    """``{"xx": upper triangle of x x^T, "xy": x y}`` for one row (``x`` of shape ``(p,)``) or many (``(k, p)``);
    only ``"xy"`` with ``gram=False``."""
    features = np.asarray(x, dtype=float)
    labels = np.asarray(y, dtype=float)
    if features.ndim not in (1, 2) or labels.shape != features.shape[:-1]:
        raise ValueError(f"x must have shape (p,) or (k, p) and y the matching (,) or (k,), got {features.shape} "
                         f"and {labels.shape}")
    moment = features * labels[..., None]
    if not gram:
        return {"xy": moment}
    rows, cols = np.triu_indices(features.shape[-1])
    return {"xx": features[..., rows] * features[..., cols], "xy": moment}


def randomize_sufficient_statistics(
    x: object,
    y: object,
    *,
    norm_bound: float,
    label_bound: float,
    epsilon: float,
    delta: float,
    norm: str = "l2",
    gram: bool = True,
    xy_ratio: float | None = None,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """One report per row: clip ``x`` and ``y``, round every entry to its part's grid and add discrete Gaussian noise
    (:func:`noise_scales`)."""
    features = clip_features(x, norm_bound, norm)
    noise = noise_scales(features.shape[-1], norm_bound, label_bound, epsilon, delta, gram, xy_ratio)
    statistics = sufficient_statistics(features, clip_labels(y, label_bound), gram)
    noises = {"xx": noise.xx_noise, "xy": noise.xy_noise}
    generator = generator_or_device(rng)
    return {name: grid_report(value, noises[name], generator) for name, value in statistics.items()}
