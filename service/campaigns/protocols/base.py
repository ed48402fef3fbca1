"""The registry record of a campaign protocol, and the three things the service does with it by name: build a spec
from a steward's request (:func:`build_spec`), compute a round's public state from the earlier rounds' aggregates
(:func:`next_state`), and (in :mod:`service.campaigns.estimates`) answer a model from the stored aggregates.

A protocol is one :class:`CampaignProtocol`, registered by :mod:`service.campaigns.protocols.catalog` with
:func:`register`. The record holds every part the service needs, so nothing else is keyed by the protocol's name.
It is the protocol's **declaration**, what the command line, the API schema and the docs read without running it:

* ``spec``: the public spec class of :mod:`workloads.local.protocols` (its ``randomize`` is what devices run);
* ``options``: the options it takes, declared once (:class:`~service.options.OptionSpec`): :func:`build_spec` checks
  a request's options against them and fills in their defaults before the builder runs, and the command line's flags
  of ``campaign create`` and ``campaign plan``, the API's description of ``options`` and the options table of
  docs/campaigns.md are made from them. Every record also takes :data:`CAMPAIGN_OPTIONS` (``dimension``) and, with
  a transform, :data:`TRANSFORM_OPTIONS` (``standardize``, ``feature_bounds``): :attr:`CampaignProtocol.declared`;
* ``pure`` (a pure epsilon-LDP protocol, whose spec has no ``delta``): why, for the refusal of a ``delta``
  (:func:`build_spec` refuses it once, for all of them);
* ``models``: what a campaign answers (none for a protocol with ``marginals``, which answers every marginal and
  synthetic rows instead: :mod:`service.campaigns.marginal_answers`); ``target`` (``"required"`` or ``"none"``),
  ``transform`` (whether devices centre and scale the features: the Stein GLMs, whose lemma wants zero-mean features;
  not LDP-AVG or the Bernstein and DR-ERM protocols, whose bounds are stated in the features' own units) and a
  one-line ``summary``.

and the **functions that run it**, each named by where it lives (:class:`Deferred`, imported when first called: the
builders and estimators load pandas, scipy, SQLAlchemy and cvxpy, which listing the protocols' options must not):

* ``build(request) -> spec``: the spec from the request, whose ``options`` are the checked, defaulted values
  (:class:`~service.campaigns.options.OptionValues`: reading an undeclared one is an error); what the declaration
  or the spec checks, the builder does not check again, and every error it raises names the option;
* ``transition(spec, completed_round, aggregates) -> RoundState``: the next round's public state (``None`` for a
  one-round protocol);
* ``fit(engine, campaign, aggregates, model, covariance) -> CampaignFit``: the answer of one of its ``models``;
* ``plan(spec, public_rows, public_labels) -> ErrorModel`` (optional): the closed-form error model ``campaign plan``
  predicts from (:mod:`estimators.local.planning`; ``public_rows`` the public table's transformed feature columns or
  ``None``, ``public_labels`` its target column if it holds one). A protocol without it answers "no planner".
  Adding one is one argument of the record, ``plan=Deferred("module:function")``, the function returning e.g.
  ``ErrorModel(lambda n: expected_covariance(spec, rows, n), reference, source, metric)``.

``tests/service/campaigns/test_protocol_contract.py`` checks every protocol of
:data:`workloads.local.protocols.PROTOCOLS` has a complete record (every deferred function found), a row in
docs/campaigns.md, a privacy section in docs/privacy.md and a fit in the API's role test; ``tests/service/cli/
test_cli_imports.py`` that reading the records loads none of the numerical libraries.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.campaigns.options import OptionValues, check_options, invalid
from service.errors import InvalidInput
from service.options import OptionSpec
from workloads.local.protocols import ProtocolError, ProtocolSpec, RoundState
from workloads.parameters import ParameterError
from workloads.registry import Registry

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy import Engine

    from estimators.local.aggregate import ReportAggregate
    from estimators.local.planning import ErrorModel
    from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest

    #: ``next_state(spec, completed_round, aggregates of rounds 0..completed_round)``
    Transition = Callable[[ProtocolSpec, int, Sequence[ReportAggregate]], RoundState]
    #: ``fit(engine, campaign, aggregates, model, covariance)``: reads only the rounds' aggregates (``None`` for a round
    #: without reports) and public rows
    Fit = Callable[[Engine, CampaignInfo, list[ReportAggregate | None], str, str | None], CampaignFit]
    #: ``plan(spec, public_rows, public_labels)``: the protocol's error model before any report (``None`` arguments: no
    #: public table, or no target column in it)
    Planner = Callable[[ProtocolSpec, np.ndarray | None, np.ndarray | None], ErrorModel]


#: what every campaign takes, whatever its protocol
CAMPAIGN_OPTIONS = (
    OptionSpec("dimension", int, "a check: the number of features the campaign must have (refused when the features "
               "give another)"),
)
#: what a campaign whose devices transform the features takes (:func:`service.campaigns.campaigns.prepare_campaign`)
TRANSFORM_OPTIONS = (
    OptionSpec("standardize", bool, "centre and scale the features by the public table's means and standard "
               "deviations (default true with a public table)"),
    OptionSpec("feature_bounds", None, "stated public bounds per feature, {\"A\": [lo, hi], ...} (API) or "
               "A=lo:hi;B=lo:hi (command line): centre the midpoint, scale the half width"),
)


@dataclass(frozen=True)
class Deferred:
    """A function named ``"package.module:function"``, imported when it is first called (``pkgutil.resolve_name``;
    later calls find the module in ``sys.modules``): how a record names its builder, transition, fit and planner,
    so that reading the record imports none of them."""

    target: str

    def resolve(self) -> Callable[..., Any]:
        """The function itself (an ``ImportError`` or ``AttributeError`` naming what is missing)."""
        return pkgutil.resolve_name(self.target)

    def __call__(self, *args: Any) -> Any:
        return self.resolve()(*args)


@dataclass(frozen=True)
class CampaignProtocol:
    """Everything the service knows of one protocol (see the module docstring)."""

    name: str
    spec: type[ProtocolSpec]
    build: Callable[[CampaignRequest], ProtocolSpec]
    transition: Transition | None
    models: tuple[str, ...]
    fit: Fit | None
    target: str
    summary: str
    transform: bool = True
    plan: Planner | None = None
    options: tuple[OptionSpec, ...] = ()
    pure: str | None = None
    #: it answers marginals and synthetic rows (:mod:`service.campaigns.marginal_answers`), not models: no ``models``
    #: and no ``fit``
    marginals: bool = False

    @property
    def declared(self) -> tuple[OptionSpec, ...]:
        """Every option a request for this protocol may give: its own, :data:`CAMPAIGN_OPTIONS` and, with a
        transform, :data:`TRANSFORM_OPTIONS`."""
        return (*self.options, *CAMPAIGN_OPTIONS, *(TRANSFORM_OPTIONS if self.transform else ()))

    def check_options(self, given: Mapping[str, object] | None) -> OptionValues:
        """``given`` checked against :attr:`declared`, the defaults filled in (a 400 naming the option; an undeclared
    name is refused by :func:`build_spec`, after the builder's own checks)."""
        if not self.transform:
            stated = sorted(name for name in (given or {}) if name in {o.name for o in TRANSFORM_OPTIONS})
            if stated:
                raise invalid(f"protocol {self.name!r} takes values in their own units: options standardize and "
                              "feature_bounds do not apply")
        return check_options(self.name, self.declared, given)

    def __post_init__(self) -> None:
        if self.spec.protocol != self.name:
            raise ValueError(f"protocol {self.name!r}: its spec class {self.spec.__name__} is of "
                             f"{self.spec.protocol!r}")
        if self.marginals != (self.fit is None) or (self.marginals and self.models):
            raise ValueError(f"protocol {self.name!r}: a record answers models through a fit, or marginals (no "
                             "models, no fit)")
        if self.target not in ("required", "none"):
            raise ValueError(f"protocol {self.name!r}: target must be 'required' or 'none', got {self.target!r}")
        names = [option.name for option in self.declared]
        if len(set(names)) != len(names):
            raise ValueError(f"protocol {self.name!r} declares an option twice: {sorted(names)}")


def _unknown(name: object, choices: list[str]) -> InvalidInput:
    return InvalidInput(f"unknown protocol {name!r} (known: {sorted(choices)})", code="unknown_protocol")


#: protocol name -> its record; a protocol joins with :func:`register` (:mod:`service.campaigns.protocols.catalog`)
CAMPAIGN_PROTOCOLS: Registry[CampaignProtocol] = Registry("protocol", _unknown)


def register(protocol: CampaignProtocol) -> CampaignProtocol:
    """Add a protocol's record (a ``ValueError`` if one of that name is registered)."""
    return CAMPAIGN_PROTOCOLS.register(protocol.name, protocol)


def get_protocol(protocol: object) -> CampaignProtocol:
    """The record of ``protocol``; the 400 ``unknown_protocol`` naming the known ones otherwise."""
    return CAMPAIGN_PROTOCOLS.get(protocol)


def protocol_options() -> dict[str, tuple[OptionSpec, ...]]:
    """``{protocol: every option it takes}``: what the command line's campaign flags, the API's description of a
    campaign's ``options`` and docs/campaigns.md's options table are made from (by name, so the order protocols
    register in does not show)."""
    return {name: CAMPAIGN_PROTOCOLS.get(name).declared for name in sorted(CAMPAIGN_PROTOCOLS)}


def build_spec(protocol: str, request: CampaignRequest) -> ProtocolSpec:
    """The spec of ``protocol`` for ``request`` (whose ``options`` :meth:`CampaignProtocol.check_options` checked),
    or :class:`InvalidInput` naming the parameter at fault.

    ``epsilon`` and ``delta`` are what one participant spends over the whole campaign: a protocol whose participants
    report in several rounds splits them (Alg. 5: half per round)."""
    from estimators.base import EstimatorError  # what a builder's estimator helpers raise (imported with them)

    record = get_protocol(protocol)
    if record.target == "required" and request.target is None:
        raise invalid(f"protocol {protocol!r} needs a target (the label participants hold)")
    if record.target == "none" and request.target is not None:
        raise invalid(f"protocol {protocol!r} takes no target, got {request.target!r}")
    try:
        spec = record.build(request)
    except (ProtocolError, ParameterError, EstimatorError) as error:
        raise invalid(f"protocol {protocol!r}: {error}") from None
    if record.pure is not None and request.delta != 0:
        raise invalid(f"delta must be 0 for {protocol} ({record.pure}), got {request.delta}")
    dimension = request.options["dimension"]
    if dimension is not None and dimension != spec.dimension:
        raise invalid(f"dimension mismatch: option dimension={dimension}, but the {len(request.features)} features "
                      f"{list(request.features)} give dimension {spec.dimension}")
    request.options.refuse_undeclared()
    return spec


def next_state(spec: ProtocolSpec, completed_round: int, aggregates: Sequence[ReportAggregate]) -> RoundState:
    """The public state of round ``completed_round + 1``, by the protocol's transition; an
    :class:`~estimators.base.EstimatorError` when there is no such round or the aggregates do not fit."""
    from estimators.base import EstimatorError  # the transitions' own error (imported with them)

    spec.round(completed_round)
    transition = get_protocol(spec.protocol).transition
    if completed_round + 1 >= spec.round_count or transition is None:
        raise EstimatorError(f"{spec.protocol!r} has no round after round {completed_round}")
    if len(aggregates) != completed_round + 1:
        raise EstimatorError(f"pass the aggregates of rounds 0..{completed_round}, got {len(aggregates)}")
    state = transition(spec, completed_round, aggregates)
    spec.report_schema(completed_round + 1, state)  # the new state must give a valid schema
    return state
