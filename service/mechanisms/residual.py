"""The residual plan (ResidualPlanner): the optimal Gaussian plan for a marginal workload, charged exactly in zCDP.

Source: Xiao, He, Zhang & Kifer 2023, "An optimal and scalable matrix mechanism for noisy marginals under convex loss
functions" (NeurIPS 2023; ResidualPlanner+, arXiv:2305.08175). The math lives in ``estimators/residual``; this module
is the service's side of it:

* the plan for the request's workload (weights as given) and ``loss`` (``sum_var``, the default, or ``max_var``) at
  the charged ``rho`` (:func:`estimators.residual.planner.plan_residuals`), whose exact cost is checked equal to
  ``rho`` before anything is counted;
* the exact counts of the closure's maximal marginals from the count oracle (SQL), then one call of the service's
  secure :meth:`NoiseSource.gaussian` per residual (:func:`estimators.residual.measure.measure_residuals`);
* the result: the noisy residuals and their public noise scales (stored as the release's payload, so every answer
  carries its standard errors), the workload's unbiased marginals as measurements, and no graphical model -- one is
  fitted lazily when an answer needs it (docs/privacy.md, section 8.8).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from estimators.residual.basis import ResidualError
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import LOSSES, plan_residuals
from estimators.residual.reconstruct import NoisyResiduals
from service.mechanisms.base import CountOracle, MechanismError, Progress, no_progress
from service.privacy.cost import PrivacyCost
from service.privacy.noise import NoiseSource
from workloads.marginals import Query

__all__ = ["ResidualResult", "run_residual"]


class ResidualResult:
    """What a residual release produces: the noisy residuals (the payload), the cost and public details."""

    def __init__(self, residuals: NoisyResiduals, cost: PrivacyCost, details: dict[str, object]) -> None:
        self.residuals = residuals
        self.cost = cost
        self.details = details


def run_residual(
    oracle: CountOracle,
    workload: Sequence[Query],
    rho: Fraction,
    noise: NoiseSource,
    *,
    loss: str = "sum_var",
    progress: Progress = no_progress,
) -> ResidualResult:
    """Release ``workload`` by the residual plan at exactly ``rho`` (module docstring)."""
    if loss not in LOSSES:
        raise MechanismError(f"loss must be one of {list(LOSSES)}, got {loss!r}")
    if not workload:
        raise MechanismError("the workload is empty")
    domain = oracle.domain
    progress(0, 3, f"planning {len(workload)} marginals ({loss})")
    try:
        plan = plan_residuals(domain, [(q.attributes, float(q.weight)) for q in workload], rho, loss=loss)
    except ResidualError as exc:
        raise MechanismError(str(exc)) from None
    if plan.cost() != rho:
        raise AssertionError(f"residual plan costs {plan.cost()}, not the rho charged {rho}")
    progress(1, 3, f"measuring {len(plan.residuals)} residuals")
    residuals = measure_residuals(plan, lambda attrs: oracle.counts(tuple(attrs)), noise.gaussian)
    progress(3, 3, "measured")
    details = {
        "loss": loss,
        "solver": plan.solver,
        "residuals": len(plan.residuals),
        "closure_maximal": [list(c) for c in plan.maximal()],
        "rho_by_residual": {"×".join(r) or "total": str(plan.residual_cost(r)) for r in plan.residuals},
    }
    return ResidualResult(residuals, PrivacyCost(rho=rho), details)
