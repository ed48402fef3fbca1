"""stein-glm's public-gram variant on the device side: the report is ``y (1, clip(W x))`` through a randomizer of
the table :data:`~workloads.local.protocols.vector_reports.VECTOR_RANDOMIZERS`, its schema is exactly what that
randomizer can emit (no ``x x^T`` field), and variant=paper is Alg. 1 as before."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.local.protocols import (
    ProtocolError,
    ReportError,
    ReportSchema,
    RoundState,
    SteinGlmSpec,
    spec_from_json,
)
from workloads.local.protocols.stein_glm import augmented_moment
from workloads.local.protocols.vector_reports import DEFAULT_VECTOR_RANDOMIZER, VECTOR_RANDOMIZERS
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.local.randomizers.privunit import cached_privunit_parameters, privunit_ball_output_norm

STATE = RoundState(0, {})
WHITENING = (1.0, 0.5, 0.0, 2.0)  # a public 2x2 map, row-major


def _spec(**changes: object) -> SteinGlmSpec:
    settings = {"dimension": 2, "norm_bound": 1.5, "label_bound": 0.5, "epsilon": 2.0, "delta": 0.0,
                "variant": "public-gram", "randomizer": "l2ball", "label_center": 0.5, "whitening": WHITENING}
    return SteinGlmSpec(**{**settings, **changes})  # type: ignore[arg-type]


def test_the_report_is_one_vector_on_the_l2_ball_sphere_without_a_gram_field() -> None:
    spec = _spec()
    (field,) = spec.report_schema(0, STATE).fields
    assert (field.name, field.shape, spec.gram) == ("xy", (3,), False)
    radius = 0.5 * np.hypot(1.0, 1.5)
    assert spec.report_radius == pytest.approx(radius)
    assert field.exact_norm == pytest.approx(l2_ball_output_norm(3, radius, 2.0))
    x = np.random.default_rng(0).normal(size=(500, 2)) * 3
    y = np.random.default_rng(1).integers(0, 2, 500).astype(float)
    reports = spec.randomize(0, STATE, {"x": x, "y": y}, rng=np.random.default_rng(2))
    spec.report_schema(0, STATE).validate(reports)  # every honest report is accepted
    np.testing.assert_allclose(np.linalg.norm(reports["xy"], axis=1), field.exact_norm, rtol=1e-12)


def test_the_device_vector_is_the_centred_label_times_one_and_the_clipped_whitened_features() -> None:
    x = np.array([[3.0, 4.0], [0.1, 0.2]])
    mapped = x @ np.asarray(WHITENING).reshape(2, 2).T
    vector = augmented_moment(mapped, np.array([1.0, 0.0]), 1.5, 0.5, 0.5)
    first = mapped[0] * 1.5 / np.linalg.norm(mapped[0])
    np.testing.assert_allclose(vector[0], [0.5, *(0.5 * first)], rtol=1e-12)
    np.testing.assert_allclose(vector[1], [-0.5, *(-0.5 * mapped[1])], rtol=1e-12)
    assert np.all(np.linalg.norm(vector, axis=1) <= _spec().report_radius)
    np.testing.assert_allclose(_spec().device_features(x)[1], [1.0, *mapped[1]])


def test_the_l2ball_reports_are_unbiased_for_the_device_vector() -> None:
    spec = _spec(epsilon=4.0)
    x = np.tile([[0.4, -0.2]], (40_000, 1))
    y = np.ones(40_000)
    reports = spec.randomize(0, STATE, {"x": x, "y": y}, rng=np.random.default_rng(5))["xy"]
    truth = augmented_moment(x[:1] @ spec.whitening_matrix.T, y[:1], 1.5, 0.5, 0.5)[0]
    standard_error = spec.report_schema(0, STATE).fields[0].exact_norm / np.sqrt(3 * 40_000)
    assert np.all(np.abs(reports.mean(axis=0) - truth) < 5 * standard_error)


def test_privunit_reports_lie_on_the_sphere_of_radius_r_m_and_are_unbiased() -> None:
    """randomizer=privunit (the service's default): every report has norm R m exactly (m = 1 / E<V, u>, PrivUnit2's
    scale), the schema accepts exactly that sphere, and the mean report is the device vector."""
    spec = _spec(randomizer="privunit", epsilon=4.0)
    (field,) = spec.report_schema(0, STATE).fields
    m = cached_privunit_parameters(3, 4.0).scale
    assert field.exact_norm == pytest.approx(spec.report_radius * m, rel=1e-12)
    assert field.exact_norm == privunit_ball_output_norm(3, spec.report_radius, 4.0)
    x = np.tile([[0.4, -0.2]], (40_000, 1))
    y = np.ones(40_000)
    reports = spec.randomize(0, STATE, {"x": x, "y": y}, rng=np.random.default_rng(5))["xy"]
    spec.report_schema(0, STATE).validate({"xy": reports})
    np.testing.assert_allclose(np.linalg.norm(reports, axis=1), field.exact_norm, rtol=1e-8)
    truth = augmented_moment(x[:1] @ spec.whitening_matrix.T, y[:1], 1.5, 0.5, 0.5)[0]
    standard_error = field.exact_norm / np.sqrt(3 * 40_000)
    assert np.all(np.abs(reports.mean(axis=0) - truth) < 5 * standard_error)
    with pytest.raises(ReportError, match="field 'xy' has l2 norm"):
        spec.report_schema(0, STATE).validate({"xy": reports[:2] * np.array([[1.0], [1.001]])})


def test_clipping_counts_the_whitened_norm_and_the_label_distance_from_its_centre() -> None:
    """public-gram clips ``W x`` (not ``x``) at norm_bound and ``y - label_center`` at label_bound."""
    spec = _spec()  # W = [[1, .5], [0, 2]], norm_bound 1.5, labels 0.5 +- 0.5
    x = np.array([[1.0, 0.0], [0.0, 1.0], [0.2, 0.2]])  # ||x|| <= 1.5 each, ||W x||: 1.0, 2.06, 0.5
    clipped = {c.name: c.rows for c in spec.clipped(0, STATE, {"x": x, "y": np.array([0.0, 1.0, 1.7])})}
    assert clipped == {"norm_bound": 1, "label_bound": 1}
    assert spec.clipped(0, STATE, {"x": x[[0, 2]], "y": np.array([0.0, 1.0])}) == ()


def test_reports_the_randomizer_cannot_emit_are_refused_naming_the_field() -> None:
    spec = _spec()
    schema = spec.report_schema(0, STATE)
    honest = spec.randomize(0, STATE, {"x": np.zeros((2, 2)), "y": np.ones(2)}, rng=np.random.default_rng(0))
    with pytest.raises(ReportError, match="field 'xy' has l2 norm") as refused:
        schema.validate({"xy": honest["xy"] * np.array([[1.0], [0.9]])})
    assert (refused.value.field, refused.value.index) == ("xy", 1)
    gaussian = _spec(randomizer="gaussian", delta=1e-6)
    reports = gaussian.randomize(0, STATE, {"x": np.zeros((1, 2)), "y": np.ones(1)}, rng=np.random.default_rng(1))
    gaussian.report_schema(0, STATE).validate(reports)
    step = gaussian.report_schema(0, STATE).fields[0].grid
    with pytest.raises(ReportError, match="not a multiple of its grid step"):
        gaussian.report_schema(0, STATE).validate({"xy": reports["xy"] + step / 3})


def test_every_randomizer_of_the_table_emits_what_its_schema_accepts_and_states_its_delta() -> None:
    assert DEFAULT_VECTOR_RANDOMIZER == "privunit" and VECTOR_RANDOMIZERS["privunit"].pure
    assert VECTOR_RANDOMIZERS["l2ball"].pure and not VECTOR_RANDOMIZERS["gaussian"].pure
    rows = np.random.default_rng(3).normal(size=(200, 4))
    rows /= np.maximum(1.0, np.linalg.norm(rows, axis=1, keepdims=True) / 2.0)
    for randomizer in VECTOR_RANDOMIZERS.values():
        delta = 0.0 if randomizer.pure else 1e-6
        field = randomizer.schema("v", 4, 2.0, 1.0, delta)
        reports = randomizer.randomize(rows, 2.0, 1.0, delta, np.random.default_rng(4))
        assert reports.shape == rows.shape and field.shape == (4,)
        ReportSchema((field,)).validate({"v": reports})
        if randomizer.pure:
            with pytest.raises(ProtocolError, match="delta must be 0"):
                _spec(randomizer=randomizer.name, delta=1e-6)
        else:
            with pytest.raises(ProtocolError, match="delta"):
                _spec(randomizer=randomizer.name, delta=0.0)


def test_bad_public_gram_specs_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ProtocolError, match="variant must be one of"):
        _spec(variant="central")
    with pytest.raises(ProtocolError, match="randomizer must be one of"):
        _spec(randomizer="laplace")
    with pytest.raises(ProtocolError, match="clips x in the l2 norm"):
        _spec(norm="l1")
    with pytest.raises(ProtocolError, match="whitening must be 2x2"):
        _spec(whitening=(1.0, 0.0, 0.0))
    with pytest.raises(ProtocolError, match="variant 'paper' reports with the Gaussian"):
        SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6, variant="paper", randomizer="l2ball")
    with pytest.raises(ProtocolError, match="label_center applies to variant 'public-gram'"):
        SteinGlmSpec(2, 1.0, 1.0, 1.0, 1e-6, label_center=0.5)


def test_the_spec_round_trips_and_an_old_stored_spec_reads_as_the_paper_variant() -> None:
    spec = _spec()
    assert spec_from_json(spec.to_json()) == spec
    old = {"protocol": "stein-glm", "dimension": 2, "norm_bound": 3.0, "label_bound": 1.0, "epsilon": 1.0,
           "delta": 1e-6, "norm": "l2", "gram": True, "xy_ratio": None, "participants": None}
    restored = spec_from_json(old)
    assert restored.variant == "paper" and restored.randomizer == "gaussian"
    assert restored.report_schema(0, STATE).names == ("xx", "xy")
