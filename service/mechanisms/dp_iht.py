"""The DP-IHT release: a sparse linear or logistic model (at most ``sparsity`` non-zero coefficients) whose payload is
the model itself.

Wang & Xu 2019, "On sparse linear regression in the local differential privacy model" (ICML), Sec. 6, Alg. 3, with
per-example gradient clipping and an exact zCDP calibration (:mod:`estimators.central.dp_iht`; docs/privacy.md,
section 8.9 (e)). The release is charged one rho (zCDP): a request at (epsilon, delta) is charged the largest rho on
the accountant's grid that satisfies it (:meth:`service.mechanisms.registry.MechanismSpec.cost`), and
:func:`~estimators.central.dp_iht.dp_iht_calibration` splits exactly that rho between the private row count
(``COUNT_SHARE``) and ``iterations`` equal Gaussian releases of the clipped gradient sum, so the ledger's charge is the
calibration's total, exactly.

Settings (``options`` of the release, declared with their bounds and defaults in :mod:`service.mechanisms.catalog`,
checked there once and completed by :func:`resolve_options` before anything is reserved, and stored with the release
so that only an identical request reuses it):

* ``sparsity`` (required): ``k``, counted over the encoded columns *and* the intercept when the design has one;
* ``iterations`` (``T``, the declared default);
* ``step`` (``eta``): default ``1 / L`` with ``L = B^2 / 4 + l2`` (logistic) or ``B^2 + l2`` (linear), ``B`` the
  design's bound on ``||x||`` (intercept included): ``L`` bounds the smoothness of the average loss on every dataset,
  so the default is a public number;
* ``clip_norm`` (``G``): default ``B`` for the logistic loss (its gradient has norm at most ``||x|| <= B``: nothing
  is clipped) and ``2 B`` for the squared loss (residuals up to 2 pass unclipped; the target is in ``[-1, 1]``);
* ``l2``: the data-free penalty ``(l2 / 2) ||theta||^2`` (default 0; Sec. 7.2 uses ``1e-3`` with the logistic loss);
* ``curvature_share`` (``h``, default 0.1, at most 0.5): the share of ``rho`` spent, after the iterations, on the
  loss's curvature over the coefficients the model kept, at the released coefficients, which the error bars read
  (:mod:`service.mechanisms.curvature`; :func:`estimators.central.dp_iht.dp_iht_covariance`); 0 releases none.

The charge ``rho`` is split exactly: ``h rho`` for the curvature, ``(1 - h) rho`` for the fit (itself split between
the row count and the iterations), so the ledger's charge is unchanged by ``h``.

Every iteration uses every row (no subsampling) and clips each row's gradient on its own. Where the data engine
computes the clipped gradient sum in one scan (DuckDB, PostgreSQL, Spark: the count oracle's
``gradient_sums_in_one_scan``), each iteration asks the count oracle for that sum (:class:`EngineGradients`,
:mod:`service.data.engines.gradients`): the design is additive per attribute, so the engine returns one float per
(attribute, code) and no row leaves it; ``n`` is the oracle's row count, and memory is a few floats per code, so no
distinct-row cap applies. On SQLite (one scan per attribute per iteration there) it reads the table's distinct rows
with their counts once
(:func:`service.mechanisms.row_memory.weighted_design`): the count-weighted sum of the distinct rows' clipped
gradients is exactly the sum over the rows, ``n`` is the sum of the counts, memory is bounded by the distinct rows, and
a design whose public memory estimate exceeds the budget is refused before any noise (refunded). Both paths compute
the same sum (to the last bits of float64 summation order: tests/service/data/test_gradient_sums.py) with the same
sensitivity ``G``, so the charge does not depend on the path. The curvature follows the same two paths: the engine
sums an integer weight per code and per pair of codes (:meth:`EngineGradients.curvature`), or numpy sums it over the
distinct rows already read; both give the same integer matrix, which gets exact discrete Gaussian noise. Only the
fitted coefficients, the noisy row count ``n_hat`` and the noisy curvature leave the runner, in the payload, and only
public numbers (the calibration, the curvature's noise scale) in the details.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.base import EstimatorError
from estimators.central.dp_iht import (
    DPIHTCalibration,
    DPIHTLinearRegression,
    DPIHTLogisticRegression,
    loss_slopes,
)
from service.data.oracle import GradientQuery
from service.mechanisms import curvature
from service.mechanisms.base import MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.payloads import ModelPayload
from service.mechanisms.row_memory import weighted_design
from service.privacy.cost import PrivacyCost
from workloads.encodings import INTERCEPT_NAME, DesignEncoding

if TYPE_CHECKING:
    from service.data.oracle import TableCountOracle
    from service.privacy.noise import NoiseSource

#: The share of the fit's rho spent on the private row count ``n_hat`` (the rest is split equally among the
#: iterations).
COUNT_SHARE = Fraction(1, 10)
#: The largest curvature share a request may set.
MAX_CURVATURE_SHARE = Fraction(1, 2)


def _fail(message: str) -> MechanismError:
    return MechanismError(f"dp-iht: {message}")


def dimension(design: DesignEncoding) -> int:
    """The number of coefficients DP-IHT fits: the encoded columns, plus the intercept when the design has one."""
    return design.n_features + int(design.intercept)


def smoothness_bound(design: DesignEncoding, l2: float) -> float:
    """``L``: a bound on the smoothness of the average loss plus ``(l2/2)||theta||^2`` on every dataset of the design.
    Logistic: the per-example Hessian is ``phi'' x x^T`` with ``phi'' <= 1/4``; squared loss: ``x x^T``; and
    ``||x x^T|| = ||x||^2 <= B^2``."""
    bound = design.feature_norm_bound() ** 2
    return (bound / 4.0 if design.task == "logistic" else bound) + l2


def resolve_options(design: DesignEncoding, options: Mapping[str, object]) -> dict[str, object]:
    """The complete settings of a DP-IHT release on ``design`` (module docstring for the defaults), from ``options``
    already checked against their declarations and completed with the declared defaults
    (:meth:`service.mechanisms.registry.MechanismSpec.settings`, the one place they are checked): what is left are
    the rules that depend on the design. Raises :class:`MechanismError` naming the setting (sparsity missing, or
    above the number of coefficients)."""
    if options.get("sparsity") is None:
        raise _fail("sparsity is required (the number of non-zero coefficients to keep)")
    p = dimension(design)
    sparsity = int(options["sparsity"])  # type: ignore[call-overload]
    if sparsity > p:
        where = " (the intercept included)" if design.intercept else ""
        raise _fail(f"sparsity must be at most the number of coefficients p={p}{where}, got {sparsity}")
    l2 = float(options["l2"])  # type: ignore[arg-type]
    step = options.get("step")
    clip = options.get("clip_norm")
    if clip is None:
        clip = design.feature_norm_bound() * (1.0 if design.task == "logistic" else 2.0)
    share = float(options["curvature_share"])  # type: ignore[arg-type]
    if share > 0:
        curvature.integral_design_of(design)  # an encoding without exact rationals is refused before any noise
    return {"sparsity": sparsity, "iterations": int(options["iterations"]),  # type: ignore[call-overload]
            "step": 1.0 / smoothness_bound(design, l2) if step is None else float(step),  # type: ignore[arg-type]
            "clip_norm": float(clip), "l2": l2, "curvature_share": share}  # type: ignore[arg-type]


class EngineGradients:
    """:class:`estimators.central.dp_iht.ClippedGradients` computed by the table's data engine (module docstring).

    For ``theta = [theta_0?, theta_a for each feature a]`` it sends each feature's per-code margins
    ``M_a^T theta_a`` and squared norms, the target's labels and ``G``; the engine returns ``W_a`` (the sum of the
    rows' clipped weights per code of ``a``), and the clipped gradient sum is ``[sum_i w_i ; M_a W_a ...]`` (the
    first entry only with an intercept; ``sum_i w_i`` is the sum of the target's ``W``, summed exactly)."""

    def __init__(self, oracle: TableCountOracle, design: DesignEncoding, loss: str) -> None:
        self.oracle, self.design, self.loss = oracle, design, loss
        self.norms = tuple(np.sum(enc.matrix**2, axis=0) for enc in design.feature_encodings)
        self.labels = design.target_encoding.matrix[0].astype(np.float64)
        start, self.blocks = int(design.intercept), []
        for enc in design.feature_encodings:
            self.blocks.append(slice(start, start + enc.width))
            start += enc.width

    def _query(self, theta: np.ndarray, bound: float, **statistic: object) -> GradientQuery:
        encodings = self.design.feature_encodings
        return GradientQuery(
            loss=self.loss, clip_norm=float(bound), margin_offset=float(theta[0]) if self.design.intercept else 0.0,
            norm_offset=1.0 if self.design.intercept else 0.0, features=self.design.features,
            margins=tuple(enc.matrix.T @ theta[b] for enc, b in zip(encodings, self.blocks, strict=True)),
            norms=self.norms, target=self.design.target, labels=self.labels, **statistic)  # type: ignore[arg-type]

    def __call__(self, theta: np.ndarray, bound: float) -> np.ndarray:
        sums = self.oracle.row_weight_sums(self._query(theta, bound))
        head = [math.fsum(sums[-1])] if self.design.intercept else []
        encodings = self.design.feature_encodings
        return np.concatenate([head, *(enc.matrix @ w for enc, w in zip(encodings, sums, strict=False))])

    def curvature(self, theta: np.ndarray, bound: float, support: Sequence[int]) -> np.ndarray:
        """The exact integer curvature ``W`` over the columns ``support`` at ``theta`` (:func:`curvature.assemble`):
        one aggregation of the integer weights per code and per pair of codes of the features holding a support
        column."""
        held = [name for name, block in zip(self.design.features, self.blocks, strict=True)
                if any(block.start <= i < block.stop for i in support)]
        pairs = tuple((a, b) for i, a in enumerate(held) for b in held[i + 1:])
        sums = self.oracle.row_weight_sums(self._query(theta, bound, statistic="curvature", pairs=pairs))
        return curvature.assemble(self.design, support, sums, pairs)


