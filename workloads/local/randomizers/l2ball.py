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
uniform measure), so no rejection loop is needed.

**Floating point (no Mironov problem; ``docs/privacy.md`` 8.7).** The output is a float vector, but unlike additive
noise its set of possible values does not depend on the input, and the ratio bound holds for the float law itself.
Let ``w(z)`` be the probability that the float direction ``U = fl(g / ||g||)`` (times an independent fair sign, so
that ``w(z) = w(-z)`` exactly, whatever the Gaussian sampler) equals the float vector ``z``. The output is ``B U``
or ``B (-U)`` (negation is exact), on the side ``s`` drawn in steps 1-2, judged by the float sign of ``<U, u>``
(which flips exactly with ``U``). So ``P[output = B z | v] = 2 w(z) P[s = side of z]`` for every ``z`` off the
computed hyperplane, and ``w(z)`` there (both ``z`` and ``-z`` are kept as drawn) — the same support for every
input, and a ratio ``P[s = +] / P[s = -]`` between two inputs that lies in ``[(1 - pi) / pi, pi / (1 - pi)]`` for
*any* keep probability ``q`` in ``[0, 1]`` (so the float ``q`` costs nothing). Only ``pi`` must be exact: the
hemisphere coin is drawn exactly (:func:`hemisphere_coin`: Bernoulli(1 / (1 + e^-eps')) by rejection over CKS's
Bernoulli(exp(-eps'))), where ``eps' <= eps`` is epsilon rounded down to a dyadic rational with at most 40
significant bits (:func:`exact_epsilon`; ``B`` is computed from the same ``eps'``, so the reports stay unbiased).
A float ``pi`` compared with a 53-bit uniform would be off by up to ``2^-53``, a relative error ``2^-53 e^eps`` on
``1 - pi``, and ``pi`` rounds to 1 for epsilon above about 37 (the output then reveals the side of ``v``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from workloads.local.exact_noise import bernoulli_exp
from workloads.local.randomizers.inputs import as_finite_rows, clip_rows_to_ball
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: Significant bits kept of epsilon for the exact hemisphere coin (the denominator stays below 2^62).
_EPSILON_BITS = 40


def exact_epsilon(epsilon: float) -> Fraction:
    """``eps' <= eps``: epsilon rounded down to ``_EPSILON_BITS`` significant bits (a dyadic rational whose
    denominator is at most 2^62), the level the randomizer runs at exactly."""
    eps = check_positive("epsilon", epsilon)
    exponent = min(math.frexp(eps)[1], 62)
    shift = min(_EPSILON_BITS - exponent, 62)
    value = Fraction(math.floor(Fraction(eps) * 2**shift), 2**shift)
    if value <= 0:
        raise ParameterError(f"epsilon={epsilon!r} is too small for the l2-ball randomizer (below 2^-62)")
    return value


def hemisphere_probability(epsilon: float) -> float:
    """``pi = e^eps' / (1 + e^eps')`` (``eps'`` = :func:`exact_epsilon`): the probability of the hemisphere that
    agrees with ``tilde v`` (step 2), as a float (the coin itself is :func:`hemisphere_coin`)."""
    return 1.0 / (1.0 + math.exp(-float(exact_epsilon(epsilon))))


def hemisphere_coin(count: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` exact Bernoulli(1 / (1 + e^-eps')) draws: a fair bit proposes 1 (kept) or 0 (kept with probability
    ``e^-eps'``, CKS Alg. 1), else draw again; ``P(1) : P(0) = 1/2 : e^-eps' / 2``."""
    eps = exact_epsilon(epsilon)
    out = np.empty(count, dtype=bool)
    pending = np.arange(count)
    while pending.size:
        one = rng.integers(0, 2, size=pending.size) == 1
        keep_zero = ~one
        keep_zero[keep_zero] = bernoulli_exp(np.full(int(keep_zero.sum()), eps.numerator), eps.denominator, rng)
        decided = one | keep_zero
        out[pending[decided]] = one[decided]
        pending = pending[~decided]
    return out


def sphere_mean_abs_coordinate(dimension: int) -> float:
    """``E|U_1|`` for ``U`` uniform on ``S^{d-1}``: ``Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))``, via ``lgamma``."""
    d = check_count("dimension", dimension)
    return math.exp(math.lgamma(d / 2.0) - math.lgamma((d + 1) / 2.0)) / math.sqrt(math.pi)


def l2_ball_output_norm(dimension: int, radius: float, epsilon: float) -> float:
    """``B = r coth(eps/2) / E|U_1|``: the norm of every output, the constant that makes ``E[Z] = v`` exactly."""
    r = check_positive("radius", radius)
    eps = float(exact_epsilon(epsilon))
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
    exact_epsilon(epsilon)
    rows, single = as_finite_rows("values", values)
    rng = generator_or_device(rng)
    m, d = rows.shape
    bound = l2_ball_output_norm(d, r, epsilon)
    directions, keep = _directions_and_keep_probability(clip_rows_to_ball(rows, r), r)
    rounding_sign = np.where(rng.random(m) < keep, 1.0, -1.0)  # step 1: tilde v = rounding_sign * r * u
    hemisphere_sign = np.where(hemisphere_coin(m, epsilon, rng), 1.0, -1.0)  # step 2, exact: +1 = tilde v's side
    side = rounding_sign * hemisphere_sign  # the side of the hyperplane <z, u> = 0 the output must lie on
    gaussian = rng.standard_normal((m, d))
    norms = np.linalg.norm(gaussian, axis=1, keepdims=True)
    while np.any(norms == 0.0):  # probability zero; redraw rather than divide by zero
        zero = norms[:, 0] == 0.0
        gaussian[zero] = rng.standard_normal((int(zero.sum()), d))
        norms = np.linalg.norm(gaussian, axis=1, keepdims=True)
    uniform = gaussian / norms * np.where(rng.integers(0, 2, size=(m, 1)) == 1, 1.0, -1.0)  # w(z) = w(-z)
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
