"""The marginals campaign's estimators (issue 33): per-set unbiased frequencies from the aggregate, the model fitted to
all of them, the sets it keeps whole within its size, and the planner's figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.marginals import domain_of, fit_marginal_model, interaction_signal, model_sets, set_estimates
from estimators.local.marginals_planning import marginals_error_model
from workloads.local.protocols import RoundState
from workloads.local.protocols.marginals import MarginalsSpec, all_sets

STATE = RoundState(0, {})


def correlated(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])
    b = np.where(rng.random(n) < 0.8, a % 2, 1 - a % 2)
    return np.stack([a, b, rng.integers(0, 3, size=n)], axis=1)


def aggregate(spec: MarginalsSpec, data: np.ndarray, seed: int) -> ReportAggregate:
    reports = spec.randomize(0, STATE, {"x": data}, np.random.default_rng(seed))
    batch = spec.report_schema(0, STATE).validate(reports)
    return ReportAggregate.for_round(spec, 0, STATE).add(spec.aggregate_input(0, STATE, batch))


SPEC = MarginalsSpec(("a", "b", "c"), (4, 2, 3), all_sets(3, 2), 2.0)


def test_each_set_is_estimated_without_bias() -> None:
    data = correlated(60_000, 0)
    estimates = set_estimates(SPEC, aggregate(SPEC, data, 1))
    assert [e.attributes for e in estimates] == [("a", "b"), ("a", "c"), ("b", "c")]
    for e in estimates:
        columns = [SPEC.attributes.index(a) for a in e.attributes]
        shape = e.frequencies.shape
        truth = np.bincount(np.ravel_multi_index(tuple(data[:, columns].T), shape),
                            minlength=math.prod(shape)).reshape(shape) / len(data)
        # the set's own reports saw their own records, a third of the table: the error is the noise's and the
        # sampling's, both within a few standard errors
        assert np.all(np.abs(e.frequencies - truth) < 5 * e.standard_errors() + 0.02)


def test_the_model_pools_the_sets_and_answers_what_none_measured() -> None:
    data = correlated(60_000, 2)
    model, measurements = fit_marginal_model(SPEC, aggregate(SPEC, data, 3))
    assert model.total == pytest.approx(60_000) and len(measurements) == 3
    one_way = model.marginal(("a",)) / 60_000
    assert np.abs(one_way - np.bincount(data[:, 0], minlength=4) / 60_000).sum() < 0.05
    three = model.marginal(("a", "b", "c"))
    assert three.shape == (4, 2, 3) and np.all(three >= 0)


def test_the_model_keeps_the_strongest_sets_within_its_size() -> None:
    estimates = set_estimates(SPEC, aggregate(SPEC, correlated(30_000, 4), 5))
    strongest = max(estimates, key=interaction_signal)
    assert strongest.attributes == ("a", "b")  # the only dependent pair
    domain = domain_of(SPEC)
    assert len(model_sets(domain, estimates, 1.0)) == 3
    # the smallest tree with a pair: b x c (6 cells) beside a (4): 10 cells of 8 bytes; just below it, no pair fits
    assert [e.attributes for e in model_sets(domain, estimates, 10 * 8 / 2**20)] == [("b", "c")]
    assert model_sets(domain, estimates, 10 * 8 / 2**20 - 1e-12) == []
    with pytest.raises(EstimatorError, match="no reports"):
        set_estimates(SPEC, ReportAggregate.for_round(SPEC, 0, STATE))


def test_the_plan_is_deterministic_and_falls_with_the_participants() -> None:
    model = marginals_error_model(SPEC, correlated(5_000, 6))
    assert model.model_errors(4_000) == model.model_errors(4_000)
    raw = model.raw_errors(4_000)
    assert raw["a x b"] == pytest.approx(2 * model.raw_errors(16_000)["a x b"])  # 1 / sqrt(n), closed form
    needed = model.participants_for(0.05, 4_000)
    assert needed is not None and needed > 4_000
    assert model.participants_for(1e-6, 4_000) is None or model.participants_for(1e-6, 4_000) > needed
    with pytest.raises(EstimatorError, match="not its codes"):
        marginals_error_model(SPEC, np.array([[4, 0, 0]]))
