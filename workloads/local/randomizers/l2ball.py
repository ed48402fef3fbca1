"""The l2-ball randomizer of Duchi, Jordan & Wainwright (2018), run by each participant on a bounded vector.

Source: J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures for locally private estimation",
JASA 113(521), 2018, the privatization of vectors in the l2 ball of radius ``r`` (their Sec. 4.2). Wang & Xu, "On
sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 1, step 3, use it on each
participant's gradient. Given ``v`` with ``||v|| <= r`` (larger vectors are first scaled down to norm ``r``):

1. **Rounding to the sphere.** ``u = v / ||v||`` (any fixed unit vector when ``v = 0``) and
   ``tilde v = +r u`` with probability ``q = 1/2 + ||v|| / (2 r)``, ``-r u`` otherwise, so ``E[tilde v] = v``.
2. **Choice of a hemisphere.** ``T ~ Bernoulli(pi)``, ``pi = e^eps / (1 + e^eps)``.
3. **Output.** ``Z`` uniform on the sphere of radius ``B`` restricted to ``<z, tilde v> > 0`` if ``T = 1`` and to
   ``<z, tilde v> <= 0`` if ``T = 0``.

**The constant ``B`` (our derivation).** Let ``U`` be uniform on the unit sphere ``S^{d-1}`` and ``e`` a unit
vector. By symmetry ``E[U | <U, e> > 0] = E|U_1| e``, so ``E[Z | tilde v] = B (2 pi - 1) E|U_1| tilde v / r`` and
``E[Z] = B tanh(eps / 2) E|U_1| v / r``. The output is unbiased, ``E[Z] = v``, exactly when

    B = r coth(eps / 2) / E|U_1| = r (e^eps + 1) / (e^eps - 1) * sqrt(pi) Gamma((d + 1) / 2) / Gamma(d / 2),

using ``E|U_1| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))`` (``U_1^2 ~ Beta(1/2, (d-1)/2)``). Checks: ``d = 1`` gives
``B = r (e^eps + 1)/(e^eps - 1)``, the one-dimensional randomized response of the same paper; ``d = 2`` gives
``E|U_1| = 2/pi``; ``d = 3`` gives ``1/2``. For large ``d``, ``B ~ r coth(eps/2) sqrt(pi d / 2)``. The form
``sqrt(pi)/2 * d Gamma((d-1)/2 + 1) / Gamma(d/2 + 1)`` found in restatements is the same number (``d/2 Gamma(d/2) =
Gamma(d/2 + 1)``); without its factor ``1/2`` the reports would be biased by a factor 2 (the unbiasedness test
catches either mistake). The Gamma ratio is computed as ``exp(lgamma((d+1)/2) - lgamma(d/2))``, finite for every
``d``.

**Privacy.** ``Z / B`` has a density with respect to the uniform probability on the sphere that depends on the
input only through the side of the hyperplane ``<z, u> = 0``: ``2 (q pi + (1 - q)(1 - pi))`` on ``<z, u> > 0`` and
``2 (q (1 - pi) + (1 - q) pi)`` on ``<z, u> < 0`` (:func:`l2_ball_output_density`). Both are convex combinations of
``2 pi`` and ``2 (1 - pi)``, so the density ratio between any two inputs is at most ``pi / (1 - pi) = e^eps``:
pure ``eps``-LDP for any two vectors of the ball (Duchi et al. 2018), attained by opposite vectors of norm ``r``.

Sampling uniformly on a hemisphere: draw ``U = g / ||g||`` with ``g ~ N(0, I_d)`` and replace ``U`` by ``-U`` if it
lies on the wrong side (the reflection ``U -> -U`` maps one open hemisphere onto the other and preserves the
uniform measure), so no rejection loop is needed. Floating-point caveat: the output is a float vector from numpy's
Gaussian sampler (``docs/privacy.md`` section 7).
"""

from __future__ import annotations

import math

import numpy as np

from workloads.local.randomizers.inputs import as_finite_rows, clip_rows_to_ball
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive


def hemisphere_probability(epsilon: float) -> float:
    """``pi = e^eps / (1 + e^eps)``: the probability of the hemisphere that agrees with ``tilde v`` (step 2)."""
    eps = check_positive("epsilon", epsilon)
    return 1.0 / (1.0 + math.exp(-eps))


