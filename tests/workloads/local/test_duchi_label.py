"""The pure-epsilon label randomizer (Duchi, Jordan & Wainwright 2018, one-dimensional; issue 20): two outputs +-C,
unbiased, variance C^2 - y^2, the exact privacy ratio e^eps' on the inputs -B and +B, an exactly dyadic rounding coin,
and the label-ldp spec that uses it (the default of new campaigns; old specs load with the Gaussian).
Statistical checks allow 5 standard errors (each fails with probability below 1e-6)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from workloads.local.protocols import ProtocolError, ReportError, spec_from_json
from workloads.local.protocols.label_ldp import LabelLdpSpec
from workloads.local.randomizers.duchi_label import (
    duchi_label_magnitude,
    duchi_label_variance,
    duchi_randomize_labels,
    dyadic_bernoulli,
    rounding_probability,
)
from workloads.local.randomizers.l2ball import exact_epsilon, hemisphere_probability

B, EPS = 1.5, 1.0


def test_reports_are_plus_or_minus_c_unbiased_with_variance_c2_minus_y2() -> None:
    rng = np.random.default_rng(3)
    magnitude = duchi_label_magnitude(B, EPS)
    assert magnitude == pytest.approx(B * (math.e + 1) / (math.e - 1), rel=1e-11)  # eps' within 2^-40 of eps
    k = 100_000
    for y in (-B, -0.4, 0.0, 0.9, B, 7.0):  # 7 is clipped to B
        reports = duchi_randomize_labels(np.full(k, y), B, EPS, rng)
        assert set(np.unique(reports)) <= {-magnitude, magnitude}
        clipped = min(max(y, -B), B)
        variance = duchi_label_variance(y, B, EPS)
        assert variance == pytest.approx(magnitude**2 - clipped**2)
        assert abs(reports.mean() - clipped) < 5 * math.sqrt(variance / k)
        # the sample variance of a two-point law: its standard error is at most 2 C^2 / sqrt(k)
        assert abs(reports.var() - variance) < 5 * 2 * magnitude**2 / math.sqrt(k)


def test_privacy_ratio_on_minus_b_and_plus_b_is_exactly_e_to_the_eps_prime() -> None:
    """P(+C | y) = q pi' + (1 - q)(1 - pi'); at y = +B, q = 1 and at y = -B, q = 0, so the ratio is pi' / (1 - pi') =
    e^eps' <= e^eps, computed here in exact rationals from the coins' stated probabilities; the frequencies agree."""
    eps = exact_epsilon(EPS)
    assert rounding_probability(B, B) == 1 and rounding_probability(-B, B) == 0
    pi = hemisphere_probability(EPS)
    assert math.log(pi / (1 - pi)) == pytest.approx(float(eps), rel=1e-12) and float(eps) <= EPS
    rng = np.random.default_rng(4)
    k = 100_000
    plus_high = np.mean(duchi_randomize_labels(np.full(k, B), B, EPS, rng) > 0)
    plus_low = np.mean(duchi_randomize_labels(np.full(k, -B), B, EPS, rng) > 0)
    se = math.sqrt(pi * (1 - pi) / k)
    assert abs(plus_high - pi) < 5 * se and abs(plus_low - (1 - pi)) < 5 * se


def test_rounding_coin_probability_is_exactly_the_dyadic_rational() -> None:
    """q = (1 + fl(y / B)) / 2 exactly; the coin's probability is q exactly: enumerated over every value of a chunk
    when q has at most 62 digits (m of the 2^62 draws answer True), and over the two-chunk case by its first chunk."""
    assert rounding_probability(0.3, B) == (1 + Fraction(0.3 / B)) / 2
    assert rounding_probability(5.0, B) == 1 and rounding_probability(0.0, B) == Fraction(1, 2)

    class Fixed:
        def __init__(self, values: list[int]) -> None:
            self.values = iter(values)

        def integers(self, low: int, high: int, dtype: object = None) -> int:
            assert (low, high) == (0, 1 << 62)
            return next(self.values)

    q = Fraction(5, 8)  # digits 101 then zeros: the chunk's target is 5 << 59
    target = 5 << 59
    assert dyadic_bernoulli(q, Fixed([target - 1])) and not dyadic_bernoulli(q, Fixed([target]))
    # True exactly for the draws 0 .. target - 1: target / 2^62 = 5/8 of the chunk's values
    assert Fraction(target, 1 << 62) == q
    deep = Fraction(1, 2) + Fraction(1, 1 << 70)  # two chunks: equal first chunk defers to the second
    first = 1 << 61
    assert not dyadic_bernoulli(deep, Fixed([first, 1 << 54]))  # U's second chunk equals q's: U >= q (all digits)
    assert dyadic_bernoulli(deep, Fixed([first, (1 << 54) - 1]))
    assert dyadic_bernoulli(Fraction(1), Fixed([])) and not dyadic_bernoulli(Fraction(0), Fixed([0]))
    with pytest.raises(ValueError, match="dyadic"):
        dyadic_bernoulli(Fraction(1, 3), np.random.default_rng(0))
    rng = np.random.default_rng(5)
    hits = sum(dyadic_bernoulli(Fraction(3, 8), rng) for _ in range(20_000))
    assert abs(hits / 20_000 - 3 / 8) < 5 * math.sqrt(3 / 8 * 5 / 8 / 20_000)


PURE = LabelLdpSpec(dimension=3, label_bound=B, feature_bound=1.0, epsilon=EPS, delta=0.0, sparsity=1, iterations=2,
                    eta=1.0, public_rows=5, randomizer="pure")


def test_pure_spec_reports_validate_only_plus_or_minus_c_and_cost_epsilon_zero() -> None:
    state = PURE.initial_state()
    reports = PURE.randomize(0, state, {"row": np.arange(5.0), "y": np.array([-9.0, -0.5, 0.0, 0.5, 9.0])},
                             np.random.default_rng(6))
    magnitude = duchi_label_magnitude(B, EPS)
    assert np.all(np.abs(reports["label"]) == magnitude) and PURE.label_noise == magnitude
    batch = PURE.report_schema(0, state).validate(reports)
    PURE.check_reports(0, state, batch)
    assert PURE.max_participant_cost() == (EPS, 0.0)
    for forged in (0.5 * magnitude, 0.0, np.nextafter(magnitude, 0.0), -np.nextafter(magnitude, 0.0)):
        bad = {"row": np.array([0.0, 1.0]), "label": np.array([magnitude, forged])}
        with pytest.raises(ReportError, match=r"report 1: field 'label' must be exactly \+C or -C"):
            PURE.check_reports(0, state, PURE.report_schema(0, state).validate(bad))
    with pytest.raises(ReportError, match="outside its allowed range"):
        PURE.report_schema(0, state).validate({"row": np.array([0.0]), "label": np.array([2 * magnitude])})


def test_pure_spec_refuses_a_delta_and_unknown_randomizers() -> None:
    with pytest.raises(ProtocolError, match="delta must be 0 with the pure label randomizer"):
        LabelLdpSpec(3, B, 1.0, EPS, 1e-5, 1, 2, 1.0, public_rows=5, randomizer="pure")
    with pytest.raises(ProtocolError, match="randomizer must be one of"):
        LabelLdpSpec(3, B, 1.0, EPS, 1e-5, 1, 2, 1.0, public_rows=5, randomizer="laplace")
    with pytest.raises(ProtocolError, match="delta"):
        LabelLdpSpec(3, B, 1.0, EPS, 0.0, 1, 2, 1.0, public_rows=5, randomizer="gaussian")


def test_old_spec_json_without_a_randomizer_loads_as_the_gaussian_and_new_ones_round_trip() -> None:
    assert spec_from_json(json.loads(json.dumps(PURE.to_json()))) == PURE
    old = {"protocol": "label-ldp", "dimension": 3, "label_bound": B, "feature_bound": 1.0, "epsilon": EPS,
           "delta": 1e-5, "sparsity": 1, "iterations": 2, "eta": 1.0, "radius": 1.0, "alpha": None,
           "participants": None, "public_rows": 5}  # a spec stored before issue 20: no "randomizer" key
    spec = spec_from_json(old)
    assert spec.randomizer == "gaussian" and spec.max_participant_cost() == (EPS, 1e-5)
    assert spec.report_schema(0, spec.initial_state()).fields[1].grid is not None  # the Gaussian's grid field
