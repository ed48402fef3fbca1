"""The registry of mechanisms: one :class:`MechanismSpec` per mechanism, the only place that says what a name means.

The release engine, the regression service, the coverage of answers, the API schema and the command line all read
this registry instead of matching names. A spec says:

* ``kind``: the kind of release it makes (:class:`ReleaseKind`; how each kind is stored: :mod:`service.releases.kinds`);
* ``notion``: its privacy notion (:class:`PrivacyNotion`), which decides how a request's (epsilon, delta, rho)
  becomes the :class:`~service.privacy.cost.PrivacyCost` it is charged (:meth:`MechanismSpec.cost`);
* ``options``: the options a caller may set, declared once with their type, bounds, default and help
  (:class:`~service.options.OptionSpec`, shared with the regression methods and the campaign protocols): checked
  before anything is reserved or charged, and read by the API's request schema, the command line and the client,
  which list none themselves;
* ``make_runner``: a factory that turns a checked :class:`RunRequest` into the runner the engine calls with the
  count oracle, the noise and a progress callback; the runner returns a
  :class:`~service.mechanisms.base.MechanismResult` whose payload is its kind's type
  (:mod:`service.mechanisms.payloads`), so a mechanism of an existing kind writes no codec;
* ``answers``: the regression methods a stored release of it can answer (:mod:`service.regression.matching`);
* ``measured_cliques``: what a release of it measured (a rule of :mod:`service.mechanisms.cliques`; read by
  :mod:`service.releases.coverage`);
* ``resolve_settings`` (model releases whose answer depends on settings, such as DP-IHT's sparsity): the rules of
  the settings that depend on the design, applied by :meth:`MechanismSpec.settings` after the declared checks and
  defaults; the result is stored with the release and compared when a later request looks for one to reuse
  (:mod:`service.regression.matching`);
* ``release_params`` (gram and model releases, made by a regression's fit): the public parameters a release of a
  design stores beside its payload (the design, or the Gram release's columns and Alg. 2's constants), which
  matching and answering read back;
* ``regression_options`` (marginal mechanisms): the options a regression's new release of it sets unless the caller
  did (the residual plan's ``regression``, AIM's ``initial_cliques``);
* ``public_details``: the names of the release's details that a fit answered by it reports (public numbers of its
  calibration; a model release's whole answer is its model, so these are all a caller learns besides it);
* ``forecast`` (marginal mechanisms whose error does not depend on the data: laplace, gaussian, residual): the
  closed-form error of each workload marginal at a cost, before anything is measured
  (:class:`~estimators.residual.accuracy.MarginalForecast`), which a dry run shows (:mod:`service.releases.planning`);
  None for a mechanism with no closed form (MST and AIM choose what to measure from the data);
* ``simulation_trials`` (marginal mechanisms without a ``forecast`` whose release has a model: MST, AIM): how many
  runs of it on a stored release's synthetic rows a dry run makes to estimate its error instead
  (:mod:`service.releases.simulated_accuracy`); 0 for none.

A new mechanism is one module and one :func:`register` call; the built-in ones are registered by
:mod:`service.mechanisms.catalog`, which the package imports (``service/mechanisms/__init__.py``), so every lookup
sees them; this module does not import the catalog (imports go one way). It imports nothing numerical, so the
command line and the API schema can list the names without loading the mechanisms (the privacy arithmetic too is
imported when a cost is computed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

from service.errors import InvalidInput
from service.mechanisms.cliques import Clique, workload_cliques
from service.options import OptionSpec
from workloads import parameters
from workloads.registry import Registry

if TYPE_CHECKING:
    from estimators.residual.accuracy import MarginalForecast
    from service.mechanisms.base import MechanismResult
    from service.mechanisms.progress import Progress
    from service.privacy.cost import PrivacyCost
    from workloads.domain import Domain
    from workloads.encodings import DesignEncoding
    from workloads.marginals import Query


class PrivacyNotion(StrEnum):
    """How a mechanism's privacy is stated, and so which of (epsilon, delta, rho) a request gives it."""

    PURE = "pure"  # epsilon-DP: epsilon only
    APPROXIMATE = "approximate"  # (epsilon, delta)-DP with delta > 0: charged (epsilon, delta) itself
    ZCDP = "zcdp"  # rho-zCDP: rho, or (epsilon, delta) converted to the largest rho that satisfies it


class ReleaseKind(StrEnum):
    """The built-in kinds of release a mechanism makes; each value is the string stored in ``releases.kind`` (what
    each kind's payload is, and its codec: :mod:`service.releases.kinds`)."""

    MARGINALS = "marginals"
    GRAM = "gram"
    MODEL = "model"


