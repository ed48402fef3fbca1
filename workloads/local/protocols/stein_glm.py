"""The Stein-lemma GLM protocols (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021): one round (Algs. 1-4) and two rounds
(Alg. 5 of the journal version)."""

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
    _check_norm,
    _features,
    _features_and_labels,
    noisy_field,
    register_protocol,
)
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.laplace import interval_noise
from workloads.local.randomizers.sufficient_statistics import (
    StatisticsNoise,
    clip_features,
    noise_scales,
    randomize_sufficient_statistics,
    statistics_ranges,
    triangle_size,
)
from workloads.local.randomizers.two_round_projection import randomize_projection
from workloads.parameters import ParameterError, check_count, check_positive, check_probability


def _statistics_schema(dimension: int, norm_bound: float, label_bound: float, noise: StatisticsNoise) -> ReportSchema:
    """Each part on its grid, within its range (``|x_i x_j| <= r^2``, ``|x_i y| <= r B``) plus the discrete Gaussian's
    tail, union bound over all the report's entries."""
    ranges = statistics_ranges(norm_bound, label_bound)
    entries = dimension + (0 if noise.xx_noise is None else triangle_size(dimension))
    moment = noisy_field("xy", (dimension,), *ranges["xy"], noise.xy_noise, entries)
    if noise.xx_noise is None:
        return ReportSchema((moment,))
    square = noisy_field("xx", (triangle_size(dimension),), *ranges["xx"], noise.xx_noise, entries)
    return ReportSchema((square, moment))


@dataclass(frozen=True)
class _StatisticsBounds:
    """The bounds of the sufficient-statistics report shared by the one- and two-round Stein protocols."""

    dimension: int
    norm_bound: float
    label_bound: float

    def _check_bounds(self, norm: str) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "norm_bound", check_positive("norm_bound", self.norm_bound, error=ProtocolError))
        object.__setattr__(self, "label_bound", check_positive("label_bound", self.label_bound, error=ProtocolError))
        _check_norm(norm)

    def statistics_noise(
        self, epsilon: float, delta: float, gram: bool = True, xy_ratio: float | None = None
    ) -> StatisticsNoise:
        try:
            return noise_scales(self.dimension, self.norm_bound, self.label_bound, epsilon, delta, gram, xy_ratio)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    def _clipped_statistics(self, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Rows whose features the ball ``||x|| <= norm_bound`` scales down, and labels beyond ``label_bound``."""
        x, y = _features_and_labels(data, self.dimension)
        return (*clipping.count("norm_bound", self.norm_bound, clipping.norms(x, self.norm) > self.norm_bound,
                                f"a feature row's {self.norm} norm"),
                *clipping.count("label_bound", self.label_bound, np.abs(y) > self.label_bound, "a label"))

    def _randomize_statistics(
        self, data: Mapping[str, Any], epsilon: float, delta: float, norm: str, gram: bool,
        xy_ratio: float | None, rng: np.random.Generator | None,
    ) -> dict[str, np.ndarray]:
        x, y = _features_and_labels(data, self.dimension)
        return randomize_sufficient_statistics(
            x, y, norm_bound=self.norm_bound, label_bound=self.label_bound, epsilon=epsilon, delta=delta, norm=norm,
            gram=gram, xy_ratio=xy_ratio, rng=rng)


@register_protocol
@dataclass(frozen=True)
class SteinGlmSpec(_StatisticsBounds, ProtocolSpec):
    """Non-interactive Stein-lemma GLMs (Wang, Hu, Zhang, Gaboardi & Xu, Algs. 1-4): one round of noisy
    ``(x x^T, x y)`` with ``||x|| <= norm_bound`` (``norm`` "l2": Algs. 1, 3; "l1": Algs. 2, 4) and
    ``|y| <= label_bound``. The link is not part of the spec: one collection answers many GLMs (Remark 16).

    Report: ``{"xx": (p (p + 1) / 2,), "xy": (p,)}``; with ``gram=False`` only ``{"xy": (p,)}`` (the server then
    takes ``X^T X`` from public rows; less noise on ``x y``). ``xy_ratio``: the noise on ``x y`` over the noise on
    ``x x^T`` (default ``sqrt(2) B / r``, each part's noise proportional to its own sensitivity).
    Participant data: ``{"x": (p,), "y": ()}``."""

    protocol: ClassVar[str] = "stein-glm"
    epsilon: float
    delta: float
    norm: str = "l2"
    gram: bool = True
    xy_ratio: float | None = None
    participants: int | None = None

    def __post_init__(self) -> None:
        self._check_bounds(self.norm)
        if not isinstance(self.gram, bool):
            raise ProtocolError(f"gram must be true or false, got {self.gram!r}")
        if self.xy_ratio is not None:
            object.__setattr__(self, "xy_ratio", check_positive("xy_ratio", self.xy_ratio, error=ProtocolError))
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        object.__setattr__(self, "delta", check_probability("delta", self.delta, error=ProtocolError))
        self._check_groups_and_rounds()

    @property
    def noise(self) -> StatisticsNoise:
        """The noise standard deviations of the report's two parts."""
        return self.statistics_noise(self.epsilon, self.delta, self.gram, self.xy_ratio)

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, self.delta),)

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        return _statistics_schema(self.dimension, self.norm_bound, self.label_bound, self.noise)

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        return self._randomize_statistics(data, self.epsilon, self.delta, self.norm, self.gram, self.xy_ratio, rng)

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        self._check_state_round(round_index, state)
        return self._clipped_statistics(data)


