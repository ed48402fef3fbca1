"""The label-private protocol: public features, each participant's label through the Gaussian randomizer.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 2
(Label-LDP-IHT) and Sec. 5 (the label-private Lasso): the features ``X`` are public (a public table), participant
``i`` sends ``tilde y_i = clip(y_i, -B, B) + N(0, sigma_1^2)`` once
(:mod:`workloads.local.randomizers.gaussian_label`; ``sigma_1`` by the analytic Gaussian calibration), and the server
runs IHT or the Lasso on ``(X, tilde y)``. One round, one group; (epsilon, delta)-LDP per participant.

**What is reported, and why.** Both estimators need only ``X^T X / n`` and ``X^T tilde y / n`` (the gradient of
eq. 5 is ``X^T X theta / n - X^T tilde y / n``; the Lasso objective is the same quadratic plus the penalty). ``X^T X``
comes from the public table; the device sends ``xy = x_i tilde y_i`` (her public features times her noisy label), a
post-processing of ``tilde y_i`` with public values, so the guarantee is the label randomizer's. The server keeps
the running sum of ``xy`` and never needs to know which public row a report belongs to. ``x`` is clipped to
``[-feature_bound, feature_bound]`` per entry on the device (public features: no privacy role; it bounds the report
so the schema can refuse garbage).

Report: ``{"xy": (p,)}``. Participant data: ``{"x": (p,), "y": ()}`` (or rows of them). The server's settings
(``sparsity``, ``iterations``, ``eta``, ``radius`` for IHT; ``alpha`` for the Lasso, default lambda of Sec. 5) are
part of the spec, so a bad one is refused at creation, before any report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local.protocols.base import (
    FieldSchema,
    GroupSpec,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundSpec,
    RoundState,
    _features_and_labels,
    noisy_field,
    register_protocol,
)
from workloads.local.randomizers.gaussian_label import label_noise, label_noise_sigma, randomize_labels
from workloads.parameters import ParameterError, check_count, check_positive, check_probability, check_sparsity


@register_protocol
@dataclass(frozen=True)
class LabelLdpSpec(ProtocolSpec):
    """Label-LDP (Alg. 2 and Sec. 5 of Wang & Xu 2019): one round of ``x tilde y`` reports (module docstring)."""

    protocol: ClassVar[str] = "label-ldp"
    dimension: int
    label_bound: float
    feature_bound: float
    epsilon: float
    delta: float
    sparsity: int
    iterations: int
    eta: float
    radius: float = 1.0
    alpha: float | None = None
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "sparsity", check_sparsity(self.sparsity, self.dimension, error=ProtocolError))
        object.__setattr__(self, "iterations", check_count("iterations", self.iterations, error=ProtocolError))
        for name in ("label_bound", "feature_bound", "epsilon", "eta", "radius"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), error=ProtocolError))
        object.__setattr__(self, "delta", check_probability("delta", self.delta, error=ProtocolError))
        if self.alpha is not None:
            object.__setattr__(self, "alpha", check_positive("alpha", self.alpha, error=ProtocolError))
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        self.label_noise  # noqa: B018  (the calibration accepts epsilon and delta)
        self._check_groups_and_rounds()

    @property
    def label_noise(self) -> float:
        """``sigma_1``: the standard deviation of a label's Gaussian noise."""
        try:
            return label_noise_sigma(self.label_bound, self.epsilon, self.delta)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    def groups(self) -> tuple[GroupSpec, ...]:
        return (GroupSpec("all", self.participants),)

    def rounds(self) -> tuple[RoundSpec, ...]:
        return (RoundSpec("all", self.epsilon, self.delta),)

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        # the noisy label's own support bound (grid and discrete Gaussian tail, one noisy entry), times |x_j|
        label = noisy_field("label", (), -self.label_bound, self.label_bound,
                            label_noise(self.label_bound, self.epsilon, self.delta), 1)
        bound = self.feature_bound * max(-label.low, label.high)
        return ReportSchema((FieldSchema("xy", (self.dimension,), -bound, bound),))

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        x = np.clip(x, -self.feature_bound, self.feature_bound)
        noisy = randomize_labels(y, self.label_bound, self.epsilon, self.delta, rng).reshape(y.shape)
        return {"xy": x * np.asarray(noisy)[..., np.newaxis]}
