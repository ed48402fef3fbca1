"""``ldp-iht``: LDP-IHT (Wang & Xu, ICML 2019, Alg. 1; docs/privacy.md 8.9): ``T`` rounds, one disjoint group each,
a participant's gradient through the l2-ball randomizer at the published ``theta_t``.

Build: ``--target Y --epsilon E --option sparsity=S [--option rounds=T] [--option participants=N]
[--option variant=default|paper]``. ``eta`` defaults to 1 (features on a unit scale give ``E[x x^T] = I``, for which a
unit step is the natural one; Sec. 7.1 states 0.1 or 0.2, see docs/sparse-results.md). Options ``label_bound``
(default 1), ``radius`` ``R`` (default 1), ``feature_norm_bound`` ``r_x`` (default ``sqrt(p)``, the norm of a point of
``{-1, +1}^p``). Two sets of defaults for ``rounds`` and ``residual_bound`` (docs/privacy.md §8.9, issue 20):

* ``variant=default``: ``T = 1`` and ``c = min(label_bound, 2 R r_x / sqrt(p))``
  (:func:`~workloads.local.randomizers.iht_gradient.default_residual_bound`). On an isotropic design with the unit
  step (``eta E[x x^T] = I``) one full-gradient step from 0 is ``Trunc(theta* + noise)``: further rounds gain no
  optimisation and split the participants into ``T`` groups, multiplying each step's noise by ``sqrt(T)``. About
  ``6,000 p`` participants give a relative error near 0.2 at epsilon 1 (docs/sparse-results.md).
* ``variant=paper`` (Sec. 7.1's reproduction): ``T = ceil(ln(N / p))`` (at least 1; needs ``participants``) and the
  worst case ``c = sqrt(s) R + label_bound``, which never binds for features in ``[-1, 1]``.

Explicit ``rounds=`` / ``residual_bound=`` override either. ``randomizer=l2ball`` (default: the l2-ball report of the
whole gradient) or ``randomizer=coordinate`` (issue 20: one uniformly drawn coordinate through the one-dimensional
randomizer, scaled by ``p``; docs/privacy.md §8.9 (h)), with ``feature_bound`` the public bound on ``|x_j|`` (default
``r_x / sqrt(p)``, 1 on ``{-1, +1}^p``; a larger entry's gradient is clipped). Pure epsilon (delta must be 0).
Every setting is fixed here (a stored campaign keeps the values it was created with), so a bad one (``s > p``,
``T < 1``, ``eta <= 0``) is an error naming the option before any report is collected.

Transition: round ``t + 1``'s ``theta`` is the IHT step from round ``t``'s mean gradient
(:func:`estimators.local.sparse.ldp_iht_rounds.next_state`). Estimate: model ``iht``, the IHT step from the last
round with reports, taken at that round's published ``theta`` (a campaign still running gives the estimate after
the rounds done so far, ``details.rounds_used``).

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import math

from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse import ldp_iht_rounds
from estimators.local.sparse.uncertainty import iht_step_covariance
from service.campaigns.options import invalid
from service.campaigns.protocols.common import (
    default_steps,
    diameter,
    no_covariance,
    refuse_given,
    round0,
    sparse_fit,
    sparsity,
)
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.ldp_iht import LdpIhtSpec
from workloads.local.randomizers.iht_gradient import default_residual_bound, worst_case_residual_bound


def build(request: CampaignRequest) -> ProtocolSpec:
    options = request.options
    p = len(request.features)
    s = sparsity(options, "ldp-iht", p)
    participants = options["participants"]
    paper = options["variant"] == "paper"
    steps = options["rounds"]
    if steps is None and not paper:
        steps = 1
    if steps is None:
        if participants is None:
            raise invalid("ldp-iht variant=paper needs option rounds (T) or option participants (T = ceil(ln(n / p)))")
        steps = default_steps(participants, p)
    radius, label_bound = options["radius"], options["label_bound"]
    feature_norm_bound = options["feature_norm_bound"] or math.sqrt(p)
    residual_bound = options["residual_bound"] or (
        worst_case_residual_bound(s, radius, label_bound) if paper
        else default_residual_bound(label_bound, radius, feature_norm_bound, p))
    randomizer = options["randomizer"]
    feature_bound = None
    if randomizer == "coordinate":
        feature_bound = options["feature_bound"] or feature_norm_bound / math.sqrt(p)
    else:
        refuse_given(options, ("feature_bound",), f"applies to randomizer=coordinate, not to randomizer={randomizer}")
    return LdpIhtSpec(dimension=p, sparsity=s, steps=steps, eta=options["eta"],
                      epsilon=request.epsilon, residual_bound=residual_bound,
                      feature_norm_bound=feature_norm_bound, radius=radius,
                      participants=participants, randomizer=randomizer, feature_bound=feature_bound)


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    spec = campaign.spec
    round0(campaign, aggregates)
    states = [None if r.state is None else campaign.round_state(r.index) for r in campaign.rounds]
    coef, used = ldp_iht_rounds.campaign_estimate(spec, states, aggregates)
    reports = sum(a.count for a in aggregates[:used] if a is not None)
    notes = () if used == spec.steps else (f"the estimate after {used} of the {spec.steps} rounds",)
    return sparse_fit(campaign, model, coef, reports,
                      {"rounds_used": used, "rounds": spec.steps, "sparsity": spec.sparsity, "eta": spec.eta},
                      notes, diameter(2.0 * spec.radius, f"the l2 ball of radius R = {spec.radius:g} (Alg. 1 "
                                      "projects every iterate onto it)"),
                      iht_step_covariance(spec.theta(used - 1, states[used - 1]), aggregates[used - 1], spec.eta,
                                          spec.radius, coef))
