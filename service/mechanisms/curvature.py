"""The noisy curvature an objective-perturbation release adds for its error bars (issue 29): the logistic loss's
Hessian ``H = sum_i p_i (1 - p_i) x_i x_i^T`` at the *released* coefficients, through a Gaussian mechanism with
exact integer noise.

Why. ObjPert's noise acts on the coefficients through ``J^{-1}``, ``J = H + Delta I``
(:func:`estimators.central.objpert.objpert_covariance`), and ``H`` is the table's own: no standard error follows
from the coefficients alone. The release therefore spends a declared share of its (epsilon, delta) on ``H``.

Privacy (docs/privacy.md, section 8.6, "The curvature"). The point ``theta`` is the release's own output, so ``H`` is
an adaptively chosen query (basic composition covers it). Adding a row ``x`` adds ``t x x^T`` with ``t = p (1 - p)``
in ``[0, 1/4]``; the upper triangle of that matrix has squared norm ``t^2 (||x||^4 + sum_i x_i^4) / 2 <= (B^4 +
sum_j m_j^2) / 32`` with ``m_j`` each block's largest squared norm and ``B^2 = sum_j m_j`` (the bound of
:mod:`service.mechanisms.gram`, times ``t^2 <= 1/16``).

Exactness. ``t`` is rounded to the grid ``2^-K`` (``K = GRID_BITS``) and clamped to ``[0, 1/4]``: a function of the
row and the public ``theta`` only, so the bound above holds for the rounded weights, which is what is released. Each
column of the design becomes integer after multiplying by its scale ``s_c`` (the Gram release's
:func:`~service.mechanisms.gram.integral_design`), so ``W = 2^K S H S`` is an integer matrix, summed exactly in
integers; each upper-triangle entry gets discrete Gaussian noise (Canonne, Kamath & Steinke 2020) of parameter
``sigma^2 (2^K s_i s_j)^2`` and is divided back. The Renyi divergence is then that of continuous noise of scale
``sigma``: ``rho``-zCDP with ``sigma^2 = Delta^2 / (2 rho)``, and ``rho = cdp_rho(epsilon_c, delta_c)`` makes it
``(epsilon_c, delta_c)``-DP (Bun & Steinke 2016, Prop. 1.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.base import logistic_probabilities
from service.mechanisms.base import MechanismError
from service.mechanisms.gram import integral_design, perturb_symmetric
from service.privacy import calibration, conversions
from service.privacy.calibration import sqrt_up
from workloads import parameters
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

#: K: the curvature weights ``p (1 - p)`` are rounded to multiples of ``2^-K``.
GRID_BITS = 16
#: Base of the digits the integer sum is split into, so that every partial sum fits an int64.
_DIGIT_BITS = 20


def feature_scales(design: DesignEncoding) -> tuple[tuple[int, ...], tuple[Fraction, ...]]:
    """Each design column's integer scale ``s_c`` and each block's largest squared norm ``m_j`` (intercept first),
    without the target's block. Raises :class:`MechanismError` for an encoding whose entries are not rationals."""
    try:
        integral = integral_design(design)
    except MechanismError:
        raise MechanismError("objective perturbation's curvature adds exact integer noise, so every encoding must "
                             "have rational entries; use a built-in encoding or curvature_share=0") from None
    width = design.target_encoding.width
    return tuple(integral.scales[:-width]), tuple(integral.bounds[:-1])


def sensitivity_squared(bounds: tuple[Fraction, ...]) -> Fraction:
    """``(B^4 + sum_j m_j^2) / 32``: the squared l2 sensitivity of ``H``'s upper triangle (module docstring)."""
    b2 = sum(bounds, Fraction(0))
    return (b2 * b2 + sum((m * m for m in bounds), Fraction(0))) / 32


