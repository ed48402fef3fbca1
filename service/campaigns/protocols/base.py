"""The registry record of a campaign protocol, and the three things the service does with it by name: build a spec
from a steward's request (:func:`build_spec`), compute a round's public state from the earlier rounds' aggregates
(:func:`next_state`), and (in :mod:`service.campaigns.estimates`) answer a model from the stored aggregates.

A protocol is one :class:`CampaignProtocol`, registered by its module of :mod:`service.campaigns.protocols` with
:func:`register`. The record holds every part the service needs, so nothing else is keyed by the protocol's name:

* ``spec``: the public spec class of :mod:`workloads.local.protocols` (its ``randomize`` is what devices run);
* ``build(request) -> spec``: checks the request's options and returns the spec, every error naming the option;
* ``transition(spec, completed_round, aggregates) -> RoundState``: the next round's public state (``None`` for a
  one-round protocol);
* ``models`` and ``fit(engine, campaign, aggregates, model, covariance) -> CampaignFit``: what the campaign answers;
* ``target`` (``"required"`` or ``"none"``), ``transform`` (whether devices centre and scale the features: the Stein
  GLMs, whose lemma wants zero-mean features; not LDP-AVG or the Bernstein and DR-ERM protocols, whose bounds are
  stated in the features' own units) and a one-line ``summary`` with the options;
* ``plan(spec, public_rows, public_labels) -> ErrorModel`` (optional): the closed-form error model ``campaign plan``
  predicts from (:mod:`estimators.local.planning`; ``public_rows`` the public table's transformed feature columns or
  ``None``, ``public_labels`` its target column if it holds one). A protocol without it answers "no planner".
  Adding one is one argument of the record, e.g. ``plan=lambda spec, rows, labels: ErrorModel(lambda n:
  expected_covariance(spec, rows, n), reference, source, metric)``.

``tests/service/campaigns/test_protocol_contract.py`` checks every protocol of
:data:`workloads.local.protocols.PROTOCOLS` has a complete record, a row in docs/campaigns.md, a privacy section in
docs/privacy.md and a fit in the API's role test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.planning import ErrorModel
from service.campaigns.options import invalid
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import InvalidInput
from workloads.local.protocols import ProtocolError, ProtocolSpec, RoundState
from workloads.parameters import ParameterError

#: ``next_state(spec, completed_round, aggregates of rounds 0..completed_round)``
Transition = Callable[[ProtocolSpec, int, Sequence[ReportAggregate]], RoundState]
#: ``fit(engine, campaign, aggregates, model, covariance)``: reads only the rounds' aggregates (``None`` for a round
#: without reports) and public rows
Fit = Callable[[Engine, CampaignInfo, list[ReportAggregate | None], str, str | None], CampaignFit]
#: ``plan(spec, public_rows, public_labels)``: the protocol's error model before any report (``None`` arguments: no
#: public table, or no target column in it)
Planner = Callable[[ProtocolSpec, np.ndarray | None, np.ndarray | None], ErrorModel]


@dataclass(frozen=True)
class CampaignProtocol:
    """Everything the service knows of one protocol (see the module docstring)."""

    name: str
    spec: type[ProtocolSpec]
    build: Callable[[CampaignRequest], ProtocolSpec]
    transition: Transition | None
    models: tuple[str, ...]
    fit: Fit
    target: str
    summary: str
    transform: bool = True
    plan: Planner | None = None

    def __post_init__(self) -> None:
        if self.spec.protocol != self.name:
            raise ValueError(f"protocol {self.name!r}: its spec class {self.spec.__name__} is of "
                             f"{self.spec.protocol!r}")
        if self.target not in ("required", "none"):
            raise ValueError(f"protocol {self.name!r}: target must be 'required' or 'none', got {self.target!r}")


#: protocol name -> its record; a protocol joins with :func:`register` in its own module of this package
CAMPAIGN_PROTOCOLS: dict[str, CampaignProtocol] = {}


def register(protocol: CampaignProtocol) -> CampaignProtocol:
    if protocol.name in CAMPAIGN_PROTOCOLS:
        raise ValueError(f"protocol {protocol.name!r} is registered already")
    CAMPAIGN_PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(protocol: object) -> CampaignProtocol:
    if not isinstance(protocol, str) or protocol not in CAMPAIGN_PROTOCOLS:
        raise InvalidInput(f"unknown protocol {protocol!r} (known: {sorted(CAMPAIGN_PROTOCOLS)})",
                           code="unknown_protocol")
    return CAMPAIGN_PROTOCOLS[protocol]


def build_spec(protocol: str, request: CampaignRequest) -> ProtocolSpec:
    """The spec of ``protocol`` for ``request``, or :class:`InvalidInput` naming the parameter at fault.

    ``epsilon`` and ``delta`` are what one participant spends over the whole campaign: a protocol whose participants
    report in several rounds splits them (Alg. 5: half per round)."""
    record = get_protocol(protocol)
    if record.target == "required" and request.target is None:
        raise invalid(f"protocol {protocol!r} needs a target (the label participants hold)")
    if record.target == "none" and request.target is not None:
        raise invalid(f"protocol {protocol!r} takes no target, got {request.target!r}")
    dimension = request.options.count("dimension")
    try:
        spec = record.build(request)
    except (ProtocolError, ParameterError, EstimatorError) as error:
        raise invalid(f"protocol {protocol!r}: {error}") from None
    if dimension is not None and dimension != spec.dimension:
        raise invalid(f"dimension mismatch: option dimension={dimension}, but the {len(request.features)} features "
                      f"{list(request.features)} give dimension {spec.dimension}")
    request.options.check_all_used(protocol)
    return spec


def next_state(spec: ProtocolSpec, completed_round: int, aggregates: Sequence[ReportAggregate]) -> RoundState:
    """The public state of round ``completed_round + 1``, by the protocol's transition; an
    :class:`~estimators.base.EstimatorError` when there is no such round or the aggregates do not fit."""
    spec.round(completed_round)
    transition = get_protocol(spec.protocol).transition
    if completed_round + 1 >= spec.round_count or transition is None:
        raise EstimatorError(f"{spec.protocol!r} has no round after round {completed_round}")
    if len(aggregates) != completed_round + 1:
        raise EstimatorError(f"pass the aggregates of rounds 0..{completed_round}, got {len(aggregates)}")
    state = transition(spec, completed_round, aggregates)
    spec.report_schema(completed_round + 1, state)  # the new state must give a valid schema
    return state
