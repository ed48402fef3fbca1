"""Frequency oracles: one categorical value of ``k`` reported under pure epsilon-LDP, sampled exactly.

Four oracles, each a public object (:class:`FrequencyOracle`) that a device uses to randomize and the server uses to
check reports, tally them and estimate the frequencies with their variances:

* ``grr``, generalized randomized response (Wang, Blocki, Li & Jha 2017, "Locally differentially private protocols
  for frequency estimation", USENIX Security, Sec. 4.1, "direct encoding"): the report is a value of ``[0, k)``, the
  true one with probability ``p = e^eps / (e^eps + k - 1)``, each other one with ``q = 1 / (e^eps + k - 1)``;
* ``oue``, optimized unary encoding (ibid., Sec. 4.3): ``k`` bits, the true value's bit set with probability
  ``p = 1/2``, every other bit with ``q = 1 / (e^eps + 1)``;
* ``olh``, optimized local hashing (ibid., Sec. 4.4): a public hash ``h_a`` drawn from a family, then GRR over its
  ``g`` buckets on ``h_a(x)``; ``p = e^eps / (e^eps + g - 1)``, and a value ``v != x`` is supported with
  ``q = 1/g``. Wang et al. take ``g = e^eps + 1`` and a universal family; here ``g`` is the **prime** of least
  variance near it and the family is ``h_a(v) = sum_i a_i v_i mod g`` over the ``L`` base-``g`` digits ``v_i`` of
  ``v`` (of each axis's code, for a marginal's cell; ``a`` uniform on ``Z_g^L``, sent as the integer whose digits are
  ``a_i``): for ``u != v`` some digit
  difference is invertible mod the prime ``g``, so ``P_a(h_a(u) = h_a(v)) = 1/g`` **exactly**, and the estimator
  is exactly unbiased (a finite family that is only approximately universal would bias it);
* ``hadamard``, Hadamard response (Acharya, Sun & Zhang 2019, "Hadamard response: estimating distributions privately,
  efficiently, and with little communication", AISTATS, Sec. 3, the ``K ~ k`` case): with ``K`` the smallest power of
  two above ``k`` and ``C_x = {y in [0, K): popcount((x + 1) & y) even}`` (the +1 entries of row ``x + 1`` of the
  ``K x K`` Sylvester-Hadamard matrix, ``K/2`` of them), the report ``y`` is uniform on ``C_x`` with probability
  ``e^eps / (e^eps + 1)`` and uniform on its complement otherwise; two rows agree on exactly ``K/2`` columns, so a
  value ``v != x`` is supported with ``q = 1/2`` and ``p = e^eps / (e^eps + 1)``.

**Guarantee.** GRR, OLH and Hadamard are one scheme: over a finite output set, an output "favoured" by ``x`` has
weight ``1``, any other ``e^-eps``, and each input has equally many favoured outputs (one; one per seed; ``K/2``),
so ``P(y | x) / P(y | x') <= e^eps`` for all ``x, x', y``: pure epsilon-LDP (derivations in ``docs/privacy.md`` 8.10).
OUE's bits are independent, and a report's ratio is ``(p (1 - q) / ((1 - p) q))^(b_x - b_x')`` with
``p (1 - q) / ((1 - p) q) = e^eps``.

**Exactly sampled.** Every coin is exact, so the output's law is the stated one for every input (no Mironov 2012
float leak): epsilon is first rounded down to ``eps' <= eps`` with 40 significant bits
(:func:`~workloads.local.randomizers.l2ball.exact_epsilon`), and every probability above is at ``eps'``. The
weighted draw (:func:`favoured_draw`) is rejection sampling: propose a uniform output (numpy's bounded integers are
exactly uniform), keep a favoured one, keep another with an exact Bernoulli(``e^-eps'``) (CKS Alg. 1,
:func:`workloads.local.exact_noise.bernoulli_exp`); OUE's bits are a fair coin and the exact
Bernoulli(``1 / (1 + e^eps')``) of :func:`~workloads.local.randomizers.l2ball.hemisphere_coin`.

**What the server accepts** (:meth:`FrequencyOracle.first_refused`): whole numbers in the output set (a value in
``[0, k)``, ``[0, g)`` or ``[0, K)``, a seed in ``[0, g^L)``), bits that are 0 or 1. Every such report has positive
probability under every input, so refusing anything else rejects only what no honest device sends.

**Estimation** (Wang et al. 2017, Sec. 3, eq. (1)-(2)): with ``c_v`` the number of the ``n`` reports that support
``v``, ``f_v = (c_v / n - q) / (p - q)`` is unbiased and
``Var f_v = (q (1 - q) + f_v (p (1 - p) - q (1 - q))) / (n (p - q)^2)`` (each report supports ``v`` independently,
with probability ``p`` if its value is ``v`` and ``q`` otherwise). :func:`best_oracle` picks the oracle of least
variance at ``f = 1/k``, the mean over the cells.

numpy and the standard library only, as everything a participant runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import numpy as np

from workloads.local.exact_noise import bernoulli_exp
from workloads.local.randomizers.l2ball import exact_epsilon, hemisphere_coin
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: the oracles by name, in the order :func:`best_oracle` breaks ties (compact reports first)
ORACLES = ("grr", "olh", "hadamard", "oue")
#: the oracles :func:`best_oracle` chooses from: OUE's report is ``k`` bits and its variance is OLH's at a real ``g``
#: (Wang et al. 2017, Sec. 4.4), which the prime ``g`` of OLH approaches within a few per cent; it is offered, never
#: picked by default
AUTO_ORACLES = ("grr", "olh", "hadamard")
#: the largest domain one oracle takes (a marginal's cells): OUE's report has this many bits, and Hadamard's ``K``
#: is below twice it
MAX_CELLS = 1 << 20


def favoured_draw(count: int, outputs: int, favoured: np.ndarray | None, epsilon: Fraction,
                  rng: np.random.Generator, favoured_test=None) -> np.ndarray:  # noqa: ANN001
    """``count`` outputs of ``[0, outputs)``, each drawn with weight 1 if favoured and ``e^-eps`` otherwise, exactly.

    Either ``favoured`` (one favoured output per draw, shape ``(count,)``) or ``favoured_test(indices, proposals)``
    (a boolean per proposal: whether it is favoured for the draws ``indices``). Rejection sampling: a uniform
    proposal is kept if favoured, else with an exact Bernoulli(``e^-eps``); the kept output has the stated law."""
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        proposals = rng.integers(0, outputs, size=pending.size, dtype=np.int64)
        if favoured_test is None:
            liked = proposals == favoured[pending]
        else:
            liked = favoured_test(pending, proposals)
        kept = liked.copy()
        others = np.flatnonzero(~liked)
        if others.size:
            kept[others] = bernoulli_exp(np.full(others.size, epsilon.numerator), epsilon.denominator, rng)
        out[pending[kept]] = proposals[kept]
        pending = pending[~kept]
    return out


def _not_whole_below(values: np.ndarray, limit: int) -> np.ndarray:
    """A mask of the entries that are not whole numbers in ``[0, limit)``."""
    return (values != np.floor(values)) | (values < 0) | (values >= limit) | ~np.isfinite(values)


@dataclass(frozen=True)
class OracleReports:
    """A batch of one oracle's reports: ``value`` (GRR, OLH, Hadamard: one whole number each), ``seed`` (OLH's hash;
    0 for the others) and ``bits`` (OUE: ``(n, k)``; ``None`` for the others)."""

    value: np.ndarray
    seed: np.ndarray
    bits: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.value.shape[0])


@dataclass(frozen=True)
class FrequencyOracle:
    """One oracle over ``cells`` values at ``epsilon`` (the base of the four; module docstring)."""

    name: ClassVar[str]
    cells: int
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", check_count("cells", self.cells, minimum=2))
        if self.cells > MAX_CELLS:
            raise ParameterError(f"a frequency oracle takes at most {MAX_CELLS:,} cells, got {self.cells:,}")
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    # ---- the law
    @property
    def exact_epsilon(self) -> Fraction:
        """``eps' <= eps``, the level every coin runs at."""
        return exact_epsilon(self.epsilon)

    @property
    def _e(self) -> float:
        return math.exp(float(self.exact_epsilon))

    @property
    def p(self) -> float:
        """The probability that a report supports its own value."""
        raise NotImplementedError

    @property
    def q(self) -> float:
        """The probability that a report supports a given other value."""
        raise NotImplementedError

    def cell_variance(self, frequency: float | np.ndarray, reports: int) -> float | np.ndarray:
        """``Var f_v`` of the estimate of a value of frequency ``frequency`` from ``reports`` reports."""
        p, q = self.p, self.q
        return (q * (1 - q) + np.asarray(frequency) * (p * (1 - p) - q * (1 - q))) / (reports * (p - q) ** 2)

    def mean_variance(self, reports: int) -> float:
        """The variance of one cell's estimate averaged over the cells (``f = 1/k``)."""
        return float(self.cell_variance(1.0 / self.cells, reports))

    def expected_l1(self, frequencies: np.ndarray, reports: float) -> float:
        """The expected L1 error of the unbiased estimate of a distribution ``frequencies`` over the cells from
        ``reports`` reports: ``sqrt(2 / pi) sum_v sqrt(Var f_v)`` (the central limit of each cell's mean)."""
        return float(math.sqrt(2.0 / math.pi) * np.sqrt(self.cell_variance(np.asarray(frequencies), reports)).sum())

    # ---- the device
    def randomize(self, values: object, rng: np.random.Generator | None = None) -> OracleReports:
        """One report per value of ``values`` (whole numbers in ``[0, cells)``; ``rng=None``: the device's source)."""
        array = np.asarray(values, dtype=float).reshape(-1)
        if array.size and _not_whole_below(array, self.cells).any():
            raise ParameterError(f"values must be whole numbers in [0, {self.cells - 1}]")
        return self._randomize(array.astype(np.int64), generator_or_device(rng))

    def _randomize(self, values: np.ndarray, rng: np.random.Generator) -> OracleReports:
        raise NotImplementedError

    # ---- the server
    @property
    def value_limit(self) -> int:
        """Reports' ``value`` lies in ``[0, value_limit)``."""
        return self.cells

    @property
    def seed_limit(self) -> int:
        """Reports' ``seed`` lies in ``[0, seed_limit)`` (1: always 0)."""
        return 1

    @property
    def tally_width(self) -> int:
        """The length of :meth:`tally`'s vector."""
        return self.cells

    def first_refused(self, reports: OracleReports) -> tuple[int, str, str] | None:
        """The first report of the batch no honest device can send: its index in the batch, the field at fault and
        why; or None."""
        checks = [(reports.value, self.value_limit, "value"), (reports.seed, self.seed_limit, "seed")]
        for values, limit, what in checks:
            bad = _not_whole_below(np.asarray(values, dtype=float), limit)
            if bad.any():
                index = int(np.argmax(bad))
                return index, what, (f"its {self.name} {what} {float(values[index])!r} is not a whole number in "
                                     f"[0, {limit - 1}]")
        return None

    def tally(self, reports: OracleReports) -> np.ndarray:
        """What the server adds up for a batch of accepted reports, a vector of :attr:`tally_width` counts (GRR,
        OUE, OLH: the support counts ``c_v``; Hadamard: the histogram of the outputs, turned into ``c_v`` by
        :meth:`support_counts`)."""
        return np.bincount(reports.value.astype(np.int64), minlength=self.tally_width).astype(float)

    def support_counts(self, tally: np.ndarray, reports: int) -> np.ndarray:
        """``c_v`` for every value from the summed tallies of ``reports`` reports."""
        return np.asarray(tally, dtype=float)

    def estimate(self, tally: np.ndarray, reports: int) -> np.ndarray:
        """The unbiased frequencies ``(c_v / n - q) / (p - q)`` (they sum to 1 for GRR and OUE in expectation, and
        may be negative)."""
        n = check_count("reports", reports)
        return (self.support_counts(tally, n) / n - self.q) / (self.p - self.q)

    def to_json(self) -> dict[str, object]:
        return {"oracle": self.name, "cells": self.cells, "epsilon": self.epsilon}


