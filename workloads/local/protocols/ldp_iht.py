"""The LDP-IHT protocol: ``T`` rounds, ``T`` disjoint groups, each member of group ``t`` reports one gradient.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 1.
Round ``t`` (0-based here, ``t + 1`` in the paper) publishes ``theta`` (``theta_t``; round 0 publishes 0); each
member of its group sends ``R_eps(x clip(<theta, x> - y, -c, c))``, the l2-ball randomizer of Duchi, Jordan &
Wainwright (2018) on her clipped least-squares gradient
(:func:`workloads.local.randomizers.iht_gradient.ldp_iht_report`). The server averages the round's reports and takes
one IHT step (``estimators.local.sparse.ldp_iht_rounds``): the next round's ``theta``. The last round's step is the
estimate.

Everything the server does is public and fixed in the spec: the sparsity ``s`` kept by ``Trunc``, the step ``eta``,
the ball radius ``R`` of eq. 5, the residual clip ``c`` and the feature-norm bound ``r_x`` (the randomizer's ball has
radius ``r_x c``). Each participant reports once: ``epsilon``-LDP, delta 0 (Thm. 4; docs/privacy.md §8.9).

Report: ``{"gradient": (p,)}``; every honest report has l2 norm exactly ``B = l2_ball_output_norm(p, r_x c, eps)``,
so the schema requires that norm (up to float rounding, :data:`~workloads.local.protocols.base.EXACT_NORM_RTOL`) and
bounds each entry by ``B``. Participant data:
``{"x": (p,), "y": ()}`` (or rows of them).
"""

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
    _features_and_labels,
    register_protocol,
    sphere_field,
)
from workloads.local.randomizers.iht_gradient import ldp_iht_report
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.parameters import check_count, check_positive, check_sparsity

#: relative slack on the report norm: rounding of ``B g / ||g||``, and a gateway's single-precision batches (float32
#: keeps about 6e-8 relative per entry)
NORM_SLACK = 1e-6


def group_sizes(participants: int, steps: int) -> list[int]:
    """Alg. 1 step 1: ``floor(n / T)`` per group, the last also takes the remainder."""
    size = participants // steps
    return [size] * (steps - 1) + [participants - size * (steps - 1)]


@register_protocol
@dataclass(frozen=True)
class LdpIhtSpec(ProtocolSpec):
    """LDP-IHT (Alg. 1 of Wang & Xu 2019): ``steps`` rounds, one disjoint group each (see the module docstring)."""

    protocol: ClassVar[str] = "ldp-iht"
    dimension: int
    sparsity: int
    steps: int
    eta: float
    epsilon: float
    residual_bound: float
    feature_norm_bound: float
    radius: float = 1.0
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "sparsity", check_sparsity(self.sparsity, self.dimension, error=ProtocolError))
        object.__setattr__(self, "steps", check_count("rounds (T)", self.steps, error=ProtocolError))
        for name in ("eta", "epsilon", "residual_bound", "feature_norm_bound", "radius"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), error=ProtocolError))
        if self.participants is not None:
            n = check_count("participants", self.participants, error=ProtocolError)
            if n < self.steps:
                raise ProtocolError(f"participants must be at least the number of rounds T={self.steps} (one "
                                    f"disjoint group per round), got {n}")
        self._check_groups_and_rounds()

    @property
    def gradient_radius(self) -> float:
        """``r = r_x c``: the l2 ball the clipped gradients lie in."""
        return self.feature_norm_bound * self.residual_bound

    @property
    def report_norm(self) -> float:
        """``B``: the l2 norm of every report."""
        return l2_ball_output_norm(self.dimension, self.gradient_radius, self.epsilon)

    def groups(self) -> tuple[GroupSpec, ...]:
        if self.participants is None:
            return tuple(GroupSpec(f"group-{t + 1}") for t in range(self.steps))
        return tuple(GroupSpec(f"group-{t + 1}", size)
                     for t, size in enumerate(group_sizes(self.participants, self.steps)))

    def rounds(self) -> tuple[RoundSpec, ...]:
        return tuple(RoundSpec(f"group-{t + 1}", self.epsilon, 0.0) for t in range(self.steps))

    def initial_state(self, public_rows: np.ndarray | None = None) -> RoundState:
        return self.theta_state(0, np.zeros(self.dimension))

    def theta_state(self, round_index: int, theta: object) -> RoundState:
        """Round ``round_index``'s public state: the iterate ``theta`` its group's gradients are taken at."""
        state = RoundState(round_index, {"theta": np.asarray(theta, dtype=float)})
        self.theta(round_index, state)
        return state

    def theta(self, round_index: int, state: RoundState) -> np.ndarray:
        """The published iterate of round ``round_index`` (checked: length ``p``, inside the ball of radius R)."""
        self._check_state_round(round_index, state)
        theta = state.vector("theta", self.dimension)
        if float(np.linalg.norm(theta)) > self.radius * (1 + NORM_SLACK):
            raise ProtocolError(f"state value 'theta' of round {round_index} lies outside the ball of radius "
                                f"{self.radius}")
        return theta

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self.theta(round_index, state)
        return ReportSchema((sphere_field("gradient", (self.dimension,), self.report_norm),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        theta = self.theta(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        report = ldp_iht_report(theta, x, y, self.residual_bound, self.feature_norm_bound, self.epsilon, rng)
        return {"gradient": report}

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Residuals beyond ``c`` (``residual_bound``), and gradients ``x clip(r)`` beyond the ball of radius
        ``feature_norm_bound * c`` the randomizer scales them into."""
        theta = self.theta(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        residual = np.atleast_2d(x) @ theta - np.atleast_1d(y)
        gradient = clipping.norms(x) * np.minimum(np.abs(residual), self.residual_bound)
        return (*clipping.count("residual_bound", self.residual_bound, np.abs(residual) > self.residual_bound,
                                "a residual <theta, x> - y"),
                *clipping.count("feature_norm_bound", self.feature_norm_bound,
                                gradient > self.feature_norm_bound * self.residual_bound,
                                "a gradient x clip(r) of norm (over residual_bound)"))
