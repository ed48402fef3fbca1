"""What every local-DP protocol shares: public specs, rounds, report schemas and their validators, the registry.

See :mod:`workloads.local.protocols` for the whole picture; the protocols themselves are the sibling modules.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from workloads.local.calibration import grid_units
from workloads.local.clipping import Clipped
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.sufficient_statistics import (
    NORMS,
)
from workloads.parameters import check_count, check_positive, check_probability
from workloads.registry import Registry

#: Laplace scales a public Laplace number (the 1-bit Bernstein protocol's string, public randomness, not noise on
#: data) may reach (P(|Lap(1)| > 60) = e^-60 < 1e-26).
LAPLACE_TAIL = 60.0
#: Relative tolerance on the norm of a report whose every honest value has one norm (the l2-ball randomizer's sphere):
#: float64 rounding of ``B g / ||g||`` is ~1e-15, and a batch sent in single precision (the wire's ``"<f4"``) rounds
#: each entry by at most 2^-24 relative, so the norm by at most 2^-24; 2^-22 covers both.
EXACT_NORM_RTOL = 2.0**-22


class ProtocolError(ValueError):
    """A spec, a round index, a public state or participant data that cannot be used; the message names it."""


class ReportError(ValueError):
    """A batch of reports refused: ``field`` and ``index`` (the first bad report, 0-based in the batch) name it."""

    def __init__(self, message: str, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.index = index


# --------------------------------------------------------------------------------------------------- report schemas
@dataclass(frozen=True)
class FieldSchema:
    """One field of a report: its per-report shape and the closed range ``[low, high]`` of every entry.

    ``grid``: every entry must be an integer multiple of this power of two (the randomizer's public grid,
    :mod:`workloads.local.randomizers.grid`); ``exact_norm``: every report's l2 norm must equal it up to
    :data:`EXACT_NORM_RTOL` (the l2-ball randomizer's sphere); ``norm``: an upper bound on the l2 norm."""

    name: str
    shape: tuple[int, ...]
    low: float
    high: float
    #: the largest l2 norm of one report's value (``None``: entries bounded only)
    norm: float | None = None
    #: the step every entry is a multiple of (``None``: no grid)
    grid: float | None = None
    #: the norm every report has (``None``: no exact norm)
    exact_norm: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ProtocolError(f"field {self.name!r}: low < high must be finite, got [{self.low}, {self.high}]")
        for name in ("norm", "exact_norm", "grid"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_positive(f"field {self.name!r} {name}", getattr(self, name),
                                                              error=ProtocolError))
        if self.grid is not None and math.frexp(self.grid)[0] != 0.5:
            raise ProtocolError(f"field {self.name!r}: grid must be a power of two, got {self.grid!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "low": self.low, "high": self.high}
        for name in ("norm", "grid", "exact_norm"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FieldSchema:
        optional = {name: None if data.get(name) is None else float(data[name])
                    for name in ("norm", "grid", "exact_norm")}
        return cls(str(data["name"]), tuple(data["shape"]), float(data["low"]), float(data["high"]), **optional)


def noisy_field(name: str, shape: tuple[int, ...], low: float, high: float, noise: GridNoise,
                entries: int) -> FieldSchema:
    """The schema of a field whose entries are a value in ``[low, high]`` rounded to ``noise.grid`` plus ``noise``.

    Every honest entry is ``g (K + N)`` with ``K`` in the grid interval ``[L, U]`` of ``[low, high]``
    (:func:`workloads.local.calibration.grid_units`), so the field requires the grid and the range
    ``g [L - M, U + M]`` with ``M = noise.tail_units(entries)``: ``entries`` is the number of noisy entries of the
    whole report, and an honest report is refused with probability at most
    :data:`~workloads.local.randomizers.grid.FALSE_REFUSAL` (1e-9; union bound over its entries)."""
    lo, hi = grid_units(low, high, noise.grid)
    margin = noise.tail_units(entries)
    return FieldSchema(name, shape, noise.grid * (lo - margin), noise.grid * (hi + margin), grid=noise.grid)


def sphere_field(name: str, shape: tuple[int, ...], radius: float) -> FieldSchema:
    """The schema of a field whose every honest value lies on the sphere of ``radius`` (entries in ``[-R, R]``)."""
    bound = radius * (1.0 + EXACT_NORM_RTOL)
    return FieldSchema(name, shape, -bound, bound, exact_norm=radius)


@dataclass(frozen=True)
class ReportSchema:
    """The fields of one round's reports, and the vectorised check of a batch."""

    fields: tuple[FieldSchema, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def to_json(self) -> dict[str, Any]:
        return {"fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReportSchema:
        return cls(tuple(FieldSchema.from_json(f) for f in data["fields"]))

    def stack(self, reports: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        """A columnar batch from single reports (each ``{field: value}``), checked field by field (not ranges)."""
        if isinstance(reports, Mapping) or not isinstance(reports, Sequence):
            raise ReportError("reports must be a list of reports, each a mapping of field to value")
        for index, report in enumerate(reports):
            if not isinstance(report, Mapping):
                raise ReportError(f"report {index} must be a mapping of field to value", index=index)
            self._check_names(report.keys(), index)
        batch: dict[str, np.ndarray] = {}
        for f in self.fields:
            bad = next((i for i, r in enumerate(reports) if not _has_shape(r[f.name], f.shape)), None)
            if bad is not None:
                raise ReportError(f"report {bad}: field {f.name!r} must be numbers of shape {f.shape}", f.name, bad)
            batch[f.name] = np.array([r[f.name] for r in reports], dtype=float).reshape(len(reports), *f.shape)
        return batch

    def validate(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The batch as float arrays ``{field: (k, *shape)}``, or :class:`ReportError` naming field and first index."""
        if not isinstance(batch, Mapping):
            raise ReportError("a batch must be a mapping of field name to an array of reports")
        self._check_names(batch.keys(), None)
        arrays: dict[str, np.ndarray] = {}
        count: int | None = None
        for f in self.fields:
            try:
                array = np.asarray(batch[f.name], dtype=float)
            except (TypeError, ValueError):
                raise ReportError(f"field {f.name!r} must hold numbers of shape (k, {_shape_text(f.shape)})",
                                  f.name) from None
            if array.ndim != 1 + len(f.shape) or array.shape[1:] != f.shape:
                raise ReportError(f"field {f.name!r} must have shape (k, {_shape_text(f.shape)}), got {array.shape}",
                                  f.name)
            if count is not None and array.shape[0] != count:
                raise ReportError(f"field {f.name!r} has {array.shape[0]} reports, earlier fields have {count}",
                                  f.name)
            count = array.shape[0]
            flat = array.reshape(count, math.prod(f.shape))
            bad = ~np.all(np.isfinite(flat), axis=1)
            if bad.any():
                index = int(np.argmax(bad))
                raise ReportError(f"report {index}: field {f.name!r} has a value that is not a finite number",
                                  f.name, index)
            bad = ~np.all((flat >= f.low) & (flat <= f.high), axis=1)
            if bad.any():
                index = int(np.argmax(bad))
                worst = float(flat[index][np.argmax((flat[index] < f.low) | (flat[index] > f.high))])
                raise ReportError(
                    f"report {index}: field {f.name!r} has {worst!r}, outside its allowed range [{f.low:.6g}, "
                    f"{f.high:.6g}]", f.name, index)
            if f.grid is not None:
                scaled = flat / f.grid  # exact: the grid is a power of two
                bad = ~np.all(np.floor(scaled) == scaled, axis=1)
                if bad.any():
                    index = int(np.argmax(bad))
                    worst = float(flat[index][np.argmax(np.floor(scaled[index]) != scaled[index])])
                    raise ReportError(f"report {index}: field {f.name!r} has {worst!r}, not a multiple of its grid "
                                      f"step {f.grid!r} (no honest report has it)", f.name, index)
            if f.norm is not None or f.exact_norm is not None:
                norms = np.linalg.norm(flat, axis=1)
                if f.norm is not None:
                    bad = norms > f.norm
                    if bad.any():
                        index = int(np.argmax(bad))
                        raise ReportError(f"report {index}: field {f.name!r} has l2 norm {float(norms[index]):.6g}, "
                                          f"above its allowed {f.norm:.6g}", f.name, index)
                if f.exact_norm is not None:
                    bad = np.abs(norms - f.exact_norm) > EXACT_NORM_RTOL * f.exact_norm
                    if bad.any():
                        index = int(np.argmax(bad))
                        raise ReportError(f"report {index}: field {f.name!r} has l2 norm {float(norms[index]):.9g}; "
                                          f"every honest report has norm {f.exact_norm:.9g}", f.name, index)
            arrays[f.name] = array
        return arrays

    def _check_names(self, names: typing.Iterable[str], index: int | None) -> None:
        given = set(names)
        where = f"report {index}: " if index is not None else ""
        for f in self.fields:
            if f.name not in given:
                raise ReportError(f"{where}field {f.name!r} is missing", f.name, index)
        extra = sorted(str(name) for name in given - set(self.names))
        if extra:
            raise ReportError(f"{where}unknown field {extra[0]!r} (expected {list(self.names)})", extra[0], index)


@dataclass(frozen=True)
class BatchTotals:
    """What a protocol's :meth:`ProtocolSpec.aggregate_input` may return instead of one row per report: the batch's
    per-field ``sums`` and ``squares`` over its ``count`` reports, already added up (a frequency oracle's support
    counts: a row per report would be a vector of the domain's size each). The aggregate checks the shapes against
    its schema and every entry against ``count`` times the field's range."""

    count: int
    sums: Mapping[str, np.ndarray]
    squares: Mapping[str, np.ndarray]


def checked_delta(delta: object, pure: bool, randomizer: str) -> float:
    """A spec's ``delta`` for its randomizer: exactly 0 for a pure (epsilon, 0)-LDP one, in (0, 1) otherwise; a
    :class:`ProtocolError` naming the randomizer when it is not."""
    if pure:
        if delta != 0:
            raise ProtocolError(f"delta must be 0 with the {randomizer} randomizer (pure epsilon-LDP), got {delta!r}")
        return 0.0
    try:
        return check_probability("delta", delta, error=ProtocolError)
    except ProtocolError:
        raise ProtocolError(f"delta must be in (0, 1) with the {randomizer} randomizer, got {delta!r}") from None


class OneRound:
    """A protocol in which every participant reports once: one round and one group, both ``"all"``, at the spec's
    ``epsilon`` and ``delta`` (mixed in before :class:`ProtocolSpec` by a spec with those fields and
    ``participants``)."""

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, self.delta),)  # type: ignore[attr-defined]

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)  # type: ignore[attr-defined]


def check_whole_numbers(batch: Mapping[str, np.ndarray], field: str, description: str) -> None:
    """Refuse (:class:`ReportError`, the first offending report) a field whose entries are not whole numbers
    (``description`` says what they are: an id, a coordinate)."""
    values = np.asarray(batch[field], dtype=float)
    bad = values != np.floor(values)
    if bad.any():
        index = int(np.argmax(bad))
        raise ReportError(f"report {index}: field {field!r} must be {description}, got {float(values[index])!r}",
                          field, index)


def check_two_point(batch: Mapping[str, np.ndarray], field: str, magnitude: float, symbol: str, source: str) -> None:
    """Refuse a field whose entries are not exactly ``+magnitude`` or ``-magnitude``, the only outputs of a two-point
    randomizer (``symbol`` names the magnitude in the message, ``source`` the randomizer)."""
    values = np.asarray(batch[field], dtype=float)
    bad = np.abs(values) != magnitude
    if bad.any():
        index = int(np.argmax(bad))
        raise ReportError(f"report {index}: field {field!r} must be exactly +{symbol} or -{symbol} ({symbol} = "
                          f"{magnitude!r}, the {source}'s only outputs), got {float(values[index])!r}", field, index)


def _has_shape(value: object, shape: tuple[int, ...]) -> bool:
    try:
        return np.asarray(value, dtype=float).shape == shape
    except (TypeError, ValueError):
        return False


def _shape_text(shape: tuple[int, ...]) -> str:
    return ", ".join(str(n) for n in shape) if shape else ""


# ------------------------------------------------------------------------------------------------- rounds and state
class _JsonFields:
    """``to_json`` / ``from_json`` of a frozen dataclass, field by field (unknown or missing keys refused)."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: _to_json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        return cls(**_exact_keys(cls, data))


@dataclass(frozen=True)
class GroupSpec(_JsonFields):
    """A group of participants; ``size`` is the number the steward plans (public), ``None`` when open-ended."""

    name: str
    size: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ProtocolError(f"a group name must be a non-empty string, got {self.name!r}")
        if self.size is not None:
            object.__setattr__(self, "size", check_count(f"group {self.name!r} size", self.size, error=ProtocolError))


@dataclass(frozen=True)
class RoundSpec(_JsonFields):
    """One round: the group that reports in it and the local (epsilon, delta) each of its reports spends."""

    group: str
    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.group, str) or not self.group:
            raise ProtocolError(f"a round's group must be a non-empty string, got {self.group!r}")
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        object.__setattr__(self, "delta", check_probability("delta", self.delta, error=ProtocolError, allow_zero=True))


@dataclass(frozen=True)
class RoundState(_JsonFields):
    """The public state of round ``round_index`` (0-based): numbers and vectors the server publishes."""

    round_index: int
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean: dict[str, float | tuple[float, ...]] = {}
        for name, value in dict(self.values).items():
            array = np.asarray(value, dtype=float)
            if array.ndim > 1 or not np.all(np.isfinite(array)):
                raise ProtocolError(f"state value {name!r} must be a finite number or vector")
            clean[str(name)] = float(array) if array.ndim == 0 else tuple(array.tolist())
        object.__setattr__(self, "values", clean)
        object.__setattr__(self, "round_index", int(self.round_index))

    def number(self, name: str) -> float:
        value = self._get(name)
        if isinstance(value, tuple):
            raise ProtocolError(f"state value {name!r} of round {self.round_index} must be a number")
        return value

    def vector(self, name: str, length: int) -> np.ndarray:
        value = np.asarray(self._get(name), dtype=float)
        if value.shape != (length,):
            raise ProtocolError(f"state value {name!r} of round {self.round_index} must be a vector of length "
                                f"{length}, got shape {value.shape}")
        return value

    def _get(self, name: str) -> float | tuple[float, ...]:
        if name not in self.values:
            raise ProtocolError(f"the state of round {self.round_index} lacks {name!r}")
        return self.values[name]


# ------------------------------------------------------------------------------------------------------ spec base
def _unknown(name: object, choices: list[str]) -> ProtocolError:
    return ProtocolError(f"unknown protocol {name!r} (known: {sorted(choices)})")


#: protocol name -> its spec class (:func:`register_protocol`); what a device and the server find a spec by
PROTOCOLS: Registry[type[ProtocolSpec]] = Registry("protocol", _unknown)


def register_protocol(cls: type[ProtocolSpec]) -> type[ProtocolSpec]:
    """Class decorator: make a spec class findable by its ``protocol`` name."""
    if cls.protocol in PROTOCOLS:
        raise ProtocolError(f"protocol {cls.protocol!r} is registered twice")
    return PROTOCOLS.register(cls.protocol, cls)


def spec_from_json(data: Mapping[str, Any]) -> ProtocolSpec:
    """The spec a :meth:`ProtocolSpec.to_json` dictionary describes (its ``protocol`` key picks the class)."""
    if not isinstance(data, Mapping) or "protocol" not in data:
        raise ProtocolError("a protocol spec must be a JSON object with a 'protocol' key")
    return PROTOCOLS.get(data["protocol"]).from_json(data)


class ProtocolSpec:
    """Base of every protocol's spec (subclasses are frozen dataclasses registered with :func:`register_protocol`)."""

    protocol: ClassVar[str]
    #: the dimension of a participant's feature vector (1 for scalar protocols); a field or a property
    dimension: int

    # ---- what every protocol states
    def rounds(self) -> tuple[RoundSpec, ...]:
        raise NotImplementedError

    def groups(self) -> tuple[GroupSpec, ...]:
        raise NotImplementedError

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        raise NotImplementedError

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        """A participant's report(s) for round ``round_index`` from her data (``rng=None``: the device's source).

        ``data`` holds arrays; a leading batch axis randomizes many participants at once (simulations)."""
        raise NotImplementedError

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[Clipped, ...]:
        """Per public bound of round ``round_index``, how many rows of ``data`` (as :meth:`randomize` takes it) it
        clips (:mod:`workloads.local.clipping`: a count that stays on the device). Default: nothing is clipped."""
        return ()

    def check_reports(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray]) -> None:
        """Refuse (:class:`ReportError`) reports the schema's ranges admit but the randomizer cannot emit.

        ``batch`` is what :meth:`ReportSchema.validate` returned. Default: the ranges are the whole support."""

    #: whether a participant's data is her whole row of features and no label (``{"x": row}``: the marginals
    #: protocol's codes); otherwise a protocol without a target takes one number (``{"value": v}``)
    unlabeled_rows: ClassVar[bool] = False

    #: whether the server needs the campaign's public table to turn reports into aggregate input
    #: (:meth:`aggregate_input`; label-ldp's reports name a public row)
    aggregates_public_rows: ClassVar[bool] = False

    def aggregate_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        """The fields the server sums for this round (default: the reports' own)."""
        return self.report_schema(round_index, state)

    def aggregate_input(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray],
                        public_rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """What the server adds to the round's running sums for a validated batch (default: the reports)."""
        return dict(batch)

    def initial_state(self, public_rows: np.ndarray | None = None) -> RoundState:
        """Round 0's public state. Default: nothing beyond the spec."""
        return RoundState(0, {})

    # ---- shared
    @property
    def round_count(self) -> int:
        return len(self.rounds())

    def round(self, round_index: int) -> RoundSpec:
        rounds = self.rounds()
        if isinstance(round_index, bool) or not isinstance(round_index, int | np.integer) or not (
            0 <= round_index < len(rounds)
        ):
            raise ProtocolError(f"round_index must be an integer in [0, {len(rounds) - 1}], got {round_index!r}")
        return rounds[int(round_index)]

    def participant_cost(self, group: str) -> tuple[float, float]:
        """(epsilon, delta) a participant of ``group`` spends over the whole campaign (basic composition)."""
        if group not in {g.name for g in self.groups()}:
            raise ProtocolError(f"unknown group {group!r} (groups: {[g.name for g in self.groups()]})")
        mine = [r for r in self.rounds() if r.group == group]
        return math.fsum(r.epsilon for r in mine), math.fsum(r.delta for r in mine)

    def max_participant_cost(self) -> tuple[float, float]:
        """The largest (epsilon, delta) any participant spends (the campaign's stated local budget)."""
        costs = [self.participant_cost(g.name) for g in self.groups()]
        return max(c[0] for c in costs), max(c[1] for c in costs)

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: _to_json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {"protocol": self.protocol, **fields}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProtocolSpec:
        if data.get("protocol") != cls.protocol:
            raise ProtocolError(f"expected protocol {cls.protocol!r}, got {data.get('protocol')!r}")
        fields = _exact_keys(cls, {k: v for k, v in data.items() if k != "protocol"})
        hints = typing.get_type_hints(cls)
        return cls(**{name: _from_json_value(hints[name], value) for name, value in fields.items()})

    def _check_groups_and_rounds(self) -> None:
        names = [g.name for g in self.groups()]
        if len(set(names)) != len(names):
            raise ProtocolError(f"group names must be distinct, got {names}")
        for index, r in enumerate(self.rounds()):
            if r.group not in names:
                raise ProtocolError(f"round {index} names group {r.group!r}, which is not among {names}")

    def _check_state_round(self, round_index: int, state: RoundState) -> None:
        self.round(round_index)
        if state.round_index != round_index:
            raise ProtocolError(f"the state is of round {state.round_index}, not of round {round_index}")


def _exact_keys(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown key {unknown[0]!r} (known: {known})")
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise ProtocolError(f"{cls.__name__}: missing key {missing[0]!r}")
    return dict(data)


def _to_json_value(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_to_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_json_value(v) for k, v in value.items()}
    return value


def _from_json_value(hint: Any, value: Any) -> Any:
    """Decode nested spec values by their annotation: a class with ``from_json``, or a tuple of such classes."""
    if hasattr(hint, "from_json"):
        return hint.from_json(value)
    if typing.get_origin(hint) is tuple:
        (item, *_) = typing.get_args(hint)
        if not isinstance(value, list | tuple):
            raise ProtocolError(f"expected a list, got {value!r}")
        return tuple(_from_json_value(item, v) for v in value)
    return value


def _participant_array(data: Mapping[str, Any], name: str) -> np.ndarray:
    if not isinstance(data, Mapping) or name not in data:
        raise ProtocolError(f"participant data must contain {name!r}")
    try:
        array = np.asarray(data[name], dtype=float)
    except (TypeError, ValueError):
        raise ProtocolError(f"participant data {name!r} must be numbers") from None
    if not np.all(np.isfinite(array)):
        raise ProtocolError(f"participant data {name!r} must be finite")
    return array


def _features(data: Mapping[str, Any], dimension: int) -> np.ndarray:
    x = _participant_array(data, "x")
    if x.ndim not in (1, 2) or x.shape[-1] != dimension:
        raise ProtocolError(f"participant data 'x' must have shape ({dimension},) or (k, {dimension}), got {x.shape}")
    return x


def _features_and_labels(data: Mapping[str, Any], dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """A participant's (or a batch's) features ``x`` (:func:`_features`) and labels ``y``, one label per row."""
    x = _features(data, dimension)
    y = _participant_array(data, "y")
    if y.shape != x.shape[:-1]:
        raise ProtocolError(f"participant data 'y' must have shape {x.shape[:-1]}, got {y.shape}")
    return x, y


def _check_norm(norm: str) -> str:
    if norm not in NORMS:
        raise ProtocolError(f"norm must be one of {NORMS}, got {norm!r}")
    return norm
