"""The participant's side of the Local Bernstein Mechanism and of its 1-bit variant (dimension p <= 3).

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Alg. 2 (Local Bernstein Mechanism) and Alg. 3 (player-efficient, 1 bit per player). The loss
``l(theta; x)`` is public, maps the parameter box to ``[0, 1]`` and is evaluated on the public grid
``{v / k : v in {0, ..., k}^p}`` (:func:`bernstein_grid`; a parameter box ``[lower, upper]^p`` is mapped to
``[0, 1]^p`` affinely, as Sec. 3 allows).

**Alg. 2 (one report of ``(k + 1)^p`` numbers).** The participant sends ``l(v; x) + Lap((k + 1)^p / eps)`` for every
grid point ``v`` (Alg. 1 with ``b = 1`` at ``eps / (k + 1)^p`` per grid point). Privacy: the vector of clipped loss
values lies in ``[0, 1]^G``, ``G = (k + 1)^p``, so two participants' vectors differ by at most ``G`` in l1 norm and
Laplace noise of scale ``G / eps`` on each entry is eps-LDP (Dwork, McSherry, Nissim & Smith 2006). The noise is
exact (:func:`grid_loss_noise`, ``docs/privacy.md`` 8.7): each loss is rounded at random to a power-of-two grid
``g <= 2^-12`` (0 and 1 are on it, so rounded losses stay in ``[0, 1]`` and the l1 sensitivity is ``G / g`` units)
and discrete Laplace noise of integer scale ``t = ceil(G / (g eps))`` is added in grid units: eps-LDP exactly.

**The public strings of Alg. 3** (:func:`public_laplace_strings`, and the device's own draw in the
``bernstein-1bit`` protocol) stay continuous float Laplace draws: they are public randomness drawn independently of
the data, so their floating-point support reveals nothing about anyone. The bit is drawn exactly
(:func:`one_bit_report`, issue 20; the float ``rng.random() < p`` it replaces was off by up to ``2^-53`` per draw),
as the product of two exact coins (derivation and privacy proof in docs/privacy.md §8.9 (d)):

* ``A ~ Bernoulli(1 - e^{-eps'} / 2)``: not (a fair bit and CKS's Bernoulli(exp(-eps'))), with ``eps' <= eps``
  epsilon rounded down to a 40-significant-bit dyadic (:func:`~workloads.local.randomizers.l2ball.exact_epsilon`);
  ``1 - e^{-eps'} / 2 = e^a / 2`` for ``a = ln(2 - e^{-eps'})``;
* ``E ~ Bernoulli(exp(-a'' (1 + D)))`` (CKS Alg. 1, :func:`workloads.local.exact_noise.bernoulli_exp`), with ``a''`` a
  dyadic rational strictly below ``a`` (:func:`one_bit_exact_parameters`) and ``D = |Y - V| - |Y|`` computed in
  integers from ``V = round(v 2^20)`` and ``Y = round(clip(y, -1, 1) 2^20)``, in units of ``2^-20`` (clipping ``y``
  to ``[-1, 1]`` changes nothing: for ``|y| >= 1`` the difference is ``-v sign(y)`` either way).

``P(b = 1) = A E = (e^a / 2) exp(-a'' (1 + D))``, which is Alg. 3's ``(1/2) exp(-a (|y - v| - |y|))`` up to the
roundings of ``v`` and ``y`` to ``2^-20`` and of ``a`` to ``a''`` (:func:`one_bit_coin_probability`; relative error
below ``2^-19``, so ``2 b y`` is unbiased for ``v`` up to about ``1e-6``). The privacy bound holds for the rounded law
itself: for two inputs, ``1 + D`` lies in ``[0, 2]`` and moves by at most 1 (triangle inequality in integers), so the
bit 1's ratio is at most ``e^{a''} < e^eps'`` and the bit 0's at most ``(1 - (e^a / 2) e^{-a''}) / (1 - e^a / 2)
<= (1/2) / (e^{-eps'} / 2) = e^{eps'}``, because ``a'' <= a``.

**Alg. 3 (one bit).** Each participant ``i`` is assigned one grid point ``l`` and one public number
``y_i ~ Lap(1/a)`` (both public, independent of the data). She computes ``v = l(T(l); x_i)`` in ``[0, 1]`` and sends
``b_i ~ Bernoulli(p_i)`` with

    p_i = (1/2) Pr[v + Lap(1/a) = y_i] / Pr[Lap(1/a) = y_i] = (1/2) exp(-a (|y_i - v| - |y_i|)).

The server's estimate of the group mean is ``2 mean(b_i y_i)``: ``E[b_i y_i] = E_y[y p(y)] = (1/2) int y f(y - v) dy
= v / 2``, so ``2 b_i y_i`` is unbiased for ``v`` (Alg. 3 as printed scales by ``n / |I_l|`` instead of 2; our copy
is garbled there and we use the derivation).

*Privacy of Alg. 3 (our derivation; the paper's Thm. 4 claims eps-LDP for ``a = eps <= ln 2``, which does not hold).*
Given the public ``y``, the bit ``1`` has probability ratio ``p(v)/p(v') = exp(a (|y - v'| - |y - v|)) <= e^a``
between two loss values in ``[0, 1]``. The bit ``0`` is worse: for ``y >= 1`` (probability ``e^{-a}/2 > 0``),
``p(0) = 1/2`` and ``p(1) = e^a / 2``, so ``(1 - p(0)) / (1 - p(1)) = 1 / (2 - e^a)``, and one checks over all ``y``
that this is the largest ratio (for ``y <= 0`` the ratio is ``2 - e^{-a}``, smaller, and for ``y`` in ``(0, 1)`` it
lies between). ``1 / (2 - e^a) >= e^a`` always (``(e^a - 1)^2 >= 0``). Hence the protocol is exactly
``-ln(2 - e^a)``-LDP (:func:`one_bit_ldp_epsilon`), finite only for ``a < ln 2``, e.g. 1.05 for ``a = 0.5``. To
guarantee a target ``eps`` we set ``a = ln(2 - e^{-eps})`` (:func:`one_bit_laplace_epsilon`): any ``eps > 0`` is
reachable and ``a < min(eps, ln 2)``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from workloads.local.exact_noise import bernoulli_exp
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.inputs import as_finite_rows, as_finite_vector
from workloads.local.randomizers.l2ball import exact_epsilon
from workloads.local.randomizers.laplace import interval_noise, randomize_interval_values
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: Alg. 2 sends ``(k + 1)^p`` numbers and the server's polynomial has as many coefficients: p <= 3 here.
MAX_BERNSTEIN_DIMENSION = 3


def check_bernstein_dimension(dimension: object) -> int:
    p = check_count("dimension", dimension)
    if p > MAX_BERNSTEIN_DIMENSION:
        raise ParameterError(
            f"dimension must be at most {MAX_BERNSTEIN_DIMENSION} for the Bernstein mechanism (a grid of (k + 1)^p "
            f"points per participant), got {dimension!r}"
        )
    return p


def bernstein_grid(degree: int, dimension: int) -> np.ndarray:
    """The public grid ``{v / k : v in {0..k}^p}`` as a ``((k + 1)^p, p)`` array, last coordinate fastest."""
    k = check_count("degree", degree)
    p = check_bernstein_dimension(dimension)
    axes = np.meshgrid(*([np.arange(k + 1) / k] * p), indexing="ij")
    return np.stack([axis.ravel() for axis in axes], axis=1)


def grid_loss_noise(grid_size: int, epsilon: float) -> GridNoise:
    """The grid and discrete Laplace noise of Alg. 2's report: ``G`` values in ``[0, 1]``, l1 sensitivity ``G``."""
    return interval_noise(0.0, 1.0, epsilon, check_count("grid_size", grid_size))


