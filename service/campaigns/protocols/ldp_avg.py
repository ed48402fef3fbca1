"""``ldp-avg``: one bounded number per participant, Laplace noise, the mean (1-dim LDP-AVG, Wang, Gaboardi & Xu
2018, Alg. 1; docs/privacy.md 8.7.1).

Build: one feature, no target, pure epsilon (``delta`` 0); ``lower``/``upper`` stated or taken from the ``--public``
table's column; the values stay in their own units (no transform). Estimate: model ``mean``, the average of the
reports (:class:`estimators.local.ldp_avg.LdpAverage`) projected onto ``[lower, upper]``. Plan: its closed form
(:func:`estimators.local.ldp_avg.ldp_avg_error_model`), which the record names directly.

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.ldp_avg import LdpAverage
from service.campaigns.options import invalid
from service.campaigns.protocols.common import round0
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from workloads.local.protocols import LdpAverageSpec, ProtocolSpec


def build(request: CampaignRequest) -> ProtocolSpec:
    if len(request.features) != 1:
        raise invalid(f"dimension mismatch: ldp-avg averages one feature, got {len(request.features)}: "
                      f"{list(request.features)}")
    options = request.options
    public = request.public_rows
    lower, upper = options["lower"], options["upper"]
    if public is not None:
        lower = float(public[:, 0].min()) if lower is None else lower
        upper = float(public[:, 0].max()) if upper is None else upper
    if lower is None or upper is None:
        raise invalid("ldp-avg needs the public bounds of the value: options lower and upper (or a public table, "
                      "parameter public, to take them from)")
    if not lower < upper:
        raise invalid(f"option lower must be below upper, got lower={lower}, upper={upper}")
    return LdpAverageSpec(lower=lower, upper=upper, epsilon=request.epsilon, participants=options["participants"])


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    spec = campaign.spec
    fitted = LdpAverage().fit(round0(campaign, aggregates), spec)
    scale, center = campaign.transform.scale[0], campaign.transform.center[0]
    feature = campaign.features[0]
    details = {"std_error": fitted.std_error_ * scale, "noise_std_error": fitted.noise_std_error_ * scale,
               "lower": spec.lower * scale + center, "upper": spec.upper * scale + center,
               "raw_mean": fitted.raw_mean_ * scale + center}
    return CampaignFit(campaign.name, campaign.protocol, "mean", "mean", None, (feature,),
                       {feature: fitted.mean_ * scale + center}, fitted.n_reports_, details,
                       ("the average of the participants' values clipped to [lower, upper], projected onto [lower, "
                        "upper]",), fitted.influence_.scaled(abs(scale)),
                       standard_errors={feature: max(fitted.std_error_, fitted.noise_std_error_) * abs(scale)})
