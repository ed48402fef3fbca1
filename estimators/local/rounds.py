"""Round transitions of multi-round protocols, found by protocol name: round ``t + 1``'s public state from round
``t``'s aggregate (and earlier ones). A one-round protocol has no entry. LDP-IHT (T rounds) has its own here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.glm import two_round
from estimators.local.sparse import ldp_iht_rounds
from workloads.local.protocols import ProtocolSpec, RoundState

NextState = Callable[[ProtocolSpec, int, Sequence[ReportAggregate]], RoundState]

#: protocol name -> ``next_state(spec, completed_round, aggregates of rounds 0..completed_round)``
TRANSITIONS: dict[str, NextState] = {
    "stein-glm-2round": two_round.next_state,  # type: ignore[dict-item]
    "ldp-iht": ldp_iht_rounds.next_state,  # type: ignore[dict-item]
}


def next_state(spec: ProtocolSpec, completed_round: int, aggregates: Sequence[ReportAggregate]) -> RoundState:
    """The public state of round ``completed_round + 1``."""
    spec.round(completed_round)
    if completed_round + 1 >= spec.round_count or spec.protocol not in TRANSITIONS:
        raise EstimatorError(f"{spec.protocol!r} has no round after round {completed_round}")
    if len(aggregates) != completed_round + 1:
        raise EstimatorError(f"pass the aggregates of rounds 0..{completed_round}, got {len(aggregates)}")
    state = TRANSITIONS[spec.protocol](spec, completed_round, aggregates)
    spec.report_schema(completed_round + 1, state)  # the new state must give a valid schema
    return state
