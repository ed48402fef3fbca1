"""Low-degree Chebyshev approximations of a GLM's log-likelihood term (Ferrando & Sheldon, Sec. 3.3 and App. A).

DD-SSP logistic regression replaces ``phi(s) = -log(1 + e^{-s})`` by a degree-2 polynomial
``b0 + b1 s + b2 s^2`` fitted on ``[-R, R]`` (``R = 6`` in the paper), following Huggins et al. (PASS-GLM, the
paper's reference [23]). The estimators need the **monomial** coefficients ``(b0, b1, b2)`` in ``s`` on the
original interval (Prop. 3.4 multiplies them with ``n``, ``theta^T X^T y`` and ``theta^T X^T X theta``).

How they are obtained: with ``t = s / R`` in ``[-1, 1]``, ``f(t) = phi(R t) ~ sum_m c_m T_m(t)``. The Chebyshev
coefficients ``c_m`` come either from the truncated Chebyshev series (``method="projection"``:
``c_m = (2 / pi) int_0^pi f(cos u) cos(m u) du``, halved for ``m = 0``, computed by Gauss-Chebyshev quadrature),
or from interpolation at the ``degree + 1`` Chebyshev nodes (``method="interpolation"``). The Chebyshev series is
converted to a power series in ``t`` (``T_2(t) = 2 t^2 - 1``, ...) and then ``t = s / R`` gives
``b_m = a_m / R^m``. Using the ``c_m`` directly as monomial coefficients is the known bug this module exists to
avoid: it shrinks the DD-SSP logistic coefficients by a factor of about 3 for ``R = 6``.

Error. For the projection, ``max_{[-R,R]} |phi - p| <= sum_{m > degree} |c_m|`` because ``|T_m| <= 1``; for the
interpolant the bound doubles (aliasing, Trefethen, *Approximation Theory and Approximation Practice*, Thm. 8.2).
:func:`chebyshev_tail_bound` computes these bounds from a high-degree expansion.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.polynomial import chebyshev as cheb

METHODS = ("projection", "interpolation")
_QUADRATURE_NODES = 512


class ChebyshevError(ValueError):
    """Bad parameters for a Chebyshev approximation; the message names the parameter."""


def log_sigmoid(s: np.ndarray | float) -> np.ndarray:
    """``phi(s) = -log(1 + e^{-s})`` (Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient
    Statistic Perturbation", Sec. 3.3), computed stably."""
    return -np.logaddexp(0.0, -np.asarray(s, dtype=float))


def _check(degree: int, radius: float, method: str) -> None:
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
        raise ChebyshevError(f"degree must be a non-negative integer, got {degree!r}")
    if isinstance(radius, bool) or not isinstance(radius, int | float) or not math.isfinite(radius) or radius <= 0:
        raise ChebyshevError(f"radius must be a positive finite number, got {radius!r}")
    if method not in METHODS:
        raise ChebyshevError(f"method must be one of {METHODS}, got {method!r}")


def chebyshev_basis_coefficients(
    degree: int = 2,
    radius: float = 6.0,
    func: Callable[[np.ndarray], np.ndarray] = log_sigmoid,
    method: str = "projection",
) -> np.ndarray:
    """Coefficients ``c_0..c_degree`` of ``func(R t)`` in the Chebyshev basis ``T_m(t)``, ``t in [-1, 1]``.

    These are NOT the monomial coefficients; see :func:`chebyshev_monomial_coefficients`.
    """
    _check(degree, radius, method)
    if method == "interpolation":
        return cheb.chebinterpolate(lambda t: func(radius * t), degree)
    # Gauss-Chebyshev quadrature of (2/pi) int_0^pi f(cos u) cos(m u) du, exact for polynomials of degree < 2N.
    u = (np.arange(_QUADRATURE_NODES) + 0.5) * np.pi / _QUADRATURE_NODES
    values = func(radius * np.cos(u))
    coefficients = np.array([2.0 / _QUADRATURE_NODES * np.sum(values * np.cos(m * u)) for m in range(degree + 1)])
    coefficients[0] /= 2.0
    return coefficients


def chebyshev_monomial_coefficients(
    degree: int = 2,
    radius: float = 6.0,
    func: Callable[[np.ndarray], np.ndarray] = log_sigmoid,
    method: str = "projection",
) -> np.ndarray:
    """Monomial coefficients ``(b_0, ..., b_degree)`` with ``func(s) ~ sum_m b_m s^m`` on ``[-R, R]``.

    Paper 002, Sec. 3.3 / App. A (``b_m^{(M)}``). For ``phi`` and ``R = 6`` with the default projection:
    ``b_1 = 1/2`` exactly (the odd part of ``phi`` is ``s / 2``), ``b_2 ~ -0.0621``, ``b_0 ~ -0.882``.
    """
    basis = chebyshev_basis_coefficients(degree, radius, func, method)
    power_in_t = cheb.cheb2poly(basis)
    return power_in_t / radius ** np.arange(power_in_t.size)


def chebyshev_tail_bound(
    degree: int = 2,
    radius: float = 6.0,
    func: Callable[[np.ndarray], np.ndarray] = log_sigmoid,
    method: str = "projection",
    expansion_degree: int = 200,
) -> float:
    """Uniform bound on ``|func - p_degree|`` on ``[-R, R]`` from the Chebyshev tail ``sum_{m > degree} |c_m|``.

    The coefficients come from a degree-``expansion_degree`` projection (for ``phi`` with ``R = 6`` they decay like
    ``1.65^{-m}``: the nearest singularities ``s = +-i pi`` lie on a Bernstein ellipse of parameter ~1.65, so the
    neglected tail beyond degree 200 is below ``1e-40``). The interpolant's bound is twice the tail.
    """
    _check(degree, radius, method)
    if expansion_degree <= degree:
        raise ChebyshevError(f"expansion_degree must exceed degree={degree}, got {expansion_degree}")
    full = chebyshev_basis_coefficients(expansion_degree, radius, func, "projection")
    tail = float(np.sum(np.abs(full[degree + 1 :])))
    return tail if method == "projection" else 2.0 * tail


def evaluate_monomial(coefficients: np.ndarray, s: np.ndarray | float) -> np.ndarray:
    """``sum_m b_m s^m`` for monomial coefficients ``b`` (lowest degree first)."""
    return np.polynomial.polynomial.polyval(np.asarray(s, dtype=float), np.asarray(coefficients, dtype=float))
