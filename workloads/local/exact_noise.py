"""Exact integer noise for participants' devices, vectorised: discrete Laplace and discrete Gaussian.

Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy" (NeurIPS; arXiv:2004.00010, "CKS"):

* Algorithm 1 (:func:`bernoulli_exp`): Bernoulli(exp(-gamma)) for rational ``gamma = num / den``, von Neumann's method
  (``K = 1``; draw ``A ~ Bernoulli(gamma / K)`` until ``A = 0``, ``K += 1`` each time; return ``[K odd]``) for
  ``gamma <= 1``, and for ``gamma > 1`` the product of ``floor(gamma)`` draws of Bernoulli(exp(-1)) and one of
  Bernoulli(exp(-(gamma - floor(gamma)))), stopped at the first 0;
* Algorithm 2 (:func:`discrete_laplace`): ``P(x) proportional to exp(-|x| s / t)`` on the integers, for integers
  ``t, s >= 1``: ``U`` uniform on ``{0..t-1}`` kept with probability ``exp(-U/t)``, ``V`` geometric from
  Bernoulli(exp(-1)) draws, ``Y = floor((U + t V) / s)``, a fair sign, ``(-, 0)`` rejected;
* Algorithm 3 (:func:`discrete_gaussian`): ``P(x) proportional to exp(-x^2 / (2 sigma^2))`` for rational
  ``sigma^2 = n / d``: ``t = floor(sigma) + 1``, ``Y`` discrete Laplace of scale ``t``, kept with probability
  ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|Y| d t - n)^2 / (2 n d t^2))`` (integers only).

Every coin is ``rng.integers(0, m) < k`` for integers ``m, k``: numpy's bounded integers are exactly uniform (Lemire's
rejection method on the generator's raw 64-bit words), so no floating point enters any decision, and the support of
every draw is all of the integers whatever the parameters (the floating-point attack of Mironov 2012 has nothing to
read). The loops are masked numpy loops: each pass draws for the entries still undecided, so a simulator's millions of
entries cost a few dozen array passes. Arithmetic is int64; parameters are checked so that no product overflows
(:data:`MAX_DENOMINATOR`; von Neumann's coin Bernoulli(gamma / K) is drawn as Bernoulli(gamma) and Bernoulli(1/K),
so no product grows with ``K``), and the one unbounded quantity, the Gaussian's squared gap for a Laplace draw far in
its tail (``|Y| t`` beyond 2^31, probability below ``e^-(2^31 / t^2)``), is handled exactly in Python integers
(:func:`_bernoulli_exp_big`).

The device's generator is PCG64 seeded from ``os.urandom`` (:mod:`workloads.local.rng`); tests and the simulator pass
a seeded ``numpy.random.Generator``. The central half's samplers (``service/privacy/noise.py``) are the same
algorithms, scalar over Python integers and fed by the service's own bit source; they stay separate because the
central releases are pinned to that source's seeded streams (a ``NoiseSource(seed)`` is Python's Mersenne Twister,
not a numpy generator), and exact rationals of any size (a float sigma^2 such as ``3602879701896397 / 2**55``)
overflow int64.

**Why not a library.** OpenDP (Rust, with GMP/MPFR through ``rug`` and OpenSSL) has exact discrete Laplace and
Gaussian samplers over vectors, but draws from its own OS-seeded source (no ``numpy.random.Generator``: a simulation
could not be reproduced) and is a far heavier install than the numpy-only light client; we found no light,
maintained numpy package with exact samplers. numpy only, as everything a participant runs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from workloads.parameters import ParameterError, check_generator

#: Largest denominator (and Laplace ``t``) the int64 loops accept (``rng.integers`` takes bounds below 2^63).
MAX_DENOMINATOR = 1 << 62
#: ``|gap|`` below which ``gap^2`` fits in int64 (below 2^62).
_GAP_LIMIT = 1 << 31


def _as_size(size: int | tuple[int, ...]) -> tuple[int, ...]:
    dims = size if isinstance(size, tuple) else (size,)
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 0:
            raise ParameterError(f"size must be a non-negative integer or a tuple of them, got {size!r}")
    return tuple(int(dim) for dim in dims)


def _positive_int(name: str, value: object, limit: int = MAX_DENOMINATOR) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= value <= limit:
        raise ParameterError(f"{name} must be an integer in [1, {limit}], got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------------------------ Algorithm 1
def _bernoulli_exp_unit(num: np.ndarray, den: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-num/den)) per entry, ``0 <= num <= den`` (von Neumann: CKS Alg. 1 for gamma <= 1)."""
    k = np.ones(num.shape, dtype=np.int64)
    active = np.flatnonzero(num > 0)  # gamma = 0: K stays 1, the answer is 1
    while active.size:
        # Bernoulli(num / (den K)) as Bernoulli(num / den) and Bernoulli(1 / K), independent: no product overflows
        success = (rng.integers(0, den[active]) < num[active]) & (rng.integers(0, k[active]) == 0)
        k[active[success]] += 1
        active = active[success]
    return (k & 1) == 1


