"""The noisy curvature a model release adds for its error bars (issue 29): the loss's Hessian ``H = sum_i w_i x_i
x_i^T`` at the *released* coefficients, through a Gaussian mechanism with exact integer noise. Objective
perturbation releases it over every coefficient (``w = p (1 - p)``, the logistic loss's second derivative); DP-IHT
over the coefficients its model kept (``w = l''(u)`` for the rows whose gradient the iterations did not clip, 0 for
the others, whose clipped gradient is locally constant).

Why. The coefficients' noise acts through ``H``: through ``J^{-1}``, ``J = H + Delta I``, for objective perturbation
(:func:`estimators.central.objpert.objpert_covariance`), through the iterations' contraction ``I - eta H / n`` for
DP-IHT (:func:`estimators.central.dp_iht.dp_iht_covariance`); ``H`` is the table's own, so no standard error follows
from the coefficients alone, and the release spends a declared share of its budget on ``H``.

Privacy (docs/privacy.md, section 8.6, "The curvature", and 8.9 (e)). The point ``theta`` (and DP-IHT's support) is
the release's own output, so ``H`` is an adaptively chosen query (composition covers it). Adding a row ``x`` adds ``w
x x^T`` with ``w`` in ``[0, t]`` (``t = 1/4`` for the logistic loss, 1 for the squared loss); the upper triangle of
that matrix has squared norm ``w^2 (||x||^4 + sum_i x_i^4) / 2 <= t^2 (B^4 + sum_j m_j^2) / 2`` with ``m_j`` each
block's largest squared norm and ``B^2 = sum_j m_j`` (the bound of :mod:`service.mechanisms.gram`, over the columns
released).

Exactness. ``w`` is rounded to the grid ``2^-K`` (``K = GRID_BITS``, ``floor(2^K w + 1/2)``): a function of the row and
the public ``theta`` only, in ``[0, 2^K t]``, so the bound above holds for the rounded weights, which is what is
released. Each column of the design becomes integer after multiplying by its scale ``s_c`` (the Gram release's
:func:`~service.mechanisms.gram.integral_design`), so ``W = 2^K S H S`` is an integer matrix, summed exactly in
integers (in numpy over the distinct rows, or by the data engine per pair of codes: :func:`assemble`); each
upper-triangle entry gets discrete Gaussian noise (Canonne, Kamath & Steinke 2020) of parameter ``sigma^2 (2^K s_i
s_j)^2`` and is divided back. The Renyi divergence is then that of continuous noise of scale ``sigma``: ``rho``-zCDP
with ``sigma^2 = Delta^2 / (2 rho)``; for objective perturbation ``rho = cdp_rho(epsilon_c, delta_c)`` makes it
``(epsilon_c, delta_c)``-DP (Bun & Steinke 2016, Prop. 1.3), DP-IHT charges ``rho`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from service.data.engines.queries import CURVATURE_GRID_BITS
from service.mechanisms.base import MechanismError
from service.mechanisms.gram import integral_design, perturb_symmetric
from service.privacy import calibration, conversions
from service.privacy.calibration import sqrt_up
from workloads import parameters
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

#: K: the curvature weights ``l''(u)`` are rounded to multiples of ``2^-K`` (the engines' SQL uses the same K).
GRID_BITS = CURVATURE_GRID_BITS
#: ``t``: the largest second derivative of each loss (logistic ``p (1 - p) <= 1/4``; squared loss 1).
WEIGHT_BOUNDS = {"logistic": Fraction(1, 4), "linear": Fraction(1)}
#: Base of the digits the integer sum is split into, so that every partial sum fits an int64.
_DIGIT_BITS = 20


def feature_scales(design: DesignEncoding) -> tuple[tuple[int, ...], tuple[Fraction, ...]]:
    """Each design column's integer scale ``s_c`` and each block's largest squared norm ``m_j`` (intercept first),
    without the target's block. Raises :class:`MechanismError` for an encoding whose entries are not rationals."""
    return support_scales(design, range(design.n_features + int(design.intercept)))


