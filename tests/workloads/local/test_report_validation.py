"""Issue 18, finding 6 (validation half): the server accepts only what the randomizer can emit.

Forged values that the schemas of before accepted (within 60 Laplace scales or 20 Gaussian sigmas of the interval, or
an l2-ball report of any norm up to the sphere's) are refused: every noisy entry must be on the campaign's grid and
within the discrete noise's 1e-9 tail; an l2-ball report must have the sphere's norm. And 10^5 honest reports of
extreme participants are all accepted (the false-refusal probability is at most 1e-9 per report).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from workloads.local.protocols import (
    EXACT_NORM_RTOL,
    FieldSchema,
    LdpAverageSpec,
    ReportError,
    ReportSchema,
    SteinGlmSpec,
    TwoRoundSteinSpec,
)
from workloads.local.protocols.bernstein import BernsteinSpec
from workloads.local.protocols.dr_erm import DrErmSpec
from workloads.local.protocols.ldp_iht import LdpIhtSpec
from workloads.local.randomizers.grid import FALSE_REFUSAL

HONEST = 100_000


def _refused(schema: ReportSchema, batch: dict, pattern: str) -> None:
    with pytest.raises(ReportError, match=pattern):
        schema.validate(batch)


def test_ldp_avg_refuses_off_grid_and_far_tail_values_main_accepted() -> None:
    spec = LdpAverageSpec(0.0, 1.0, 1.0)
    schema = spec.report_schema(0, spec.initial_state())
    (field,) = schema.fields
    grid = spec.noise.grid
    assert field.grid == grid
    _refused(schema, {"value": [0.3 + grid / 3]}, "not a multiple of its grid step")  # in range, off the grid
    _refused(schema, {"value": [1.0 + 30 * spec.scale]}, "outside its allowed range")  # 30 scales: main took 60
    # the bound is the discrete Laplace tail at 1e-9: M = ceil(t ln(2 / 1e-9)) + 1 units past the grid interval
    margin = spec.noise.tail_units(1)
    assert margin == int(np.ceil(spec.noise.t * np.log(2 / FALSE_REFUSAL))) + 1
    assert field.high == 1.0 + grid * margin and field.low == -grid * margin
    schema.validate({"value": [field.high, field.low, 0.5]})


def test_ldp_avg_accepts_every_honest_report() -> None:
    spec = LdpAverageSpec(-2.0, 3.0, 0.5)
    rng = np.random.default_rng(1)
    values = np.where(rng.random(HONEST) < 0.5, -50.0, 50.0)  # both extremes, clipped
    schema = spec.report_schema(0, spec.initial_state())
    schema.validate(spec.randomize(0, spec.initial_state(), {"value": values}, rng))


def test_stein_refuses_forged_statistics_and_accepts_honest_ones() -> None:
    spec = SteinGlmSpec(4, 1.0, 1.0, 1.0, 1e-6)
    state = spec.initial_state()
    schema = spec.report_schema(0, state)
    rng = np.random.default_rng(2)
    x = rng.choice([-1.0, 1.0], size=(HONEST, 4)) * 10.0  # every participant clipped to the sphere
    honest = spec.randomize(0, state, {"x": x, "y": np.sign(rng.normal(size=HONEST)) * 5.0}, rng)
    schema.validate(honest)
    forged = {name: values[:1].copy() for name, values in honest.items()}
    forged["xy"][0, 0] = 1.0 + 15 * spec.noise.xy  # 15 sigma: main took 20
    forged["xy"][0, 0] -= forged["xy"][0, 0] % spec.noise.xy_noise.grid  # on the grid, so the range is what refuses
    _refused(schema, forged, "'xy' .* outside its allowed range")
    forged = {name: values[:1].copy() for name, values in honest.items()}
    forged["xx"][0, 3] += spec.noise.xx_noise.grid / 2
    _refused(schema, forged, "'xx' .* not a multiple")


def test_two_round_projection_and_bernstein_reports_are_checked_on_their_grids() -> None:
    spec = TwoRoundSteinSpec.split_groups(2, 1.0, 1.0, 1.0, 1e-6)
    state = spec.projection_state([0.5, -0.5], 0.8)
    schema = spec.report_schema(1, state)
    rng = np.random.default_rng(3)
    honest = spec.randomize(1, state, {"x": rng.normal(size=(HONEST, 2)) * 5}, rng)
    schema.validate(honest)
    _refused(schema, {"projection": [0.1 + spec.projection_noise(state).grid / 4]}, "not a multiple")

    bernstein = BernsteinSpec(1, 3, 2, -1.0, 1.0, 4.0, 1.0)
    schema = bernstein.report_schema(0, bernstein.initial_state())
    honest = bernstein.randomize(0, bernstein.initial_state(),
                                 {"x": rng.uniform(-1, 1, (HONEST, 1)), "y": rng.uniform(-1, 1, HONEST)}, rng)
    schema.validate(honest)
    forged = honest["losses"][:1].copy()
    forged[0, 2] = 0.123456789  # in [0, 1], off the grid
    _refused(schema, {"losses": forged}, "not a multiple")


def test_l2_ball_reports_must_have_the_spheres_norm() -> None:
    """LDP-IHT's gradients and DR-ERM's statistics: main accepted any norm up to the sphere's; every honest report
    has exactly that norm, so a shorter vector (a forged small gradient) is refused."""
    spec = LdpIhtSpec(5, 2, 2, 0.5, 1.0, 2.0, 3.0)
    state = spec.initial_state()
    schema = spec.report_schema(0, state)
    (field,) = schema.fields
    assert field.exact_norm == pytest.approx(spec.report_norm) and field.norm is None
    rng = np.random.default_rng(4)
    honest = spec.randomize(0, state, {"x": rng.choice([-1.0, 1.0], (HONEST, 5)), "y": rng.normal(size=HONEST)}, rng)
    schema.validate(honest)
    schema.validate({"gradient": honest["gradient"][:50].astype(np.float32)})  # a gateway's single precision
    forged = honest["gradient"][:1] * 0.5
    _refused(schema, {"gradient": forged}, "every honest report has norm")
    _refused(schema, {"gradient": honest["gradient"][:1] * (1 + 4 * EXACT_NORM_RTOL)}, "every honest report has norm")

    dr = DrErmSpec(4, 2, 11, 1.0)
    state = dr.initial_state()
    schema = dr.report_schema(0, state)
    honest = dr.randomize(0, state, {"x": rng.normal(size=(1000, 4)), "y": rng.normal(size=1000)}, rng)
    schema.validate(honest)
    _refused(schema, {"statistics": honest["statistics"][:1] * 0.9}, "every honest report has norm")


def test_field_schema_grid_and_exact_norm_round_trip_through_json() -> None:
    field = FieldSchema("v", (3,), -2.0, 2.0, grid=2.0**-12)
    sphere = FieldSchema("g", (2,), -1.5, 1.5, exact_norm=1.5)
    schema = ReportSchema((field, sphere))
    again = ReportSchema.from_json(json.loads(json.dumps(schema.to_json())))
    assert again == schema and again.fields[0].grid == 2.0**-12 and again.fields[1].exact_norm == 1.5
    with pytest.raises(ValueError, match="power of two"):
        FieldSchema("v", (), -1.0, 1.0, grid=0.3)
