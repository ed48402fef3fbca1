"""The pure-epsilon label randomizer: Duchi, Jordan & Wainwright's one-dimensional mechanism, sampled exactly.

Source: J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Minimax optimal procedures for locally private estimation",
JASA 113(521), 2018, the one-dimensional privatization of a bounded scalar (their Sec. 4.2.3 / the ``d = 1`` case of
the l2-ball mechanism, :mod:`workloads.local.randomizers.l2ball`). For ``y`` clipped to ``[-B, B]`` the report is

    +C with probability 1/2 + y (e^eps - 1) / (2 B (e^eps + 1)),  -C otherwise,  C = B (e^eps + 1) / (e^eps - 1),

so ``E[report] = y`` and ``Var[report] = C^2 - y^2``; eps-LDP (``docs/privacy.md`` 8.9: the two probabilities of an
outcome under any two labels are convex combinations of ``pi`` and ``1 - pi``, ``pi = e^eps / (1 + e^eps)``).

**Sampling, exactly.** The same probability is the composition of two coins (Duchi et al.'s two steps, ``d = 1``):

1. **Rounding.** ``s = +1`` with probability ``q = (1 + t) / 2``, ``t = fl(clip(y) / B)`` (a float in ``[-1, 1]``),
   else ``-1``: ``E[s B] = t B``. ``q`` is computed exactly as the dyadic rational ``Fraction(t + 1) / 2`` and the coin
   compares it with a uniform binary fraction drawn 62 bits at a time (:func:`dyadic_bernoulli`): its probability is
   exactly ``q``, no float comparison.
2. **Keep or flip.** ``T = 1`` with probability ``pi' = 1 / (1 + e^-eps')``, exactly
   (:func:`workloads.local.randomizers.l2ball.hemisphere_coin`: rejection over CKS's exact Bernoulli(exp(-eps'))),
   with ``eps' <= eps`` epsilon rounded down to a 40-significant-bit dyadic (:func:`~.l2ball.exact_epsilon`).

The report is ``+C`` if ``s T`` agrees (``s = +1`` and kept, or ``s = -1`` and flipped), so
``P(+C) = q pi' + (1 - q)(1 - pi') = 1/2 + t (2 pi' - 1) / 2 = 1/2 + t tanh(eps'/2) / 2`` and, with
``C = B coth(eps' / 2)`` (computed from the same ``eps'``), ``E[report] = t B``: the clipped label up to the float
roundings of ``y / B`` and ``C``. The privacy ratio is ``pi' / (1 - pi') = e^eps' <= e^eps`` for *every* ``q`` in
``[0, 1]``, so the rounding coin's exactness buys unbiasedness, not privacy; the keep coin's exactness is what the
guarantee rests on (a float ``pi`` compared with a 53-bit uniform is off by up to ``2^-53``, a relative error
``2^-53 e^eps`` on ``1 - pi``).

The output's support is the two floats ``{-C, +C}`` for every input (no Mironov problem); the server accepts only
those two values (:meth:`workloads.local.protocols.label_ldp.LabelLdpSpec.check_reports`).

numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from workloads.local.randomizers.inputs import as_finite_vector
from workloads.local.randomizers.l2ball import exact_epsilon, hemisphere_coin
from workloads.local.rng import generator_or_device
from workloads.parameters import check_positive

#: bits of the uniform binary fraction drawn per step of :func:`dyadic_bernoulli`
_CHUNK_BITS = 62


def duchi_label_magnitude(label_bound: float, epsilon: float) -> float:
    """``C = B (e^eps' + 1) / (e^eps' - 1) = B coth(eps' / 2)``: the magnitude of every report."""
    bound = check_positive("label_bound", label_bound)
    return bound / math.tanh(float(exact_epsilon(epsilon)) / 2.0)


def duchi_label_variance(label: float, label_bound: float, epsilon: float) -> float:
    """``C^2 - y^2`` for ``y`` clipped to ``[-B, B]``: the variance of one report."""
    bound = check_positive("label_bound", label_bound)
    y = min(max(float(label), -bound), bound)
    return duchi_label_magnitude(bound, epsilon) ** 2 - y * y


def rounding_probability(label: float, label_bound: float) -> Fraction:
    """``q = (1 + fl(clip(y) / B)) / 2`` as an exact dyadic rational: the probability that step 1 rounds to ``+B``."""
    bound = check_positive("label_bound", label_bound)
    t = min(max(float(label), -bound), bound) / bound
    return (1 + Fraction(min(max(t, -1.0), 1.0))) / 2


def dyadic_bernoulli(probability: Fraction, rng: np.random.Generator) -> bool:
    """One Bernoulli(``probability``) draw for a dyadic ``probability = m / 2^k`` in ``[0, 1]``, exactly.

    A uniform ``U`` in ``[0, 1)`` is drawn 62 binary digits at a time and compared with ``probability``'s digits; the
    first chunk that differs decides ``U < probability`` (expected fewer than two chunks), and when all ``k`` digits
    agree ``U >= probability``. ``P(True) = m / 2^k`` exactly."""
    numerator, denominator = probability.numerator, probability.denominator
    if not 0 <= numerator <= denominator or denominator & (denominator - 1):
        raise ValueError(f"probability must be a dyadic rational in [0, 1], got {probability}")
    if numerator == denominator:
        return True
    bits = denominator.bit_length() - 1
    padded = -(-bits // _CHUNK_BITS) * _CHUNK_BITS
    digits = numerator << (padded - bits)  # the first `padded` binary digits of the probability
    for shift in range(padded - _CHUNK_BITS, -1, -_CHUNK_BITS):
        target = (digits >> shift) & ((1 << _CHUNK_BITS) - 1)
        drawn = int(rng.integers(0, 1 << _CHUNK_BITS, dtype=np.int64))
        if drawn != target:
            return drawn < target
    return False


def duchi_label_signs(labels: object, label_bound: float, epsilon: float,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """``+1`` / ``-1`` per label, ``P(+1) = 1/2 + t tanh(eps'/2) / 2`` exactly (module docstring, steps 1-2)."""
    bound = check_positive("label_bound", label_bound)
    exact_epsilon(epsilon)
    values = as_finite_vector("labels", labels)
    generator = generator_or_device(rng)
    rounded = np.array([dyadic_bernoulli(rounding_probability(v, bound), generator) for v in values], dtype=bool)
    kept = hemisphere_coin(values.size, epsilon, generator)
    return np.where(rounded == kept, 1.0, -1.0)


def duchi_randomize_labels(labels: object, label_bound: float, epsilon: float,
                           rng: np.random.Generator | None = None) -> np.ndarray:
    """``+C`` or ``-C`` per label (one per participant): unbiased for the clipped label, eps-LDP."""
    return duchi_label_signs(labels, label_bound, epsilon, rng) * duchi_label_magnitude(label_bound, epsilon)
