"""PrivUnit2 (Bhowmick, Freudiger, Duchi & Rogers 2018), the unbiased pure-epsilon randomizer of a unit vector.

Source: A. Bhowmick, J. Freudiger, J. Duchi, R. Rogers, "Protection against reconstruction and its implications for
private federated learning", arXiv:1812.00984 (2018), Algorithm 1 (``PrivUnit2``) and Theorem 1; its optimality
among unbiased randomizers of the sphere, with the split of epsilon chosen numerically as here, is Asi, Feldman &
Talwar, "Optimal algorithms for mean estimation under local differential privacy", ICML 2022, arXiv:2205.02466.

**The mechanism.** Public parameters ``p in [1/2, 1)`` and ``gamma in [0, 1)``. Given a unit vector ``u`` in
``R^d`` (``d >= 2``), draw ``V`` uniform on the cap ``C(u) = {v in S^{d-1}: <v, u> >= gamma}`` with probability
``p`` and uniform on its complement with probability ``1 - p``; report ``m V`` with ``m = 1 / E[<V, u>]``.

**The cap fraction.** For ``U`` uniform on ``S^{d-1}`` the cosine ``T = <U, u>`` has density ``c_d (1 - t^2)^((d -
3)/2)`` on ``[-1, 1]``, ``c_d = Gamma(d/2) / (sqrt(pi) Gamma((d - 1)/2))``, so the cap has uniform measure ``q =
P(T >= gamma) = I_{1 - gamma^2}((d - 1)/2, 1/2) / 2`` (a regularized incomplete beta). Integrating by parts,
``q_d = q_{d-2} - gamma (1 - gamma^2)^((d - 3)/2) c_d / (d - 2)``, and ``c_d / c_{d-2} = (d - 2) / (d - 3)``; from
``q_3 = (1 - gamma) / 2`` and ``q_2 = arccos(gamma) / pi``:

* odd ``d``: ``q = (1 - gamma)/2 - gamma sum_{j = 5, 7, ..., d} a_j``, ``a_5 = w / 4``,
  ``a_j = a_{j-2} (j - 4)/(j - 3) w``, ``w = 1 - gamma^2`` (a polynomial in ``gamma``);
* even ``d``: ``q = (2 atan(x) - gamma s sum_{j = 4, 6, ..., d} b_j) / pi``, ``b_4 = 1``,
  ``b_j = b_{j-2} (j - 4)/(j - 3) w``, ``s = sqrt(w)``, ``x = sqrt((1 - gamma)/(1 + gamma))``
  (``arccos(gamma) = 2 atan(x)``; ``d = 4`` gives the known ``(theta - sin theta cos theta)/pi``).

Every term of both sums is positive. :func:`cap_fraction_bounds` evaluates them in interval arithmetic on integers
scaled by ``2^192`` (each product rounded down for the lower end and up for the upper end; ``s`` and ``x`` by
``math.isqrt``; ``atan`` by Euler's series ``atan x = sum_n 4^n n!^2/(2n + 1)! x^(2n+1)/(1 + x^2)^(n+1)``, whose
terms are positive with ratio at most ``x^2/(1 + x^2) <= 1/2`` for ``x <= 1``, so the tail after a term ``T`` is at
most ``T``; ``pi`` between two 50-digit decimals). The result is a proven enclosure ``q_lower <= q <= q_upper`` of
width below ``10^-50 + d 2^-180`` (the first term, from ``pi``, for even ``d`` only) — no float and no library
special function enters it.

**Privacy (Theorem 1, rederived exactly).** With respect to the uniform probability on the sphere, ``V`` has density
``p / q`` on ``C(u)`` and ``(1 - p)/(1 - q)`` off it. Since ``gamma >= 0`` gives ``q <= 1/2 <= p``, the first value
is the larger, and for any two inputs ``u, u'`` and every output ``v`` the density ratio is at most
``(p / q) / ((1 - p)/(1 - q))``, attained (``u' = -u``, ``v`` in ``C(u)``). So PrivUnit2 is exactly

    epsilon(p, gamma) = log(p / (1 - p)) + log((1 - q) / q)  -LDP,

the sum of the coin's ``epsilon_0 = log(p / (1 - p))`` and the cap's ``epsilon_1 = log((1 - q)/q)``. The paper's
Theorem 1 states the same split with *sufficient* conditions on ``gamma`` (its (16a)-(16b), closed-form bounds that
ensure ``q >= 1 / (1 + e^epsilon_1)``); we use the exact value, which allows a larger ``gamma`` at the same level,
hence 3-40 % less variance (``docs/privacy.md`` 8.7.8, with a table against the l2-ball randomizer). Choosing ``p``
and ``gamma`` involves nothing private: both are public functions of ``(d, epsilon)``.

**The scale.** ``E[T 1{T >= gamma}] = c_d (1 - gamma^2)^((d-1)/2) / (d - 1)`` and ``E[T] = 0``, so by symmetry
``E[V] = E[<V, u>] u`` with ``E[<V, u>] = (p / q - (1 - p)/(1 - q)) c_d (1 - gamma^2)^((d - 1)/2) / (d - 1)``
(the paper's ``m``, its eq. (15): Alg. 1 returns ``V / m``). We report ``m V`` with ``m = 1 / E[<V, u>]``:
``E[m V] = u`` and ``||m V|| = m``, so the covariance trace is ``m^2 - 1`` (:func:`privunit_variance`).

**The parameter choice** (:func:`privunit_parameters`). For fixed ``gamma`` the level and ``E[<V, u>]`` both grow
with ``p``, so the best parameters saturate ``epsilon(p, gamma) = epsilon``; we search ``gamma`` on a public grid
(64 points from 0 to where ``epsilon_1 = epsilon``, then 64 points between the best point's neighbours), setting
``epsilon_0 = epsilon - epsilon_1(gamma)`` and maximising ``E[<V, u>]`` in floats. The chosen ``gamma`` is then
rounded down to a multiple of ``2^-40``, its cap fraction enclosed as above, ``epsilon_0 = epsilon - log((1 -
q_lower) / q_lower)`` rounded down to 40 significant bits (``l2ball.exact_epsilon``), and the inequality
``(1 - q_lower)/q_lower <= exp(epsilon - epsilon_0)`` checked in rationals against a Taylor partial sum (a lower
bound of ``exp``). The guaranteed level ``epsilon_0 + log((1 - q_lower)/q_lower)`` is therefore at most epsilon, and
below it by about ``epsilon 2^-40``.

**Sampling.** The cap side is decided by an exact coin: Bernoulli(``1 / (1 + e^-epsilon_0)``) by
``l2ball.hemisphere_coin`` (CKS Alg. 1 on a dyadic ``epsilon_0``). Given the side, the cosine ``t`` is drawn from
``c_d (1 - t^2)^((d - 3)/2)`` restricted to ``[gamma, 1]`` or ``[-1, gamma)`` by rejection (masked numpy loops, no
tabulated inverse CDF): ``t = 2 B - 1``, ``B ~ Beta((d - 1)/2, (d - 1)/2)``, kept on the right side (acceptance
``q`` or ``1 - q``); on the cap, when that acceptance is low, the proposal ``x = 1 - t^2 = (1 - gamma^2) U^(2/(d -
1))`` (density ``∝ x^((d-3)/2)`` on ``[0, 1 - gamma^2]``) kept with probability ``gamma / t``, which turns it into
``∝ x^((d-3)/2) (1 - x)^(-1/2)``, the cap's law (acceptance ``gamma / E[T | T >= gamma]``; the larger of the two is
used, above 0.35 at every ``d`` from 2 to 100 and every ``gamma``, checked numerically). Then ``V = t u + sqrt(1 -
t^2) w`` with ``w`` uniform on the unit sphere of ``u``'s orthogonal complement (a Gaussian projected and
normalised): by rotational symmetry about ``u``, ``V`` is uniform on the chosen side.

**Floating point.** What privacy rests on is exact: the side's probability ``p`` (the exact coin; a float ``p``
compared with a 53-bit uniform would be off by ``2^-53``, and ``p`` rounds to 1 at large epsilon), the threshold
(``gamma`` is a dyadic float, compared exactly with the float ``t``) and the cap fraction (the enclosure; the
guarantee uses ``q_lower``, so the level holds for the true ``q``). The direction within a side is a float
approximation of the uniform law, as every sampler of a continuous law is.
Left as is, that float vector would carry input-dependent low-order bits (for ``u = e_1`` the first coordinate of
``V`` is exactly the float ``t``, on ``2 B - 1``'s coarse grid, while the others are not: a Mironov-style channel).
So the unit vector is rounded, coordinate by coordinate and unbiasedly (up by its fraction, a float coin: rounding
is post-processing), to the public grid ``2^-32 Z^d``, and the report is ``m K 2^-32`` for an integer vector ``K``:
the set of possible reports is the same for every input (every grid point near the sphere, reached from both sides),
and the law of ``K`` differs from the exact-arithmetic PrivUnit2 law rounded the same way only when a rounding uniform
falls within the float error (of order ``d 2^-53``) of its coordinate's fraction: probability of order ``d 2^-21``
per coordinate in the worst case, far less typically. The pure guarantee is proven for the exact-arithmetic law; we
claim no proof for the float law beyond this argument (``docs/privacy.md`` 8.7.8). The rounding adds at most
``d 2^-66 m^2`` to the covariance trace and moves the norm by less than ``sqrt(d) 2^-32`` relatively.

**Inputs ``s z`` with ``|s| <= 1``** (:func:`privunit2_scaled`, the glm protocol's ``u = s(y) z``): the device
rounds ``s`` to a sign ``S = +1`` with probability ``(1 + s)/2`` (``E[S] = s``) and reports PrivUnit2 of ``S z``, so
``E[report] = s z``. The law of the report is a mixture of PrivUnit2 laws of unit inputs, each within ``e^epsilon``
of every PrivUnit2 law of another unit input, so the mixture is epsilon-LDP whatever the mixing weights (a float
coin for ``S`` costs nothing); its covariance trace is ``m^2 - s^2``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from workloads.local.randomizers.inputs import as_finite_rows, as_finite_vector, clip_rows_to_ball
from workloads.local.randomizers.l2ball import exact_epsilon, hemisphere_coin
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: Bits of the fixed-point interval arithmetic that encloses the cap fraction.
_PRECISION = 192
#: ``gamma`` is a multiple of ``2^-_GAMMA_BITS``.
_GAMMA_BITS = 40
#: Points of each level of the public search grid over ``gamma``.
_GRID_POINTS = 64
#: The unit vector is rounded to multiples of ``2^-_OUTPUT_BITS`` before scaling by ``m``.
_OUTPUT_BITS = 32
#: How far from unit norm an input row may be (it is then normalised exactly).
_UNIT_TOLERANCE = 1e-8
#: pi to 50 decimals (truncated): pi lies in ``[_PI_DIGITS, _PI_DIGITS + 10^-50]``.
_PI_DIGITS = Fraction("3.14159265358979323846264338327950288419716939937510")


@dataclass(frozen=True)
class PrivUnitParameters:
    """The public constants of one PrivUnit2 report (all functions of ``dimension`` and the requested epsilon).

    ``epsilon`` is the level guaranteed (``cap_coin_epsilon + log((1 - q_lower) / q_lower)``, at most the requested
    ``requested_epsilon``); ``cap_coin_epsilon`` is the dyadic ``epsilon_0`` of the exact coin, whose probability
    is ``p``; ``gamma`` the cap threshold (a multiple of 2^-40); ``q`` the cap's uniform measure, enclosed in
    ``[q_lower, q_upper]``; ``scale`` the norm ``m`` of every report, ``1 / E[<V, u>]``."""

    dimension: int
    requested_epsilon: float
    epsilon: float
    cap_coin_epsilon: float
    p: float
    gamma: float
    q: float
    q_lower: Fraction
    q_upper: Fraction
    scale: float

    @property
    def cap_epsilon(self) -> float:
        """``epsilon_1 = log((1 - q_lower) / q_lower)``, the cap's share of the level (an upper bound of the exact
        ``log((1 - q)/q)``)."""
        return math.log((1 - self.q_lower) / self.q_lower)


# ------------------------------------------------------------------------------------------------ the cap fraction
def _check_dimension(dimension: int) -> int:
    d = check_count("dimension", dimension)
    if d < 2:
        raise ParameterError(f"dimension must be at least 2 for PrivUnit2 (a sphere with a cap), got {dimension!r}")
    return d


def _fixed(value: Fraction, up: bool) -> int:
    """``value`` in units of ``2^-_PRECISION``, rounded down (or up)."""
    scaled = value * (1 << _PRECISION)
    return math.ceil(scaled) if up else math.floor(scaled)


def _mul(a: int, b: int, up: bool) -> int:
    """Product of two fixed-point numbers, rounded down (or up)."""
    return -((-a * b) >> _PRECISION) if up else (a * b) >> _PRECISION


def _sqrt_fixed(value: Fraction, up: bool) -> int:
    """``sqrt(value)`` in fixed point, rounded down (or up), by ``math.isqrt``."""
    scaled = value * (1 << (2 * _PRECISION))
    radicand = math.ceil(scaled) if up else math.floor(scaled)
    root = math.isqrt(radicand)
    return root + 1 if up and root * root < radicand else root


def _atan_fixed(x: int, up: bool) -> int:
    """``atan(x)`` for a fixed-point ``0 <= x <= 1``, rounded down (or up): Euler's series (module docstring)."""
    one = 1 << _PRECISION
    # the terms must be rounded in the direction of the bound: T0 = x / (1 + x^2) and the ratio y = x^2 / (1 + x^2)
    low_den, high_den = one + _mul(x, x, False), one + _mul(x, x, True)
    if up:
        term = -((-x * one) // low_den)
        ratio = one - (one * one) // high_den
    else:
        term = (x * one) // high_den
        ratio = one - -((-one * one) // low_den)
    total, n = 0, 0
    while True:
        total += term
        if term <= 1:
            break
        n += 1
        step = term * ratio * 2 * n
        scale = (2 * n + 1) << _PRECISION
        term = -((-step) // scale) if up else step // scale
    return total + (2 * n + 2 if up else 0)  # the tail (at most the last term) and the rounding of the sum


def _cap_sum(d: int, w: int, first: int, up: bool) -> int:
    """``sum_j`` of the recursion's terms (module docstring) in fixed point, rounded down (or up)."""
    total, term = 0, first
    start = 5 if d % 2 else 4
    for j in range(start, d + 1, 2):
        if j > start:
            step = term * (j - 4) * w
            scale = (j - 3) << _PRECISION
            term = -((-step) // scale) if up else step // scale
        total += term
    return total


def cap_fraction_bounds(dimension: int, gamma: float) -> tuple[Fraction, Fraction]:
    """A proven enclosure ``[q_lower, q_upper]`` of ``q = P(<U, u> >= gamma)``, ``U`` uniform on ``S^{d-1}``.

    ``gamma`` in ``[0, 1]`` (a float, taken exactly); integer interval arithmetic (module docstring)."""
    d = _check_dimension(dimension)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0.0 <= float(gamma) <= 1.0:
        raise ParameterError(f"gamma must be a number in [0, 1], got {gamma!r}")
    g = Fraction(float(gamma))
    w_exact = 1 - g * g
    w_low, w_high = _fixed(w_exact, False), _fixed(w_exact, True)
    g_low, g_high = _fixed(g, False), _fixed(g, True)
    one = 1 << _PRECISION
    if d % 2:
        first_low, first_high = w_low // 4, -(-w_high // 4)
        sum_low = _cap_sum(d, w_low, first_low, False) if d >= 5 else 0
        sum_high = _cap_sum(d, w_high, first_high, True) if d >= 5 else 0
        base = Fraction(1 - g, 2)
        lower = _fixed(base, False) - _mul(g_high, sum_high, True)
        upper = _fixed(base, True) - _mul(g_low, sum_low, False)
    else:
        x_exact = (1 - g) / (1 + g)
        angle_low = 2 * _atan_fixed(_sqrt_fixed(x_exact, False), False)
        angle_high = 2 * _atan_fixed(min(_sqrt_fixed(x_exact, True), one), True)
        s_low, s_high = _sqrt_fixed(w_exact, False), _sqrt_fixed(w_exact, True)
        sum_low = _cap_sum(d, w_low, one, False) if d >= 4 else 0
        sum_high = _cap_sum(d, w_high, one, True) if d >= 4 else 0
        pi_low, pi_high = _fixed(_PI_DIGITS, False), _fixed(_PI_DIGITS + Fraction(1, 10**50), True)
        numerator_low = angle_low - _mul(_mul(g_high, s_high, True), sum_high, True)
        numerator_high = angle_high - _mul(_mul(g_low, s_low, False), sum_low, False)
        lower = max(numerator_low, 0) * one // pi_high
        upper = -((-numerator_high * one) // pi_low)
    return Fraction(max(lower, 0), one), Fraction(min(upper, one), one)


def _cap_fraction_float(d: int, gammas: np.ndarray) -> np.ndarray:
    """``q(gamma)`` in float64, vectorised over ``gammas`` in [0, 1]: only for the search (the proof is
    :func:`cap_fraction_bounds`). The recursion for ``gamma < 0.1`` (where ``q`` is not small against its terms) and
    the incomplete beta's positive series ``B_x(a, 1/2) = sum_n (1/2)_n / n! x^(a+n) / (a + n)``, ``x = 1 - gamma^2``,
    ``a = (d - 1)/2``, elsewhere (no cancellation, so tiny ``q`` keep their relative accuracy)."""
    gammas = np.asarray(gammas, dtype=float)
    w = 1.0 - gammas * gammas
    if d % 2:
        base, term, start = (1.0 - gammas) / 2.0, w / 4.0, 5
        factor = gammas
    else:
        base, term, start = 2.0 * np.arctan(np.sqrt((1.0 - gammas) / (1.0 + gammas))) / math.pi, np.ones_like(w), 4
        factor = gammas * np.sqrt(w) / math.pi
    total = np.zeros_like(w)
    for j in range(start, d + 1, 2):
        if j > start:
            term = term * (j - 4) / (j - 3) * w
        total = total + term
    recursion = np.where(w > 0, base - factor * total, 0.0)
    series_points = (w <= 0.99) & (w > 0)
    if not np.any(series_points):
        return recursion
    a = (d - 1) / 2.0
    x = w[series_points]
    terms = int(math.ceil(-60 * math.log(2) / math.log(float(x.max()))))
    n = np.arange(terms)
    log_coefficients = np.concatenate([[0.0], np.cumsum(np.log((n[1:] - 0.5) / n[1:]))])
    log_beta = math.lgamma(a) + math.lgamma(0.5) - math.lgamma(a + 0.5)
    log_x = np.log(x)[:, np.newaxis]
    series = np.sum(np.exp(log_coefficients + n * log_x) / (a + n), axis=1)
    recursion[series_points] = 0.5 * np.exp(a * log_x[:, 0] - log_beta) * series
    return recursion


def _sphere_constant(d: int) -> float:
    """``c_d = Gamma(d/2) / (sqrt(pi) Gamma((d - 1)/2))``, the cosine's density constant, via ``lgamma``."""
    return math.exp(math.lgamma(d / 2.0) - math.lgamma((d - 1) / 2.0)) / math.sqrt(math.pi)


def _mean_cosine(d: int, p: np.ndarray | float, gamma: np.ndarray | float, q: np.ndarray | float) -> np.ndarray:
    """``E[<V, u>] = (p/q - (1 - p)/(1 - q)) c_d (1 - gamma^2)^((d - 1)/2) / (d - 1)`` (module docstring)."""
    gamma = np.asarray(gamma, dtype=float)
    tail = _sphere_constant(d) * np.exp((d - 1) / 2.0 * np.log1p(-gamma * gamma)) / (d - 1)
    return (np.asarray(p) / q - (1.0 - np.asarray(p)) / (1.0 - np.asarray(q))) * tail


# ------------------------------------------------------------------------------------------------ the parameters
def _exp_lower_bound(x: Fraction) -> Fraction:
    """A rational lower bound of ``exp(x)`` for ``x >= 0``, within a relative 2^-100: a Taylor partial sum."""
    total, term, n = Fraction(1), Fraction(1), 0
    while term > total / (1 << 100):
        n += 1
        term = term * x / n
        total += term
    return total


def _search_gamma(d: int, epsilon: float) -> float:
    """The float ``gamma`` maximising ``E[<V, u>]`` on the saturated frontier, by a two-level public grid."""
    # the largest useful gamma: the cap alone spends all of epsilon (q = 1 / (1 + e^epsilon)); bisection in floats
    target = math.exp(-epsilon) / (1.0 + math.exp(-epsilon))  # 1 / (1 + e^epsilon), without overflow
    low, high = 0.0, 1.0
    for _ in range(80):
        middle = (low + high) / 2.0
        if _cap_fraction_float(d, np.array([middle]))[0] >= target:
            low = middle
        else:
            high = middle
    ceiling = low * (1.0 - 2.0**-20)

    def best_of(gammas: np.ndarray) -> tuple[int, np.ndarray]:
        q = np.clip(_cap_fraction_float(d, gammas), 1e-300, 0.5)
        coin = epsilon - np.log((1.0 - q) / q)
        p = 1.0 / (1.0 + np.exp(-coin))
        value = np.where(coin >= epsilon * 2.0**-20, _mean_cosine(d, p, gammas, q), -np.inf)
        return int(np.argmax(value)), value

    grid = np.linspace(0.0, ceiling, _GRID_POINTS)
    index, _ = best_of(grid)
    fine = np.linspace(grid[max(index - 1, 0)], grid[min(index + 1, _GRID_POINTS - 1)], _GRID_POINTS)
    index, _ = best_of(fine)
    return float(fine[index])


def _coin_epsilon(epsilon: float, cap_level: Fraction) -> Fraction | None:
    """The dyadic ``epsilon_0`` with ``epsilon_0 + log(cap_level) <= epsilon`` proven in rationals, or None when less
    than ``epsilon 2^-20`` would be left for the coin."""
    room = epsilon - math.log(cap_level)
    if room <= epsilon * 2.0**-20:
        return None
    coin = exact_epsilon(room)
    for _ in range(16):
        if cap_level <= _exp_lower_bound(Fraction(epsilon) - coin):  # cap_level <= e^(epsilon - epsilon_0)
            return coin
        coin = exact_epsilon(float(coin) * (1.0 - 2.0**-30))
    return None


def privunit_parameters(dimension: int, epsilon: float) -> PrivUnitParameters:
    """The PrivUnit2 constants for unit vectors of ``R^dimension`` at (at most) ``epsilon``-LDP (module docstring).

    Deterministic: the same public parameters on every device and on the server."""
    d = _check_dimension(dimension)
    eps = check_positive("epsilon", epsilon)
    exact_epsilon(eps)  # refuses epsilon below 2^-62
    quantum = 2.0**-_GAMMA_BITS
    gamma = math.floor(_search_gamma(d, eps) / quantum) * quantum
    while True:
        q_lower, q_upper = cap_fraction_bounds(d, gamma)
        cap_level = (1 - q_lower) / q_lower if q_lower > 0 else None  # (1 - q)/q <= cap_level
        coin = _coin_epsilon(eps, cap_level) if cap_level is not None else None
        if coin is not None:
            break
        gamma = math.floor(gamma / 2.0 / quantum) * quantum  # the cap alone spends (nearly) everything
    coin_float = float(coin)
    p = 1.0 / (1.0 + math.exp(-coin_float))
    q = float((q_lower + q_upper) / 2)
    scale = 1.0 / float(_mean_cosine(d, p, gamma, q))
    level = coin_float + math.log(cap_level)
    return PrivUnitParameters(d, eps, min(level, eps), coin_float, p, gamma, q, q_lower, q_upper, scale)


def privunit_variance(parameters: PrivUnitParameters, input_norm: float = 1.0) -> float:
    """Trace of the report's covariance: ``E||m V||^2 - ||E[m V]||^2 = m^2 - ||u||^2`` (``input_norm`` = ``|s|`` for
    :func:`privunit2_scaled`), up to the grid rounding's ``d 2^-66 m^2``."""
    return parameters.scale**2 - float(input_norm) ** 2


def privunit_output_density(directions: object, unit: object, parameters: PrivUnitParameters) -> np.ndarray:
    """Density of ``V = report / m`` at unit vector(s) ``directions`` for the unit input ``unit``, with respect to the
    uniform law on the sphere: ``p / q`` where ``<direction, u> >= gamma``, ``(1 - p)/(1 - q)`` elsewhere."""
    parameters = _check_parameters(parameters)
    points, _ = as_finite_rows("directions", directions, width=parameters.dimension)
    (u,) = _unit_rows("unit", np.atleast_2d(np.asarray(unit, dtype=float)), parameters.dimension)
    p, q = parameters.p, parameters.q
    return np.where(points @ u >= parameters.gamma, p / q, (1.0 - p) / (1.0 - q))


# ------------------------------------------------------------------------------------------------ the sampler
def _unit_rows(name: str, units: object, dimension: int) -> np.ndarray:
    rows, _ = as_finite_rows(name, units, width=dimension)
    norms = np.linalg.norm(rows, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > _UNIT_TOLERANCE)
    if bad.size:
        raise ParameterError(
            f"{name} row {int(bad[0])} must be a unit vector (norm within {_UNIT_TOLERANCE} of 1), "
            f"got norm {norms[bad[0]]!r}"
        )
    return rows / norms[:, np.newaxis]


def _symmetric_cosines(d: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws of the cosine's full law ``c_d (1 - t^2)^((d-3)/2)`` on [-1, 1]: ``2 Beta - 1``."""
    half = (d - 1) / 2.0
    return 2.0 * rng.beta(half, half, size=count) - 1.0


def _cap_cosines(parameters: PrivUnitParameters, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` cosines from the law restricted to ``[gamma, 1]`` (rejection; module docstring)."""
    d, gamma, q = parameters.dimension, parameters.gamma, parameters.q
    mean_cap = _sphere_constant(d) * math.exp((d - 1) / 2.0 * math.log1p(-gamma * gamma)) / (d - 1) / q
    power_proposal = gamma / mean_cap > q
    out = np.empty(count)
    pending = np.arange(count)
    while pending.size:
        if power_proposal:
            x = (1.0 - gamma * gamma) * rng.random(pending.size) ** (2.0 / (d - 1))
            t = np.sqrt(1.0 - x)
            keep = (rng.random(pending.size) * t < gamma) & (t >= gamma)
        else:
            t = _symmetric_cosines(d, pending.size, rng)
            keep = t >= gamma
        out[pending[keep]] = t[keep]
        pending = pending[~keep]
    return out


def _complement_cosines(parameters: PrivUnitParameters, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` cosines from the law restricted to ``[-1, gamma)`` (rejection, acceptance ``1 - q >= 1/2``)."""
    out = np.empty(count)
    pending = np.arange(count)
    while pending.size:
        t = _symmetric_cosines(parameters.dimension, pending.size, rng)
        keep = t < parameters.gamma
        out[pending[keep]] = t[keep]
        pending = pending[~keep]
    return out


def _orthogonal_directions(units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform unit vector orthogonal to each row of ``units`` (a Gaussian, projected and normalised)."""
    out = np.empty_like(units)
    pending = np.arange(units.shape[0])
    while pending.size:
        gaussian = rng.standard_normal((pending.size, units.shape[1]))
        rows = units[pending]
        gaussian -= np.einsum("ij,ij->i", gaussian, rows)[:, np.newaxis] * rows
        norms = np.linalg.norm(gaussian, axis=1)
        good = norms > 1e-8  # a degenerate draw (probability ~0) is drawn again
        out[pending[good]] = gaussian[good] / norms[good, np.newaxis]
        pending = pending[~good]
    return out


def _round_to_grid(vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unbiased randomized rounding of each entry to the public grid ``2^-_OUTPUT_BITS Z`` (module docstring)."""
    scaled = vectors * 2.0**_OUTPUT_BITS
    floor = np.floor(scaled)
    return (floor + (rng.random(vectors.shape) < scaled - floor)) * 2.0**-_OUTPUT_BITS


def _privunit_rows(units: np.ndarray, parameters: PrivUnitParameters, rng: np.random.Generator) -> np.ndarray:
    count = units.shape[0]
    in_cap = hemisphere_coin(count, parameters.cap_coin_epsilon, rng)  # exact: P(cap) = p
    cosines = np.empty(count)
    cosines[in_cap] = _cap_cosines(parameters, int(in_cap.sum()), rng)
    cosines[~in_cap] = _complement_cosines(parameters, int((~in_cap).sum()), rng)
    sines = np.sqrt(np.maximum(1.0 - cosines * cosines, 0.0))
    directions = cosines[:, np.newaxis] * units + sines[:, np.newaxis] * _orthogonal_directions(units, rng)
    return parameters.scale * _round_to_grid(directions, rng)


def _check_parameters(parameters: object) -> PrivUnitParameters:
    if not isinstance(parameters, PrivUnitParameters):
        raise ParameterError(f"parameters must come from privunit_parameters, got {type(parameters).__name__}")
    return parameters


def privunit2(
    units: object, parameters: PrivUnitParameters, rng: np.random.Generator | None = None
) -> np.ndarray:
    """One PrivUnit2 report per row of ``units`` (a unit vector, or one participant per row of a 2-d array).

    Each report has norm ``parameters.scale`` (up to the grid rounding) and mean the input: ``E[report] = u``.
    ``parameters.epsilon``-LDP (module docstring). ``rng=None`` on a device (a fresh secure generator)."""
    parameters = _check_parameters(parameters)
    rows = _unit_rows("units", units, parameters.dimension)
    single = np.asarray(units).ndim == 1
    reports = _privunit_rows(rows, parameters, generator_or_device(rng))
    return reports[0] if single else reports


def privunit2_scaled(
    vectors: object, scalars: object, parameters: PrivUnitParameters, rng: np.random.Generator | None = None
) -> np.ndarray:
    """PrivUnit2 reports of ``u = s z`` (``z`` a unit row of ``vectors``, ``s`` in [-1, 1] from ``scalars``).

    ``s`` is rounded unbiasedly to a sign ``S`` (``P(S = 1) = (1 + s)/2``) and PrivUnit2 reports ``S z``, so
    ``E[report] = s z``; a mixture of epsilon-LDP laws is epsilon-LDP (module docstring)."""
    parameters = _check_parameters(parameters)
    rows = _unit_rows("vectors", vectors, parameters.dimension)
    single = np.asarray(vectors).ndim == 1
    s = as_finite_vector("scalars", scalars)
    if s.size != rows.shape[0]:
        raise ParameterError(f"scalars must have one entry per row of vectors ({rows.shape[0]}), got {s.size}")
    outside = np.flatnonzero(np.abs(s) > 1.0)
    if outside.size:
        raise ParameterError(f"scalars entry {int(outside[0])} must lie in [-1, 1], got {s[outside[0]]!r}")
    rng = generator_or_device(rng)
    signs = np.where(rng.random(s.size) < (1.0 + s) / 2.0, 1.0, -1.0)
    reports = _privunit_rows(rows * signs[:, np.newaxis], parameters, rng)
    return reports[0] if single else reports


@functools.lru_cache(maxsize=64)
def cached_privunit_parameters(dimension: int, epsilon: float) -> PrivUnitParameters:
    """:func:`privunit_parameters`, remembered (they are public and deterministic; the search takes ~15 ms)."""
    return privunit_parameters(dimension, epsilon)


def privunit_ball_output_norm(dimension: int, radius: float, epsilon: float) -> float:
    """The norm of every :func:`privunit_ball_randomize` report: ``radius * m`` (up to the grid rounding)."""
    return check_positive("radius", radius) * cached_privunit_parameters(dimension, epsilon).scale


def privunit_ball_randomize(
    values: object, radius: float, epsilon: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """PrivUnit2 for vectors of the l2 ball of ``radius``, with the signature of
    :func:`workloads.local.randomizers.l2ball.l2_ball_randomize`, so a protocol's randomizer table takes either.

    Each row ``v`` is first scaled down to norm ``radius`` if longer; then ``v = radius s z`` with ``z = v / ||v||``
    (``e_1`` when ``v = 0``) and ``s = ||v|| / radius`` in [0, 1], and the report is ``radius`` times
    :func:`privunit2_scaled` of ``(z, s)``: unbiased for ``v``, epsilon-LDP (the map to ``(z, s)`` is pre-processing
    and the sign rounding a mixture of epsilon-LDP laws), every report of norm :func:`privunit_ball_output_norm`.
    Its covariance trace is ``radius^2 m^2 - ||v||^2`` (:func:`privunit_variance`)."""
    r = check_positive("radius", radius)
    rows, single = as_finite_rows("values", values)
    parameters = cached_privunit_parameters(rows.shape[1], float(epsilon))
    clipped = clip_rows_to_ball(rows, r)
    norms = np.linalg.norm(clipped, axis=1)
    directions = np.zeros_like(clipped)
    directions[:, 0] = 1.0
    nonzero = norms > 0.0
    directions[nonzero] = clipped[nonzero] / norms[nonzero, np.newaxis]
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)  # exact unit rows for the check
    scalars = np.minimum(norms / r, 1.0)
    reports = r * privunit2_scaled(directions, scalars, parameters, rng)
    return reports[0] if single else reports


def privunit_direction_moments(parameters: PrivUnitParameters, grid_points: int = 4_001) -> tuple[float, float]:
    """``(alpha, beta)`` with ``E[V V^T] = alpha u u^T + beta (I - u u^T)`` for the unit PrivUnit2 direction ``V`` of a
    unit input ``u`` (the report is ``m V``): ``alpha = E[T^2]`` for the cosine ``T = <V, u>`` and ``beta = (1 -
    alpha) / (d - 1)`` (the orthogonal part is uniform on its sphere). ``E[T^2] = p E[T^2 | T >= gamma] + (1 - p)
    E[T^2 | T < gamma]`` under the cosine density ``c_d sin^(d-2)(theta)`` in ``theta = arccos T``, each side by the
    trapezoid rule on its own ``grid_points`` angles (smooth in ``theta``; a server-side quantity for standard errors
    and plans, not a privacy parameter)."""
    parameters = _check_parameters(parameters)
    d = parameters.dimension
    edge = math.acos(parameters.gamma)

    def conditional_square(low: float, high: float) -> float:
        theta = np.linspace(low, high, grid_points)
        weight = np.sin(theta) ** (d - 2)
        return float(np.trapezoid(weight * np.cos(theta) ** 2, theta) / np.trapezoid(weight, theta))

    alpha = parameters.p * conditional_square(0.0, edge) + (1.0 - parameters.p) * conditional_square(edge, math.pi)
    return alpha, (1.0 - alpha) / (d - 1)
