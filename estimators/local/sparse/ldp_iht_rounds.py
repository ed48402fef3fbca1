"""LDP-IHT run by the collections service: the transition between rounds and the final estimate.

Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 1, steps 4-7:
when round ``t``'s group has reported, ``theta_{t+1} = Proj_{B_R}(Trunc(theta_t - eta g_t, s))`` with ``g_t`` the
mean of the round's reports (:func:`estimators.local.sparse.iht.iht_step`). ``theta_{t+1}`` is round ``t + 1``'s
public state (:func:`next_state`, the transition of the ``ldp-iht`` record in ``service/campaigns/protocols/``); the
step after the last round is the estimate (:func:`campaign_estimate`). Post-processing of the reports: no privacy
cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse.iht import iht_step
from workloads.local.protocols import RoundState
from workloads.local.protocols.ldp_iht import LdpIhtSpec


def step_from_round(spec: LdpIhtSpec, round_index: int, state: RoundState, aggregate: ReportAggregate) -> np.ndarray:
    """``theta_{t+1}`` from round ``t``'s published ``theta_t`` and the mean of its reports."""
    if aggregate.count == 0:
        raise EstimatorError(f"round {round_index} has no reports: its IHT step cannot be taken")
    theta = spec.theta(round_index, state)
    return iht_step(theta, aggregate.mean("gradient"), spec.eta, spec.sparsity, spec.radius)


def next_state(spec: LdpIhtSpec, completed_round: int, aggregates: Sequence[ReportAggregate]) -> RoundState:
    """Round ``completed_round + 1``'s state from the completed round's aggregate.

    The completed round's own ``theta`` is not in its aggregate; it is recomputed from round 0 by replaying the
    steps (each a deterministic function of the stored aggregates), so the transition needs nothing but them."""
    theta = spec.initial_state().values["theta"]
    state = spec.theta_state(0, theta)
    for index in range(completed_round + 1):
        theta = step_from_round(spec, index, state, aggregates[index])
        state = spec.theta_state(index + 1, theta)
    return state


def campaign_estimate(spec: LdpIhtSpec, states: Sequence[RoundState],
                      aggregates: Sequence[ReportAggregate | None]) -> tuple[np.ndarray, int]:
    """The estimate and the number of rounds it used: the step from the last round that has reports.

    ``states[t]`` is round ``t``'s published state (``None`` entries of ``aggregates``: rounds without reports, which
    must all come after the last round used). Raises :class:`EstimatorError` when no round has reports."""
    used = [t for t, aggregate in enumerate(aggregates) if aggregate is not None and aggregate.count > 0]
    if not used:
        raise EstimatorError("no round has reports yet")
    last = used[-1]
    if used != list(range(last + 1)):
        raise EstimatorError(f"rounds {sorted(set(range(last + 1)) - set(used))} have no reports but later ones do")
    return step_from_round(spec, last, states[last], aggregates[last]), last + 1