def randomize_grid_losses(loss_values: object, epsilon: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """Alg. 2: each row (one participant's losses at all grid points) clipped to ``[0, 1]``, rounded to the grid,
    plus discrete Laplace noise (:func:`grid_loss_noise`)."""
    check_positive("epsilon", epsilon)
    rows, single = as_finite_rows("loss_values", loss_values)
    reports = randomize_interval_values(rows, 0.0, 1.0, epsilon, generator_or_device(rng), entries=rows.shape[1])
    return reports[0] if single else reports


def one_bit_laplace_epsilon(epsilon: float) -> float:
    """The Laplace parameter ``a = ln(2 - e^{-eps})`` that makes Alg. 3 exactly eps-LDP (module docstring)."""
    eps = check_positive("epsilon", epsilon)
    return math.log1p(-math.expm1(-eps))  # ln(2 - e^{-eps}) = ln(1 + (1 - e^{-eps}))


def one_bit_ldp_epsilon(laplace_epsilon: float) -> float:
    """The exact LDP level ``-ln(2 - e^a)`` of Alg. 3 run with Laplace parameter ``a`` (``inf`` for ``a >= ln 2``)."""
    a = check_positive("laplace_epsilon", laplace_epsilon)
    remainder = 2.0 - math.exp(a)
    return -math.log(remainder) if remainder > 0.0 else math.inf


def public_laplace_strings(count: int, epsilon: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """Alg. 3, step 3: the public numbers ``y_i ~ Lap(1/a)``, one per participant (the server publishes them)."""
    n = check_count("count", count)
    a = one_bit_laplace_epsilon(epsilon)
    return generator_or_device(rng).laplace(0.0, 1.0 / a, size=n)


def one_bit_probability(loss_value: object, public_string: object, epsilon: float) -> np.ndarray:
    """``p = (1/2) exp(-a (|y - v| - |y|))``, ``v`` clipped to ``[0, 1]``, ``a`` = :func:`one_bit_laplace_epsilon`."""
    a = one_bit_laplace_epsilon(epsilon)
    v = np.clip(as_finite_vector("loss_value", loss_value), 0.0, 1.0)
    y = as_finite_vector("public_string", public_string)
    if y.shape != v.shape:
        raise ParameterError(f"public_string has shape {y.shape}, loss_value has shape {v.shape}")
    return 0.5 * np.exp(-a * (np.abs(y - v) - np.abs(y)))


#: binary digits of the grid ``v`` and ``y`` are rounded to for the exact coin's exponent
_COIN_BITS = 20
#: significant bits kept of ``a''`` (its denominator times ``2^_COIN_BITS`` stays at most ``2^62``)
_A_BITS = 40


def one_bit_exact_parameters(epsilon: float) -> tuple[Fraction, Fraction]:
    """``(eps', a'')``: epsilon rounded down to a dyadic (:func:`~workloads.local.randomizers.l2ball.exact_epsilon`)
    and a dyadic ``a''`` strictly below ``a = ln(2 - e^{-eps'})``: ``a`` in float64 (within a few ulps) rounded down
    to at most ``_A_BITS`` significant bits, less one unit of the last bit (at least ``2^-40 a``, far above the float
    error), so ``a'' < a`` holds for the real number ``a``."""
    eps = exact_epsilon(epsilon)
    a = math.log1p(-math.expm1(-float(eps)))
    shift = min(_A_BITS - math.frexp(a)[1], 62 - _COIN_BITS)
    units = math.floor(a * 2.0**shift) - 1
    if units < 1:
        raise ParameterError(f"epsilon={epsilon!r} is too small for the exact 1-bit coin")
    return eps, Fraction(units, 1 << shift)


def _coin_exponent_units(loss_value: object, public_string: object) -> np.ndarray:
    """``1 + D`` in units of ``2^-_COIN_BITS`` (integers in ``[0, 2^(_COIN_BITS + 1)]``), module docstring."""
    v = np.clip(as_finite_vector("loss_value", loss_value), 0.0, 1.0)
    y = as_finite_vector("public_string", public_string)
    if y.shape != v.shape:
        raise ParameterError(f"public_string has shape {y.shape}, loss_value has shape {v.shape}")
    scale = 1 << _COIN_BITS
    value_units = np.rint(v * scale).astype(np.int64)
    string_units = np.rint(np.clip(y, -1.0, 1.0) * scale).astype(np.int64)
    return scale + np.abs(string_units - value_units) - np.abs(string_units)


def one_bit_coin_probability(loss_value: object, public_string: object, epsilon: float) -> np.ndarray:
    """``P(b = 1) = (1 - e^{-eps'} / 2) exp(-a'' (1 + D))``: the law :func:`one_bit_report` draws from exactly, in
    float64 (for tests and the docs; the coin itself never computes it)."""
    eps, a = one_bit_exact_parameters(epsilon)
    units = _coin_exponent_units(loss_value, public_string)
    return (1.0 - math.exp(-float(eps)) / 2.0) * np.exp(-float(a) * units / (1 << _COIN_BITS))


def one_bit_report(
    loss_value: object, public_string: object, epsilon: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Alg. 3, step 8: the participant's bit(s) ``b`` as an int8 array (one per participant), drawn exactly as the
    product of the two coins of the module docstring: ``P(b = 1)`` is :func:`one_bit_coin_probability`, Alg. 3's
    ``(1/2) exp(-a (|y - v| - |y|))`` up to a relative ``2^-19``."""
    eps, a = one_bit_exact_parameters(epsilon)
    units = _coin_exponent_units(loss_value, public_string)
    generator = generator_or_device(rng)
    fair = generator.integers(0, 2, size=units.size) == 1
    first = ~(fair & bernoulli_exp(np.full(units.size, eps.numerator), eps.denominator, generator))
    second = bernoulli_exp(a.numerator * units, a.denominator << _COIN_BITS, generator)
    return (first & second).astype(np.int8)


def squared_loss_on_grid(grid: object, x: object, y: object, lower: float, upper: float, scale: float) -> np.ndarray:
    """``(<theta, x> - y)^2 / scale`` clipped to ``[0, 1]`` at ``theta = lower + (upper - lower) t``, ``t`` the grid.

    ``x`` is one participant's features (the result has one entry per grid point) or rows of them with one label
    each (one row of grid losses per participant). A public loss: choose ``scale`` at least the largest squared
    residual over the box and the data's bounds so that clipping never binds (the mechanism stays private either
    way).
    """
    points, _ = as_finite_rows("grid", grid)
    try:
        features, single = as_finite_rows("x", x, width=points.shape[1])
    except ParameterError:
        raise ParameterError(f"x must have {points.shape[1]} entries (the grid's dimension) per row, got shape "
                             f"{np.shape(x)}") from None
    labels = as_finite_vector("y", y)
    if labels.size != features.shape[0]:
        raise ParameterError(f"y must hold {features.shape[0]} label(s), got {labels.size}")
    low, high = float(lower), float(upper)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"lower < upper must be finite numbers, got lower={lower!r}, upper={upper!r}")
    thetas = low + (high - low) * points
    residual = features @ thetas.T - labels[:, np.newaxis]
    losses = np.clip(residual**2 / check_positive("scale", scale), 0.0, 1.0)
    return losses[0] if single else losses
