"""The residual plan (ResidualPlanner): the optimal Gaussian plan for a marginal workload, charged exactly in zCDP.

Source: Xiao, He, Zhang & Kifer 2023, "An optimal and scalable matrix mechanism for noisy marginals under convex loss
functions" (NeurIPS 2023; ResidualPlanner+, arXiv:2305.08175). The math lives in ``estimators/residual``; this module
is the service's side of it:

* the plan for the request's workload (weights as given) and ``loss`` (``sum_var``, the default, ``max_var`` or
  ``max_var_floor``) at the charged ``rho`` (:func:`estimators.residual.planner.plan_residuals`), whose exact cost is
  checked equal to ``rho`` before anything is counted. With ``regression`` (a design, as :meth:`DesignEncoding.to_dict`
  writes it; set by ``fit --method dd-ssp``), the loss is instead the summed variance of the entries of that design's
  ``Z^T Z`` (Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient Statistic Perturbation", Prop.
  3.2), the ``X^T y`` entries weighted up (:func:`estimators.residual.regression_queries.regression_plan`);
* the exact counts of the closure's maximal marginals from the count oracle (SQL), then one call of the service's
  secure :meth:`NoiseSource.gaussian` per residual (:func:`estimators.residual.measure.measure_residuals`);
* the result: the noisy residuals and their public noise scales (the release's payload, so every answer carries its
  standard errors), and no graphical model -- one is fitted lazily when an answer needs it (docs/privacy.md,
  section 8.8; :mod:`service.releases.stored_models`).

The plan is data-independent, so the error of every answer is known before the release: :func:`forecast_residual`
(the registry's ``forecast``, read by a dry run) makes the very plan the release would make and reads each workload
marginal's cell variance from it (the paper's closed form; every cell is exactly Gaussian).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from estimators.residual.accuracy import MarginalForecast, gaussian_cell_error
from estimators.residual.basis import ResidualError
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import LOSSES, ResidualPlan, plan_residuals
from estimators.residual.regression_queries import DEFAULT_TARGET_WEIGHT, regression_plan
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.payloads import MarginalsPayload
from service.mechanisms.selection import CachedCounts
from service.privacy.cost import PrivacyCost
from service.privacy.noise import NoiseSource
from workloads.domain import Domain
from workloads.encodings import DesignEncoding, EncodingError
from workloads.marginals import Query

__all__ = ["check_loss", "forecast_residual", "run_residual"]


def check_loss(loss: object) -> str:
    """``loss`` if it is one the planner knows (a :class:`MechanismError` naming the choices otherwise)."""
    if loss not in LOSSES:
        raise MechanismError(f"loss must be one of {list(LOSSES)}, got {loss!r}")
    return str(loss)


def _plan(domain: Domain, workload: Sequence[Query], rho: Fraction, loss: str,
          regression: Mapping[str, object] | None) -> ResidualPlan:
    try:
        if regression is None:
            return plan_residuals(domain, [(q.attributes, float(q.weight)) for q in workload], rho, loss=loss)
        if not isinstance(regression, Mapping):
            raise MechanismError(f"regression must be a design description, got {type(regression).__name__}")
        design = DesignEncoding.from_dict(domain, regression)
        return regression_plan(design, rho)
    except (ResidualError, EncodingError) as exc:
        raise MechanismError(str(exc)) from None


def run_residual(
    oracle: CountOracle,
    workload: Sequence[Query],
    rho: Fraction,
    noise: NoiseSource,
    *,
    loss: str = "sum_var",
    regression: Mapping[str, object] | None = None,
    progress: Progress = no_progress,
) -> MechanismResult:
    """Release ``workload`` by the residual plan at exactly ``rho`` (module docstring)."""
    loss = check_loss(loss)
    if not workload:
        raise MechanismError("the workload is empty")
    domain = oracle.domain
    progress(0, 3, f"planning {len(workload)} marginals ({'regression' if regression is not None else loss})")
    plan = _plan(domain, workload, rho, loss, regression)
    if plan.cost() != rho:
        raise AssertionError(f"residual plan costs {plan.cost()}, not the rho charged {rho}")
    progress(1, 3, f"counting {len(plan.maximal())} marginals, measuring {len(plan.residuals)} residuals")
    counts = CachedCounts(oracle)
    counts.prefetch(plan.maximal())  # one batched count in SQL
    residuals = measure_residuals(plan, counts.counts, noise.gaussian)
    progress(3, 3, "measured")
    details = {
        "loss": "regression" if regression is not None else loss,
        "solver": plan.solver,
        "residuals": len(plan.residuals),
        "closure_maximal": [list(c) for c in plan.maximal()],
        "rho_by_residual": {"×".join(r) or "total": str(plan.residual_cost(r)) for r in plan.residuals},
    }
    if regression is not None:
        details["regression_target_weight"] = DEFAULT_TARGET_WEIGHT
    return MechanismResult(PrivacyCost(rho=rho), MarginalsPayload(residuals=residuals), details)


#: What a residual release's forecast rests on (:mod:`estimators.residual.accuracy`).
RESIDUAL_BASIS = ("the residual plan's variances (Xiao, He, Zhang & Kifer 2023, the closed form of a marginal's cell "
                  "variance): continuous Gaussian noise on every residual, so each cell's error is exactly Gaussian "
                  "and E|error| = standard error * sqrt(2/pi)")


def forecast_residual(domain: Domain, workload: Sequence[Query], rho: Fraction, *, loss: str = "sum_var",
                      regression: Mapping[str, object] | None = None) -> MarginalForecast:
    """The closed-form error of every workload marginal of a ``residual`` release at ``rho`` with these options:
    the plan the release would make (the same :func:`_plan`), before anything is counted."""
    plan = _plan(domain, workload, rho, check_loss(loss), regression)
    errors = tuple(gaussian_cell_error(domain, q.attributes, plan.cell_variance(q.attributes)) for q in workload)
    return MarginalForecast(RESIDUAL_BASIS, errors, plan.cell_variance(()))