def _bernoulli_exp_minus_one(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws of Bernoulli(exp(-1)): Alg. 1 at gamma = 1, whose first coin is always 1."""
    k = np.full(count, 2, dtype=np.int64)
    active = np.arange(count)
    while active.size:
        success = rng.integers(0, k[active]) == 0  # Bernoulli(1 / K)
        k[active[success]] += 1
        active = active[success]
    return (k & 1) == 1


def bernoulli_exp(num: object, den: object, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) draws (CKS Alg. 1), one per entry of the broadcast ``num`` and ``den``.

    ``num >= 0`` and ``1 <= den <= MAX_DENOMINATOR`` integers (arrays or scalars). Returns a bool array."""
    rng = check_generator(rng)
    numerator, denominator = np.broadcast_arrays(np.asarray(num), np.asarray(den))
    if not (np.issubdtype(numerator.dtype, np.integer) and np.issubdtype(denominator.dtype, np.integer)):
        raise ParameterError("num and den must be integers")
    numerator = numerator.astype(np.int64).ravel().copy()
    denominator = denominator.astype(np.int64).ravel()
    if np.any(numerator < 0) or np.any(denominator < 1) or np.any(denominator > MAX_DENOMINATOR):
        raise ParameterError(f"bernoulli_exp needs num >= 0 and 1 <= den <= {MAX_DENOMINATOR}")
    result = np.ones(numerator.size, dtype=bool)
    active = np.flatnonzero(numerator > denominator)
    while active.size:  # gamma > 1: one Bernoulli(exp(-1)) per unit of gamma, stopping at the first 0
        coins = _bernoulli_exp_minus_one(active.size, rng)
        result[active[~coins]] = False
        numerator[active] -= denominator[active]
        active = active[coins & (numerator[active] > denominator[active])]
    rest = np.flatnonzero(result)
    result[rest] = _bernoulli_exp_unit(numerator[rest], denominator[rest], rng)
    return result.reshape(np.shape(np.broadcast_arrays(np.asarray(num), np.asarray(den))[0]))


def _below_big(m: int, rng: np.random.Generator) -> int:
    """A uniform integer in ``{0..m-1}`` for any ``m >= 1`` (Python integers; rejection on ``m.bit_length()`` bits)."""
    bits = m.bit_length()
    words = -(-bits // 32)
    while True:
        value = 0
        for word in rng.integers(0, 1 << 32, size=words, dtype=np.uint64):
            value = (value << 32) | int(word)
        value >>= 32 * words - bits
        if value < m:
            return value


def _bernoulli_exp_big(num: int, den: int, rng: np.random.Generator) -> bool:
    """Alg. 1 in Python integers, for the rare exponents too large for int64 (same algorithm as above)."""
    while num > den:
        if not _bernoulli_exp_minus_one(1, rng)[0]:
            return False
        num -= den
    k = 1
    while _below_big(den, rng) < num and _below_big(k, rng) == 0:
        k += 1
    return k % 2 == 1


# ------------------------------------------------------------------------------------------------ Algorithm 2
def discrete_laplace(t: int, size: int | tuple[int, ...], rng: np.random.Generator, s: int = 1) -> np.ndarray:
    """Exact draws with ``P(x) proportional to exp(-|x| s / t)`` on the integers (CKS Alg. 2), as int64.

    Scale ``b = t / s``: adding it to an integer statistic whose values lie within l1 distance ``Delta`` of each other
    is ``(Delta / b)``-DP (Ghosh, Roughgarden & Sundararajan 2012's geometric mechanism; CKS Sec. 2.2). Variance
    ``2 q / (1 - q)^2`` with ``q = exp(-1/b)``."""
    rng = check_generator(rng)
    t = _positive_int("t", t)
    s = _positive_int("s", s)
    shape = _as_size(size)
    out = np.empty(math.prod(shape), dtype=np.int64)
    pending = np.arange(out.size)
    while pending.size:
        m = pending.size
        u = rng.integers(0, t, size=m) if t > 1 else np.zeros(m, dtype=np.int64)
        kept = _bernoulli_exp_unit(u, np.full(m, t, dtype=np.int64), rng)
        v = np.zeros(m, dtype=np.int64)
        active = np.flatnonzero(kept)
        while active.size:  # V ~ Geometric(1 - exp(-1)): count Bernoulli(exp(-1)) successes
            coins = _bernoulli_exp_minus_one(active.size, rng)
            v[active[coins]] += 1
            active = active[coins]
        y = (u + t * v) // s
        negative = rng.integers(0, 2, size=m) == 1
        accept = kept & ~(negative & (y == 0))
        out[pending[accept]] = np.where(negative, -y, y)[accept]
        pending = pending[~accept]
    return out.reshape(shape)


# ------------------------------------------------------------------------------------------------ Algorithm 3
def discrete_gaussian(
    sigma2: object, size: int | tuple[int, ...], rng: np.random.Generator, t: int | None = None
) -> np.ndarray:
    """Exact draws with ``P(x) proportional to exp(-x^2 / (2 sigma^2))`` on the integers (CKS Alg. 3), as int64.

    ``sigma2`` is an int or a Fraction ``n / d`` (the scale parameter, not the variance, which is slightly smaller for
    small ``sigma2``). ``t`` is the scale of the discrete Laplace proposal: CKS take ``floor(sigma) + 1`` (the
    default); the algorithm is exact for every ``t >= 1`` (the acceptance probability is the ratio of the two pmfs up
    to a constant), and a ``t`` dividing ``n`` keeps the integers small: the exponent
    ``(|Y| d t - n)^2 / (2 n d t^2)`` is reduced by ``gcd(d t, n)^2`` before sampling (``t | n``, ``d = 1``: it is
    ``(|Y| - n/t)^2 / (2 n)``). Adding the draws to each coordinate of an integer statistic is
    ``||mu||_2^2 / (2 sigma^2)``-zCDP for a shift ``mu`` (CKS; ``docs/privacy.md`` 4.1)."""
    rng = check_generator(rng)
    if isinstance(sigma2, bool) or not isinstance(sigma2, int | np.integer | Fraction) or sigma2 <= 0:
        raise ParameterError(f"sigma2 must be a positive int or Fraction, got {sigma2!r}")
    value = Fraction(sigma2)
    n, d = value.numerator, value.denominator
    t = math.isqrt(n // d) + 1 if t is None else _positive_int("t", t)  # floor(sqrt(n/d)) = isqrt(floor(n/d))
    common = math.gcd(d * t, n)
    step, offset = d * t // common, n // common  # |Y| d t - n = common (|Y| step - offset)
    den = 2 * n * d * t * t // (common * common)
    if den > MAX_DENOMINATOR or t > MAX_DENOMINATOR:
        raise ParameterError(f"sigma2={sigma2} (t={t}) is too large or too finely divided for the int64 sampler")
    shape = _as_size(size)
    out = np.empty(math.prod(shape), dtype=np.int64)
    pending = np.arange(out.size)
    limit = (_GAP_LIMIT - offset) // step  # |Y| below it keeps (|Y| step - offset)^2 below 2^62
    while pending.size:
        y = discrete_laplace(t, pending.size, rng)
        small = np.abs(y) < limit
        accept = np.zeros(pending.size, dtype=bool)
        gap = np.abs(y[small]) * step - offset
        accept[small] = bernoulli_exp(gap * gap, den, rng)
        for index in np.flatnonzero(~small):  # a draw far in the tail: exact in Python integers
            big = abs(int(y[index])) * step - offset
            accept[index] = _bernoulli_exp_big(big * big, den, rng)
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out.reshape(shape)


# ------------------------------------------------------------------------------------------------ closed forms
def discrete_laplace_variance(t: int, s: int = 1) -> float:
    """``2 q / (1 - q)^2``, ``q = exp(-s/t)``: the variance of :func:`discrete_laplace`."""
    q = math.exp(-s / t)
    return 2.0 * q / (1.0 - q) ** 2


def discrete_laplace_tail(m: int, t: int, s: int = 1) -> float:
    """``P(|Y| >= m) = 2 q^m / (1 + q)`` for ``m >= 1``, ``q = exp(-s/t)`` (sum of the geometric tails)."""
    q = math.exp(-s / t)
    return 2.0 * q**m / (1.0 + q)
