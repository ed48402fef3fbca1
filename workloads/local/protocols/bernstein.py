"""The Local Bernstein Mechanism as campaign protocols, for linear regression in dimension p <= 3.

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Alg. 2 (``bernstein``) and Alg. 3 (``bernstein-1bit``, one bit per participant). The public loss is
the squared loss ``(<theta, x> - y)^2 / loss_scale`` clipped to ``[0, 1]``, for ``theta`` in the box
``[lower, upper]^p`` mapped to ``[0, 1]^p``, evaluated on the public grid of ``G = (degree + 1)^p`` points
(:func:`workloads.local.randomizers.bernstein.squared_loss_on_grid`). One round, one group; pure epsilon-LDP.

* ``bernstein`` (Alg. 2): the device sends ``{"losses": (G,)}``, her clipped losses plus ``Lap(G / eps)`` each
  (:func:`~workloads.local.randomizers.bernstein.randomize_grid_losses`). The server keeps their running sum: the mean
  is Alg. 2's estimate of the empirical risk at every grid point.
* ``bernstein-1bit`` (Alg. 3): the device draws a grid point ``l`` uniformly and a number ``y ~ Lap(1/a)``, both
  independent of her data (the public randomness of Alg. 3, drawn on the device rather than assigned by the server;
  they reveal nothing about her), evaluates her loss ``v`` at ``l`` and sends the bit ``b ~ Bernoulli((1/2)
  exp(-a(|y - v| - |y|)))`` (:func:`~workloads.local.randomizers.bernstein.one_bit_report`, ``a = ln(2 - e^-eps)``,
  exactly eps-LDP: docs/privacy.md §8.9(d)). To keep running sums, the report carries ``l`` as a one-hot vector
  ``{"count": (G,)}`` and ``{"weighted": (G,)}`` = that vector times ``b y``: per grid point the sums are the number
  of participants and ``sum b y``, and ``2 sum(b y) / count`` is Alg. 3's unbiased estimate. (On the wire that is
  ``2G`` numbers, not one bit: the information is still one bit plus public randomness.) The server accepts exactly
  that form (:meth:`OneBitBernsteinSpec.check_reports`): ``count`` one-hot, ``weighted`` zero off its hot entry.

Participant data: ``{"x": (p,), "y": ()}`` (or rows of them); features are expected in ``[-feature_bound,
feature_bound]`` (only the default ``loss_scale`` relies on it: clipping the loss keeps any input private).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    LAPLACE_TAIL,
    FieldSchema,
    GroupSpec,
    ProtocolError,
    ProtocolSpec,
    ReportError,
    ReportSchema,
    RoundSpec,
    RoundState,
    _features_and_labels,
    noisy_field,
    register_protocol,
)
from workloads.local.randomizers.bernstein import (
    bernstein_grid,
    check_bernstein_dimension,
    grid_loss_noise,
    one_bit_laplace_epsilon,
    one_bit_report,
    randomize_grid_losses,
    squared_loss_on_grid,
)
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive


def default_loss_scale(dimension: int, lower: float, upper: float, feature_bound: float, label_bound: float) -> float:
    """``(p max(|lower|, |upper|) feature_bound + label_bound)^2``: the largest squared residual over the box."""
    return (dimension * max(abs(lower), abs(upper)) * feature_bound + label_bound) ** 2


@dataclass(frozen=True)
class _BernsteinSettings(ProtocolSpec):
    """What both variants share: the box, the grid, the loss scale and the one round."""

    dimension: int
    degree: int
    order: int
    lower: float
    upper: float
    loss_scale: float
    epsilon: float
    participants: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "dimension", check_bernstein_dimension(self.dimension))
        except ParameterError as error:
            raise ProtocolError(str(error)) from None
        object.__setattr__(self, "degree", check_count("degree", self.degree, error=ProtocolError))
        object.__setattr__(self, "order", check_count("order", self.order, error=ProtocolError))
        object.__setattr__(self, "lower", float(self.lower))
        object.__setattr__(self, "upper", float(self.upper))
        if not (math.isfinite(self.lower) and math.isfinite(self.upper) and self.lower < self.upper):
            raise ProtocolError(f"lower < upper must be finite, got lower={self.lower}, upper={self.upper}")
        object.__setattr__(self, "loss_scale", check_positive("loss_scale", self.loss_scale, error=ProtocolError))
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        self._check_groups_and_rounds()

    @property
    def grid_size(self) -> int:
        return (self.degree + 1) ** self.dimension

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, 0.0),)

    def grid_losses(self, data: Mapping[str, Any]) -> tuple[np.ndarray, bool]:
        """The participant(s)' clipped losses at every grid point, ``(k, G)``, and whether one participant was given."""
        x, y = _features_and_labels(data, self.dimension)
        grid = bernstein_grid(self.degree, self.dimension)
        losses = squared_loss_on_grid(grid, np.atleast_2d(x), np.atleast_1d(y), self.lower, self.upper,
                                      self.loss_scale)
        return losses, x.ndim == 1

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Rows whose squared residual exceeds ``loss_scale`` at some grid point (their loss is clipped to 1)."""
        self._check_state_round(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        thetas = self.lower + (self.upper - self.lower) * bernstein_grid(self.degree, self.dimension)
        residual = np.atleast_2d(x) @ thetas.T - np.atleast_1d(y)[:, np.newaxis]
        return clipping.count("loss_scale", self.loss_scale, np.max(residual**2, axis=1) > self.loss_scale,
                              "a squared residual over the box")


@register_protocol
@dataclass(frozen=True)
class BernsteinSpec(_BernsteinSettings):
    """Alg. 2: every grid loss plus ``Lap(G / eps)`` (module docstring)."""

    protocol: ClassVar[str] = "bernstein"

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        noise = grid_loss_noise(self.grid_size, self.epsilon)
        return ReportSchema((noisy_field("losses", (self.grid_size,), 0.0, 1.0, noise, self.grid_size),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        losses, single = self.grid_losses(data)
        reports = randomize_grid_losses(losses, self.epsilon, rng)
        return {"losses": reports[0] if single else reports}


@register_protocol
@dataclass(frozen=True)
class OneBitBernsteinSpec(_BernsteinSettings):
    """Alg. 3: one bit at a random grid point, with its public Laplace number (module docstring)."""

    protocol: ClassVar[str] = "bernstein-1bit"

    @property
    def string_bound(self) -> float:
        """The largest ``|y|`` a report may carry: ``LAPLACE_TAIL / a`` (exceeded with probability ``e^-60``)."""
        return LAPLACE_TAIL / one_bit_laplace_epsilon(self.epsilon)

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        return ReportSchema((FieldSchema("count", (self.grid_size,), 0.0, 1.0, norm=1.0),
                             FieldSchema("weighted", (self.grid_size,), -self.string_bound, self.string_bound)))

    def check_reports(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray]) -> None:
        """Exactly what :meth:`randomize` emits: ``count`` one-hot (entries 0 or 1, exactly one 1) and ``weighted``
        zero off that entry (on it ``b y`` with ``b`` in {0, 1}: any number in the schema's ``[-string_bound,
        string_bound]``, since ``y`` is drawn on the device). Issue 18 finding 2: a report ``count = 0``, ``weighted
        = (-122, 122, ...)`` passed the ranges and moved every grid value."""
        self._check_state_round(round_index, state)
        count, weighted = np.asarray(batch["count"]), np.asarray(batch["weighted"])
        bad = ~(np.all((count == 0.0) | (count == 1.0), axis=1) & (np.count_nonzero(count, axis=1) == 1))
        if bad.any():
            index = int(np.argmax(bad))
            raise ReportError(f"report {index}: field 'count' must be one-hot (one entry 1, the others 0): the grid "
                              "point the participant drew", "count", index)
        bad = np.any((count == 0.0) & (weighted != 0.0), axis=1)
        if bad.any():
            index = int(np.argmax(bad))
            raise ReportError(f"report {index}: field 'weighted' must be 0 off the grid point of 'count' (it is "
                              "that point's b y)", "weighted", index)

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        losses, single = self.grid_losses(data)
        rng = generator_or_device(rng)
        k = losses.shape[0]
        points = rng.integers(0, self.grid_size, size=k)
        strings = np.clip(rng.laplace(0.0, 1.0 / one_bit_laplace_epsilon(self.epsilon), size=k),
                          -self.string_bound, self.string_bound)
        bits = one_bit_report(losses[np.arange(k), points], strings, self.epsilon, rng)
        count = np.zeros((k, self.grid_size))
        count[np.arange(k), points] = 1.0
        weighted = count * (bits * strings)[:, np.newaxis]
        return {"count": count[0], "weighted": weighted[0]} if single else {"count": count, "weighted": weighted}