@dataclass(frozen=True)
class CurvatureCalibration:
    """The curvature's share of the charge and its Gaussian mechanism: ``rho`` (exact, the largest whose
    (epsilon, delta)-DP conversion fits the share) and ``sigma2`` (exact, on the Hessian's own scale)."""

    epsilon: float
    delta: float
    rho: Fraction
    sigma2: Fraction

    @property
    def sigma(self) -> float:
        return sqrt_up(self.sigma2)

    def to_json(self) -> dict[str, object]:
        return {"epsilon_curvature": self.epsilon, "delta_curvature": self.delta, "rho_curvature": float(self.rho),
                "curvature_noise_std": self.sigma, "curvature_noise": "discrete_gaussian"}


def calibrate(bounds: tuple[Fraction, ...], epsilon: float, delta: float) -> CurvatureCalibration:
    """The Gaussian mechanism of ``H`` at (``epsilon``, ``delta``): ``sigma^2 = Delta^2 / (2 rho)``."""
    try:
        rho = Fraction(conversions.cdp_rho(epsilon, delta))
    except parameters.PrivacyParameterError as exc:
        raise MechanismError(f"objective perturbation's curvature: {exc}") from None
    return CurvatureCalibration(epsilon, delta, rho,
                                calibration.gaussian_sigma2_exact(rho, 1) * sensitivity_squared(bounds))


def grid_weights(scores: np.ndarray) -> np.ndarray:
    """``round(2^K p (1 - p))`` clamped to ``[0, 2^(K-2)]`` as int64, ``p`` the logistic of each row's score."""
    positive = logistic_probabilities(scores)[:, 1]
    curvature = positive * (1.0 - positive)
    return np.clip(np.rint(curvature * 2.0 ** GRID_BITS), 0, 2 ** (GRID_BITS - 2)).astype(np.int64)


def integer_rows(design_matrix: np.ndarray, scales: tuple[int, ...]) -> np.ndarray:
    """``S x`` for every row, exactly, as int64 (the encodings' entries are rationals with these denominators)."""
    scaled = np.asarray(design_matrix, dtype=float) * np.asarray(scales, dtype=float)
    rows = np.rint(scaled)
    if not np.allclose(scaled, rows, rtol=0.0, atol=1e-6):
        raise MechanismError("objective perturbation's curvature: the encoded rows are not on their encodings' grid")
    return rows.astype(np.int64)


def integer_curvature(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``W = sum_r w_r a_r a_r^T`` exactly (an object array of Python ints), for int64 rows ``a_r`` and non-negative
    integer weights ``w_r`` (a distinct row's count times its grid weight): the weights are split into base-2^20
    digits and the rows into chunks so that every int64 partial sum is exact."""
    rows = np.asarray(rows, dtype=np.int64)
    weights = [int(w) for w in weights]
    d = rows.shape[1]
    total = np.zeros((d, d), dtype=object)
    if not weights:
        return total
    largest = max(int(np.max(np.abs(rows), initial=0)), 1)
    chunk = max(1, (2 ** 62) // ((2 ** _DIGIT_BITS) * largest * largest))
    digits = max(1, -(-max(weights).bit_length() // _DIGIT_BITS))
    mask = (1 << _DIGIT_BITS) - 1
    for k in range(digits):
        digit = np.array([(w >> (k * _DIGIT_BITS)) & mask for w in weights], dtype=np.int64)
        for start in range(0, rows.shape[0], chunk):
            part = rows[start:start + chunk]
            block = (part * digit[start:start + chunk, None]).T @ part
            total = total + block.astype(object) * (1 << (k * _DIGIT_BITS))
    return total


def noisy_curvature(design_matrix: np.ndarray, counts: np.ndarray, theta: np.ndarray, scales: tuple[int, ...],
                    cal: CurvatureCalibration, noise: NoiseSource) -> np.ndarray:
    """``H`` at ``theta`` plus the mechanism's noise (module docstring), symmetric, on the Hessian's own scale, over
    the distinct rows of ``design_matrix`` (the intercept column included) with their ``counts``."""
    rows = integer_rows(design_matrix, scales)
    weights = grid_weights(np.asarray(design_matrix, dtype=float) @ np.asarray(theta, dtype=float))
    W = integer_curvature(rows, [int(c) * int(w) for c, w in zip(counts, weights, strict=True)])
    return perturb_symmetric(W, scales, cal.sigma2, noise, multiplier=1 << GRID_BITS)