@register_protocol
@dataclass(frozen=True)
class TwoRoundSteinSpec(_StatisticsBounds, ProtocolSpec):
    """The 2-round Stein GLM protocol without public data (journal version, App. E, Alg. 5; Remark 10 of ALT 2021).

    Round 0: noisy ``(x x^T, x y)`` as in :class:`SteinGlmSpec` (Gaussian, ``first.epsilon``, ``first.delta``).
    Round 1: the server publishes ``coef`` (round 0's OLS estimate) and ``bound``; each participant of
    ``second.group`` sends ``clip(<x, coef>, -bound, bound) + Lap(2 bound / second.epsilon)``
    (:mod:`workloads.local.randomizers.two_round_projection`; ``second.delta`` must be 0). ``bound`` is
    ``projection_scale`` times round 0's estimate of the standard deviation of ``<x, coef>``.

    :meth:`split_budget` (the paper's Alg. 5: everyone reports twice, half the budget each) and :meth:`split_groups`
    (Remark 10: two disjoint groups, each reports once) build the two usual layouts."""

    protocol: ClassVar[str] = "stein-glm-2round"
    first: RoundSpec
    second: RoundSpec
    participant_groups: tuple[GroupSpec, ...]
    norm: str = "l2"
    projection_scale: float = 4.0

    def __post_init__(self) -> None:
        self._check_bounds(self.norm)
        if not isinstance(self.first, RoundSpec) or not isinstance(self.second, RoundSpec):
            raise ProtocolError("first and second must be RoundSpec values")
        if self.first.delta <= 0:
            raise ProtocolError(f"first.delta must be in (0, 1) for the Gaussian first round, got {self.first.delta}")
        if self.second.delta != 0:
            raise ProtocolError(f"second.delta must be 0 (the second round is pure Laplace), got {self.second.delta}")
        object.__setattr__(self, "participant_groups", tuple(self.participant_groups))
        object.__setattr__(self, "projection_scale",
                           check_positive("projection_scale", self.projection_scale, error=ProtocolError))
        self._check_groups_and_rounds()

    @classmethod
    def split_budget(
        cls, dimension: int, norm_bound: float, label_bound: float, epsilon: float, delta: float,
        participants: int | None = None, **options: Any,
    ) -> TwoRoundSteinSpec:
        """Alg. 5: every participant reports in both rounds, epsilon/2 each; the Gaussian round takes all of delta."""
        return cls(dimension, norm_bound, label_bound, RoundSpec("all", epsilon / 2.0, delta),
                   RoundSpec("all", epsilon / 2.0, 0.0), (GroupSpec("all", participants),), **options)

    @classmethod
    def split_groups(
        cls, dimension: int, norm_bound: float, label_bound: float, epsilon: float, delta: float,
        first_size: int | None = None, second_size: int | None = None, **options: Any,
    ) -> TwoRoundSteinSpec:
        """Remark 10: a first group reports noisy statistics, a second group projections, each at full budget."""
        groups = (GroupSpec("first", first_size), GroupSpec("second", second_size))
        return cls(dimension, norm_bound, label_bound, RoundSpec("first", epsilon, delta),
                   RoundSpec("second", epsilon, 0.0), groups, **options)

    @property
    def noise(self) -> StatisticsNoise:
        """The noise standard deviations of a round-0 report (default split, as :class:`SteinGlmSpec`)."""
        return self.statistics_noise(self.first.epsilon, self.first.delta)

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (self.first, self.second)

    def groups(self) -> tuple[GroupSpec, ...]:
        return self.participant_groups

    def projection_noise(self, state: RoundState) -> GridNoise:
        """The grid and discrete Laplace noise of round 1's report (interval ``[-bound, bound]``)."""
        bound = self._projection_state(state)[1]
        return interval_noise(-bound, bound, self.second.epsilon)

    def projection_laplace_scale(self, state: RoundState) -> float:
        """The Laplace scale ``g t`` of round 1, at least ``2 bound / second.epsilon``."""
        return self.projection_noise(state).scale

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        if round_index == 0:
            return _statistics_schema(self.dimension, self.norm_bound, self.label_bound, self.noise)
        bound = self._projection_state(state)[1]
        return ReportSchema((noisy_field("projection", (), -bound, bound, self.projection_noise(state), 1),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        if round_index == 0:
            return self._randomize_statistics(data, self.first.epsilon, self.first.delta, self.norm, True, None, rng)
        coef, bound = self._projection_state(state)
        projection = randomize_projection(_features(data, self.dimension), coef, norm_bound=self.norm_bound,
                                          bound=bound, epsilon=self.second.epsilon, norm=self.norm, rng=rng)
        return {"projection": projection}

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        self._check_state_round(round_index, state)
        if round_index == 0:
            return self._clipped_statistics(data)
        coef, bound = self._projection_state(state)
        x = _features(data, self.dimension)
        inside = clip_features(x, self.norm_bound, self.norm)
        return (*clipping.count("norm_bound", self.norm_bound, clipping.norms(x, self.norm) > self.norm_bound,
                                f"a feature row's {self.norm} norm"),
                *clipping.count("bound", bound, np.abs(np.atleast_2d(inside) @ coef) > bound,
                                "the projection <x, coef>"))

    def projection_state(self, coef: object, bound: float) -> RoundState:
        """Round 1's public state (checked)."""
        state = RoundState(1, {"coef": np.asarray(coef, dtype=float), "bound": bound})
        self._projection_state(state)
        return state

    def _projection_state(self, state: RoundState) -> tuple[np.ndarray, float]:
        if state.round_index != 1:
            raise ProtocolError(f"the projection round is round 1, got a state of round {state.round_index}")
        coef = state.vector("coef", self.dimension)
        bound = check_positive("state value 'bound'", state.number("bound"), error=ProtocolError)
        return coef, bound


