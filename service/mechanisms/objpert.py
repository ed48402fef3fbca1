"""The objective-perturbation release: a logistic regression model whose payload is the model itself.

Approximate minima perturbation (Iyengar, Near, Song, Thakkar, Thakurta & Wang 2019, "Towards Practical
Differentially Private Convex Optimization", IEEE S&P, Alg. 1) around the objective perturbation of Kifer, Smith &
Thakurta 2012 ("Private convex empirical risk minimization and high-dimensional regression", COLT, Thm. 2), as
restated in Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient
Statistic Perturbation", App. C, Alg. 3. The budget (eps, delta) is split: (eps_2, delta_2) = s (eps, delta) for the
output noise (s = ``OUTPUT_SHARE``), (eps_3, delta_3) = h (eps, delta) for the curvature that the error bars read
(h = the ``curvature_share`` option, ``DEFAULT_CURVATURE_SHARE``; 0 releases none), and (eps_1, delta_1) = (1 - s -
h)(eps, delta) for objective perturbation.

1. With ``||x|| <= ||X||`` for every encoded row (intercept included, Prop. 3.1), ``Delta = ||X||^2 / (2 eps_1)`` and
   ``b ~ N(0, ||X||^2 (8 log(2/delta_1) + 4 eps_1) / eps_1^2 I)``, the exact minimiser ``theta*`` of
   ``J(theta) = sum_i log(1 + exp(-y_i x_i.theta)) + Delta/2 ||theta||^2 + b.theta`` is (eps_1, delta_1)-DP under
   add/remove-one neighbours (docs/privacy.md, section 8.6, for the conditions and the proof).
2. The solver stops only at a point ``theta_hat`` where the exact gradient of this un-divided ``J`` has norm at most
   ``gamma = tau Delta`` (certified in decimal arithmetic, :mod:`estimators.central.certified`); ``J`` is Delta-strongly
   convex, so ``||theta_hat - theta*|| <= tau`` (``tau = DISTANCE_BOUND``) whatever the data.
3. The release is ``theta_hat + N(0, sigma_out^2 I)`` with ``sigma_out = 2 tau / sqrt(2 rho_out)`` and
   ``rho_out = cdp_rho(eps_2, delta_2)``: given ``theta*``, ``theta_hat - theta*`` is a vector of norm at most
   ``tau`` on every dataset, so its l2 sensitivity is ``2 tau`` and the Gaussian mechanism is rho_out-zCDP, hence
   (eps_2, delta_2)-DP (Bun & Steinke 2016, Prop. 1.6; Canonne, Kamath & Steinke 2020, Cor. 13).

4. With ``h > 0``, the loss's Hessian at the released coefficients, through a Gaussian mechanism with exact integer
   noise at (eps_3, delta_3) (:mod:`service.mechanisms.curvature`), is released with them: the answer's standard
   errors read it (:func:`estimators.central.objpert.objpert_covariance`).

Composition (basic, the later parts chosen adaptively): (eps_1 + eps_2 + eps_3, delta_1 + delta_2 + delta_3) = (eps,
delta), the charge. Only public numbers (the calibration)
are stored with the release: no solver diagnostic, no row count, no row norm.

This mechanism reads rows: the optimisation needs them. It reads them as the table's distinct rows with their counts
(:meth:`service.data.oracle.TableCountOracle.distinct_rows`, a ``GROUP BY`` in the engine) and minimises the same
``J`` as a weighted sum over them (``sum_i l(x_i, y_i) = sum_r count_r l(x_r, y_r)``; ``Delta``, ``b`` and ``||X||``
do not depend on the rows), so its memory is bounded by the distinct rows, not by ``n``; before reading, and before
any noise, :func:`service.mechanisms.row_memory.check_memory` refuses (refunded) a design whose public memory
estimate exceeds the budget. The rows stay inside the runner; only the fitted coefficients leave, in the payload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.base import EstimatorError
from estimators.central.logistic import ObjPertLogisticRegression
from estimators.central.objpert import objpert_noise_scale, objpert_regularization, round_up
from service.mechanisms import curvature
from service.mechanisms.base import MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.payloads import ModelPayload
from service.mechanisms.row_memory import weighted_design
from service.privacy import calibration, conversions
from service.privacy.calibration import float_down
from service.privacy.cost import PrivacyCost
from workloads import parameters
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.data.oracle import TableCountOracle
    from service.privacy.noise import NoiseSource


#: The share s of (epsilon, delta) spent on the output noise; objective perturbation gets 1 - s.
OUTPUT_SHARE = Fraction(1, 1000)
#: h: the share of (epsilon, delta) spent on the curvature the error bars read, unless the request sets another.
DEFAULT_CURVATURE_SHARE = Fraction(1, 10)
#: The largest curvature share a request may set (objective perturbation keeps at least about half).
MAX_CURVATURE_SHARE = Fraction(1, 2)
#: tau: the certified distance between the released point (before output noise) and the exact minimiser.
DISTANCE_BOUND = 1e-10


class ObjPertRelease:
    """A release runner for :func:`service.releases.engine.run_release`, built by the registry
    (:mod:`service.mechanisms.catalog`); its result's payload is a :class:`~service.mechanisms.payloads.ModelPayload`.

    ``design`` must be a logistic design (target in ``{-1, +1}``); ``epsilon`` and ``delta`` (exact, ``delta > 0``)
    are the charge, split as in the module docstring; ``curvature_share`` is h (0 <= h <= 1/2, taken exactly). Every
    float of the calibration is computed from the exact shares rounded *down* and rounded *up* itself, so the noise is
    never smaller than the charge requires.
    """

    def __init__(self, design: DesignEncoding, epsilon: Fraction, delta: Fraction, *,
                 curvature_share: object = DEFAULT_CURVATURE_SHARE, max_iter: int = 500) -> None:
        if design.task != "logistic":
            raise MechanismError("objective perturbation is implemented for logistic regression only")
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        if epsilon <= 0 or not 0 < delta < 1:
            raise MechanismError(f"objective perturbation needs epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
        share = Fraction(curvature_share)  # a float is taken exactly
        if not 0 <= share <= MAX_CURVATURE_SHARE:
            raise MechanismError(f"curvature_share must be between 0 and {float(MAX_CURVATURE_SHARE)}, got "
                                 f"{float(share)}")
        self.design = design
        self.cost = PrivacyCost(epsilon=epsilon, delta=delta)
        self.curvature_share = share
        epsilon_out, delta_out = epsilon * OUTPUT_SHARE, delta * OUTPUT_SHARE
        epsilon_curvature, delta_curvature = epsilon * share, delta * share
        self.epsilon = float_down(epsilon - epsilon_out - epsilon_curvature)  # eps_1, delta_1: objective perturbation
        self.delta = float_down(delta - delta_out - delta_curvature)
        self.curvature: curvature.CurvatureCalibration | None = None
        if share > 0:
            self.scales, bounds = curvature.feature_scales(design)
            self.curvature = curvature.calibrate(bounds, float_down(epsilon_curvature), float_down(delta_curvature))
        self.epsilon_output = float_down(epsilon_out)  # eps_2, delta_2: the output noise
        self.delta_output = float_down(delta_out)
        self.row_norm_bound = round_up(design.feature_norm_bound())
        self.noise_std = objpert_noise_scale(self.epsilon, self.delta, self.row_norm_bound)
        self.regularization = objpert_regularization(self.epsilon, self.row_norm_bound)
        self.gradient_tolerance = math.nextafter(DISTANCE_BOUND * self.regularization, 0.0)  # gamma / Delta <= tau
        try:
            rho_output = conversions.cdp_rho(self.epsilon_output, self.delta_output)
        except parameters.PrivacyParameterError as exc:
            raise MechanismError(f"objective perturbation: {exc}") from None
        self.output_noise_std = calibration.gaussian_sigma(rho_output, 2.0 * DISTANCE_BOUND)
        self.dimension = design.n_features + int(design.intercept)
        self.max_iter = max_iter

    @property
    def attributes(self) -> Sequence[str]:
        return (*self.design.features, self.design.target)

    def public_details(self) -> dict[str, object]:
        """The calibration: functions of the design and the charge only (nothing about the rows)."""
        return {
            "row_norm_bound": self.row_norm_bound,
            "epsilon_objective": self.epsilon,
            "delta_objective": self.delta,
            "epsilon_output": self.epsilon_output,
            "delta_output": self.delta_output,
            "regularization": self.regularization,
            "noise_std": self.noise_std,
            "gradient_tolerance": self.gradient_tolerance,
            "distance_bound": DISTANCE_BOUND,
            "output_noise_std": self.output_noise_std,
            "curvature_share": float(self.curvature_share),
            **(self.curvature.to_json() if self.curvature is not None else {}),
        }

    def __call__(
        self, oracle: TableCountOracle, noise: NoiseSource, progress: Progress = no_progress
    ) -> MechanismResult:
        X, y, counts = weighted_design(oracle, self.design, "objective perturbation", certified=True)
        steps = 3 if self.curvature is None else 4
        progress(1, steps, "encoded the rows")
        b = np.asarray(noise.gaussian(self.noise_std, self.dimension), dtype=float)
        output_noise = np.asarray(noise.gaussian(self.output_noise_std, self.dimension), dtype=float)
        model = ObjPertLogisticRegression(self.epsilon, self.delta, self.row_norm_bound,
                                          fit_intercept=self.design.intercept,
                                          gradient_tolerance=self.gradient_tolerance, max_iter=self.max_iter)
        try:
            model.fit(X, y, b, self.design.feature_names, output_noise=output_noise, sample_weight=counts)
        except EstimatorError as exc:  # after the noise: the charge stands (release marked failed_after_noise)
            raise MechanismError(f"objective perturbation failed: {exc}") from None
        progress(3, steps, "minimised the perturbed objective")
        coef = tuple(float(c) for c in model.coef_)
        intercept = float(model.intercept_) if self.design.intercept else None
        hessian = None
        if self.curvature is not None:
            theta = np.asarray(coef if intercept is None else (intercept, *coef))
            noisy = curvature.noisy_curvature(model.design_matrix(X), counts, theta, self.scales, self.curvature,
                                              noise)
            hessian = tuple(tuple(float(v) for v in row) for row in noisy)
            progress(4, steps, "perturbed the curvature at the released coefficients")
        payload = ModelPayload(tuple(self.design.feature_names), coef, intercept, hessian)
        return MechanismResult(self.cost, payload, self.public_details())
