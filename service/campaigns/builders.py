"""From a steward's campaign request to a protocol spec: one builder per protocol, found by name.

``marginalia campaign create NAME --protocol P --features A,B --target Y [--public T] --epsilon E [--delta D]
[--option KEY=VALUE ...]`` (and ``POST /campaigns``) give the features, the target, the public table, the local
(epsilon, delta) each participant spends in all, and protocol options. A builder checks them and returns the spec
(:mod:`workloads.local.protocols`), every error naming the parameter. A new protocol (issue 10's LDP-IHT and its
family) joins by :func:`register_builder` beside its spec, its transition (``estimators.local.rounds``) and its
estimates (:mod:`service.campaigns.estimates`); nothing else changes.

Options are JSON values (from the API, or the command line's ``--option KEY=VALUE`` read as JSON where the text is
a number or a boolean); :class:`Options` reads them by type and refuses unknown keys. ``epsilon`` and ``delta`` are
what one participant spends over the whole campaign: a protocol whose participants report in several rounds splits
them (Alg. 5: half per round).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from estimators.base import EstimatorError
from estimators.local.glm.stein import gaussian_norm_bound, known_covariance_norm_bound
from service.errors import InvalidInput
from workloads.local.protocols import LdpAverageSpec, ProtocolError, ProtocolSpec, SteinGlmSpec, TwoRoundSteinSpec
from workloads.parameters import MAX_COUNT, ParameterError


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_parameter")


def _shown(raw: object) -> str:
    """A refused option value as the message shows it: a string says it is one (``"0.01"`` is text, not a number)."""
    return f"the string {raw!r}" if isinstance(raw, str) else repr(raw)


@dataclass
class Options:
    """Protocol options as JSON values (a number is a JSON number, a flag a JSON boolean, a choice a string; the
    command line turns its ``KEY=VALUE`` text into such values first), each read key remembered, the rest refused.
    ``true`` or ``"0.01"`` where a number belongs is refused naming the option, never read as 1 or 0.01."""

    values: Mapping[str, object]
    used: set[str] = field(default_factory=set)

    def raw(self, key: str) -> object | None:
        """The value as given (``None`` when absent)."""
        self.used.add(key)
        return self.values.get(key)

    def number(self, key: str, default: float | None = None, positive: bool = True) -> float | None:
        raw = self.raw(key)
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
            raise _invalid(f"option {key} must be a number, got {_shown(raw)}")
        value = float(raw)
        if not np.isfinite(value) or (positive and value <= 0):
            raise _invalid(f"option {key} must be a finite{' positive' if positive else ''} number, got {raw!r}")
        return value

    def count(self, key: str) -> int | None:
        raw = self.raw(key)
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int | np.integer) or raw < 1:
            raise _invalid(f"option {key} must be a positive integer, got {_shown(raw)}")
        if raw > MAX_COUNT:  # a typo such as 1e30: it would overflow the database's integer columns
            raise _invalid(f"option {key} must be at most 2^53 = {MAX_COUNT:,}, got {raw!r}")
        return int(raw)

    def flag(self, key: str, default: bool) -> bool:
        raw = self.raw(key)
        if raw is None:
            return default
        if not isinstance(raw, bool):
            raise _invalid(f"option {key} must be true or false, got {_shown(raw)}")
        return raw

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        raw = self.raw(key)
        if raw is None:
            return default
        if raw not in choices:
            raise _invalid(f"option {key} must be one of {list(choices)}, got {raw!r}")
        return str(raw)

    def check_all_used(self, protocol: str) -> None:
        unknown = sorted(set(self.values) - self.used)
        if unknown:
            raise _invalid(f"option {unknown[0]!r} is not an option of protocol {protocol!r} "
                           f"(options: {sorted(self.used)})")


@dataclass(frozen=True)
class CampaignRequest:
    """What a builder sees. ``public_rows``: the public table's feature columns, already transformed (centred and
    scaled as participants' features will be), or ``None`` without a public table."""

    features: tuple[str, ...]
    target: str | None
    epsilon: float
    delta: float
    options: Options
    public_rows: np.ndarray | None


@dataclass(frozen=True)
class ProtocolBuilder:
    """``build(request) -> spec``; ``target``: whether the protocol needs one ("required") or takes none ("none");
    ``transform``: whether devices centre and scale the features (the Stein GLMs: Stein's lemma wants zero-mean
    features) or send them in their own units (LDP-AVG, whose bounds are stated in those units)."""

    protocol: str
    build: Callable[[CampaignRequest], ProtocolSpec]
    target: str
    summary: str
    transform: bool = True


BUILDERS: dict[str, ProtocolBuilder] = {}


def register_builder(builder: ProtocolBuilder) -> ProtocolBuilder:
    if builder.protocol in BUILDERS:
        raise ValueError(f"protocol {builder.protocol!r} has a builder already")
    BUILDERS[builder.protocol] = builder
    return builder


def get_builder(protocol: object) -> ProtocolBuilder:
    if not isinstance(protocol, str) or protocol not in BUILDERS:
        raise InvalidInput(f"unknown protocol {protocol!r} (known: {sorted(BUILDERS)})", code="unknown_protocol")
    return BUILDERS[protocol]