def sphere_mean_abs_coordinate(dimension: int) -> float:
    """``E|U_1|`` for ``U`` uniform on ``S^{d-1}``: ``Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))``, via ``lgamma``."""
    d = check_count("dimension", dimension)
    return math.exp(math.lgamma(d / 2.0) - math.lgamma((d + 1) / 2.0)) / math.sqrt(math.pi)


def l2_ball_output_norm(dimension: int, radius: float, epsilon: float) -> float:
    """``B = r coth(eps/2) / E|U_1|``: the norm of every output, the constant that makes ``E[Z] = v`` exactly."""
    r = check_positive("radius", radius)
    eps = check_positive("epsilon", epsilon)
    return r / math.tanh(eps / 2.0) / sphere_mean_abs_coordinate(dimension)


def _directions_and_keep_probability(rows: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """``u = v / ||v||`` (``e_1`` when ``v = 0``) and ``q = 1/2 + ||v|| / (2 r)`` for rows already in the ball."""
    norms = np.linalg.norm(rows, axis=1)
    directions = np.zeros_like(rows)
    directions[:, 0] = 1.0
    nonzero = norms > 0
    directions[nonzero] = rows[nonzero] / norms[nonzero, np.newaxis]
    keep = 0.5 + np.minimum(norms / radius, 1.0) / 2.0
    return directions, keep


def l2_ball_randomize(
    values: object, radius: float, epsilon: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """One eps-LDP report per row of ``values`` (a vector, or one participant per row of a 2-d array).

    Each row is scaled down to norm ``radius`` if it is longer (the clipping that makes any input private), then
    privatized as in the module docstring. The output has the shape of ``values`` and every report has norm
    :func:`l2_ball_output_norm` exactly (up to rounding); the mean of the reports is unbiased for the mean of the
    clipped inputs.
    """
    r = check_positive("radius", radius)
    pi = hemisphere_probability(epsilon)
    rows, single = as_finite_rows("values", values)
    rng = generator_or_device(rng)
    m, d = rows.shape
    bound = l2_ball_output_norm(d, r, epsilon)
    directions, keep = _directions_and_keep_probability(clip_rows_to_ball(rows, r), r)
    rounding_sign = np.where(rng.random(m) < keep, 1.0, -1.0)  # step 1: tilde v = rounding_sign * r * u
    hemisphere_sign = np.where(rng.random(m) < pi, 1.0, -1.0)  # step 2: +1 = the side of tilde v
    side = rounding_sign * hemisphere_sign  # the side of the hyperplane <z, u> = 0 the output must lie on
    gaussian = rng.standard_normal((m, d))
    norms = np.linalg.norm(gaussian, axis=1, keepdims=True)
    while np.any(norms == 0.0):  # probability zero; redraw rather than divide by zero
        zero = norms[:, 0] == 0.0
        gaussian[zero] = rng.standard_normal((int(zero.sum()), d))
        norms = np.linalg.norm(gaussian, axis=1, keepdims=True)
    uniform = gaussian / norms
    wrong_side = np.einsum("ij,ij->i", uniform, directions) * side < 0
    uniform[wrong_side] *= -1.0
    reports = bound * uniform
    return reports[0] if single else reports


def l2_ball_output_density(direction: object, value: object, radius: float, epsilon: float) -> np.ndarray:
    """Density of ``Z / B`` at unit vector(s) ``direction`` for input ``value``, w.r.t. the uniform law on the sphere.

    ``2 (q pi + (1 - q)(1 - pi))`` where ``<direction, u> > 0``, ``2 (q (1 - pi) + (1 - q) pi)`` where it is
    ``< 0`` and 1 on the hyperplane itself (a null set), with ``u`` and ``q`` as in the module docstring. The
    privacy test compares it between inputs; the sampler's test compares it with observed frequencies.
    """
    r = check_positive("radius", radius)
    pi = hemisphere_probability(epsilon)
    points, _ = as_finite_rows("direction", direction)
    vector, single_value = as_finite_rows("value", value, width=points.shape[1])
    if not single_value:
        raise ParameterError("value must be a single vector")
    (u,), (q,) = _directions_and_keep_probability(clip_rows_to_ball(vector, r), r)
    agree = 2.0 * (q * pi + (1.0 - q) * (1.0 - pi))
    disagree = 2.0 * (q * (1.0 - pi) + (1.0 - q) * pi)
    side = points @ u
    return np.where(side > 0, agree, np.where(side < 0, disagree, 1.0))