def support_scales(design: DesignEncoding, support: Sequence[int]) -> tuple[tuple[int, ...], tuple[Fraction, ...]]:
    """:func:`feature_scales` of the columns ``support`` only (indexes into ``[intercept?, *feature columns]``): their
    scales, and each block's largest squared norm over those columns (a block with none of them bounds 0)."""
    integral = integral_design_of(design)
    chosen = set(int(i) for i in support)
    scales = tuple(integral.scales[i] for i in sorted(chosen))
    bounds, start = [], 0
    if design.intercept:
        bounds.append(Fraction(int(0 in chosen)))
        start = 1
    for block, enc in zip(integral.blocks, design.feature_encodings, strict=False):
        rows = [r for r in range(enc.width) if start + r in chosen]
        bounds.append(max((sum((Fraction(int(block[r, v]), integral.scales[start + r]) ** 2 for r in rows),
                               Fraction(0)) for v in range(enc.levels)), default=Fraction(0)))
        start += enc.width
    return scales, tuple(bounds)


def integral_design_of(design: DesignEncoding):  # noqa: ANN201 - gram.IntegralDesign
    """:func:`~service.mechanisms.gram.integral_design`, refused with the curvature's own sentence."""
    try:
        return integral_design(design)
    except MechanismError:
        raise MechanismError("the curvature for the error bars adds exact integer noise, so every encoding must "
                             "have rational entries; use a built-in encoding or curvature_share=0") from None


def sensitivity_squared(bounds: tuple[Fraction, ...], loss: str = "logistic") -> Fraction:
    """``t^2 (B^4 + sum_j m_j^2) / 2``: the squared l2 sensitivity of ``H``'s upper triangle (module docstring)."""
    b2 = sum(bounds, Fraction(0))
    return WEIGHT_BOUNDS[loss] ** 2 * (b2 * b2 + sum((m * m for m in bounds), Fraction(0))) / 2


@dataclass(frozen=True)
class CurvatureCalibration:
    """The curvature's share of the charge and its Gaussian mechanism: ``rho`` (exact: the largest whose
    (epsilon, delta)-DP conversion fits the share, or the zCDP share itself, then epsilon and delta are None) and
    ``sigma2`` (exact, on the Hessian's own scale)."""

    epsilon: float | None
    delta: float | None
    rho: Fraction
    sigma2: Fraction

    @property
    def sigma(self) -> float:
        return sqrt_up(self.sigma2)

    def to_json(self) -> dict[str, object]:
        approximate = {} if self.epsilon is None else {"epsilon_curvature": self.epsilon,
                                                       "delta_curvature": self.delta}
        return {**approximate, "rho_curvature": float(self.rho), "curvature_noise_std": self.sigma,
                "curvature_noise": "discrete_gaussian"}


def calibrate(bounds: tuple[Fraction, ...], epsilon: float, delta: float) -> CurvatureCalibration:
    """The Gaussian mechanism of the logistic ``H`` at (``epsilon``, ``delta``): ``sigma^2 = Delta^2 / (2 rho)``."""
    try:
        rho = Fraction(conversions.cdp_rho(epsilon, delta))
    except parameters.PrivacyParameterError as exc:
        raise MechanismError(f"objective perturbation's curvature: {exc}") from None
    return CurvatureCalibration(epsilon, delta, rho,
                                calibration.gaussian_sigma2_exact(rho, 1) * sensitivity_squared(bounds))


def calibrate_rho(bounds: tuple[Fraction, ...], rho: Fraction, loss: str) -> CurvatureCalibration:
    """The Gaussian mechanism of ``loss``'s ``H`` at ``rho``-zCDP: ``sigma^2 = Delta^2 / (2 rho)``."""
    return CurvatureCalibration(None, None, Fraction(rho),
                                calibration.gaussian_sigma2_exact(Fraction(rho), 1) * sensitivity_squared(bounds, loss))


def curvature_weights(loss: str, margins: np.ndarray, unclipped: np.ndarray | None = None) -> np.ndarray:
    """``floor(2^K l''(u) + 1/2)`` as int64 for each row's ``u`` in ``margins``, 0 where ``unclipped`` is False:
    ``l''`` is 1 for the squared loss and ``(1 - tanh(u / 2)^2) / 4`` (``p (1 - p)``) for the logistic one, in
    ``[0, 2^(K-2)]``. The engines' SQL computes the same formula
    (:func:`service.data.engines.gradients.curvature_weight_sql`)."""
    u = np.asarray(margins, dtype=float)
    if loss == "linear":
        weights = np.full(u.shape, 2 ** GRID_BITS, dtype=np.int64)
    else:
        tanh = np.tanh(0.5 * u)
        weights = np.floor(2.0 ** GRID_BITS / 4 * (1.0 - tanh * tanh) + 0.5).astype(np.int64)
    return weights if unclipped is None else np.where(unclipped, weights, 0)