@dataclass(frozen=True)
class GeneralizedRandomizedResponse(FrequencyOracle):
    """GRR (Wang et al. 2017, Sec. 4.1): the report is the value itself with probability ``e^eps / (e^eps + k - 1)``,
    else uniform over the other ``k - 1``."""

    name: ClassVar[str] = "grr"

    @property
    def p(self) -> float:
        return self._e / (self._e + self.cells - 1)

    @property
    def q(self) -> float:
        return 1.0 / (self._e + self.cells - 1)

    def _randomize(self, values: np.ndarray, rng: np.random.Generator) -> OracleReports:
        drawn = favoured_draw(values.size, self.cells, values, self.exact_epsilon, rng)
        return OracleReports(drawn.astype(float), np.zeros(values.size))


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def olh_variance_factor(buckets: int, epsilon: float) -> float:
    """``n Var f`` (the ``f``-free part) of OLH with ``buckets`` buckets:
    ``(e^eps + g - 1)^2 / ((e^eps - 1)^2 (g - 1))`` (Wang et al. 2017, eq. (11) with ``q = 1/g``)."""
    e = math.exp(float(exact_epsilon(epsilon)))
    return (e + buckets - 1) ** 2 / ((e - 1) ** 2 * (buckets - 1))


def olh_buckets(epsilon: float) -> int:
    """The prime ``g`` of least OLH variance: the best of the primes next to ``e^eps + 1`` (the real optimum)."""
    target = math.exp(float(exact_epsilon(epsilon))) + 1
    below = next((g for g in range(max(2, math.floor(target)), 1, -1) if _is_prime(g)), 2)
    above = next(g for g in range(max(2, math.ceil(target)), 2 * math.ceil(target) + 3) if _is_prime(g))
    return min((below, above), key=lambda g: (olh_variance_factor(g, epsilon), g))


