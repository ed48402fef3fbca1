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

The gradient's randomizer (``randomizer``):

* ``"l2ball"`` (the default, and what a spec stored before the option existed loads as): report
  ``{"gradient": (p,)}``; every honest report has l2 norm exactly ``B = l2_ball_output_norm(p, r_x c, eps)``, so the
  schema requires that norm (up to float rounding, :data:`~workloads.local.protocols.base.EXACT_NORM_RTOL`) and
  bounds each entry by ``B``;
* ``"coordinate"`` (issue 20): one uniformly drawn coordinate ``J`` of the gradient, its entry clipped to
  ``[-b, b]``, ``b = feature_bound * c`` (``feature_bound`` bounds ``|x_j|``), through the one-dimensional randomizer
  and scaled by ``p`` (:mod:`workloads.local.randomizers.coordinate`): report ``{"coordinate": (), "value": ()}``,
  ``coordinate`` a whole number in ``[0, p - 1]`` and ``value`` exactly ``+p C`` or ``-p C``, ``C = b coth(eps'/2)``
  (:meth:`LdpIhtSpec.check_reports` admits nothing else). The server sums the dense ``value e_coordinate``
  (:meth:`LdpIhtSpec.aggregate_input`) as the field ``gradient``, so the transition and the estimate are the same
  for both randomizers.

Participant data: ``{"x": (p,), "y": ()}`` (or rows of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    FieldSchema,
    GroupSpec,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundSpec,
    RoundState,
    _features_and_labels,
    check_two_point,
    check_whole_numbers,
    register_protocol,
    sphere_field,
)
from workloads.local.randomizers.coordinate import coordinate_report_magnitude, expand_coordinate_reports
from workloads.local.randomizers.iht_gradient import ldp_iht_coordinate_report, ldp_iht_report
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.parameters import check_count, check_positive, check_sparsity

#: the gradient randomizers an ldp-iht campaign may use (module docstring)
GRADIENT_RANDOMIZERS = ("l2ball", "coordinate")

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
    #: one of :data:`GRADIENT_RANDOMIZERS`; a spec stored before the option existed has no key: ``"l2ball"``
    randomizer: str = "l2ball"
    #: ``coordinate`` only: the bound on ``|x_j|`` (the sampled entry is clipped to ``feature_bound * c``)
    feature_bound: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        if self.randomizer not in GRADIENT_RANDOMIZERS:
            raise ProtocolError(f"randomizer must be one of {list(GRADIENT_RANDOMIZERS)}, got {self.randomizer!r}")
        if self.randomizer == "coordinate" or self.feature_bound is not None:
            object.__setattr__(self, "feature_bound", check_positive("feature_bound", self.feature_bound,
                                                                     error=ProtocolError))
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
        """``B``: the l2 norm of every report (both randomizers: ``p C`` for ``coordinate``)."""
        if self.randomizer == "coordinate":
            return self.coordinate_magnitude
        return l2_ball_output_norm(self.dimension, self.gradient_radius, self.epsilon)

    @property
    def coordinate_magnitude(self) -> float:
        """``p C = p b coth(eps'/2)``, ``b = feature_bound * c``: every coordinate report's ``|value|``."""
        return coordinate_report_magnitude(self.dimension, self.feature_bound * self.residual_bound, self.epsilon)

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
        if self.randomizer == "coordinate":
            # the whole numbers of [-1/2, p - 1/2] (check_reports) are exactly the coordinates 0 .. p - 1
            magnitude = self.coordinate_magnitude
            return ReportSchema((FieldSchema("coordinate", (), -0.5, self.dimension - 0.5),
                                 FieldSchema("value", (), -magnitude, magnitude)))
        return ReportSchema((sphere_field("gradient", (self.dimension,), self.report_norm),))

    def check_reports(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray]) -> None:
        """``coordinate``: a whole-number coordinate and a value of exactly ``+p C`` or ``-p C``, the randomizer's only
        outputs (the l2-ball's reports are fully checked by their schema's exact norm)."""
        self.theta(round_index, state)
        if self.randomizer != "coordinate":
            return
        check_whole_numbers(batch, "coordinate", f"a whole number in [0, {self.dimension - 1}]")
        check_two_point(batch, "value", self.coordinate_magnitude, "pC", "coordinate randomizer")

    def aggregate_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        """The running sum ``gradient`` (both randomizers; ``coordinate``: the dense ``value e_coordinate``)."""
        if self.randomizer != "coordinate":
            return self.report_schema(round_index, state)
        self.theta(round_index, state)
        magnitude = self.coordinate_magnitude
        return ReportSchema((FieldSchema("gradient", (self.dimension,), -magnitude, magnitude),))

    def aggregate_input(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray],
                        public_rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        if self.randomizer != "coordinate":
            return dict(batch)
        return {"gradient": expand_coordinate_reports(batch["coordinate"], batch["value"], self.dimension)}

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        theta = self.theta(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        if self.randomizer == "coordinate":
            coordinates, values = ldp_iht_coordinate_report(theta, x, y, self.residual_bound, self.feature_bound,
                                                            self.epsilon, rng)
            return {"coordinate": np.asarray(coordinates, dtype=float), "value": np.asarray(values)}
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
