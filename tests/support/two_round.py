"""The two-round Stein GLM's first round in tests: a split-budget spec, its rows and round 0's aggregate.
"""

from __future__ import annotations

import numpy as np

from estimators.local.aggregate import ReportAggregate
from workloads.local.protocols import TwoRoundSteinSpec


def first_round(rng: np.random.Generator) -> tuple[TwoRoundSteinSpec, np.ndarray, ReportAggregate]:
    """A split-budget spec in 2 dimensions, 5,000 standard-normal rows and round 0's aggregate of their reports."""
    spec = TwoRoundSteinSpec.split_budget(2, 3.0, 1.0, 20.0, 1e-6)
    x = rng.standard_normal((5000, 2))
    first = ReportAggregate.for_round(spec, 0, spec.initial_state()).add(
        spec.randomize(0, spec.initial_state(), {"x": x, "y": np.sign(x[:, 0])}, rng))
    return spec, x, first
