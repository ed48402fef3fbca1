"""The one noise module of Marginalia: every random draw a release makes comes from a :class:`NoiseSource`.

* Counts get EXACT integer noise: the discrete Gaussian and the discrete Laplace samplers of Canonne,
  Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy" (arXiv:2004.00010, "CKS"),
  Algorithms 1-3. Every accept/reject decision is a comparison of integers; no floating point is involved,
  so the floating-point attacks of Mironov 2012 ("On significance of the least significant bits for
  differential privacy") do not apply.
* Real-valued mechanisms (objective perturbation, the minimum eigenvalue of a Gram release) get continuous Gaussian
  noise, and selection steps (AIM, MST) the exponential mechanism's Gumbel noise, both by inverse transform of
  uniforms built from the source's own bits (``os.urandom`` by default): vectorised, and with no second,
  non-cryptographic generator in between. Both use floating point: see docs/privacy.md, "Randomness", for why and
  what that costs.

The same CKS algorithms exist vectorised for participants' devices in ``workloads/local/exact_noise.py`` (numpy
loops over ``numpy.random.Generator.integers``). The scalar versions here stay: every central draw comes from this
source's own bits (``os.urandom``, or the seeded Mersenne Twister whose streams the central tests pin), which a numpy
generator cannot reproduce, and the parameters here are exact rationals of any size (a float ``sigma2`` keeps its
binary value, e.g. ``3602879701896397 / 2**55``), beyond the device sampler's int64 arithmetic.

Randomness: ``NoiseSource()`` (no seed) draws every bit from the operating system's CSPRNG (``os.urandom``,
buffered; the buffer is dropped in a forked child and guarded by a lock). ``NoiseSource(seed)`` uses
Python's Mersenne Twister seeded with the integer: reproducible across processes and independent of
PYTHONHASHSEED, for tests and experiments only -- anyone who knows the seed can subtract the noise.
"""

from __future__ import annotations

import math
import os
import random
import threading
import weakref
from collections.abc import Callable

import numpy as np
from scipy.special import ndtri

from workloads.parameters import PrivacyParameterError, exact_number, positive_exact, validate_epsilon

__all__ = ["NoiseSource"]

_CHUNK = 1 << 14  # bytes of OS randomness fetched at a time
_LIVE_OS_SOURCES: weakref.WeakSet[_OsRandom] = weakref.WeakSet()


class _OsRandom(random.Random):
    """``random.Random`` whose bits all come from ``os.urandom``, read in chunks.

    Like ``random.SystemRandom`` but buffered (one system call per 16 KiB instead of one per draw). A
    forked child drops the inherited buffer (``os.register_at_fork``) so that parent and child never reuse
    the same bytes; a lock keeps two threads from reading the same bytes. Not seedable.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._pos = 0
        super().__init__()
        _LIVE_OS_SOURCES.add(self)

    def seed(self, *args: object, **kwargs: object) -> None:  # noqa: D102 - nothing to seed
        return None

    def getstate(self) -> object:
        raise NotImplementedError("an OS random source has no state to save")

    def setstate(self, state: object) -> None:
        raise NotImplementedError("an OS random source has no state to restore")

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork time would never be released
        self._buf = b""
        self._pos = 0

    def _take(self, nbytes: int) -> bytes:
        if nbytes > _CHUNK:
            return os.urandom(nbytes)  # large requests bypass the buffer
        with self._lock:
            pos = self._pos
            if pos + nbytes > len(self._buf):
                self._buf = os.urandom(_CHUNK)
                pos = 0
            self._pos = pos + nbytes
            return self._buf[pos : pos + nbytes]

    def getrandbits(self, k: int) -> int:
        if k <= 0:
            if k == 0:
                return 0
            raise ValueError("number of bits must be non-negative")
        nbytes = (k + 7) // 8
        return int.from_bytes(self._take(nbytes), "little") >> (8 * nbytes - k)

    def randbytes(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("number of bytes must be non-negative")
        return self._take(n) if n else b""

    def random(self) -> float:
        return self.getrandbits(53) * (1.0 / 9007199254740992.0)


def _after_fork_in_child() -> None:
    for source in list(_LIVE_OS_SOURCES):
        source._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# --------------------------------------------------------------------------------------------------
# exact samplers over a uniform-integer primitive (CKS 2020, Algorithms 1-3)
# --------------------------------------------------------------------------------------------------
def _make_below(getrandbits: Callable[[int], int]) -> Callable[[int], int]:
    """A uniform draw from {0, ..., n-1} by rejection on n.bit_length() random bits (exactly uniform)."""

    def below(n: int) -> int:
        k = n.bit_length()
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r

    return below


def _bernoulli_exp_unit(num: int, den: int, below: Callable[[int], int]) -> bool:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Alg. 1, von Neumann's method).

    K = 1; repeat: draw A ~ Bernoulli(gamma / K); stop when A = 0, else K += 1; return [K odd].
    Bernoulli(num / (den K)) is ``below(den * K) < num``: integers only.
    """
    k = 1
    while below(den * k) < num:
        k += 1
    return (k & 1) == 1


