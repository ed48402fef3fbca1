"""1-dim LDP-AVG: unbiased, with the stated standard error, and an error falling like 1/sqrt(n)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.ldp_avg import LdpAverage
from workloads.local.protocols import LdpAverageSpec, SteinGlmSpec

Z = 4.0


def estimate(spec: LdpAverageSpec, values: np.ndarray, rng: np.random.Generator) -> LdpAverage:
    state = spec.initial_state()
    aggregate = ReportAggregate.for_round(spec, 0, state).add(spec.randomize(0, state, {"value": values}, rng))
    return LdpAverage().fit(aggregate, spec)


def test_ldp_average_recovers_the_mean_within_its_standard_error() -> None:
    rng = np.random.default_rng(10)
    spec = LdpAverageSpec(0.0, 10.0, 1.0)
    values = rng.uniform(0, 10, 200_000)
    fit = estimate(spec, values, rng)
    # the reports' variance is var(v) + 2 b^2
    expected_error = math.sqrt((values.var() + 2 * spec.scale**2) / values.size)
    assert fit.std_error_ == pytest.approx(expected_error, rel=0.02)
    assert fit.noise_std_error_ == pytest.approx(math.sqrt(2) * spec.scale / math.sqrt(values.size))
    assert abs(fit.mean_ - values.mean()) <= Z * fit.noise_std_error_


def test_ldp_average_error_falls_like_one_over_sqrt_n() -> None:
    """Root mean squared error over 200 repetitions times sqrt(n) is the same constant sqrt(2) b at every n (the
    values are fixed at 5, so only privacy noise counts); 200 repetitions estimate an RMSE to about 5 % (1 SE)."""
    rng = np.random.default_rng(11)
    spec = LdpAverageSpec(0.0, 10.0, 2.0)
    for n in (100, 1_000, 10_000):
        errors = [estimate(spec, np.full(n, 5.0), rng).mean_ - 5.0 for _ in range(200)]
        rmse = math.sqrt(np.mean(np.square(errors)))
        assert rmse * math.sqrt(n) == pytest.approx(math.sqrt(2) * spec.scale, rel=Z * 0.05)


def test_ldp_average_refuses_other_inputs() -> None:
    spec = LdpAverageSpec(0.0, 1.0, 1.0)
    other = SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6)
    with pytest.raises(EstimatorError, match="LdpAverageSpec"):
        LdpAverage().fit(ReportAggregate.for_round(spec, 0, spec.initial_state()), other)  # type: ignore[arg-type]
    with pytest.raises(EstimatorError, match="no reports"):
        LdpAverage().fit(ReportAggregate.for_round(spec, 0, spec.initial_state()), spec)
