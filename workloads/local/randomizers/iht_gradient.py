"""A participant's report in one round of LDP-IHT: her least-squares gradient through the l2-ball randomizer.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 1,
step 3: participant ``i`` of round ``t``'s group receives ``theta_{t-1}``, computes
``grad_i = x_i (<theta_{t-1}, x_i> - y_i)`` and sends ``R_eps(grad_i)``, the randomizer of Duchi, Jordan &
Wainwright (2018) (:mod:`workloads.local.randomizers.l2ball`).

**The bound the randomizer needs.** It privatizes vectors of norm at most ``r``. Here the residual is clipped to
``[-c, c]`` (``residual_bound``) and ``||x|| <= feature_norm_bound``, so ``||grad|| <= r = feature_norm_bound * c``
(longer vectors are scaled down by the randomizer). With the model class of the paper (``x`` in ``{-1, +1}^p``,
``||theta||_2 <= R`` and ``s``-sparse iterates, ``|y| <= B_y``) the worst case is ``||x|| = sqrt(p)`` and
``|<theta, x>| <= ||theta||_1 <= sqrt(s) R``, so ``c = sqrt(s) R + B_y`` never clips and the mean report is unbiased
for the mean gradient (:func:`worst_case_residual_bound`); a smaller ``c`` trades a bias for less noise. Both are
public parameters of the round; privacy is eps-LDP per report for any choice (every participant reports once).

**The default clip** (:func:`default_residual_bound`, docs/privacy.md §8.9, issue 20): ``c = min(B_y, 2 R r_x /
sqrt(p))``. ``r_x / sqrt(p)`` is the design's public per-coordinate scale ``sigma_x`` (1 on ``{-1, +1}^p``). At
``theta = 0`` (round 0) the residual is ``-y``, so ``c >= B_y`` never clips there; and ``y = <theta*, x> + e`` has
standard deviation about ``sigma_x ||theta*|| <= sigma_x R``, so clipping at two of those costs a bias of at most
``sigma_x sqrt(E (|y| - c)_+^2)`` in l2 (Cauchy-Schwarz with ``E x x^T = sigma_x^2 I``; 0.11 for a Gaussian ``y`` of
unit variance at ``c = 2``, 0.058 on Sec. 7.1's design, where the measured bias is 0.023) while the report noise,
proportional to ``r = r_x c``, falls by ``(sqrt(s) R + B_y) / c`` (6.37 / 2 on Sec. 7.1's design).
"""

from __future__ import annotations

import math

import numpy as np

from workloads.local.randomizers.coordinate import coordinate_randomize
from workloads.local.randomizers.inputs import as_finite_rows, as_finite_vector
from workloads.local.randomizers.l2ball import l2_ball_randomize
from workloads.parameters import ParameterError, check_count, check_positive


def worst_case_residual_bound(sparsity: int, radius: float, label_bound: float) -> float:
    """``sqrt(s) R + B_y``: the largest ``|<theta, x> - y|``, ``x`` in ``{-1, +1}^p``, ``theta`` s-sparse in ``B_R``."""
    s = check_count("sparsity", sparsity)
    return math.sqrt(s) * check_positive("radius", radius) + check_positive("label_bound", label_bound)


#: the default clip in units of the design's residual scale ``sigma_x R`` (two standard deviations of the label)
CLIP_SCALES = 2.0


def default_residual_bound(label_bound: float, radius: float, feature_norm_bound: float, dimension: int) -> float:
    """``min(B_y, 2 R r_x / sqrt(p))``: the default residual clip (see the module docstring; 2 on Sec. 7.1's design,
    ``B_y = sqrt(s) + 0.05``, ``R = 1``, ``r_x = sqrt(p)``)."""
    p = check_count("dimension", dimension)
    scale = check_positive("feature_norm_bound", feature_norm_bound) / math.sqrt(p)
    return min(check_positive("label_bound", label_bound), CLIP_SCALES * check_positive("radius", radius) * scale)


def clipped_least_squares_gradient(theta: object, x: object, y: object, residual_bound: float) -> np.ndarray:
    """``x_i clip(<theta, x_i> - y_i, -c, c)`` for each row ``x_i`` (a vector for one participant, rows for many)."""
    c = check_positive("residual_bound", residual_bound)
    parameters = as_finite_vector("theta", theta)
    rows, single = as_finite_rows("x", x, width=parameters.size)
    labels = as_finite_vector("y", y)
    if labels.size != rows.shape[0]:
        raise ParameterError(f"y must hold {rows.shape[0]} label(s), got {labels.size}")
    residual = np.clip(rows @ parameters - labels, -c, c)
    gradients = rows * residual[:, np.newaxis]
    return gradients[0] if single else gradients


def ldp_iht_report(
    theta: object,
    x: object,
    y: object,
    residual_bound: float,
    feature_norm_bound: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The eps-LDP report(s) of Alg. 1, step 3: the clipped gradient through the l2-ball randomizer of radius ``r``."""
    radius = check_positive("feature_norm_bound", feature_norm_bound) * check_positive("residual_bound", residual_bound)
    check_positive("epsilon", epsilon)
    gradients = clipped_least_squares_gradient(theta, x, y, residual_bound)
    return l2_ball_randomize(gradients, radius, epsilon, rng)


def ldp_iht_coordinate_report(
    theta: object,
    x: object,
    y: object,
    residual_bound: float,
    feature_bound: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The coordinate-sampling report(s) (issue 20): one uniformly drawn coordinate of the clipped gradient, each
    entry clipped to ``[-b, b]``, ``b = feature_bound * c`` (never binds when ``|x_j| <= feature_bound``, as
    ``|residual| <= c``),
    through the one-dimensional randomizer (:func:`workloads.local.randomizers.coordinate.coordinate_randomize`):
    ``(J, p C S)``, unbiased for the gradient once expanded to ``p C S e_J``, eps-LDP."""
    bound = check_positive("feature_bound", feature_bound)
    check_positive("epsilon", epsilon)
    gradients = clipped_least_squares_gradient(theta, x, y, residual_bound)
    return coordinate_randomize(gradients, bound * residual_bound, epsilon, rng)