def _bernoulli_exp_minus_one(below: Callable[[int], int]) -> bool:
    """Bernoulli(exp(-1)): Alg. 1 with gamma = 1, whose first draw Bernoulli(1/1) is always 1."""
    k = 2
    while below(k) == 0:
        k += 1
    return (k & 1) == 1


def _bernoulli_exp(num: int, den: int, below: Callable[[int], int]) -> bool:
    """Bernoulli(exp(-num/den)) for any num >= 0 (CKS Sec. on Alg. 1: gamma > 1 is the product of
    floor-many Bernoulli(exp(-1)) and one Bernoulli(exp(-fractional part)); we stop at the first 0)."""
    while num > den:
        if not _bernoulli_exp_minus_one(below):
            return False
        num -= den
    return _bernoulli_exp_unit(num, den, below)


def _discrete_laplace_one(t: int, s: int, below: Callable[[int], int], bit: Callable[[], int]) -> int:
    """One draw with P(x) proportional to exp(-|x| s / t), i.e. scale t/s (CKS Alg. 2).

    U uniform on {0..t-1}, accepted with probability exp(-U/t); V ~ Geometric(1 - exp(-1)) from
    Bernoulli(exp(-1)) draws; X = U + t V is geometric with P(X = x) proportional to exp(-x/t);
    Y = floor(X / s); a sign B; (B = 1, Y = 0) is rejected so that 0 is not counted twice.
    """
    while True:
        u = below(t) if t > 1 else 0
        if u and not _bernoulli_exp_unit(u, t, below):
            continue
        v = 0
        while _bernoulli_exp_minus_one(below):
            v += 1
        y = (u + t * v) // s
        if bit():
            if y == 0:
                continue
            return -y
        return y


def _discrete_gaussian_one(n: int, d: int, t: int, below: Callable[[int], int], bit: Callable[[], int]) -> int:
    """One draw with P(x) proportional to exp(-x^2 / (2 sigma^2)), sigma^2 = n/d (CKS Alg. 3).

    t = floor(sigma) + 1; Y ~ discrete Laplace with scale t; accept with probability
    exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)). In integers (our rewriting, checked in the tests):
    (|Y| - n/(d t))^2 / (2 n/d) = (|Y| d t - n)^2 / (2 n d t^2).
    """
    den = 2 * n * d * t * t
    dt = d * t
    while True:
        y = _discrete_laplace_one(t, 1, below, bit)
        gap = abs(y) * dt - n
        if _bernoulli_exp(gap * gap, den, below):
            return y


def _shape(size: object) -> tuple[int, ...]:
    dims = (size,) if not isinstance(size, tuple) else size
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
            raise ValueError(f"size must be a non-negative integer or a tuple of them, got {size!r}")
    return tuple(int(dim) for dim in dims)


