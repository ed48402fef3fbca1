"""AdaSSP's privacy calibration and ridge choice (Wang 2018, as restated in Ferrando & Sheldon 2024, "Private
Regression via Data-Dependent Sufficient Statistic Perturbation", App. B, Alg. 2).

Pure functions: the release engine samples the noise with these scales;
:class:`estimators.central.linear.AdaSSPLinearRegression` post-processes what it released.

Alg. 2 releases three things, each with a third of the budget:

1. ``lambda_min(X^T X) + sigma_lambda Z`` (step 2), then ``tilde_lambda = max(that - shift, 0)``;
2. ``X^T X + sigma_xtx Z`` with ``Z`` symmetric, upper triangle i.i.d. ``N(0, 1)`` (step 4);
3. ``X^T y + sigma_xty Z`` (step 5); here optionally the whole last column ``[X^T y; y^T y]`` of ``Z^T Z``, so a
   noisy ``Z^T Z`` comes out (``y^T y`` is not needed by Alg. 2 but lets an analyst estimate the residual variance).

and then solves ``(hat{X^T X} + lambda I) theta = hat{X^T y}`` with
``lambda = max(0, sqrt(d log(6/delta) log(2 d^2 / rho)) ||X||^2 / (eps/3) - tilde_lambda)`` (step 3), ``rho`` being
a failure probability (0.05), not zCDP's rho.

Sensitivities under add/remove-one (the paper's App. B neighbouring relation) with ``||x|| <= B_x``, ``|y| <= B_y``
and ``z = [x, y]``:

* ``X^T X`` changes by ``x x^T``; the released vector (its upper triangle) has norm at most
  ``||x x^T||_F = ||x||^2 <= B_x^2``. The same argument for the whole ``Z^T Z`` gives ``||z z^T||_F = ||z||^2 <= B^2``
  with ``B^2 = B_x^2 + B_y^2`` (:func:`gram_sensitivity`).
* ``lambda_min``: ``lambda_min(A) <= lambda_min(A + x x^T) <= lambda_min(A) + ||x||^2`` (Weyl), so ``B_x^2``.
* ``X^T y`` changes by ``y x``: ``B_x B_y``; the column ``[X^T y; y^T y]`` changes by ``y z``:
  ``B_y sqrt(B_x^2 + B_y^2)``.

Two calibrations of the same structure:

* ``epsilon`` given (``calibration="paper"``): Alg. 2 as printed, ``sigma = sqrt(log(6/delta)) Delta / (eps/3)``.
  Note: this is smaller than the classical Gaussian-mechanism scale ``sqrt(2 log(1.25 / (delta/3))) Delta / (eps/3)``
  (e.g. 3.65 vs 5.07 times ``Delta / (eps/3)`` at ``delta = 1e-5``); it is here to reproduce the paper's baseline, and
  the privacy it buys is the paper's claim, not something this project's accountant certifies.
* ``rho`` given (``calibration="zcdp"``): each part is a Gaussian mechanism with ``rho / 3``, ``sigma = Delta /
  sqrt(2 rho / 3)`` (Bun & Steinke 2016, Prop. 1.6); the three compose to ``rho``-zCDP.

In both, the utility constants keep the form of Alg. 2 written with the part's ``sigma``:
``shift = sqrt(log(6/delta)) sigma_lambda`` and ``lambda = max(0, sqrt(d log(2 d^2 / failure_prob)) sigma_xtx -
tilde_lambda)``; with the paper's ``sigma`` these are exactly steps 2 and 3. In the zCDP calibration ``delta`` is only
that confidence parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimators.base import EstimatorError, check_non_negative, check_positive, check_probability


@dataclass(frozen=True)
class AdaSSPNoiseScales:
    """Noise standard deviations and AdaSSP's constants for one release.

    ``sigma_xty`` applies to every entry of the released y column (``[X^T y; y^T y]`` when ``include_yty``).
    ``rho_parts`` is the zCDP cost of each part (``None`` in the paper calibration, whose cost is ``epsilon_parts``).
    """

    calibration: str
    d: int
    delta: float
    failure_prob: float
    include_yty: bool
    sensitivity_lambda_min: float
    sensitivity_xtx: float
    sensitivity_xty: float
    sigma_lambda_min: float
    sigma_xtx: float
    sigma_xty: float
    lambda_min_shift: float
    ridge_offset: float
    epsilon_parts: tuple[float, float, float] | None = None
    rho_parts: tuple[float, float, float] | None = None


def gram_sensitivity(row_norm_bound: float) -> float:
    """l2 sensitivity of ``Z^T Z`` (upper triangle) under add/remove-one: ``||z z^T||_F = ||z||^2 <= B^2``."""
    return check_positive("row_norm_bound", row_norm_bound) ** 2


def adassp_sensitivities(bound_x: float, bound_y: float, include_yty: bool = True) -> tuple[float, float, float]:
    """``(Delta_lambda_min, Delta_xtx, Delta_xty)`` under add/remove-one (see the module docstring)."""
    bx = check_positive("bound_x", bound_x)
    by = check_positive("bound_y", bound_y)
    column = by * math.hypot(bx, by) if include_yty else bx * by
    return bx * bx, bx * bx, column


def adassp_noise_scales(
    bound_x: float,
    bound_y: float,
    d: int,
    delta: float,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    failure_prob: float = 0.05,
    include_yty: bool = True,
) -> AdaSSPNoiseScales:
    """Noise scales of the three parts of Alg. 2 for a budget ``epsilon`` (paper) or ``rho`` (zCDP), split in thirds.

    ``bound_x`` is ``||X||`` (Prop. 3.1, intercept included), ``bound_y`` is ``||Y||``, ``d`` the number of columns
    of ``X`` (intercept included), ``delta`` the confidence parameter of steps 2-3 (and, for ``epsilon``, the
    privacy delta), ``failure_prob`` Alg. 2's ``rho`` (0.05 in the paper).
    """
    if (epsilon is None) == (rho is None):
        raise EstimatorError("give exactly one of epsilon (paper calibration) or rho (zCDP calibration)")
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise EstimatorError(f"d must be a positive integer, got {d!r}")
    delta = check_probability("delta", delta)
    failure_prob = check_probability("failure_prob", failure_prob)
    sens = adassp_sensitivities(bound_x, bound_y, include_yty)
    log_term = math.log(6.0 / delta)
    if epsilon is not None:
        part = check_positive("epsilon", epsilon) / 3.0
        sigmas = [math.sqrt(log_term) * s / part for s in sens]
        calibration, eps_parts, rho_parts = "paper", (part, part, part), None
    else:
        part = check_positive("rho", rho) / 3.0
        sigmas = [s / math.sqrt(2.0 * part) for s in sens]
        calibration, eps_parts, rho_parts = "zcdp", None, (part, part, part)
    return AdaSSPNoiseScales(
        calibration=calibration,
        d=d,
        delta=delta,
        failure_prob=failure_prob,
        include_yty=include_yty,
        sensitivity_lambda_min=sens[0],
        sensitivity_xtx=sens[1],
        sensitivity_xty=sens[2],
        sigma_lambda_min=sigmas[0],
        sigma_xtx=sigmas[1],
        sigma_xty=sigmas[2],
        lambda_min_shift=lambda_min_shift(sigmas[0], delta),
        ridge_offset=ridge_offset(sigmas[1], d, failure_prob),
        epsilon_parts=eps_parts,
        rho_parts=rho_parts,
    )


def lambda_min_shift(sigma_lambda_min: float, delta: float) -> float:
    """Alg. 2, step 2: the noisy minimum eigenvalue is shifted down by ``sqrt(log(6/delta)) sigma``."""
    return math.sqrt(math.log(6.0 / delta)) * sigma_lambda_min


def ridge_offset(sigma_gram: float, d: int, failure_prob: float) -> float:
    """Alg. 2, step 3: the ridge offset ``sqrt(d log(2 d^2 / failure_prob)) sigma`` on the noisy ``X^T X``."""
    return math.sqrt(d * math.log(2.0 * d * d / failure_prob)) * sigma_gram


def adassp_entry_std(scales: AdaSSPNoiseScales) -> np.ndarray:
    """Standard deviation of the noise on each entry of the ``(d+1) x (d+1)`` Gram release ``Z^T Z = [X, y]^T [X, y]``.

    The engine draws one ``N(0, std^2)`` per upper-triangular entry (diagonal included) and mirrors it (Alg. 2,
    step 4). ``sigma_xtx`` on the ``X^T X`` block, ``sigma_xty`` on the ``X^T y`` column; the ``y^T y`` entry is
    ``sigma_xty`` when ``include_yty`` and NaN otherwise, meaning "not released": store NaN there.
    """
    std = np.full((scales.d + 1, scales.d + 1), scales.sigma_xtx)
    std[:-1, -1] = std[-1, :-1] = scales.sigma_xty
    std[-1, -1] = scales.sigma_xty if scales.include_yty else np.nan
    return std


def adassp_lambda_min_tilde(lambda_min_noisy: float, scales: AdaSSPNoiseScales) -> float:
    """Alg. 2 step 2 after the noise: ``max(lambda_min + sigma Z - shift, 0)`` from the noisy release."""
    value = float(lambda_min_noisy)
    if not math.isfinite(value):
        raise EstimatorError(f"lambda_min_noisy must be finite, got {lambda_min_noisy!r}")
    return max(value - scales.lambda_min_shift, 0.0)


def adassp_ridge(lambda_min_tilde: float, scales: AdaSSPNoiseScales) -> float:
    """Alg. 2 step 3: ``lambda = max(0, sqrt(d log(2 d^2 / failure_prob)) sigma_xtx - tilde_lambda_min)``."""
    return max(0.0, scales.ridge_offset - check_non_negative("lambda_min_tilde", lambda_min_tilde))


def symmetric_noise_form_covariance(v: np.ndarray, sigma: float) -> np.ndarray:
    """Covariance of ``u = E[:-1, :] v`` for the symmetric noise ``E`` of a Gram release: ``q x q``, its upper
    triangle (diagonal included) i.i.d. ``N(0, sigma^2)``, mirrored (step 4 of Alg. 2, as the service releases it).

    ``u_i = sum_j E_ij v_j`` sums ``q`` distinct entries, so ``Var(u_i) = sigma^2 ||v||^2``; for ``i != k`` the only
    entry ``u_i`` and ``u_k`` share is ``E_ik = E_ki`` (with weights ``v_k`` and ``v_i``), so ``Cov(u_i, u_k) =
    sigma^2 v_i v_k``. With ``w = v[:-1]``: ``sigma^2 (||v||^2 I + w w^T - diag(w * w))``. (Derived here; the
    delta method of :func:`adassp_noise_covariance` applies it with ``v = (-theta, 1)``.)"""
    v = np.asarray(v, dtype=float)
    w = v[:-1]
    return sigma ** 2 * (float(v @ v) * np.eye(w.size) + np.outer(w, w) - np.diag(w * w))


def adassp_noise_covariance(theta: np.ndarray, solver: np.ndarray, scales: AdaSSPNoiseScales,
                            ridge_varies: bool) -> np.ndarray:
    """The covariance the release's noise gives AdaSSP's ``theta = (hat{X^T X} + lambda I)^{-1} hat{X^T y}``, to first
    order (the delta method; derived in docs/mechanisms.md, "Error bars on answers").

    With ``M = (hat{X^T X} + lambda I)^{-1}`` (``solver``) and the Gram noise ``E``, ``d theta = M (dE_{Xy} - dE_{XX}
    theta) = M E[:-1, :] (-theta, 1)``: covariance ``M C M^T`` with ``C`` from
    :func:`symmetric_noise_form_covariance` at ``sigma_xtx`` (one scale for the whole Gram matrix: the service's
    release). When the ridge is ``offset - tilde_lambda`` with ``tilde_lambda > 0`` (``ridge_varies``), it moves
    one-for-one against the independent noise on ``lambda_min`` (variance ``sigma_lambda^2``) and ``d theta / d lambda
    = -M theta``: the term ``sigma_lambda^2 (M theta)(M theta)^T`` is added."""
    if scales.sigma_xtx != scales.sigma_xty:
        raise EstimatorError("the closed form assumes one noise scale for X^T X and X^T y (the service's release)")
    theta = np.asarray(theta, dtype=float)
    form = symmetric_noise_form_covariance(np.concatenate([-theta, [1.0]]), scales.sigma_xtx)
    covariance = solver @ form @ solver.T
    if ridge_varies:
        shift = solver @ theta
        covariance = covariance + scales.sigma_lambda_min ** 2 * np.outer(shift, shift)
    return covariance
