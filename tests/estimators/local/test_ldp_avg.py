"""1-dim LDP-AVG: unbiased, with the stated standard error, and an error falling like 1/sqrt(n); its plan against
measured collections."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.ldp_avg import LdpAverage, ldp_avg_error_model
from estimators.local.planning import expected_error
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


@pytest.mark.slow  # statistical: 60 simulated collections
def test_the_plan_is_within_a_factor_1_5_of_measured_collections() -> None:
    """The closed form (estimators.local.ldp_avg, "Planning": ``(sigma_v^2 + g^2/4 + sigma_N^2) / n``) against the
    root mean squared error of 60 simulated collections of ``n`` uniform values on [0, 10], measured against the
    population mean 5 (a 60-collection RMSE is within about 9 % of its expectation, one standard error); the public
    table is another sample of the same law. Without the table, the values' variance at its bound makes an upper
    bound."""
    rng = np.random.default_rng(12)
    spec = LdpAverageSpec(0.0, 10.0, 1.0)
    n = 400
    model = ldp_avg_error_model(spec, rng.uniform(0, 10, (5_000, 1)))
    predicted = expected_error(model, n)
    errors = [estimate(spec, rng.uniform(0, 10, n), rng).mean_ - 5.0 for _ in range(60)]
    measured = math.sqrt(np.mean(np.square(errors)))
    assert measured / 1.5 <= predicted.error <= 1.5 * measured, (predicted.error, measured)
    assert predicted.relative == pytest.approx(predicted.error / float(model.reference[0]))
    bound = expected_error(ldp_avg_error_model(spec, None), n)
    assert bound.relative is None and bound.error >= predicted.error
    assert bound.error == pytest.approx(math.sqrt((100 / 4 + spec.noise.variance + spec.noise.grid**2 / 4) / n))
