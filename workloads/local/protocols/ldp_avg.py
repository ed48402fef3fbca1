"""1-dim LDP-AVG (Wang, Gaboardi & Xu 2018, Alg. 1) as a campaign protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    GroupSpec,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundSpec,
    RoundState,
    _participant_array,
    noisy_field,
    register_protocol,
)
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.laplace import interval_noise, randomize_interval_values
from workloads.parameters import ParameterError, check_positive


@register_protocol
@dataclass(frozen=True)
class LdpAverageSpec(ProtocolSpec):
    """1-dim LDP-AVG (Wang, Gaboardi & Xu 2018, Alg. 1): one round, each value in ``[lower, upper]`` rounded to a
    public grid plus discrete Laplace noise (:mod:`workloads.local.randomizers.laplace`).

    Report: ``{"value": ()}``, a multiple of the grid step. Participant data: ``{"value": v}``. Pure epsilon-LDP
    (delta = 0)."""

    protocol: ClassVar[str] = "ldp-avg"
    lower: float
    upper: float
    epsilon: float
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", float(self.lower))
        object.__setattr__(self, "upper", float(self.upper))
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        self.scale  # noqa: B018  (checks lower < upper)
        self._check_groups_and_rounds()

    @property
    def dimension(self) -> int:
        return 1

    @property
    def noise(self) -> GridNoise:
        """The public grid and the discrete Laplace noise of a report."""
        try:
            return interval_noise(self.lower, self.upper, self.epsilon)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    @property
    def scale(self) -> float:
        """The Laplace scale ``g t``, at least ``(upper - lower) / epsilon``."""
        return self.noise.scale

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, 0.0),)

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        return ReportSchema((noisy_field("value", (), self.lower, self.upper, self.noise, 1),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        value = _participant_array(data, "value")
        return {"value": randomize_interval_values(value, self.lower, self.upper, self.epsilon, rng)}

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        value = _participant_array(data, "value")
        return (*clipping.count("lower", self.lower, value < self.lower, "a value"),
                *clipping.count("upper", self.upper, value > self.upper, "a value"))


