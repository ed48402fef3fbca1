"""Report aggregates: adding in batches, merging and serialising equal one sum over all reports; bad input is refused
without changing the aggregate."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from workloads.local.protocols import LdpAverageSpec, ReportError, SteinGlmSpec

SPEC = SteinGlmSpec(3, 2.0, 1.0, 2.0, 1e-6)
STATE = SPEC.initial_state()


def reports(count: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return SPEC.randomize(0, STATE, {"x": rng.normal(size=(count, 3)), "y": rng.uniform(-1, 1, count)}, rng)


def test_batches_merge_and_serialise_to_the_one_shot_sum() -> None:
    batch = reports(10_000, 1)
    one_shot = {name: values.sum(axis=0) for name, values in batch.items()}
    squares = {name: np.square(values).sum(axis=0) for name, values in batch.items()}
    pieces = [slice(0, 1), slice(1, 2500), slice(2500, 2500), slice(2500, 7000), slice(7000, 10_000)]
    incremental = ReportAggregate.for_round(SPEC, 0, STATE)
    for piece in pieces:
        incremental.add({name: values[piece] for name, values in batch.items()})
    left = ReportAggregate.for_round(SPEC, 0, STATE).add({n: v[:4000] for n, v in batch.items()})
    right = ReportAggregate.for_round(SPEC, 0, STATE).add({n: v[4000:] for n, v in batch.items()})
    merged = left.merge(right)
    restored = ReportAggregate.from_bytes(merged.to_bytes())
    for aggregate in (incremental, merged, restored):
        assert aggregate.count == 10_000
        for name in batch:
            # float sums in another order agree to rounding
            np.testing.assert_allclose(aggregate.sums[name], one_shot[name], rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(aggregate.squares[name], squares[name], rtol=1e-12)
    for name in batch:  # serialisation itself is exact
        assert np.array_equal(restored.sums[name], merged.sums[name])
        assert np.array_equal(restored.squares[name], merged.squares[name])
    assert restored.schema == merged.schema and restored.protocol == "stein-glm"
    np.testing.assert_allclose(merged.mean("xy"), batch["xy"].mean(axis=0), rtol=1e-12, atol=1e-12)


def test_a_refused_batch_leaves_the_aggregate_unchanged() -> None:
    aggregate = ReportAggregate.for_round(SPEC, 0, STATE).add(reports(100, 2))
    before = aggregate.to_bytes()
    bad = reports(50, 3)
    bad["xy"][49, 1] = np.nan
    with pytest.raises(ReportError, match="report 49"):
        aggregate.add(bad)
    assert aggregate.to_bytes() == before and aggregate.count == 100


def test_mismatched_or_tampered_aggregates_are_refused() -> None:
    stein = ReportAggregate.for_round(SPEC, 0, STATE)
    average = LdpAverageSpec(0.0, 1.0, 1.0)
    other = ReportAggregate.for_round(average, 0, average.initial_state())
    with pytest.raises(EstimatorError, match="cannot merge"):
        stein.merge(other)
    with pytest.raises(EstimatorError, match="no reports"):
        stein.mean("xy")
    with pytest.raises(EstimatorError, match="no field"):
        stein.add(reports(3, 4)).mean("value")
    data = stein.to_json()
    with pytest.raises(EstimatorError, match="count"):
        ReportAggregate.from_json({**data, "count": -1})
    with pytest.raises(EstimatorError, match="shape"):
        ReportAggregate.from_json({**data, "sums": {**data["sums"], "xy": [0.0]}})
    with pytest.raises(EstimatorError, match="format"):
        ReportAggregate.from_json({**data, "format": "something else"})
    with pytest.raises(EstimatorError, match="not a serialised"):
        ReportAggregate.from_bytes(b"\xff not json")
