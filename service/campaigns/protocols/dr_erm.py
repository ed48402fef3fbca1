"""``dr-erm``: DR-ERM-LDP (Wang, Gaboardi & Xu, NeurIPS 2018, Alg. 4; docs/privacy.md 8.9): a public random
projection, the projected statistics through the l2-ball randomizer, recovery over the l1 ball or the simplex.

Build: options ``rows`` (m, the projection's dimension, default 20), ``constraint`` (``l1`` or ``simplex``),
``radius`` (of C, default 1), ``feature_radius`` (the clip on ``||Phi x||``, default 1), ``label_bound`` (1),
``participants``; the projection's seed is drawn here (public, published). Pure epsilon (delta must be 0); the
features stay in their own units.

Estimate, model ``linear``: the mean report gives the projected statistics; projected least squares over ``Phi C``
and the recovery in ``C`` with cvxpy (:class:`estimators.local.sparse.dr_erm.DRERMLinearRegression`); a cvxpy
failure is the error ``solver_failed`` naming each solver's status.

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import math
import secrets

from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse.uncertainty import dr_erm_covariance
from service.campaigns.protocols.common import diameter, no_covariance, round0, solved, sparse_fit
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.dr_erm import MAX_SEED, DrErmSpec


def projection_seed() -> int:
    """A new campaign's public projection seed, drawn from the operating system (a test may fix it in-process)."""
    return secrets.randbelow(MAX_SEED)


def build(request: CampaignRequest) -> ProtocolSpec:
    options = request.options
    return DrErmSpec(dimension=len(request.features), rows=options["rows"], projection_seed=projection_seed(),
                     epsilon=request.epsilon, feature_radius=options["feature_radius"],
                     label_bound=options["label_bound"], constraint=options["constraint"], radius=options["radius"],
                     participants=options["participants"])


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    from estimators.local.sparse.dr_erm import DRERMLinearRegression

    spec = campaign.spec
    aggregate = round0(campaign, aggregates)
    estimator = DRERMLinearRegression(spec.constraint, spec.radius)
    projection, statistics = spec.projection(), aggregate.mean("statistics")
    solved(lambda: estimator.fit(statistics, projection), f"campaign {campaign.name!r}")
    details = {"rows": spec.rows, "projection_seed": spec.projection_seed, "constraint": spec.constraint,
               "radius": spec.radius}
    # C: the l1 ball of radius R (diameter 2R) or the probability simplex (diameter sqrt(2), whatever the radius)
    size, what = (2.0 * spec.radius, f"the l1 ball of radius {spec.radius:g}") if spec.constraint == "l1" else (
        math.sqrt(2.0), "the probability simplex")
    return sparse_fit(campaign, model, estimator.coef_, aggregate.count, details, (),
                      diameter(size, f"C, {what} (step 7 recovers w in C)"),
                      solved(lambda: dr_erm_covariance(
                          lambda mean: DRERMLinearRegression(spec.constraint, spec.radius).fit(mean, projection).coef_,
                          statistics, aggregate), f"campaign {campaign.name!r} (standard errors)"))
