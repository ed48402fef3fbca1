"""The ``glm`` protocol's device side: the public map ``z``, the label score, each randomizer of the table (unbiased,
its covariance the stated one), what the server accepts, the bad specs refused naming the parameter, and the charge."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.local.protocols import PROTOCOLS, ProtocolError, ReportError, RoundState, spec_from_json
from workloads.local.protocols.glm import (
    GLM_RANDOMIZERS,
    GlmSpec,
    directions,
    label_scores,
    public_feature_map,
)
from workloads.local.randomizers.l2ball import l2_ball_output_norm

STATE = RoundState(0)


def _public(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((400, 3)) * np.array([1.0, 3.0, 0.5]) + np.array([0.0, 2.0, -1.0])


def _spec(randomizer: str = "l2ball", labels: str = "binary", whiten: bool = False, **extra: object) -> GlmSpec:
    center, matrix = public_feature_map(_public(), whiten)
    delta = 0.0 if GLM_RANDOMIZERS[randomizer].pure else 1e-6
    options = {"epsilon": 2.0, "delta": delta, **extra}
    return GlmSpec(3, center=tuple(center), matrix=tuple(map(tuple, matrix)), labels=labels,
                   randomizer=randomizer, **options)  # type: ignore[arg-type]


def test_registered_and_round_trips_through_json() -> None:
    assert PROTOCOLS.get("glm") is GlmSpec
    spec = _spec("gaussian", "bounded", label_bound=3.0)
    assert spec_from_json(spec.to_json()) == spec and spec.report_dimension == 4


def test_the_public_map_is_a_unit_vector_of_public_constants() -> None:
    rows = _public()
    center, matrix = public_feature_map(rows)
    np.testing.assert_allclose(center, rows.mean(axis=0))
    np.testing.assert_allclose(matrix, np.diag(1.0 / rows.std(axis=0)))
    _, white = public_feature_map(rows, whiten=True)
    np.testing.assert_allclose(white @ np.cov(rows, rowvar=False, bias=True) @ white.T, np.eye(3), atol=1e-10)
    x = np.array([[1.0, -2.0, 0.3], center])
    z = directions(x, center, matrix)
    a = np.concatenate([[1.0], (x[0] - center) / rows.std(axis=0)])
    np.testing.assert_allclose(z[0], a / np.linalg.norm(a))
    np.testing.assert_allclose(z[1], [1.0, 0.0, 0.0, 0.0])  # the public mean maps to the intercept's axis
    with pytest.raises(ProtocolError, match="public column 'b' is constant"):
        public_feature_map(np.column_stack([rows[:, 0], np.ones(400)]), names=["a", "b"])


def test_label_scores() -> None:
    np.testing.assert_array_equal(label_scores(np.array([0.0, 1.0]), "binary", 1.0), [-0.5, 0.5])
    np.testing.assert_allclose(label_scores(np.array([-5.0, 1.0, 9.0]), "bounded", 2.0), [-1.0, 0.5, 1.0])
    with pytest.raises(ProtocolError, match="'y' must be 0 or 1"):
        _spec().randomize(0, STATE, {"x": np.zeros(3), "y": 2.0})


@pytest.mark.parametrize(("randomizer", "labels"), [("l2ball", "binary"), ("l2ball", "bounded"),
                                                    ("gaussian", "binary"), ("gaussian", "bounded")])
def test_reports_are_unbiased_with_the_stated_covariance(randomizer: str, labels: str) -> None:
    """One participant's input ``u`` repeated ``k`` times: the mean report is within 5 standard errors of ``u`` (the
    standard errors from the randomizer's stated covariance), and the empirical covariance matches the stated one."""
    spec, k = _spec(randomizer, labels, label_bound=2.0) if labels == "bounded" else _spec(randomizer), 40_000
    x, y = np.array([0.5, 4.0, -1.2]), (1.0 if labels == "binary" else -1.5)
    u = label_scores(np.array(y), labels, spec.label_bound) * spec.map_features(x)
    reports = spec.randomize(0, STATE, {"x": np.tile(x, (k, 1)), "y": np.full(k, y)},
                             np.random.default_rng(7))["u"]
    stated = spec.ball_randomizer().covariance(np.outer(u, u), u, spec.radius, spec.epsilon, spec.delta)
    np.testing.assert_array_less(np.abs(reports.mean(axis=0) - u), 5 * np.sqrt(np.diag(stated) / k))
    empirical = np.cov(reports, rowvar=False)
    # the variance of a sample covariance entry is at most (4th moment) / k; the reports are bounded or Gaussian
    np.testing.assert_allclose(empirical, stated, atol=6 * np.max(np.diag(stated)) / np.sqrt(k))
    spec.report_schema(0, STATE).validate({"u": reports})  # every honest report is accepted