@dataclass(frozen=True)
class OptimizedLocalHashing(FrequencyOracle):
    """OLH (Wang et al. 2017, Sec. 4.4) with the exactly universal family of the module docstring.

    ``shape``: the value's axes when it is a cell of a marginal (``cells = prod(shape)``); a value's digits are then
    each axis code's base-``g`` digits, end to end, so ``h_a(u, w) = (alpha . d(u) + beta . d(w)) mod g``: distinct
    cells differ in a digit, so the family stays exactly universal, and a two-axis tally factorises into matrix
    products (:meth:`tally`)."""

    name: ClassVar[str] = "olh"
    shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
            if math.prod(self.shape) != self.cells or min(self.shape) < 1:
                raise ParameterError(f"shape {self.shape} does not hold {self.cells} cells")

    @property
    def axes(self) -> tuple[int, ...]:
        return self.shape if self.shape is not None else (self.cells,)

    @cached_property
    def buckets(self) -> int:
        return olh_buckets(self.epsilon)

    @cached_property
    def axis_digits(self) -> tuple[int, ...]:
        """``L_i``: base-``g`` digits of each axis's codes (``g^L_i >= k_i``, at least one)."""
        g = self.buckets
        out = []
        for size in self.axes:
            length = 1
            while g**length < size:
                length += 1
            out.append(length)
        return tuple(out)

    @property
    def digits(self) -> int:
        """``L``: the digits of a value, and of a seed."""
        return sum(self.axis_digits)

    @property
    def p(self) -> float:
        return self._e / (self._e + self.buckets - 1)

    @property
    def q(self) -> float:
        return 1.0 / self.buckets

    @property
    def value_limit(self) -> int:
        return self.buckets

    @property
    def seed_limit(self) -> int:
        return self.buckets**self.digits

    def _base_digits(self, numbers: np.ndarray, length: int) -> np.ndarray:
        """``(n, length)`` base-``g`` digits of whole numbers, least significant first."""
        powers = self.buckets ** np.arange(length, dtype=np.int64)
        return (np.asarray(numbers).astype(np.int64)[:, np.newaxis] // powers) % self.buckets

    def _value_digits(self, values: np.ndarray) -> np.ndarray:
        """``(n, L)``: each axis code's digits, end to end."""
        codes = np.unravel_index(np.asarray(values).astype(np.int64), self.axes)
        return np.concatenate([self._base_digits(c, n) for c, n in zip(codes, self.axis_digits, strict=True)], axis=1)

    def hash(self, seeds: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``h_a(v)`` per pair (``seeds`` and ``values`` of one shape)."""
        return (self._base_digits(seeds, self.digits) * self._value_digits(values)).sum(axis=1) % self.buckets

    def _randomize(self, values: np.ndarray, rng: np.random.Generator) -> OracleReports:
        seeds = rng.integers(0, self.seed_limit, size=values.size, dtype=np.int64)
        drawn = favoured_draw(values.size, self.buckets, self.hash(seeds, values), self.exact_epsilon, rng)
        return OracleReports(drawn.astype(float), seeds.astype(float))

    def tally(self, reports: OracleReports) -> np.ndarray:
        """``c_v``: for each value, the reports whose bucket is its hash under their seed. Two axes and a small ``g``:
        ``C[u, w] = sum_c sum_r [A_r(u) = c] [B_r(w) = y_r - c]`` with ``A_r``, ``B_r`` the two axes' partial hashes,
        ``g`` matrix products; otherwise an ``(n, k)`` comparison per chunk of the batch (bounded memory)."""
        seeds = self._base_digits(reports.seed, self.digits)
        buckets = reports.value.astype(np.int64)
        if len(self.axes) == 2 and self.buckets <= 16:
            return self._factorised_tally(seeds, buckets)
        cell_digits = self._value_digits(np.arange(self.cells)).T  # (L, k)
        counts = np.zeros(self.cells)
        chunk = max(1, (1 << 22) // self.cells)
        for start in range(0, reports.count, chunk):
            hashes = (seeds[start:start + chunk] @ cell_digits) % self.buckets
            counts += (hashes == buckets[start:start + chunk, np.newaxis]).sum(axis=0)
        return counts

    def _factorised_tally(self, seeds: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        g = self.buckets
        first, second = self.axis_digits
        partial = []
        for offset, length, size in ((0, first, self.axes[0]), (first, second, self.axes[1])):
            axis_digits = self._base_digits(np.arange(size), length).T  # (L_i, k_i)
            partial.append((seeds[:, offset:offset + length] @ axis_digits) % g)  # (n, k_i)
        a, b = partial
        counts = np.zeros(self.axes, dtype=np.float64)
        for c in range(g):
            left = (a == c).astype(np.float32)
            right = (b == ((buckets - c) % g)[:, np.newaxis]).astype(np.float32)
            counts += (left.T @ right).astype(np.float64)  # whole numbers below 2^24: exact in float32
        return counts.ravel()

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "buckets": self.buckets, "digits": self.digits}


def _popcount_parity(numbers: np.ndarray) -> np.ndarray:
    """``popcount(n) mod 2`` per entry of a non-negative int64 array."""
    return np.bitwise_count(numbers.astype(np.uint64)) & 1


def walsh_hadamard(vector: np.ndarray) -> np.ndarray:
    """``H v`` for the Sylvester-Hadamard matrix ``H[i, j] = (-1)^popcount(i & j)`` of order ``len(v)`` (a power of
    two), by the fast transform (``K log K`` additions)."""
    out = np.array(vector, dtype=float)
    size = out.size
    if size & (size - 1):
        raise ParameterError(f"the Walsh-Hadamard transform needs a power-of-two length, got {size}")
    half = 1
    while half < size:
        blocks = out.reshape(-1, 2, half)
        top, bottom = blocks[:, 0, :].copy(), blocks[:, 1, :]
        blocks[:, 0, :] = top + bottom
        blocks[:, 1, :] = top - bottom
        half *= 2
    return out


@dataclass(frozen=True)
class HadamardResponse(FrequencyOracle):
    """Hadamard response (Acharya, Sun & Zhang 2019, Sec. 3): the output ``y`` in ``[0, K)``, favoured when row
    ``x + 1`` of the Hadamard matrix is +1 at ``y``."""

    name: ClassVar[str] = "hadamard"

    @property
    def order(self) -> int:
        """``K``: the smallest power of two above ``cells`` (rows ``1..k`` are used, row 0 favours everything)."""
        return 1 << self.cells.bit_length()

    @property
    def p(self) -> float:
        return self._e / (self._e + 1)

    @property
    def q(self) -> float:
        return 0.5

    @property
    def value_limit(self) -> int:
        return self.order

    @property
    def tally_width(self) -> int:
        return self.order

    def _randomize(self, values: np.ndarray, rng: np.random.Generator) -> OracleReports:
        rows = values + 1

        def favoured(indices: np.ndarray, proposals: np.ndarray) -> np.ndarray:
            return _popcount_parity(rows[indices] & proposals) == 0

        drawn = favoured_draw(values.size, self.order, None, self.exact_epsilon, rng, favoured)
        return OracleReports(drawn.astype(float), np.zeros(values.size))

    def support_counts(self, tally: np.ndarray, reports: int) -> np.ndarray:
        """``c_v = (n + (H t)[v + 1]) / 2`` from the histogram ``t`` (row ``v + 1`` is +1 on the outputs that
        support ``v``)."""
        return (reports + walsh_hadamard(tally)[1:self.cells + 1]) / 2.0


@dataclass(frozen=True)
class OptimizedUnaryEncoding(FrequencyOracle):
    """OUE (Wang et al. 2017, Sec. 4.3): ``k`` bits, the own one set with probability 1/2, the others with
    ``1 / (e^eps + 1)``."""

    name: ClassVar[str] = "oue"

    @property
    def p(self) -> float:
        return 0.5

    @property
    def q(self) -> float:
        return 1.0 / (self._e + 1)

    def _randomize(self, values: np.ndarray, rng: np.random.Generator) -> OracleReports:
        n = values.size
        bits = ~hemisphere_coin(n * self.cells, self.epsilon, rng).reshape(n, self.cells)
        bits[np.arange(n), values] = rng.integers(0, 2, size=n) == 1
        return OracleReports(np.zeros(n), np.zeros(n), bits.astype(float))

    def first_refused(self, reports: OracleReports) -> tuple[int, str, str] | None:
        bits = np.asarray(reports.bits, dtype=float)
        bad = ~np.all((bits == 0) | (bits == 1), axis=1)
        if bad.any():
            return int(np.argmax(bad)), "bits", f"an oue report is {self.cells} bits, each 0 or 1"
        return super().first_refused(reports)

    def tally(self, reports: OracleReports) -> np.ndarray:
        return np.asarray(reports.bits, dtype=float).sum(axis=0)


#: oracle name -> its class
ORACLE_CLASSES: Mapping[str, type[FrequencyOracle]] = {
    cls.name: cls for cls in (GeneralizedRandomizedResponse, OptimizedLocalHashing, HadamardResponse,
                              OptimizedUnaryEncoding)}


def make_oracle(name: str, cells: int, epsilon: float, shape: tuple[int, ...] | None = None) -> FrequencyOracle:
    """The oracle ``name`` (one of :data:`ORACLES`, or ``"auto"``: :func:`best_oracle`) over ``cells`` values
    (``shape``: their axes, for a marginal's cells: OLH hashes each axis's code)."""
    if name == "auto":
        return best_oracle(cells, epsilon, shape)
    if name not in ORACLE_CLASSES:
        raise ParameterError(f"oracle must be 'auto' or one of {list(ORACLES)}, got {name!r}")
    if name == "olh":
        return OptimizedLocalHashing(cells, epsilon, shape)
    return ORACLE_CLASSES[name](cells, epsilon)


def best_oracle(cells: int, epsilon: float, shape: tuple[int, ...] | None = None) -> FrequencyOracle:
    """The oracle of :data:`AUTO_ORACLES` whose cell-averaged variance is least (ties: the earlier one). GRR wins for
    ``k < 3 e^eps + 2`` roughly, OLH above (Wang et al. 2017, Sec. 5); Hadamard's ``(e^eps + 1)^2 / (e^eps - 1)^2``
    is never below OLH's at its real optimum, but it is at a small prime ``g`` or a small ``epsilon``."""
    candidates = [make_oracle(name, cells, epsilon, shape) for name in AUTO_ORACLES]
    return min(candidates, key=lambda oracle: oracle.mean_variance(1))