def build_spec(protocol: str, request: CampaignRequest) -> ProtocolSpec:
    """The spec of ``protocol`` for ``request``, or :class:`InvalidInput` naming the parameter at fault."""
    builder = get_builder(protocol)
    if builder.target == "required" and request.target is None:
        raise _invalid(f"protocol {protocol!r} needs a --target (the label participants hold)")
    if builder.target == "none" and request.target is not None:
        raise _invalid(f"protocol {protocol!r} takes no --target, got {request.target!r}")
    dimension = request.options.count("dimension")
    try:
        spec = builder.build(request)
    except (ProtocolError, ParameterError, EstimatorError) as error:
        raise _invalid(f"protocol {protocol!r}: {error}") from None
    if dimension is not None and dimension != spec.dimension:
        raise _invalid(f"dimension mismatch: option dimension={dimension}, but the {len(request.features)} features "
                       f"{list(request.features)} give dimension {spec.dimension}")
    request.options.check_all_used(protocol)
    return spec


def _ldp_average(request: CampaignRequest) -> ProtocolSpec:
    if len(request.features) != 1:
        raise _invalid(f"dimension mismatch: ldp-avg averages one feature, got {len(request.features)}: "
                       f"{list(request.features)}")
    if request.delta != 0:
        raise _invalid(f"delta must be 0 for ldp-avg (pure epsilon-LDP, Laplace), got {request.delta}")
    options = request.options
    public = request.public_rows
    lower = options.number("lower", None if public is None else float(public[:, 0].min()), positive=False)
    upper = options.number("upper", None if public is None else float(public[:, 0].max()), positive=False)
    if lower is None or upper is None:
        raise _invalid("ldp-avg needs the public bounds of the value: --option lower=L --option upper=U "
                       "(or a --public table to take them from)")
    if not lower < upper:
        raise _invalid(f"option lower must be below upper, got lower={lower}, upper={upper}")
    return LdpAverageSpec(lower=lower, upper=upper, epsilon=request.epsilon, participants=options.count("participants"))


def _norm_bound(request: CampaignRequest, participants: int | None) -> float:
    """The stated ``norm_bound``, else Alg. 1's bound from the public rows (public information only)."""
    stated = request.options.number("norm_bound")
    if stated is not None:
        return stated
    if request.public_rows is None:
        raise _invalid("norm_bound is needed: --option norm_bound=R (the public bound on a participant's ||x||), "
                       "or a --public table to derive Alg. 1's bound from")
    n = participants or request.public_rows.shape[0]
    return gaussian_norm_bound(request.public_rows, max(n, 2))


def _stein_glm(request: CampaignRequest) -> ProtocolSpec:
    if request.delta <= 0:
        raise _invalid(f"delta must be in (0, 1) for stein-glm (Gaussian reports), got {request.delta}")
    options = request.options
    participants = options.count("participants")
    return SteinGlmSpec(
        dimension=len(request.features), norm_bound=_norm_bound(request, participants),
        label_bound=options.number("label_bound", 1.0), epsilon=request.epsilon, delta=request.delta,
        norm=options.choice("norm", ("l2", "l1"), "l2"), gram=options.flag("gram", True),
        xy_ratio=options.number("xy_ratio"), participants=participants)


def _two_round_stein(request: CampaignRequest) -> ProtocolSpec:
    if request.delta <= 0:
        raise _invalid(f"delta must be in (0, 1) for stein-glm-2round (its first round is Gaussian), "
                       f"got {request.delta}")
    options = request.options
    layout = options.choice("layout", ("split-budget", "split-groups"), "split-budget")
    participants = options.count("participants")
    covariance_norm = options.number("covariance_norm")
    if options.number("norm_bound") is None and covariance_norm is not None:
        if participants is None:
            raise _invalid("option covariance_norm needs option participants (Alg. 5's bound grows with log n)")
        norm_bound = known_covariance_norm_bound(len(request.features), covariance_norm, participants)
    else:
        norm_bound = _norm_bound(request, participants)
    common = {"norm": options.choice("norm", ("l2", "l1"), "l2"),
              "projection_scale": options.number("projection_scale", 4.0)}
    label_bound = options.number("label_bound", 1.0)
    if layout == "split-budget":
        return TwoRoundSteinSpec.split_budget(len(request.features), norm_bound, label_bound, request.epsilon,
                                              request.delta, participants, **common)
    return TwoRoundSteinSpec.split_groups(len(request.features), norm_bound, label_bound, request.epsilon,
                                          request.delta, options.count("first_size"), options.count("second_size"),
                                          **common)


register_builder(ProtocolBuilder("ldp-avg", _ldp_average, "none",
                                 "1-dim LDP-AVG: one bounded number per participant, Laplace (options: lower, upper, "
                                 "participants)", transform=False))
register_builder(ProtocolBuilder("stein-glm", _stein_glm, "required",
                                 "noisy (x x^T, x y) for the Stein-lemma GLMs, one round (options: norm_bound, "
                                 "label_bound, norm, gram, xy_ratio, participants)"))
register_builder(ProtocolBuilder("stein-glm-2round", _two_round_stein, "required",
                                 "Alg. 5, two rounds without public data (options: layout, norm_bound or "
                                 "covariance_norm, label_bound, norm, projection_scale, participants, first_size, "
                                 "second_size)"))


# Protocols whose builders live in their own modules register themselves on import.
from service.campaigns import sparse_builders  # noqa: E402, F401, I001
