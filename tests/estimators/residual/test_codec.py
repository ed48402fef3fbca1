"""Stored residual releases (estimators/residual/codec.py): a round trip keeps every value and scale."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.residual.basis import ResidualError
from estimators.residual.codec import residuals_from_bytes, residuals_to_bytes
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import plan_residuals
from workloads.domain import Domain


def test_round_trip_keeps_values_scales_and_answers() -> None:
    domain = Domain.from_sizes({"a": 3, "b": 2, "c": 4})
    rng = np.random.default_rng(7)
    joint = rng.integers(0, 20, size=(3, 2, 4)).astype(float)
    axes = {"a": 0, "b": 1, "c": 2}

    def counts(attrs: tuple[str, ...]) -> np.ndarray:
        return joint.sum(axis=tuple(i for n, i in axes.items() if n not in attrs))

    plan = plan_residuals(domain, [("a", "b"), ("b", "c")], "1/2")
    release = measure_residuals(plan, counts, lambda sigma, size: rng.normal(0.0, sigma, size))
    back = residuals_from_bytes(residuals_to_bytes(release), domain)
    assert list(back.values) == list(release.values)
    for a in release.values:
        np.testing.assert_array_equal(back.values[a], release.values[a])
        assert back.scales[a] == release.scales[a]
    np.testing.assert_array_equal(back.marginal(("b", "c")), release.marginal(("b", "c")))
    assert back.cell_variance(("a", "b")) == release.cell_variance(("a", "b"))


def test_bad_payloads_are_clear_errors() -> None:
    with pytest.raises(ResidualError, match="not a stored residual release"):
        residuals_from_bytes(b"garbage")
    domain = Domain.from_sizes({"a": 3, "b": 2})
    plan = plan_residuals(domain, [("a", "b")], 1)
    release = measure_residuals(plan, lambda attrs: np.ones(domain.shape(attrs)) * (6 / domain.cells(attrs)),
                                lambda sigma, size: np.zeros(size))
    with pytest.raises(ResidualError, match="different domain"):
        residuals_from_bytes(residuals_to_bytes(release), Domain.from_sizes({"a": 3, "b": 3}))
