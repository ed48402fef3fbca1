"""The Stein-lemma GLM protocols (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021): one round (Algs. 1-4) and two rounds
(Alg. 5 of the journal version)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    GroupSpec,
    OneRound,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundSpec,
    RoundState,
    _check_norm,
    _features,
    _features_and_labels,
    checked_delta,
    noisy_field,
    register_protocol,
)
from workloads.local.protocols.vector_reports import VECTOR_RANDOMIZERS
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.laplace import interval_noise
from workloads.local.randomizers.sufficient_statistics import (
    StatisticsNoise,
    clip_features,
    clip_labels,
    noise_scales,
    randomize_sufficient_statistics,
    statistics_ranges,
    triangle_size,
)
from workloads.local.randomizers.two_round_projection import randomize_projection
from workloads.parameters import ParameterError, check_count, check_positive


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


#: ``SteinGlmSpec.variant``: "public-gram" (what the service builds by default, see the class) or "paper" (Alg. 1-4 as
#: printed). The dataclass default stays "paper" so that specs stored before the variant existed read back unchanged.
VARIANTS = ("public-gram", "paper")


@register_protocol
@dataclass(frozen=True)
class SteinGlmSpec(OneRound, _StatisticsBounds, ProtocolSpec):
    """Non-interactive Stein-lemma GLMs (Wang, Hu, Zhang, Gaboardi & Xu, Algs. 1-4). The link is not part of the spec:
    one collection answers many GLMs (Remark 16). Participant data: ``{"x": (p,), "y": ()}``.

    ``variant="paper"`` (Algs. 1-4 as printed): one round of noisy ``(x x^T, x y)`` with ``||x|| <= norm_bound``
    (``norm`` "l2": Algs. 1, 3; "l1": Algs. 2, 4) and ``|y| <= label_bound``, Gaussian noise. Report:
    ``{"xx": (p (p + 1) / 2,), "xy": (p,)}``; with ``gram=False`` only ``{"xy": (p,)}`` (the server then takes
    ``X^T X`` from public rows; less noise on ``x y``). ``xy_ratio``: the noise on ``x y`` over the noise on
    ``x x^T`` (default ``sqrt(2) B / r``, each part's noise proportional to its own sensitivity).

    ``variant="public-gram"`` (Remark 11 and Sec. 5 taken to their end: ``X^T X`` needs no labels, so it comes from the
    public rows alone): the device maps its (publicly standardized) ``x`` by the public ``whitening`` ``W`` (row-major
    ``p x p``; ``None``: the identity), clips ``W x`` to the l2 ball of radius ``norm_bound`` (a public quantile
    ``norm_quantile`` of the public rows' norms), appends a 1 and reports the one vector ``v = clip(y - y0, -B, B) (1,
    clip(W x))`` (``y0 = label_center``, public: the labels are taken to lie in ``[y0 - B, y0 + B]``; ``||v|| <= B
    sqrt(1 + r^2)``, :attr:`report_radius`) through ``randomizer``
    (:data:`~workloads.local.protocols.vector_reports.VECTOR_RANDOMIZERS`: ``privunit``, the service's default, or
    ``l2ball``, pure epsilon; ``gaussian``, (epsilon, delta)). Report: ``{"xy": (p + 1,)}``, entry 0 estimating ``E[y]``
    (what the intercept needs), entries 1.. ``E[x y]`` (both shifted by ``y0``). ``gram`` is False in this variant;
    ``norm`` must be "l2"."""

    protocol: ClassVar[str] = "stein-glm"
    epsilon: float
    delta: float
    norm: str = "l2"
    gram: bool = True
    xy_ratio: float | None = None
    participants: int | None = None
    variant: str = "paper"
    randomizer: str = "gaussian"
    norm_quantile: float | None = None
    label_center: float = 0.0
    whitening: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        self._check_bounds(self.norm)
        if not isinstance(self.gram, bool):
            raise ProtocolError(f"gram must be true or false, got {self.gram!r}")
        if self.xy_ratio is not None:
            object.__setattr__(self, "xy_ratio", check_positive("xy_ratio", self.xy_ratio, error=ProtocolError))
        if self.variant not in VARIANTS:
            raise ProtocolError(f"variant must be one of {list(VARIANTS)}, got {self.variant!r}")
        if self.randomizer not in VECTOR_RANDOMIZERS:
            raise ProtocolError(f"randomizer must be one of {sorted(VECTOR_RANDOMIZERS)}, got {self.randomizer!r}")
        if self.norm_quantile is not None and not 0.0 < self.norm_quantile <= 1.0:
            raise ProtocolError(f"norm_quantile must be in (0, 1], got {self.norm_quantile!r}")
        pure = VECTOR_RANDOMIZERS[self.randomizer].pure
        if self.variant == "paper":
            if self.randomizer != "gaussian":
                raise ProtocolError(f"variant 'paper' reports with the Gaussian randomizer (Alg. 1), got randomizer "
                                    f"{self.randomizer!r}")
        else:
            if self.norm != "l2":
                raise ProtocolError(f"variant 'public-gram' clips x in the l2 norm, got norm {self.norm!r}")
            if self.xy_ratio is not None:
                raise ProtocolError("xy_ratio applies to variant 'paper' only (the public-gram report has no x x^T)")
            object.__setattr__(self, "gram", False)
        if not isinstance(self.label_center, int | float) or isinstance(self.label_center, bool) or not math.isfinite(
            self.label_center
        ):
            raise ProtocolError(f"label_center must be a finite number, got {self.label_center!r}")
        if self.label_center != 0 and self.variant == "paper":
            raise ProtocolError("label_center applies to variant 'public-gram' only (Alg. 1 reports x y)")
        object.__setattr__(self, "label_center", float(self.label_center))
        if self.whitening is not None:
            if self.variant == "paper":
                raise ProtocolError("whitening applies to variant 'public-gram' only")
            matrix = np.asarray(self.whitening, dtype=float)
            if matrix.shape != (self.dimension**2,) or not np.all(np.isfinite(matrix)):
                raise ProtocolError(f"whitening must be {self.dimension}x{self.dimension} = {self.dimension**2} "
                                    f"finite numbers (row-major), got shape {matrix.shape}")
            object.__setattr__(self, "whitening", tuple(float(v) for v in matrix))
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        object.__setattr__(self, "delta", checked_delta(self.delta, pure, self.randomizer))
        self._check_groups_and_rounds()

    @property
    def whitening_matrix(self) -> np.ndarray:
        """The public ``W`` (``p x p``) the public-gram device applies to its standardized ``x`` (identity: none)."""
        if self.whitening is None:
            return np.eye(self.dimension)
        return np.asarray(self.whitening, dtype=float).reshape(self.dimension, self.dimension)

    def device_features(self, x: object) -> np.ndarray:
        """``z = (1, clip(W x))`` per row: the public-gram feature map (the server maps the public rows the same)."""
        return augmented_features(np.asarray(x, dtype=float) @ self.whitening_matrix.T, self.norm_bound)

    @property
    def report_radius(self) -> float:
        """``B sqrt(1 + r^2)``: the l2 bound of the public-gram report's vector ``clip(y) (1, clip(x))``."""
        return self.label_bound * math.hypot(1.0, self.norm_bound)

    @property
    def noise(self) -> StatisticsNoise:
        """The noise standard deviations of the report's parts (the Gaussian randomizer; for public-gram, the
        vector's noise is ``xy``)."""
        if self.randomizer != "gaussian":
            raise ProtocolError(f"the {self.randomizer} randomizer adds no Gaussian noise")
        if self.variant == "public-gram":
            return self.statistics_noise_of(self.dimension + 1, self.report_radius)
        return self.statistics_noise(self.epsilon, self.delta, self.gram, self.xy_ratio)

    def statistics_noise_of(self, dimension: int, radius: float) -> StatisticsNoise:
        try:
            return noise_scales(dimension, radius, 1.0, self.epsilon, self.delta, gram=False)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        if self.variant == "public-gram":
            randomizer = VECTOR_RANDOMIZERS[self.randomizer]
            try:
                field = randomizer.schema("xy", self.dimension + 1, self.report_radius, self.epsilon, self.delta)
            except ParameterError as error:
                raise ProtocolError(str(error)) from None
            return ReportSchema((field,))
        return _statistics_schema(self.dimension, self.norm_bound, self.label_bound, self.noise)

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        if self.variant == "public-gram":
            x, y = _features_and_labels(data, self.dimension)
            vector = augmented_moment(x @ self.whitening_matrix.T, y, self.norm_bound, self.label_bound,
                                      self.label_center)
            return {"xy": VECTOR_RANDOMIZERS[self.randomizer].randomize(
                vector, self.report_radius, self.epsilon, self.delta, rng)}
        return self._randomize_statistics(data, self.epsilon, self.delta, self.norm, self.gram, self.xy_ratio, rng)

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        self._check_state_round(round_index, state)
        if self.variant == "public-gram":
            x, y = _features_and_labels(data, self.dimension)
            whitened = np.atleast_2d(x) @ self.whitening_matrix.T
            return (*clipping.count("norm_bound", self.norm_bound, clipping.norms(whitened, "l2") > self.norm_bound,
                                    "a whitened feature row's l2 norm"),
                    *clipping.count("label_bound", self.label_bound,
                                    np.abs(np.asarray(y, dtype=float) - self.label_center) > self.label_bound,
                                    "a label's distance from label_center"))
        return self._clipped_statistics(data)


def augmented_features(x: object, norm_bound: float) -> np.ndarray:
    """``(1, clip(x))`` per row: ``x`` scaled into the l2 ball of radius ``norm_bound``, a 1 prepended (the
    public-gram variant's feature map; the server builds its public Gram from the same map of the public rows)."""
    clipped = clip_features(x, norm_bound, "l2")
    return np.concatenate([np.ones((*clipped.shape[:-1], 1)), clipped], axis=-1)


def augmented_moment(x: object, y: object, norm_bound: float, label_bound: float,
                     label_center: float = 0.0) -> np.ndarray:
    """``clip(y - y0, -B, B) (1, clip(x))``: the vector a public-gram participant randomizes (norm at most
    ``B sqrt(1 + r^2)``; ``y0`` the public label centre, 1/2 for 0/1 labels)."""
    labels = clip_labels(np.asarray(y, dtype=float) - label_center, label_bound)
    return augmented_features(x, norm_bound) * labels[..., None]


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


