"""``linear-ssp``: low-dimensional linear regression (with an intercept) from one report of sufficient statistics.

Each participant holds features ``x`` (``p`` of them) and a label ``y``, both private. She sends once
``R(s)``, ``s = [x, svec(x x^T), y, x y]`` with ``||x|| <= norm_bound`` (scaled into the ball) and
``|y| <= label_bound`` (clipped) (:mod:`workloads.local.randomizers.regression_statistics`), through the campaign's
``randomizer``: ``"l2ball"`` (the default; pure epsilon, delta 0) or ``"gaussian"`` (exact discrete Gaussian on a
grid; epsilon, delta > 0). One round, one group. The server sums the reports, rebuilds ``mean x~ x~^T`` and
``mean x~ y`` and solves least squares (``estimators.local.linear_ssp``) with the spec's public ``ridge`` (``None``:
the default rule there).

Report: ``{"statistics": (D,)}``, ``D = 2p + 1 + p (p + 1) / 2``. l2ball: every honest report has norm exactly
``l2_ball_output_norm(D, R_s, eps)`` (:func:`~workloads.local.protocols.base.sphere_field`); gaussian: every entry
on the grid, within the grid interval of ``[-R_s, R_s]`` plus the discrete Gaussian's tail
(:func:`~workloads.local.protocols.base.noisy_field`). Participant data: ``{"x": (p,), "y": ()}`` (or rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    OneRound,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundState,
    _features_and_labels,
    checked_delta,
    noisy_field,
    register_protocol,
    sphere_field,
)
from workloads.local.randomizers.grid import GridNoise
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.local.randomizers.regression_statistics import (
    STATISTICS_RANDOMIZERS,
    randomize_regression_statistics,
    statistics_length,
    statistics_noise,
    statistics_radius,
)
from workloads.parameters import ParameterError, check_count, check_non_negative, check_positive


@register_protocol
@dataclass(frozen=True)
class LinearSspSpec(OneRound, ProtocolSpec):
    """Local sufficient-statistics perturbation for linear regression with an intercept (module docstring)."""

    protocol: ClassVar[str] = "linear-ssp"
    dimension: int
    norm_bound: float
    label_bound: float
    epsilon: float
    delta: float = 0.0
    randomizer: str = "l2ball"
    #: the ridge added to the Gram matrix's feature block (``None``: the estimator's default rule)
    ridge: float | None = None
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        for name in ("norm_bound", "label_bound", "epsilon"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), error=ProtocolError))
        if self.randomizer not in STATISTICS_RANDOMIZERS:
            raise ProtocolError(f"randomizer must be one of {list(STATISTICS_RANDOMIZERS)}, got {self.randomizer!r}")
        pure = STATISTICS_RANDOMIZERS[self.randomizer].pure
        object.__setattr__(self, "delta", checked_delta(self.delta, pure, self.randomizer))
        if self.ridge is not None:
            object.__setattr__(self, "ridge", check_non_negative("ridge", self.ridge, error=ProtocolError))
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        self.report_variance  # noqa: B018  (the calibration accepts epsilon and delta)
        self._check_groups_and_rounds()

    @property
    def length(self) -> int:
        """``D``: the entries of one report."""
        return statistics_length(self.dimension)

    @property
    def radius(self) -> float:
        """``R_s``: the largest norm of a participant's statistics vector."""
        return statistics_radius(self.norm_bound, self.label_bound)

    @property
    def noise(self) -> GridNoise:
        """The Gaussian randomizer's grid and noise (a :class:`ProtocolError` for the l2ball randomizer)."""
        if self.randomizer != "gaussian":
            raise ProtocolError(f"the {self.randomizer} randomizer adds no grid noise")
        try:
            return statistics_noise(self.dimension, self.norm_bound, self.label_bound, self.epsilon, self.delta)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    @property
    def report_norm(self) -> float:
        """The l2ball randomizer's output norm ``B`` (every report has it)."""
        return l2_ball_output_norm(self.length, self.radius, self.epsilon)

    @property
    def report_variance(self) -> float:
        """An upper bound on the variance of one report's entry around its statistic: ``B^2 / D`` for the l2ball
        (``E[Z Z^T] = B^2 I / D`` exactly: the output is ``B`` times a direction whose law is symmetric under
        ``U -> -U``, and ``U U^T`` is invariant under it, so ``E[U U^T]`` is that of the uniform law) and the discrete
        Gaussian's variance plus a quarter grid step squared (the rounding) for the gaussian."""
        try:
            if self.randomizer == "l2ball":
                return self.report_norm**2 / self.length
            noise = self.noise
            return noise.variance + noise.grid**2 / 4.0
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        if self.randomizer == "l2ball":
            return ReportSchema((sphere_field("statistics", (self.length,), self.report_norm),))
        return ReportSchema((noisy_field("statistics", (self.length,), -self.radius, self.radius, self.noise,
                                         self.length),))

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Rows whose features the ball ``||x|| <= norm_bound`` scales down, and labels beyond ``label_bound``."""
        self._check_state_round(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        return (*clipping.count("norm_bound", self.norm_bound, clipping.norms(x) > self.norm_bound,
                                "a feature row's l2 norm"),
                *clipping.count("label_bound", self.label_bound, np.abs(y) > self.label_bound, "a label"))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        try:
            report = randomize_regression_statistics(
                x, np.atleast_1d(y), norm_bound=self.norm_bound, label_bound=self.label_bound, epsilon=self.epsilon,
                delta=self.delta, randomizer=self.randomizer, rng=rng)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None
        return {"statistics": report}