class NoiseSource:
    """Every random draw of a release.

    ``NoiseSource()`` -- cryptographically secure (OS randomness); ``NoiseSource(seed)`` -- deterministic
    (same seed, same draws, in any process), for tests and experiments only.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            self._rng: random.Random = _OsRandom()
        else:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise ValueError(f"seed must be an integer or None, got {seed!r}")
            self._rng = random.Random(int(seed))
        self._seeded = seed is not None
        getrandbits = self._rng.getrandbits
        self._below = _make_below(getrandbits)
        self._bit = lambda: getrandbits(1)

    @property
    def seeded(self) -> bool:
        """True for a deterministic (seeded) source, False for OS randomness."""
        return self._seeded

    def __repr__(self) -> str:
        return f"NoiseSource(seeded={self._seeded})"

    # primitives ---------------------------------------------------------------------------------
    def uniform_int(self, n: int) -> int:
        """A uniform integer in {0, ..., n-1} (exact: rejection sampling on random bits)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        return self._below(int(n))

    def bernoulli_exp(self, gamma: object) -> bool:
        """An exact Bernoulli(exp(-gamma)) draw for rational gamma >= 0 (CKS Alg. 1)."""
        value = exact_number(gamma, "gamma")
        if value < 0:
            raise PrivacyParameterError(f"gamma must be >= 0, got {gamma!r}")
        return _bernoulli_exp(value.numerator, value.denominator, self._below)

    # exact integer noise ------------------------------------------------------------------------
    def discrete_gaussian(self, sigma2: object, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Exact draws from the discrete Gaussian N_Z(0, sigma2): P(x) proportional to exp(-x^2/(2 sigma2)).

        ``sigma2`` (the square of the scale parameter, not the variance, which is slightly smaller for
        small sigma2) is converted to a Fraction EXACTLY: an int, Fraction, Decimal or decimal string
        keeps its value; a float keeps its binary value (0.1 becomes 3602879701896397/2**55, not 1/10).
        No rounding to a nearby simple fraction is done. Adding this noise to an integer query with
        L2 sensitivity Delta gives rho = Delta^2 / (2 sigma2) (CKS Thm. 4;
        see service.privacy.calibration.gaussian_sigma2_exact).
        """
        value = positive_exact(sigma2, "sigma2")
        shape = _shape(size)
        n, d = value.numerator, value.denominator
        t = math.isqrt(n // d) + 1  # floor(sqrt(n/d)) = floor(sqrt(floor(n/d)))
        below, bit = self._below, self._bit
        count = math.prod(shape)
        draws = [_discrete_gaussian_one(n, d, t, below, bit) for _ in range(count)]
        return np.array(draws, dtype=np.int64).reshape(shape)

    def discrete_laplace(self, scale: object, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Exact draws with P(x) proportional to exp(-|x| / scale) on the integers (CKS Alg. 2).

        ``scale`` is converted to a Fraction exactly (as for ``discrete_gaussian``). Adding this noise to an
        integer query with L1 sensitivity Delta gives pure epsilon-DP with epsilon = Delta / scale
        (see service.privacy.calibration.laplace_scale_exact).
        """
        value = positive_exact(scale, "scale")
        shape = _shape(size)
        t, s = value.numerator, value.denominator
        below, bit = self._below, self._bit
        count = math.prod(shape)
        draws = [_discrete_laplace_one(t, s, below, bit) for _ in range(count)]
        return np.array(draws, dtype=np.int64).reshape(shape)

    # floating-point noise and selection ---------------------------------------------------------
    def numpy_generator(self) -> np.random.Generator:
        """A fresh numpy Generator (PCG64) seeded with 256 bits drawn from this source: reproducible for a
        seeded source, fresh OS entropy otherwise. For post-processing only (synthetic rows): PCG64 is not a
        cryptographic generator, so no mechanism draws its noise from it."""
        entropy = self._rng.getrandbits(256)
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))

    def uniform(self, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Uniform draws on the open interval (0, 1), float64: ``(2k + 1) / 2^53`` with ``k`` uniform on
        ``{0, ..., 2^52 - 1}``, i.e. the midpoints of a grid of 2^52 equal cells, each exactly representable.

        The 52 bits of each ``k`` are the top bits of 8 bytes of this source (``os.urandom`` for ``NoiseSource()``;
        the seeded Mersenne Twister's ``randbytes`` for ``NoiseSource(seed)``), read as little-endian uint64."""
        shape = _shape(size)
        count = math.prod(shape)
        words = np.frombuffer(self._rng.randbytes(8 * count), dtype="<u8")
        k = (words >> np.uint64(12)).astype(np.float64)  # < 2^52: exact in float64
        return ((2.0 * k + 1.0) * (1.0 / 9007199254740992.0)).reshape(shape)

    def gaussian(self, sigma: float, size: int | tuple[int, ...] = 1) -> np.ndarray:
        """Continuous N(0, sigma^2) draws (float64) for mechanisms whose output is real-valued (objective
        perturbation's noise vectors, a Gram release's minimum eigenvalue): ``sigma * Phi^{-1}(U)`` with ``U`` from
        :meth:`uniform` (inverse transform; scipy's ``ndtri``). The tails are cut where ``U`` is: beyond about
        8.1 sigma, a probability below 1e-15. Floating point: see docs/privacy.md, section 7."""
        sigma_value = float(positive_exact(sigma, "sigma"))
        return sigma_value * ndtri(self.uniform(size))

    def exponential_mechanism(self, scores: object, epsilon: float, sensitivity: float) -> int:
        """Index i chosen with probability proportional to exp(epsilon * score_i / (2 * sensitivity))
        (McSherry & Talwar 2007), where ``sensitivity`` bounds how much any score changes between
        neighbouring datasets. It is epsilon-DP and epsilon^2/8-zCDP (Cesar & Rogers 2021, via
        epsilon-bounded range), the charge AIM and MST use.

        Gumbel-max trick: argmax_i (logit_i + G_i) with G_i iid standard Gumbel has exactly the softmax law.
        Stable: logits are shifted by their maximum (no overflow, argmax unchanged) and G = -log(E) with
        E = -log1p(-V), V from :meth:`uniform` ((2k+1)/2^53 for k uniform on {0..2^52-1}, from this source's bits),
        so 0 < V < 1 and G is finite.
        """
        values = np.asarray(scores, dtype=np.float64)
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"scores must be a non-empty 1-d array, got shape {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("scores must all be finite")
        eps = validate_epsilon(epsilon)
        sens = float(positive_exact(sensitivity, "sensitivity"))
        factor = eps / (2.0 * sens)
        if not math.isfinite(factor):
            raise PrivacyParameterError(
                f"epsilon / (2 * sensitivity) is not finite: epsilon={epsilon!r}, sensitivity={sensitivity!r}"
            )
        with np.errstate(over="ignore"):  # a difference below -1.8e308 becomes -inf: probability 0, as it should
            logits = factor * (values - values.max())
        gumbel = -np.log(-np.log1p(-self.uniform(values.size)))
        return int(np.argmax(logits + gumbel))