def test_the_l2ball_covariance_is_exact_and_isotropic_in_the_noise() -> None:
    spec = _spec()
    bound = l2_ball_output_norm(4, 0.5, 2.0)
    u = np.array([0.3, -0.2, 0.1, 0.3])
    stated = spec.ball_randomizer().covariance(np.zeros((4, 4)), u, 0.5, 2.0, 0.0)
    np.testing.assert_allclose(stated, bound**2 / 4 * np.eye(4) - np.outer(u, u))


def test_reports_the_randomizer_cannot_emit_are_refused() -> None:
    spec = _spec()
    schema = spec.report_schema(0, STATE)
    honest = spec.randomize(0, STATE, {"x": _public()[:5], "y": np.array([0, 1, 1, 0, 1.0])},
                            np.random.default_rng(1))
    schema.validate(honest)
    with pytest.raises(ReportError, match="every honest report has norm") as refused:
        schema.validate({"u": honest["u"] * 0.5})
    assert refused.value.field == "u" and refused.value.index == 0
    with pytest.raises(ReportError, match="shape"):
        schema.validate({"u": honest["u"][:, :3]})
    gaussian = _spec("gaussian")
    schema = gaussian.report_schema(0, STATE)
    field = schema.fields[0]
    reports = gaussian.randomize(0, STATE, {"x": _public()[:5], "y": np.array([0, 1, 1, 0, 1.0])},
                                 np.random.default_rng(2))
    schema.validate(reports)
    off_grid = reports["u"].copy()
    off_grid[3, 1] += field.grid / 2
    with pytest.raises(ReportError, match="not a multiple of its grid step") as refused:
        schema.validate({"u": off_grid})
    assert refused.value.index == 3
    with pytest.raises(ReportError, match="outside its allowed range"):
        schema.validate({"u": np.full((1, 4), field.high + 64 * field.grid)})


def test_the_charge_is_exactly_the_stated_epsilon_and_delta() -> None:
    assert _spec().max_participant_cost() == (2.0, 0.0)
    assert _spec("gaussian").participant_cost("all") == (2.0, 1e-6)
    assert [(r.group, r.epsilon, r.delta) for r in _spec().rounds()] == [("all", 2.0, 0.0)]


@pytest.mark.parametrize(("change", "message"), [
    ({"randomizer": "privunit9"}, "randomizer must be one of"),
    ({"labels": "ternary"}, "labels must be one of"),
    ({"delta": 1e-6}, "delta must be 0 with the l2ball randomizer"),
    ({"randomizer": "gaussian", "delta": 0.0}, "delta must"),
    ({"center": (0.0, 0.0)}, "center must be 3 finite numbers"),
    ({"matrix": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 1.0, 0.0))}, "matrix \\(W\\) must be invertible"),
    ({"label_bound": 0.0}, "label_bound"),
    ({"epsilon": -1.0}, "epsilon"),
])
def test_bad_specs_are_refused_naming_the_parameter(change: dict, message: str) -> None:
    good = _spec().to_json()
    with pytest.raises(ProtocolError, match=message):
        spec_from_json({**good, **{k: list(v) if isinstance(v, tuple) else v for k, v in change.items()}})
