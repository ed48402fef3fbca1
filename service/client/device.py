"""The participant's side: from a campaign's published state and her own values to the report she sends.

Numpy and :mod:`workloads` only (no server stack), so the client (``Client.campaign(...).submit``) and the simulator
run the same code: apply the campaign's public transform to the features, shape the values the protocol's randomizer
takes (``{"value"}`` for LDP-AVG, ``{"x", "y"}`` for the Stein GLMs), and randomize with the open round's public
state. ``rng=None`` is the device's source (``workloads.local.rng.device_rng``: OS randomness); only the simulator
passes a seeded generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workloads.local.protocols import ProtocolSpec, RoundState, spec_from_json


class DeviceError(ValueError):
    """The campaign's state or the participant's values cannot be used; the message says which."""


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
        raise DeviceError(f"x must hold the {dimension} features {state['features']} (shape ({dimension},) or "
                          f"(k, {dimension})), got shape {features.shape}")
    transform = state["transform"]
    features = (features - np.asarray(transform["center"])) / np.asarray(transform["scale"])
    if state["target"] is None:
        if y is not None:
            raise DeviceError(f"campaign {state['campaign']!r} collects no label: call submit(x) without y")
        if dimension != 1:
            raise DeviceError(f"protocol {spec.protocol!r} with {dimension} features needs a mapping of its data")
        return {"value": features[..., 0]}
    if y is None:
        raise DeviceError(f"campaign {state['campaign']!r} collects the label {state['target']!r}: pass y")
    return {"x": features, "y": np.asarray(y, dtype=float)}


def _public_row_data(state: Mapping[str, Any], x: object, y: object) -> dict[str, Any]:
    ids = np.asarray(x, dtype=float)
    if ids.ndim not in (1, 2) or ids.shape[-1] != 1:
        raise DeviceError(f"campaign {state['campaign']!r} takes the id of your row of its public table, not your "
                          f"features: x must be [id] (or a column (k, 1) of ids), got shape {ids.shape}")
    if y is None:
        raise DeviceError(f"campaign {state['campaign']!r} collects the label {state['target']!r}: pass y")
    return {"row": ids[..., 0], "y": np.asarray(y, dtype=float)}


def open_round(state: Mapping[str, Any]) -> tuple[ProtocolSpec, int, RoundState]:
    """The spec, the open round's index and its public state, from ``GET /campaigns/{name}/state``."""
    if state.get("round") is None or state.get("state") is None:
        raise DeviceError(f"campaign {state.get('campaign')!r} has no open round (status {state.get('status')!r})")
    return spec_from_json(state["spec"]), int(state["round"]), RoundState.from_json(state["state"])


def make_report(state: Mapping[str, Any], x: object, y: object = None,
                rng: np.random.Generator | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """The open round's index and the randomized report(s) of ``(x, y)``: the only thing that leaves the device."""
    spec, index, round_state = open_round(state)
    return index, spec.randomize(index, round_state, participant_data(spec, state, x, y), rng)