@dataclass(frozen=True)
class RunRequest:
    """What a runner factory gets: the charged cost, the checked options and, depending on the kind, the workload
    (marginal mechanisms) or the encoded design (the gram and model kinds)."""

    cost: PrivacyCost
    options: Mapping[str, object] = field(default_factory=dict)
    queries: tuple[Query, ...] = ()
    design: DesignEncoding | None = None
    epsilon: object = None  # what was requested (the cost is derived from these)
    delta: object = None


class Runner(Protocol):
    """``runner(oracle, noise, progress)``, called once by the release engine; its result carries the payload."""

    def __call__(self, oracle: Any, noise: Any, progress: Progress) -> MechanismResult: ...


def design_params(design: DesignEncoding, delta: Fraction) -> dict[str, object]:  # noqa: ARG001
    """What a model release stores beside its model: the design it was fitted on (matching compares it)."""
    return {"design": design.to_dict()}


def no_options(design: DesignEncoding, attributes: Sequence[str]) -> dict[str, object]:  # noqa: ARG001
    """A marginal mechanism whose regression releases set no option of their own."""
    return {}


@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism (module docstring)."""

    name: str
    kind: str
    notion: PrivacyNotion
    make_runner: Callable[[RunRequest], Runner]
    description: str = ""
    options: tuple[OptionSpec, ...] = ()
    uses_workload: bool = True
    answers: frozenset[str] = frozenset()
    measured_cliques: Callable[[Mapping[str, object], Mapping[str, object], Sequence[str]], list[Clique]] = (
        workload_cliques)
    resolve_settings: Callable[[DesignEncoding, Mapping[str, object]], dict[str, object]] | None = None
    release_params: Callable[[DesignEncoding, Fraction], dict[str, object]] = design_params
    regression_options: Callable[[DesignEncoding, Sequence[str]], dict[str, object]] = no_options
    public_details: tuple[str, ...] = ()
    forecast: Callable[[Domain, tuple[Query, ...], PrivacyCost, Mapping[str, object]], MarginalForecast] | None = None
    simulation_trials: int = 0

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)

    @property
    def public_options(self) -> tuple[OptionSpec, ...]:
        """The options a caller of the API or the command line may set (:attr:`OptionSpec.internal`)."""
        return tuple(option for option in self.options if not option.internal)

    def check_options(self, options: Mapping[str, object]) -> None:
        """Refuse unknown or ill-typed options BEFORE anything is reserved or charged."""
        known = {option.name: option for option in self.options}
        for name, value in options.items():
            if name not in known:
                raise InvalidInput(f"{self.name} has no option {name!r}; it takes {sorted(known)}",
                                   code="invalid_parameter")
            known[name].check(self.name, value)

    def settings(self, design: DesignEncoding, options: Mapping[str, object] | None) -> dict[str, object]:
        """The complete settings of a new release of ``design`` (a gram or model release): ``options`` checked
        against the declarations (the one check), the declared defaults filled in, then the mechanism's own rules
        (:attr:`resolve_settings`, when it has any); empty for a mechanism without settings."""
        given = dict(options or {})
        self.check_options(given)
        defaults = {option.name: option.default for option in self.options if option.default is not None}
        settings = {**defaults, **given}
        return settings if self.resolve_settings is None else self.resolve_settings(design, settings)

    def cost(self, epsilon: object, delta: object, rho: object) -> PrivacyCost:
        """The charge for a release by this mechanism, from what the caller asked for (by :attr:`notion`).

        Pure DP takes epsilon only. zCDP takes rho, or an (epsilon, delta) pair converted to the largest rho that
        satisfies it (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Prop. 1.3
        via :func:`service.privacy.conversions.cdp_rho`), rounded down to the accountant's grid so the mechanism
        calibrates to exactly the rho that is charged. Approximate DP takes epsilon and delta > 0, charged as
        they are."""
        rule = {PrivacyNotion.PURE: _pure_cost, PrivacyNotion.APPROXIMATE: _approximate_cost}.get(self.notion,
                                                                                                 _zcdp_cost)
        return _checked_cost(rule, self.name, epsilon, delta, rho)


def zcdp_cost(name: str, epsilon: object, delta: object, rho: object) -> PrivacyCost:
    """The zCDP charge of a request named ``name`` in the refusals (:meth:`MechanismSpec.cost` of a zCDP mechanism;
    ``auto``, which chooses among them, is charged by it before it chooses)."""
    return _checked_cost(_zcdp_cost, name, epsilon, delta, rho)


def _checked_cost(rule: Callable[[str, object, object, object], PrivacyCost], name: str, epsilon: object,
                  delta: object, rho: object) -> PrivacyCost:
    """``rule``'s cost, its arithmetic's refusals as the caller's bad input."""
    try:
        return rule(name, epsilon, delta, rho)
    except ValueError as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(str(exc), code="invalid_parameter") from None


