"""What the protocols' builders and fits share: reading the options several builders read alike, round 0's aggregate,
coefficients back on the features' own scale, and the answer of a sparse or low-dimensional model (the options
themselves are declared in :mod:`service.campaigns.protocols.catalog`).

Coefficients are returned on the scale of the features as participants hold them: the campaign's public transform
``x' = (x - center) / scale`` is undone, so ``score = <w / scale, x> - <w / scale, center>`` gives ``coefficients``
keyed by feature name and an ``(intercept)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence
from service.campaigns.options import OptionValues, invalid
from service.campaigns.types import CampaignFit, CampaignInfo
from service.errors import Conflict, InvalidInput, ServiceError


# ---------------------------------------------------------------------------------------------------------- building
def refuse_given(options: OptionValues, names: tuple[str, ...], why: str) -> None:
    """Refuse the first of ``names`` the request stated, ``why`` saying what it applies to: a declared option that
    this request's other settings leave without effect is an error, never silently ignored."""
    given = [name for name in names if name in options.given]
    if given:
        raise invalid(f"option {given[0]} {why}")


def default_steps(participants: int, dimension: int) -> int:
    """``T = ceil(ln(n / p))`` (Sec. 7.1 of Wang & Xu 2019), at least 1."""
    return max(1, math.ceil(math.log(participants / dimension)))


def sparsity(options: OptionValues, protocol: str, dimension: int) -> int:
    """The ``s`` hard thresholding keeps (:data:`~service.campaigns.protocols.catalog.SPARSITY`: required, at most the
    number of features)."""
    value = options["sparsity"]
    if value is None:
        raise invalid(f"{protocol} needs option sparsity (the s kept by hard thresholding)")
    if value > dimension:
        raise invalid(f"option sparsity must be at most the number of features p={dimension}, got {value}")
    return value


# ------------------------------------------------------------------------------------------------------- estimating
def round0(campaign: CampaignInfo, aggregates: list[ReportAggregate | None]) -> ReportAggregate:
    """Round 0's aggregate, or the 409 ``no_reports`` before its first report."""
    first = aggregates[0]
    if first is None or first.count == 0:
        raise Conflict(f"campaign {campaign.name!r} has no reports yet: nothing to estimate", code="no_reports")
    return first


def raw_scale(campaign: CampaignInfo, coef: np.ndarray, intercept: float = 0.0) -> dict[str, float]:
    """Coefficients for the features as participants hold them, and the intercept: the model's own (``intercept``,
    on the transformed features; 0 for a model without one) plus what the transform implies."""
    scale = np.asarray(campaign.transform.scale)
    center = np.asarray(campaign.transform.center)
    raw = np.asarray(coef, dtype=float) / scale
    out = {name: float(v) for name, v in zip(campaign.features, raw, strict=True)}
    out["(intercept)"] = float(intercept - (raw @ center)) + 0.0  # + 0.0: no "-0.0" when nothing was centred
    return out


def raw_standard_errors(campaign: CampaignInfo, covariance: np.ndarray, intercept: bool = False) -> dict[str, float]:
    """Standard errors of :func:`raw_scale`'s coefficients from the covariance of ``coef`` (devices' units):
    ``raw = coef / scale`` has covariance ``Cov / (scale scale^T)``, the intercept ``-<raw, center>`` the variance
    ``center^T Cov_raw center`` (docs/campaigns.md, "Standard errors"). ``intercept=True``: ``covariance`` is that of
    ``(b, coef)`` (the model's own intercept first), and the raw intercept ``b - <raw, center>`` is the linear map's."""
    inverse = 1.0 / np.asarray(campaign.transform.scale, dtype=float)
    center = np.asarray(campaign.transform.center, dtype=float)
    matrix = np.asarray(covariance, dtype=float)
    if not intercept:
        matrix = np.pad(matrix, ((1, 0), (1, 0)))  # a model without an intercept: b = 0, no variance
    to_raw = np.zeros_like(matrix)
    to_raw[0, 0] = 1.0
    to_raw[0, 1:] = -center * inverse
    to_raw[1:, 1:] = np.diag(inverse)
    errors = np.sqrt(np.clip(np.diag(to_raw @ matrix @ to_raw.T), 0.0, None))
    out = {name: float(v) for name, v in zip(campaign.features, errors[1:], strict=True)}
    out["(intercept)"] = float(errors[0])
    return out


def transform_influence(campaign: CampaignInfo, influence: Influence) -> Influence:
    """The bound in the features' own units: ``raw = coef / scale`` moves by at most ``1 / min |scale|`` times the
    coefficients, and the intercept ``-<raw, center>`` by that times ``||center||``."""
    scale = np.abs(np.asarray(campaign.transform.scale, dtype=float))
    center = float(np.linalg.norm(np.asarray(campaign.transform.center, dtype=float)))
    return influence.scaled(1.0 / float(scale.min()), center)


def raw_influence(campaign: CampaignInfo, influence: Influence) -> Influence:
    """``influence`` in the features' own units (an influence without a bound stays as it is)."""
    return influence if influence.per_report is None else transform_influence(campaign, influence)


def transform_notes(campaign: CampaignInfo) -> tuple[str, ...]:
    """The note a fit carries when devices centred and scaled the features."""
    if campaign.transform.source == "identity":
        return ()
    return (f"features were centred and scaled on the devices ({campaign.transform.source}); the coefficients here "
            "are on the features' own scale",)


def no_covariance(campaign: CampaignInfo, covariance: str | None) -> None:
    """Refuse the ``covariance`` choice, which only the Stein GLM campaigns have."""
    if covariance is not None:
        raise InvalidInput(f"covariance applies to the Stein GLM campaigns, not to campaign {campaign.name!r} "
                           f"({campaign.protocol})", code="invalid_parameter")


def diameter(radius: float, what: str) -> Influence:
    """The bound of an estimate confined to a set of l2 diameter ``radius``: one report can move it across the set."""
    return Influence(radius, "l2", "coefficients", f"the estimate lies in {what}; no smaller bound is derived "
                     "(hard thresholding and a minimiser over the set are not Lipschitz in the reports)")


def sparse_fit(campaign: CampaignInfo, model: str, coef: np.ndarray, reports: int, details: dict[str, Any],
               notes: tuple[str, ...], influence: Influence, covariance: np.ndarray | None = None) -> CampaignFit:
    """The answer of a sparse or low-dimensional regressor, with its ``support`` and the standard errors from
    ``covariance`` (conditional on the support: :mod:`estimators.local.sparse.uncertainty`)."""
    # the support: entries above 1e-6 of the largest (IHT's are exact zeros; an interior-point Lasso leaves ~1e-8)
    floor = 1e-6 * float(np.max(np.abs(coef), initial=0.0))
    support = [name for name, value in zip(campaign.features, coef, strict=True) if abs(value) > floor]
    return CampaignFit(campaign.name, campaign.protocol, model, "regressor", campaign.target, campaign.features,
                       raw_scale(campaign, coef), reports,
                       {**details, "support": support, "transform": campaign.transform.to_json()},
                       (*notes, *transform_notes(campaign)), raw_influence(campaign, influence),
                       standard_errors=None if covariance is None else raw_standard_errors(campaign, covariance))


def solved(solve: Any, what: str) -> Any:
    """``solve()``, a cvxpy failure becoming the error ``solver_failed`` that names each solver's status."""
    from estimators.local.sparse.convex import ConvexSolverError  # cvxpy loads in seconds: only when needed

    try:
        return solve()
    except ConvexSolverError as error:
        raise ServiceError(f"{what}: {error}", code="solver_failed", status=422) from None