def rows_curvature(X: np.ndarray, y: np.ndarray, counts: np.ndarray, theta: np.ndarray, loss: str, bound: float,
                   support: Sequence[int], scales: Sequence[int]) -> np.ndarray:
    """The exact integer curvature ``W`` over the columns ``support`` at ``theta``, from the distinct rows ``X``
    (intercept column included), ``y`` and their ``counts``: each row's :func:`curvature.curvature_weights`, 0 where
    its gradient is clipped (``|l'(u)| ||x|| > G``, the engines' rule), times its count."""
    margins = X @ theta
    unclipped = np.abs(loss_slopes(loss, margins, y)) * np.linalg.norm(X, axis=1) <= bound
    weights = curvature.curvature_weights(loss, margins, unclipped)
    return curvature.weighted_curvature(X[:, list(support)], counts, weights, scales)


class DPIHTRelease:
    """A release runner for :func:`service.releases.engine.run_release`, built by the registry
    (:mod:`service.mechanisms.catalog`); its result's payload is a :class:`~service.mechanisms.payloads.ModelPayload`.

    ``rho`` is the charge (exact, > 0); ``settings`` are complete (:meth:`MechanismSpec.settings
    <service.mechanisms.registry.MechanismSpec.settings>`, which checks them once). The calibration is computed here,
    before the engine reserves anything; its total equals ``rho`` exactly (a check, not a hope).
    """

    def __init__(self, design: DesignEncoding, rho: Fraction, settings: Mapping[str, object]) -> None:
        rho = Fraction(rho)
        if rho <= 0:
            raise _fail(f"rho must be > 0, got {rho}")
        self.design = design
        self.options = dict(settings)
        share = Fraction(repr(float(self.options.get("curvature_share", 0.0))))  # 0.1 is 1/10, as the ledger reads it
        if not 0 <= share <= MAX_CURVATURE_SHARE:
            raise _fail(f"curvature_share must be between 0 and {float(MAX_CURVATURE_SHARE)}, got {float(share)}")
        self.cost = PrivacyCost(rho=rho)
        self.rho_curvature = rho * share
        estimator_class = DPIHTLogisticRegression if design.task == "logistic" else DPIHTLinearRegression
        self.estimator = estimator_class(
            sparsity=self.options["sparsity"], iterations=self.options["iterations"], eta=self.options["step"],
            rho=rho - self.rho_curvature, clip_norm=self.options["clip_norm"], l2=self.options["l2"],
            count_fraction=COUNT_SHARE)
        try:
            self.calibration: DPIHTCalibration = self.estimator.calibration()
        except EstimatorError as exc:
            raise _fail(str(exc)) from None
        #: the curvature's mechanism, once the support is known (its sensitivity depends on the columns kept)
        self.curvature: curvature.CurvatureCalibration | None = None
        if self.calibration.rho_total + self.rho_curvature != rho:  # exact by construction: never charge unspent
            raise _fail(f"calibration total {self.calibration.rho_total + self.rho_curvature} differs from the "
                        f"charge {rho}")

    @property
    def attributes(self) -> Sequence[str]:
        return (*self.design.features, self.design.target)

    @property
    def coefficient_names(self) -> tuple[str, ...]:
        head = (INTERCEPT_NAME,) if self.design.intercept else ()
        return (*head, *self.design.feature_names)

    def public_details(self) -> dict[str, object]:
        """The settings and the calibration: functions of the design and the charge only (nothing about the rows)."""
        cal = self.calibration
        return {
            **self.options,
            "rho": float(self.cost.rho),
            "rho_count": float(cal.rho_count),
            "rho_per_iteration": float(cal.rho_per_iteration),
            "sigma_gradient": cal.sigma_gradient,
            "sigma_count": cal.sigma_count,
            "rho_curvature": float(self.rho_curvature),
            **(self.curvature.to_json() if self.curvature is not None else {}),
        }

    def __call__(
        self, oracle: TableCountOracle, noise: NoiseSource, progress: Progress = no_progress
    ) -> MechanismResult:
        engine = oracle.gradient_sums_in_one_scan
        try:
            if engine:
                progress(1, 3, "the engine sums the clipped gradients in one scan per iteration")
                gradients = EngineGradients(oracle, self.design, self.estimator.loss)
                self.estimator.fit_gradients(gradients, oracle.row_count(), dimension(self.design), noise.gaussian,
                                             self.coefficient_names)
            else:
                X, y, counts = weighted_design(oracle, self.design, "dp-iht", certified=False)
                if self.design.intercept:
                    X = np.column_stack([np.ones(len(X)), X])
                progress(1, 3, "encoded the distinct rows")
                self.estimator.fit(X, y, noise.gaussian, self.coefficient_names, sample_weight=counts)
        except EstimatorError as exc:  # after the noise: the charge stands (release marked failed_after_noise)
            raise MechanismError(f"dp-iht failed: {exc}") from None
        progress(2, 3, f"ran {self.calibration.iterations} noisy hard-thresholding iterations")
        fitted = np.asarray(self.estimator.coef_, dtype=float)  # [intercept?, *features]: the design's columns
        support = [int(i) for i in np.flatnonzero(fitted)]
        hessian, names = None, None
        if self.rho_curvature and support:
            scales, bounds = curvature.support_scales(self.design, support)
            self.curvature = curvature.calibrate_rho(bounds, self.rho_curvature, self.estimator.loss)
            G = self.calibration.clip_norm
            W = (gradients.curvature(fitted, G, support) if engine
                 else rows_curvature(X, y, counts, fitted, self.estimator.loss, G, support, scales))
            noisy = curvature.perturb(W, scales, self.curvature, noise)
            hessian = tuple(tuple(float(v) for v in row) for row in noisy)
            names = tuple(self.coefficient_names[i] for i in support)
            progress(3, 3, "perturbed the loss's curvature over the kept coefficients")
        theta = [float(c) for c in fitted]
        intercept = theta.pop(0) if self.design.intercept else None
        payload = ModelPayload(tuple(self.design.feature_names), tuple(theta), intercept, hessian, names,
                               float(self.estimator.normalizer_))
        return MechanismResult(self.cost, payload, self.public_details())
