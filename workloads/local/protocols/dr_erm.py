"""DR-ERM-LDP as a campaign protocol: a public random projection, one l2-ball report of projected statistics each.

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Alg. 4, with the squared loss and our low-dimensional step (``estimators.local.sparse.dr_erm``): the
public ``Phi`` (``rows x p``, entries ``+-1/sqrt(rows)``) comes from ``projection_seed``, part of the public spec and
published in round 0's state (drawn by the server at creation; no privacy rests on it, anyone can rebuild ``Phi``
from it: :func:`workloads.local.randomizers.random_projection_statistics.random_projection`). Each participant sends
``R_eps([y u, vech(u u^T)])``, ``u = Phi x`` clipped to norm ``feature_radius``, ``y`` clipped to ``label_bound``,
through the l2-ball randomizer (eps-LDP, once; docs/privacy.md §8.9). The server keeps the running sum; the estimate
solves the projected least squares over ``Phi C`` and recovers ``w`` in ``C`` (the l1 ball or the simplex of radius
``radius``) with cvxpy.

Report: ``{"statistics": (rows + rows (rows + 1) / 2,)}``, every honest report of l2 norm ``B``
(:func:`~workloads.local.randomizers.l2ball.l2_ball_output_norm`), refused above it.
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
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.local.randomizers.random_projection_statistics import (
    projected_statistics_bound,
    projected_statistics_report,
    random_projection,
)
from workloads.parameters import check_count, check_positive

CONSTRAINTS = ("l1", "simplex")
#: seeds stay below 2^52 so that the published state (floats) carries them exactly
MAX_SEED = 2**52


@register_protocol
@dataclass(frozen=True)
class DrErmSpec(ProtocolSpec):
    """DR-ERM-LDP (Alg. 4 of Wang, Gaboardi & Xu 2018) with the squared loss (module docstring)."""

    protocol: ClassVar[str] = "dr-erm"
    dimension: int
    rows: int
    projection_seed: int
    epsilon: float
    feature_radius: float = 1.0
    label_bound: float = 1.0
    constraint: str = "l1"
    radius: float = 1.0
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "rows", check_count("rows", self.rows, error=ProtocolError))
        seed = self.projection_seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < MAX_SEED:
            raise ProtocolError(f"projection_seed must be an integer in [0, 2^52), got {seed!r}")
        for name in ("epsilon", "feature_radius", "label_bound", "radius"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), error=ProtocolError))
        if self.constraint not in CONSTRAINTS:
            raise ProtocolError(f"constraint must be one of {list(CONSTRAINTS)}, got {self.constraint!r}")
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        self._check_groups_and_rounds()

    @property
    def width(self) -> int:
        return self.rows + self.rows * (self.rows + 1) // 2

    @property
    def report_norm(self) -> float:
        return l2_ball_output_norm(self.width, projected_statistics_bound(self.feature_radius, self.label_bound),
                                   self.epsilon)

    def projection(self) -> np.ndarray:
        """The public ``Phi`` (``rows x p``)."""
        return random_projection(self.rows, self.dimension, self.projection_seed)

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, 0.0),)

    def initial_state(self, public_rows: np.ndarray | None = None) -> RoundState:
        return RoundState(0, {"projection_seed": float(self.projection_seed), "rows": float(self.rows)})

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        if state.number("projection_seed") != self.projection_seed:
            raise ProtocolError("the state's projection_seed differs from the spec's")
        return ReportSchema((sphere_field("statistics", (self.width,), self.report_norm),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self.report_schema(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        report = projected_statistics_report(x, y, self.projection(), self.feature_radius, self.label_bound,
                                             self.epsilon, rng)
        return {"statistics": report}

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        self.report_schema(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        projected = np.atleast_2d(x) @ self.projection().T
        return (*clipping.count("feature_radius", self.feature_radius,
                                clipping.norms(projected) > self.feature_radius, "a projected row's norm ||Phi x||"),
                *clipping.count("label_bound", self.label_bound, np.abs(y) > self.label_bound, "a label"))
