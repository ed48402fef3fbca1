"""Coordinate sampling through the one-dimensional randomizer (issue 20; docs/privacy.md §8.9 (h))."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from workloads.local.protocols import spec_from_json
from workloads.local.protocols.base import ReportError
from workloads.local.protocols.ldp_iht import LdpIhtSpec
from workloads.local.randomizers.coordinate import (
    coordinate_randomize,
    coordinate_report_magnitude,
    coordinate_report_variance,
    expand_coordinate_reports,
)
from workloads.local.randomizers.duchi_label import duchi_label_magnitude
from workloads.local.randomizers.iht_gradient import ldp_iht_coordinate_report
from workloads.local.randomizers.l2ball import exact_epsilon

V = np.array([0.5, -1.0, 0.2, 0.0, 2.0])  # the last entry is clipped to the bound 1
CLIPPED = np.clip(V, -1.0, 1.0)
M = 40_000


def _reports(eps: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    return coordinate_randomize(np.tile(V, (M, 1)), 1.0, eps, np.random.default_rng(seed))


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_unbiased_with_the_derived_covariance(eps: float) -> None:
    coordinates, values = _reports(eps, 1)
    dense = expand_coordinate_reports(coordinates, values, V.size)
    magnitude = coordinate_report_magnitude(V.size, 1.0, eps)
    assert magnitude == V.size * duchi_label_magnitude(1.0, eps)
    variance = V.size * (magnitude / V.size) ** 2 - CLIPPED**2  # Cov(Z) = p C^2 I - v v^T, diagonal
    np.testing.assert_array_less(np.abs(dense.mean(axis=0) - CLIPPED), 5 * np.sqrt(variance / M))
    # the sample variance of each coordinate against p C^2 - v_j^2 (its relative sd about sqrt(2 / M) or less)
    np.testing.assert_allclose(dense.var(axis=0), variance, rtol=0.05)
    off = np.cov(dense.T) - np.diag(np.diag(np.cov(dense.T)))
    np.testing.assert_allclose(off, -np.outer(CLIPPED, CLIPPED) * (1 - np.eye(V.size)),
                               atol=5 * magnitude**2 / V.size / math.sqrt(M))
    assert coordinate_report_variance(V, 1.0, eps) == pytest.approx(magnitude**2 - float(CLIPPED @ CLIPPED))


def test_the_output_law_is_the_derived_pmf_and_its_ratio_is_bounded() -> None:
    """P(J = j, S = s | v) = (1/p)(1/2 + s v_j tanh(eps'/2) / 2) (b = 1): chi-square over the 2p outcomes, for two
    inputs; the largest ratio of the pmf between the two inputs is e^eps', attained at v_j = +-b."""
    eps = 1.0
    tanh = math.tanh(float(exact_epsilon(eps)) / 2)
    other = -CLIPPED
    for vector, seed in ((CLIPPED, 2), (other, 3)):
        coordinates, values = coordinate_randomize(np.tile(vector, (M, 1)), 1.0, eps, np.random.default_rng(seed))
        observed = np.zeros((V.size, 2))
        np.add.at(observed, (coordinates, (values > 0).astype(int)), 1)
        pmf = np.stack([(0.5 - vector * tanh / 2), (0.5 + vector * tanh / 2)], axis=1) / V.size
        assert stats.chisquare(observed.ravel(), M * pmf.ravel()).pvalue > 1e-4
        if vector is CLIPPED:
            first = pmf
    ratio = np.max(first / pmf)
    assert ratio == pytest.approx(math.exp(float(exact_epsilon(eps))), rel=1e-12) and ratio <= math.exp(eps)


def test_reports_are_on_the_exact_support() -> None:
    coordinates, values = _reports(2.0, 4)
    magnitude = coordinate_report_magnitude(V.size, 1.0, 2.0)
    assert coordinates.dtype.kind == "i" and set(np.unique(coordinates)) == set(range(V.size))
    assert set(np.unique(np.abs(values))) == {magnitude}
    one_j, one_value = coordinate_randomize(V, 1.0, 2.0, np.random.default_rng(5))
    assert np.shape(one_j) == () and abs(float(one_value)) == magnitude


def test_the_iht_report_clips_the_sampled_gradient_entry() -> None:
    """The gradient x (<theta, x> - y) with the residual clipped at c and the entry at feature_bound * c: a residual
    of 10 at c = 0.5 and x = (3, 3) reports +-p C with C = (1 * 0.5) coth(eps'/2), and is unbiased for the clipped
    gradient (0.5, 0.5) (the sign's mean, 5 standard errors)."""
    theta, x, y = np.array([1.0, 1.0]), np.tile([3.0, 3.0], (M, 1)), np.full(M, -4.0)
    coordinates, values = ldp_iht_coordinate_report(theta, x, y, 0.5, 1.0, 1.0, np.random.default_rng(6))
    magnitude = 2 * duchi_label_magnitude(0.5, 1.0)
    assert set(np.unique(np.abs(values))) == {magnitude}
    mean = expand_coordinate_reports(coordinates, values, 2).mean(axis=0)
    np.testing.assert_array_less(np.abs(mean - 0.5), 5 * magnitude / math.sqrt(2 * M))


def _spec(**extra: object) -> LdpIhtSpec:
    return LdpIhtSpec(dimension=3, sparsity=1, steps=1, eta=1.0, epsilon=1.0, residual_bound=2.0,
                      feature_norm_bound=math.sqrt(3), **extra)


def test_the_spec_accepts_only_what_the_coordinate_randomizer_emits() -> None:
    spec = _spec(randomizer="coordinate", feature_bound=1.0)
    state = spec.initial_state()
    magnitude = spec.coordinate_magnitude
    assert magnitude == 3 * duchi_label_magnitude(2.0, 1.0) == spec.report_norm
    schema = spec.report_schema(0, state)
    report = spec.randomize(0, state, {"x": np.ones((50, 3)), "y": np.zeros(50)}, np.random.default_rng(7))
    spec.check_reports(0, state, schema.validate(report))
    dense = spec.aggregate_input(0, state, report)["gradient"]
    assert dense.shape == (50, 3) and np.all(np.count_nonzero(dense, axis=1) == 1)
    spec.aggregate_schema(0, state).validate({"gradient": dense})
    for coordinate, value, pattern in ((3.0, magnitude, "outside its allowed range"),
                                       (-1.0, magnitude, "outside its allowed range"),
                                       (1.5, magnitude, "'coordinate' must be a whole number"),
                                       (1.0, 0.5 * magnitude, "'value' must be exactly"),
                                       (1.0, np.nextafter(magnitude, 0), "'value' must be exactly")):
        with pytest.raises(ReportError, match=pattern):
            spec.check_reports(0, state, schema.validate({"coordinate": [0.0, coordinate],
                                                          "value": [magnitude, value]}))


def test_a_spec_stored_before_the_option_loads_as_the_l2_ball() -> None:
    stored = _spec().to_json()
    del stored["randomizer"], stored["feature_bound"]
    spec = spec_from_json(stored)
    assert spec.randomizer == "l2ball" and spec.report_schema(0, spec.initial_state()).names == ("gradient",)
    assert spec_from_json(_spec(randomizer="coordinate", feature_bound=1.0).to_json()).feature_bound == 1.0
    with pytest.raises(ValueError, match="randomizer must be one of"):
        _spec(randomizer="hadamard")
    with pytest.raises(ValueError, match="feature_bound"):
        _spec(randomizer="coordinate")
