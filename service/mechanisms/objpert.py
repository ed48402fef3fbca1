"""The objective-perturbation release: a logistic regression model whose payload is the model itself.

Kifer, Smith & Thakurta 2012 ("Private convex empirical risk minimization and high-dimensional regression",
COLT, Thm. 2), as restated in paper 002, App. C, Alg. 3: with ``||x|| <= ||X||`` for every encoded row (intercept
included, Prop. 3.1), ``Delta = ||X||^2 / (2 eps)`` and ``b ~ N(0, ||X||^2 (8 log(2/delta) + 4 eps) / eps^2 I)``, the
exact minimiser of ``sum_i log(1 + exp(-y_i x_i.theta)) + Delta/2 ||theta||^2 + b.theta`` is (eps, delta)-DP
under add/remove-one neighbours. The conditions of the theorem and why the logistic loss meets them are in
docs/privacy.md, section 8.6; the calibration and the solver live in
:mod:`estimators.objpert` and :class:`estimators.logistic.ObjPertLogisticRegression`.

This is the one mechanism of the service that reads rows (:meth:`service.oracle.SqlCountOracle.rows`): the
optimisation needs them. They stay inside the runner; only the fitted coefficients leave, in the payload.
The charge is (eps, delta) itself (approximate DP), not a zCDP rho.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.base import EstimatorError
from estimators.logistic import ObjPertLogisticRegression
from estimators.objpert import objpert_noise_scale, objpert_regularization
from service.cost import PrivacyCost
from service.mechanisms.base import MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.gram import float_down
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.noise import NoiseSource
    from service.oracle import SqlCountOracle


@dataclass(frozen=True)
class ModelPayload:
    """A released linear model: ``score(x) = intercept + sum_j coef[j] x_j`` over the named encoded columns."""

    feature_names: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float | None  # None: fitted without an intercept

    def to_bytes(self) -> bytes:
        body = {"feature_names": list(self.feature_names), "coef": list(self.coef), "intercept": self.intercept}
        return json.dumps({"format": 1, **body}).encode()

    @classmethod
    def from_bytes(cls, payload: bytes) -> ModelPayload:
        data = json.loads(payload.decode())
        return cls(tuple(data["feature_names"]), tuple(float(c) for c in data["coef"]), data["intercept"])


class ObjPertRelease:
    """A release runner for :func:`service.releases.run_release` (``runner=release, encode_payload=release.encode``).

    ``design`` must be a logistic design (target in ``{-1, +1}``); ``epsilon`` and ``delta`` (exact, ``delta > 0``)
    are the charge. The noise scale and ``Delta`` use floats rounded *down* from the exact values, so the noise is
    never smaller than the charge requires.
    """

    def __init__(
        self, design: DesignEncoding, epsilon: Fraction, delta: Fraction, *, tol: float = 1e-9, max_iter: int = 500
    ) -> None:
        if design.task != "logistic":
            raise MechanismError("objective perturbation is implemented for logistic regression only")
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        if epsilon <= 0 or not 0 < delta < 1:
            raise MechanismError(f"objective perturbation needs epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
        self.design = design
        self.cost = PrivacyCost(epsilon=epsilon, delta=delta)
        self.epsilon = float_down(epsilon)
        self.delta = float_down(delta)
        self.row_norm_bound = design.feature_norm_bound()
        self.noise_std = objpert_noise_scale(self.epsilon, self.delta, self.row_norm_bound)
        self.dimension = design.n_features + int(design.intercept)
        self.tol = tol
        self.max_iter = max_iter
        self.payload: ModelPayload | None = None

    @property
    def attributes(self) -> Sequence[str]:
        return (*self.design.features, self.design.target)

    def __call__(self, oracle: SqlCountOracle, noise: NoiseSource, progress: Progress = no_progress) -> MechanismResult:
        codes = oracle.rows(self.attributes)
        if len(codes) == 0:
            raise MechanismError("the dataset has no rows")
        X, y = self.design.encode({name: codes[:, i] for i, name in enumerate(self.attributes)})
        del codes
        progress(1, 3, f"encoded {len(y):,} rows")
        b = np.asarray(noise.gaussian(self.noise_std, self.dimension), dtype=float)
        model = ObjPertLogisticRegression(self.epsilon, self.delta, self.row_norm_bound,
                                          fit_intercept=self.design.intercept, tol=self.tol, max_iter=self.max_iter)
        try:
            model.fit(X, y, b, self.design.feature_names)
        except EstimatorError as exc:  # after the noise: the charge stands (release marked failed_after_noise)
            raise MechanismError(f"objective perturbation failed: {exc}") from None
        progress(3, 3, "minimised the perturbed objective")
        self.payload = ModelPayload(tuple(self.design.feature_names), tuple(float(c) for c in model.coef_),
                                    float(model.intercept_) if self.design.intercept else None)
        details = {
            "row_norm_bound": self.row_norm_bound,
            "noise_std": self.noise_std,
            "regularization": objpert_regularization(self.epsilon, self.row_norm_bound),
            "converged": model.converged_,
            "gradient_norm": model.gradient_norm_,
            "iterations": model.n_iter_,
        }
        return MechanismResult([], None, self.cost, details)  # type: ignore[arg-type]

    def encode(self, result: MechanismResult) -> bytes:  # noqa: ARG002 - the payload is kept on the runner
        if self.payload is None:
            raise RuntimeError("the objective-perturbation release has not run")
        return self.payload.to_bytes()