def _epsilon(epsilon: object) -> Fraction:
    """The epsilon a request is charged and calibrated to: checked, at most the largest amount, on the ledger's grid
    (rounded down; refused below the ledger's unit, as rho is)."""
    from service.privacy.cost import chargeable, check_amount, exact

    return chargeable(check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon"), "epsilon")


def _pure_cost(name: str, epsilon: object, delta: object, rho: object) -> PrivacyCost:
    from service.privacy.cost import PrivacyCost

    if rho is not None:
        raise InvalidInput(f"{name} is a pure-DP mechanism: give epsilon, not rho", code="invalid_parameter")
    if delta not in (None, 0, 0.0, "0"):
        raise InvalidInput(f"{name} is pure DP: delta must be omitted or 0", code="invalid_parameter")
    if epsilon is None:
        raise InvalidInput(f"{name} needs epsilon", code="invalid_parameter")
    return PrivacyCost(epsilon=_epsilon(epsilon))


def _approximate_cost(name: str, epsilon: object, delta: object, rho: object) -> PrivacyCost:
    from db.models import DELTA_SCALE
    from service.privacy.cost import PrivacyCost, chargeable, exact

    if rho is not None:
        raise InvalidInput(f"{name} is an (epsilon, delta) mechanism: give epsilon and delta, not rho",
                           code="invalid_parameter")
    if epsilon is None or delta is None:
        raise InvalidInput(f"{name} needs epsilon and delta (delta > 0)", code="invalid_parameter")
    eps = _epsilon(epsilon)
    if parameters.validate_delta(delta, "delta") == 0:
        raise InvalidInput(f"{name} needs delta > 0", code="invalid_parameter")
    return PrivacyCost(epsilon=eps, delta=chargeable(exact(delta), "delta", DELTA_SCALE))


def _zcdp_cost(name: str, epsilon: object, delta: object, rho: object) -> PrivacyCost:
    from service.privacy import conversions
    from service.privacy.cost import PrivacyCost, chargeable, check_amount, exact, floor_to_grid

    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidInput("give either rho or epsilon with delta, not both", code="invalid_parameter")
        return PrivacyCost(rho=chargeable(check_amount(exact(parameters.validate_rho(rho, "rho")), "rho"), "rho"))
    if epsilon is None or delta is None:
        raise InvalidInput(f"{name} is a zCDP mechanism: give rho, or epsilon and delta (delta > 0)",
                           code="invalid_parameter")
    eps = float(check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon"))
    dlt = float(parameters.validate_delta(delta, "delta"))
    if dlt == 0:
        raise InvalidInput(f"{name} needs delta > 0 to convert (epsilon, delta) to rho", code="invalid_parameter")
    converted = floor_to_grid(conversions.cdp_rho(eps, dlt))
    if converted <= 0:
        raise InvalidInput(f"epsilon={eps}, delta={dlt} converts to rho below 1e-12", code="invalid_parameter")
    return PrivacyCost(rho=converted)


def _refused(name: object, choices: list[str]) -> InvalidInput:
    return InvalidInput(f"mechanism must be one of {choices}, got {name!r}", code="invalid_parameter")


#: The registered mechanisms (the project's one generic registry, :class:`workloads.registry.Registry`).
_SPECS: Registry[MechanismSpec] = Registry("mechanism", _refused)


def register(spec: MechanismSpec) -> MechanismSpec:
    """Add a mechanism; refused if one of that name exists. Returns ``spec``."""
    return _SPECS.register(spec.name, spec)


def unregister(name: str) -> None:
    """Remove a mechanism (tests that register one of their own remove it afterwards)."""
    _SPECS.unregister(name)


def get(name: object, kind: str | None = None) -> MechanismSpec:
    """The mechanism called ``name`` (of ``kind`` when given); an :class:`InvalidInput` naming the choices otherwise."""
    spec = _SPECS.find(name)
    if spec is None or (kind is not None and spec.kind != kind):
        raise _refused(name, names(kind))
    return spec


def find(name: str) -> MechanismSpec | None:
    """The mechanism called ``name``, or None (a stored release may name one that is no longer registered)."""
    return _SPECS.find(name)


def names(kind: str | None = None) -> list[str]:
    """The registered names (of ``kind`` when given), in the order they were registered."""
    return [spec.name for spec in _SPECS.entries() if kind is None or spec.kind == kind]


def specs() -> list[MechanismSpec]:
    return _SPECS.entries()