def grid_weights(scores: np.ndarray) -> np.ndarray:
    """The logistic loss's :func:`curvature_weights` with nothing clipped (objective perturbation's)."""
    return curvature_weights("logistic", scores)


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


def perturb(W: np.ndarray, scales: Sequence[int], cal: CurvatureCalibration, noise: NoiseSource) -> np.ndarray:
    """``W / (2^K S S)`` plus the mechanism's noise (module docstring): the released ``H``, symmetric, on the
    Hessian's own scale."""
    return perturb_symmetric(W, scales, cal.sigma2, noise, multiplier=1 << GRID_BITS)


def noisy_curvature(design_matrix: np.ndarray, counts: np.ndarray, theta: np.ndarray, scales: tuple[int, ...],
                    cal: CurvatureCalibration, noise: NoiseSource) -> np.ndarray:
    """The logistic ``H`` at ``theta`` plus the mechanism's noise (module docstring), over the distinct rows of
    ``design_matrix`` (the intercept column included) with their ``counts``, nothing clipped (objective
    perturbation's)."""
    weights = grid_weights(np.asarray(design_matrix, dtype=float) @ np.asarray(theta, dtype=float))
    return perturb(weighted_curvature(design_matrix, counts, weights, scales), scales, cal, noise)


def weighted_curvature(design_matrix: np.ndarray, counts: np.ndarray, weights: np.ndarray,
                       scales: Sequence[int]) -> np.ndarray:
    """``W = sum_r count_r weight_r (S x_r)(S x_r)^T`` exactly over the distinct rows of ``design_matrix`` (the columns
    released, scaled to integers by ``scales``), with integer grid ``weights`` (:func:`curvature_weights`)."""
    rows = integer_rows(design_matrix, tuple(scales))
    return integer_curvature(rows, [int(c) * int(w) for c, w in zip(counts, weights, strict=True)])


def _integers(values: np.ndarray) -> np.ndarray:
    """An engine's sums of integer weights (float64, exact below 2^53) as Python ints; refuses anything else."""
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any(values != np.rint(values)) or np.any(np.abs(values) >= 2.0 ** 53):
        raise MechanismError("the data engine's curvature sums are not exact integers")
    return np.rint(values).astype(np.int64).astype(object)


def assemble(design: DesignEncoding, support: Sequence[int], sums: Sequence[np.ndarray],
             pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """``W = 2^K S H S`` over the columns ``support`` (sorted indexes into ``[intercept?, *feature columns]``), exactly,
    from a data engine's curvature sums (:class:`service.data.engines.queries.GradientQuery` with statistic
    ``"curvature"``): ``sums`` holds the weights summed per code of each feature, then of the target, then per pair of
    codes of each of ``pairs`` (every pair of features holding a support column, in either order).

    For columns ``c`` of feature ``a`` and ``c'`` of feature ``b`` with integer encodings ``v_c`` (one integer per
    code; :func:`~service.mechanisms.gram.integral_design`), the entry is ``v_c^T W_ab v_c'``; within one feature
    ``sum_v v_c[v] v_c'[v] W_a[v]``; with the intercept ``v_c^T W_a``, and ``sum W_target`` for the intercept
    itself."""
    integral = integral_design_of(design)
    features = list(design.features)
    singles = {name: _integers(total) for name, total in zip(features, sums, strict=False)}
    everyone = int(sum(_integers(sums[len(features)])))
    joint = {}
    for (a, b), total in zip(pairs, sums[len(features) + 1:], strict=True):
        joint[(a, b)] = _integers(total)
        joint[(b, a)] = joint[(a, b)].T
    columns = [(None, None)] if design.intercept else []  # (feature, or None: the intercept; its integers per code)
    for name, block, enc in zip(features, integral.blocks, design.feature_encodings, strict=False):
        columns += [(name, np.asarray(block[r, :], dtype=object)) for r in range(enc.width)]
    chosen = [columns[int(i)] for i in support]
    d = len(chosen)
    W = np.zeros((d, d), dtype=object)
    for i, (a, u) in enumerate(chosen):
        for j in range(i, d):
            b, v = chosen[j]
            if a is None and b is None:
                entry = everyone
            elif a is None or b is None:
                name, vector = (b, v) if a is None else (a, u)
                entry = int(np.dot(vector, singles[name]))
            elif a == b:
                entry = int(np.dot(u * v, singles[a]))
            else:
                entry = int(u @ joint[(a, b)] @ v)
            W[i, j] = W[j, i] = entry
    return W
