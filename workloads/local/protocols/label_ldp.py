"""The label-private protocol: public features, each participant's label through a pure-epsilon or Gaussian randomizer.

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Alg. 2
(Label-LDP-IHT) and Sec. 5 (the label-private Lasso): the features ``X`` are public (a public table), participant
``i`` sends ``tilde y_i`` once, unbiased for ``clip(y_i, -B, B)``, and the server runs IHT or the Lasso on
``(X, tilde y)``. One round, one group. The label's randomizer (``randomizer``, issue 20):

* ``"pure"`` (the default of new campaigns): Duchi, Jordan & Wainwright's one-dimensional mechanism
  (:mod:`workloads.local.randomizers.duchi_label`), ``tilde y = +-C``, ``C = B coth(eps/2)``; (epsilon, 0)-LDP;
* ``"gaussian"``: ``clip(y_i) + N(0, sigma_1^2)`` on a grid (:mod:`workloads.local.randomizers.gaussian_label`);
  (epsilon, delta)-LDP. A spec stored before issue 20 has no ``randomizer`` key and loads as ``"gaussian"``, the
  randomizer it was created with.

**What is reported, and why.** Both estimators need only ``X^T X / n`` and ``X^T tilde y / n`` (the gradient of
eq. 5 is ``X^T X theta / n - X^T tilde y / n``; the Lasso objective is the same quadratic plus the penalty). In Alg. 2
the features are public: participant ``i``'s row ``x_i`` is a row of the campaign's public table, known to the server.
So the device sends ``{"row": (), "label": ()}``: the **id** of her public row (its 0-based index in the table, public)
and her noisy label ``tilde y_i``; the server forms ``x_i tilde y_i`` from its own copy of the table
(:meth:`LabelLdpSpec.aggregate_input`, ``x`` clipped to ``[-feature_bound, feature_bound]`` per entry) and keeps the
running sum ``{"xy": (p,)}`` (:meth:`LabelLdpSpec.aggregate_schema`). The report is therefore a function of the public
id and ``tilde y_i`` only: it carries nothing about any feature vector the device holds (issue 18 finding 4: the earlier
report ``x tilde y`` gave away ``x`` up to a scalar for an ``x`` that was not a public row), and the server trusts no
feature value from the device.

Participant data: ``{"row": id, "y": ()}`` (or ``{"row": (k,), "y": (k,)}``); on the client and in the simulator the
participant's ``x`` is her row id in place of her features (``workloads.local.device.participant_data``). The server's
settings (``sparsity``, ``iterations``, ``eta``, ``radius`` for IHT; ``alpha`` for the Lasso, default lambda of
Sec. 5) and the public table's row count ``public_rows`` are part of the spec, so a bad one is refused at creation,
before any report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    FieldSchema,
    OneRound,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundState,
    _participant_array,
    check_two_point,
    check_whole_numbers,
    checked_delta,
    noisy_field,
    register_protocol,
)
from workloads.local.randomizers.duchi_label import duchi_label_magnitude, duchi_randomize_labels
from workloads.local.randomizers.gaussian_label import label_noise, label_noise_sigma, randomize_labels
from workloads.parameters import ParameterError, check_count, check_positive, check_sparsity

#: the label randomizers a label-ldp campaign may use (module docstring)
LABEL_RANDOMIZERS = ("pure", "gaussian")


@register_protocol
@dataclass(frozen=True)
class LabelLdpSpec(OneRound, ProtocolSpec):
    """Label-LDP (Alg. 2 and Sec. 5 of Wang & Xu 2019): one round of (public row id, ``tilde y``) reports (module
    docstring)."""

    protocol: ClassVar[str] = "label-ldp"
    aggregates_public_rows: ClassVar[bool] = True
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
    #: the public table's row count (the ids a report may name); ``None`` only in a campaign stored before reports
    #: named rows (issue 18): it still lists and answers from its stored sums, and accepts no more reports
    public_rows: int | None = None
    #: the label's randomizer, one of :data:`LABEL_RANDOMIZERS`; the default ``"gaussian"`` is what a spec stored
    #: before issue 20 (no such key) was created with; new campaigns are built with ``"pure"``
    randomizer: str = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "sparsity", check_sparsity(self.sparsity, self.dimension, error=ProtocolError))
        object.__setattr__(self, "iterations", check_count("iterations", self.iterations, error=ProtocolError))
        if self.public_rows is not None:
            object.__setattr__(self, "public_rows", check_count("public_rows", self.public_rows,
                                                                error=ProtocolError))
        for name in ("label_bound", "feature_bound", "epsilon", "eta", "radius"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), error=ProtocolError))
        if self.randomizer not in LABEL_RANDOMIZERS:
            raise ProtocolError(f"randomizer must be one of {list(LABEL_RANDOMIZERS)}, got {self.randomizer!r}")
        pure = self.randomizer == "pure"
        object.__setattr__(self, "delta", checked_delta(self.delta, pure, "pure label"))
        if self.alpha is not None:
            object.__setattr__(self, "alpha", check_positive("alpha", self.alpha, error=ProtocolError))
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        self.label_noise  # noqa: B018  (the calibration accepts epsilon and delta)
        self._check_groups_and_rounds()

    @property
    def label_noise(self) -> float:
        """The largest standard deviation of a report around its clipped label: ``sigma_1`` (Gaussian) or ``C``
        (pure: the variance ``C^2 - y^2`` is at most ``C^2``)."""
        try:
            if self.randomizer == "pure":
                return duchi_label_magnitude(self.label_bound, self.epsilon)
            return label_noise_sigma(self.label_bound, self.epsilon, self.delta)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    def label_field(self) -> FieldSchema:
        """The noisy label's schema. Pure: ``[-C, C]`` (:meth:`check_reports` then admits only the two endpoints).
        Gaussian: on its grid, within the grid interval of ``[-B, B]`` plus the discrete Gaussian tail an honest
        report exceeds with probability at most 1e-9 (:func:`noisy_field`, one noisy entry)."""
        if self.randomizer == "pure":
            magnitude = self.label_noise
            return FieldSchema("label", (), -magnitude, magnitude)
        try:
            noise = label_noise(self.label_bound, self.epsilon, self.delta)
        except ParameterError as error:
            raise ProtocolError(str(error)) from None
        return noisy_field("label", (), -self.label_bound, self.label_bound, noise, 1)

    @property
    def label_range(self) -> float:
        """The largest ``|tilde y|`` a report may carry (:meth:`label_field`'s bound)."""
        field = self.label_field()
        return max(-field.low, field.high)

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        self._require_rows()
        # the whole numbers of [-1/2, rows - 1/2] (check_reports) are exactly the ids 0 .. rows - 1
        return ReportSchema((FieldSchema("row", (), -0.5, self.public_rows - 0.5),
                             self.label_field()))

    def check_reports(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray]) -> None:
        """A row id is a whole number (the schema's range ``[-1/2, public_rows - 1/2]`` then leaves the ids
        ``0 .. public_rows - 1``); with the pure randomizer a label is exactly ``+C`` or ``-C``, its two outputs."""
        self._check_state_round(round_index, state)
        check_whole_numbers(batch, "row", "the whole-number id of a public row")
        if self.randomizer == "pure":
            check_two_point(batch, "label", self.label_noise, "C", "pure randomizer")

    def _require_rows(self) -> None:
        if self.public_rows is None:
            raise ProtocolError("this label-ldp campaign was created before reports named public rows (issue 18): "
                                "it accepts no more reports; create a new campaign")

    def aggregate_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        """The server's running sum: ``xy = x_row tilde y`` per report, each entry within ``feature_bound`` times
        :attr:`label_range`."""
        self._check_state_round(round_index, state)
        bound = self.feature_bound * self.label_range
        return ReportSchema((FieldSchema("xy", (self.dimension,), -bound, bound),))

    def aggregate_input(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray],
                        public_rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``{"xy": x_row tilde y}`` from the server's copy of the public table (transformed as the campaign says)."""
        if public_rows is None or np.shape(public_rows) != (self.public_rows, self.dimension):
            raise ProtocolError(f"label-ldp needs its public table's {self.public_rows} rows of {self.dimension} "
                                f"features, got {None if public_rows is None else np.shape(public_rows)}")
        rows = np.asarray(batch["row"]).astype(np.int64)
        x = np.clip(np.asarray(public_rows, dtype=float)[rows], -self.feature_bound, self.feature_bound)
        return {"xy": x * np.asarray(batch["label"], dtype=float)[:, np.newaxis]}

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        """``{"row": the id, "label": tilde y}``: the id as given (public), the label through the randomizer."""
        self._check_state_round(round_index, state)
        self._require_rows()
        rows = _participant_array(data, "row")
        y = _participant_array(data, "y")
        if rows.ndim > 1 or y.shape != rows.shape:
            raise ProtocolError(f"participant data 'row' and 'y' must have one shape, () or (k,), got {rows.shape} "
                                f"and {y.shape}")
        if np.any((rows != np.floor(rows)) | (rows < 0) | (rows >= self.public_rows)):
            raise ProtocolError(f"participant data 'row' must be ids of the public table's rows, whole numbers in "
                                f"[0, {self.public_rows - 1}]")
        if self.randomizer == "pure":
            noisy = duchi_randomize_labels(y.reshape(-1), self.label_bound, self.epsilon, rng).reshape(y.shape)
        else:
            noisy = np.asarray(randomize_labels(y, self.label_bound, self.epsilon, self.delta, rng)).reshape(y.shape)
        return {"row": rows, "label": noisy}

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        self._check_state_round(round_index, state)
        y = _participant_array(data, "y")
        return clipping.count("label_bound", self.label_bound, np.abs(y) > self.label_bound, "a label")
