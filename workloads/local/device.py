"""What a participant's device runs: from a campaign's published state and her own values to the report she sends.

Numpy and :mod:`workloads` only (no server stack, no client), beside the randomizers it calls: the client
(``Client.campaign(...).submit``, through its face :mod:`service.client.device`) and the server's simulator
(:mod:`service.campaigns.simulate`) run this same code, and neither imports the other. It applies the campaign's public
transform to the features, shapes the values the protocol's randomizer takes (``{"value"}`` for LDP-AVG,
``{"x", "y"}`` for the Stein GLMs), and randomizes with the open round's public state. ``rng=None`` is the device's
source (``workloads.local.rng.device_rng``: OS randomness); only the simulator passes a seeded generator.

The published state is checked before it is used (:func:`open_round`): the spec must parse, the open round must be
one of its rounds, the round's (epsilon, delta) the state announces must be the spec's, and every public number the
device computes with (the transform's centers and scales, the round's published values) must be finite and of a sane
size (:data:`PUBLIC_MAGNITUDE`). :func:`round_cost` is what one report of the open round spends, from the spec alone;
the participant's own ceilings and spend are enforced by ``service.client.spend`` on the client's submit path
(the simulator, which plays no real participant, calls :func:`make_report` directly and touches no spend file).

A refusal is a :class:`DeviceRefusal` (a ``ValueError``) with a stable ``code`` (``invalid_state``,
``round_closed``, ``invalid_participant_data``, ``device_refused``); the client raises it as its own
``DeviceError``, the simulator's callers see it as bad input (its text ``code: message``, as the client's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from workloads.local.clipping import Clipped
from workloads.local.protocols import ProtocolError, ProtocolSpec, RoundState, spec_from_json

__all__ = ["PUBLIC_MAGNITUDE", "DeviceRefusal", "clipped", "clipping_warning", "make_report", "open_round",
           "participant_data", "randomize", "round_cost"]

#: The largest magnitude of a published public number (a transform's center or scale, a round's published value) and
#: the inverse of the smallest scale the device accepts. Real public statistics are nowhere near it; a state beyond it
#: is forged or broken, and would only make ``(x - center) / scale`` overflow or pin every value to a clip bound.
PUBLIC_MAGNITUDE = 1e100
#: How far the round's (epsilon, delta) the state announces may be from the spec's: the server stores them rounded up
#: to its ledger units (1e-12 for epsilon, 1e-18 for delta), plus a relative 1e-9 for the float round trip.
_ANNOUNCED = (("round_epsilon", 1e-12), ("round_delta", 1e-18))


class DeviceRefusal(ValueError):
    """The campaign's published state or the participant's values cannot be used; the message says which and
    ``code`` names the case. Nothing was randomized."""

    def __init__(self, message: str, code: str = "device_refused") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def participant_data(spec: ProtocolSpec, state: Mapping[str, Any], x: object, y: object = None) -> dict[str, Any]:
    """The protocol's input from raw features ``x`` (``(p,)`` or ``(k, p)``) and label ``y``, transformed.

    A protocol whose reports name public rows (label-ldp: the features are the public table's) takes instead, in ``x``,
    the participant's row id in that table, ``[id]`` for one participant or a column ``(k, 1)`` of ids: her
    features never reach the device's report (:mod:`workloads.local.protocols.label_ldp`)."""
    if spec.aggregates_public_rows:
        return _public_row_data(state, x, y)
    features = np.asarray(x, dtype=float)
    dimension = len(state["features"])
    if features.ndim not in (1, 2) or features.shape[-1] != dimension:
        raise DeviceRefusal(f"x must hold the {dimension} features {state['features']} (shape ({dimension},) or "
                          f"(k, {dimension})), got shape {features.shape}")
    transform = state["transform"]
    features = (features - np.asarray(transform["center"])) / np.asarray(transform["scale"])
    if state["target"] is None:
        if y is not None:
            raise DeviceRefusal(f"campaign {state['campaign']!r} collects no label: call submit(x) without y")
        if spec.unlabeled_rows:
            return {"x": features}
        if dimension != 1:
            raise DeviceRefusal(f"protocol {spec.protocol!r} with {dimension} features needs a mapping of its data")
        return {"value": features[..., 0]}
    if y is None:
        raise DeviceRefusal(f"campaign {state['campaign']!r} collects the label {state['target']!r}: pass y")
    return {"x": features, "y": np.asarray(y, dtype=float)}


def _public_row_data(state: Mapping[str, Any], x: object, y: object) -> dict[str, Any]:
    ids = np.asarray(x, dtype=float)
    if ids.ndim not in (1, 2) or ids.shape[-1] != 1:
        raise DeviceRefusal(f"campaign {state['campaign']!r} takes the id of your row of its public table, not your "
                          f"features: x must be [id] (or a column (k, 1) of ids), got shape {ids.shape}")
    if y is None:
        raise DeviceRefusal(f"campaign {state['campaign']!r} collects the label {state['target']!r}: pass y")
    return {"row": ids[..., 0], "y": np.asarray(y, dtype=float)}


def open_round(state: Mapping[str, Any]) -> tuple[ProtocolSpec, int, RoundState]:
    """The spec, the open round's index and its public state, from ``GET /campaigns/{name}/state``, checked (see the
    module docstring): a :class:`DeviceRefusal` naming what is wrong, before anything is randomized."""
    if not isinstance(state, Mapping):
        raise DeviceRefusal(f"a campaign's state must be a JSON object, got {type(state).__name__}",
                          code="invalid_state")
    if state.get("round") is None or state.get("state") is None:
        raise DeviceRefusal(f"campaign {state.get('campaign')!r} has no open round (status {state.get('status')!r})",
                          code="round_closed")
    name = state.get("campaign")
    try:
        spec = spec_from_json(state["spec"])
        index = state["round"]
        spec.round(index)
        round_state = RoundState.from_json(state["state"])
    except (KeyError, TypeError, ProtocolError) as error:
        raise DeviceRefusal(f"campaign {name!r}: the published spec or round state cannot be used: {error}",
                          code="invalid_state") from None
    if round_state.round_index != index:
        raise DeviceRefusal(f"campaign {name!r}: the published state is of round {round_state.round_index}, the open "
                          f"round is {index}", code="invalid_state")
    for key, value in round_state.values.items():
        if np.max(np.abs(value), initial=0.0) > PUBLIC_MAGNITUDE:
            raise DeviceRefusal(f"campaign {name!r}: round {index}'s published value {key!r} exceeds "
                              f"{PUBLIC_MAGNITUDE:g} in magnitude", code="invalid_state")
    _check_transform(state)
    _check_announced_cost(state, spec, int(index))
    return spec, int(index), round_state


def round_cost(spec: ProtocolSpec, round_index: int) -> tuple[float, float]:
    """What one report of round ``round_index`` spends, (epsilon, delta), from the spec alone: the parameters its
    randomizer is calibrated to (``RoundSpec``; docs/privacy.md 8.7), whatever else the server says."""
    spent = spec.round(round_index)
    return spent.epsilon, spent.delta


def make_report(state: Mapping[str, Any], x: object, y: object = None,
                rng: np.random.Generator | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """The open round's index and the randomized report(s) of ``(x, y)``: the only thing that leaves the device.

    No ceiling and no spend file here (the simulator calls it); a participant's submit goes through
    ``service.client.spend.Device.randomize``, which checks and reserves first."""
    spec, index, round_state = open_round(state)
    return index, randomize(spec, index, round_state, participant_data(spec, state, x, y), rng)


def clipped(state: Mapping[str, Any], x: object, y: object = None) -> tuple[Clipped, ...]:
    """Per public bound of the open round, how many rows of ``(x, y)`` it clips (:mod:`workloads.local.clipping`).
    Computed here from her own values: it never leaves the device (a warning, not part of a report)."""
    spec, index, round_state = open_round(state)
    try:
        return spec.clipped(index, round_state, participant_data(spec, state, x, y))
    except ProtocolError as error:
        raise DeviceRefusal(str(error), code="invalid_participant_data") from None


def clipping_warning(campaign: object, found: tuple[Clipped, ...]) -> str:
    """The warning text: which bounds clipped how many rows."""
    return (f"campaign {campaign!r}: " + "; ".join(item.sentence() for item in found)
            + " (on this device; the count is not sent). Clipped values bias the estimate towards 0.")


def randomize(spec: ProtocolSpec, index: int, round_state: RoundState, data: Mapping[str, Any],
              rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """The protocol's randomizer on prepared data (participant data the protocol refuses: a :class:`DeviceRefusal`)."""
    try:
        return spec.randomize(index, round_state, data, rng)
    except ProtocolError as error:
        raise DeviceRefusal(str(error), code="invalid_participant_data") from None


def _check_transform(state: Mapping[str, Any]) -> None:
    """The public transform ``(x - center) / scale``: one finite center and one positive scale per feature, both
    within :data:`PUBLIC_MAGNITUDE` (a scale at least its inverse)."""
    name, features, transform = state.get("campaign"), state.get("features"), state.get("transform")
    if not isinstance(features, list) or not isinstance(transform, Mapping):
        raise DeviceRefusal(f"campaign {name!r}: the published state lacks its features or their transform",
                          code="invalid_state")
    for part in ("center", "scale"):
        values = transform.get(part)
        if not isinstance(values, list) or len(values) != len(features):
            raise DeviceRefusal(f"campaign {name!r}: the transform's {part} must be a list of {len(features)} numbers "
                              f"(one per feature {features}), got {values!r}", code="invalid_state")
        for feature, value in zip(features, values, strict=True):
            number = value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
            low = 1.0 / PUBLIC_MAGNITUDE if part == "scale" else -PUBLIC_MAGNITUDE
            if not low <= number <= PUBLIC_MAGNITUDE:
                need = (f"a positive number in [{low:g}, {PUBLIC_MAGNITUDE:g}]" if part == "scale"
                        else f"a finite number within +-{PUBLIC_MAGNITUDE:g}")
                raise DeviceRefusal(f"campaign {name!r}: the transform's {part} of feature {feature!r} must be {need}, "
                                  f"got {value!r}", code="invalid_state")


def _check_announced_cost(state: Mapping[str, Any], spec: ProtocolSpec, index: int) -> None:
    """The round's (epsilon, delta) the state announces, where it does, must be the spec's (up to the server's
    rounding): a state that says one cost and calibrates to another is refused."""
    for (key, unit), value in zip(_ANNOUNCED, round_cost(spec, index), strict=True):
        announced = state.get(key)
        if announced is None:
            continue
        if (isinstance(announced, bool) or not isinstance(announced, int | float)
                or not abs(announced - value) <= 1e-9 * abs(value) + unit):
            raise DeviceRefusal(f"campaign {state.get('campaign')!r}: the state announces {key} {announced!r}, its "
                              f"spec's round {index} spends {value!r}", code="invalid_state")
