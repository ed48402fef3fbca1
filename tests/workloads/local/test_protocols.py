"""Campaign protocols: specs and their JSON round trip, rounds and public state, costs, and the batch validators."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workloads.local.protocols import (
    PROTOCOLS,
    FieldSchema,
    GroupSpec,
    LdpAverageSpec,
    ProtocolError,
    ReportError,
    ReportSchema,
    RoundSpec,
    RoundState,
    SteinGlmSpec,
    TwoRoundSteinSpec,
    register_protocol,
    spec_from_json,
)

SPECS = [
    LdpAverageSpec(0.0, 10.0, 1.5, participants=1000),
    SteinGlmSpec(4, 3.0, 1.0, 2.0, 1e-6),
    SteinGlmSpec(4, 1.0, 1.0, 10.0, 1e-7, norm="l1", gram=False, participants=5000),
    SteinGlmSpec(4, 3.0, 1.0, 2.0, 1e-6, xy_ratio=0.5),
    TwoRoundSteinSpec.split_budget(3, 2.0, 1.0, 4.0, 1e-6, participants=300),
    TwoRoundSteinSpec.split_groups(3, 2.0, 1.0, 4.0, 1e-6, 100, 200, projection_scale=3.0),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.protocol)
def test_specs_round_trip_through_json(spec) -> None:  # noqa: ANN001
    text = json.dumps(spec.to_json())
    again = spec_from_json(json.loads(text))
    assert again == spec and type(again) is type(spec)
    assert json.loads(text)["protocol"] == spec.protocol


def test_registry_finds_protocols_by_name() -> None:
    assert {"ldp-avg", "stein-glm", "stein-glm-2round", "ldp-iht", "label-ldp"} <= set(PROTOCOLS)
    with pytest.raises(ProtocolError, match="registered twice"):
        register_protocol(SteinGlmSpec)
    with pytest.raises(ProtocolError, match="unknown protocol 'no-such'"):
        spec_from_json({"protocol": "no-such"})


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({**SPECS[1].to_json(), "epsilon": 0}, "epsilon"),
        ({**SPECS[1].to_json(), "delta": 1.0}, "delta"),
        ({**SPECS[1].to_json(), "delta": 0.0}, "delta"),
        ({**SPECS[1].to_json(), "norm": "l3"}, "norm"),
        ({**SPECS[1].to_json(), "dimension": 0}, "dimension"),
        ({**SPECS[1].to_json(), "norm_bound": -1}, "norm_bound"),
        ({**SPECS[1].to_json(), "label_bound": float("nan")}, "label_bound"),
        ({**SPECS[1].to_json(), "gram": "yes"}, "gram"),
        ({**SPECS[1].to_json(), "xy_ratio": -2.0}, "xy_ratio"),
        ({**SPECS[1].to_json(), "seed": 3}, "unknown key 'seed'"),
        ({k: v for k, v in SPECS[1].to_json().items() if k != "delta"}, "missing key 'delta'"),
        ({**SPECS[0].to_json(), "upper": -5.0}, "lower < upper"),
        ({**SPECS[4].to_json(), "second": {"group": "all", "epsilon": 1.0, "delta": 1e-6}}, "second.delta"),
        ({**SPECS[4].to_json(), "first": {"group": "nobody", "epsilon": 1.0, "delta": 1e-6}}, "group 'nobody'"),
        ({**SPECS[4].to_json(), "participant_groups": [{"name": "all", "size": -3}]}, "size"),
        ({**SPECS[4].to_json(), "projection_scale": 0}, "projection_scale"),
    ],
)
def test_bad_specs_are_refused_naming_the_parameter(data: dict, pattern: str) -> None:
    with pytest.raises(ProtocolError, match=pattern):
        spec_from_json(data)


def test_rounds_groups_and_participant_costs() -> None:
    one = SPECS[1]
    assert one.round_count == 1 and one.participant_cost("all") == (2.0, 1e-6)
    budget = SPECS[4]
    assert budget.round_count == 2 and budget.rounds()[1].delta == 0.0
    assert budget.participant_cost("all") == (4.0, 1e-6)  # epsilon/2 twice, delta once
    groups = SPECS[5]
    assert groups.participant_cost("first") == (4.0, 1e-6)
    assert groups.participant_cost("second") == (4.0, 0.0)
    assert groups.max_participant_cost() == (4.0, 1e-6)
    assert [g.size for g in groups.groups()] == [100, 200]
    with pytest.raises(ProtocolError, match="unknown group"):
        groups.participant_cost("third")
    with pytest.raises(ProtocolError, match="round_index"):
        groups.round(2)


def test_round_state_round_trip_and_checks() -> None:
    spec = SPECS[4]
    state = spec.projection_state([0.1, -0.2, 0.3], 1.5)
    assert RoundState.from_json(json.loads(json.dumps(state.to_json()))) == state
    spec.report_schema(1, state)
    with pytest.raises(ProtocolError, match="length 3"):
        spec.projection_state([0.1, 0.2], 1.5)
    with pytest.raises(ProtocolError, match="bound"):
        spec.projection_state([0.1, 0.2, 0.3], 0.0)
    with pytest.raises(ProtocolError, match="round 1"):
        spec.report_schema(0, state)  # a state of round 1 used for round 0
    with pytest.raises(ProtocolError, match="lacks 'coef'"):
        spec.report_schema(1, RoundState(1, {"bound": 1.0}))
    with pytest.raises(ProtocolError, match="finite"):
        RoundState(1, {"bound": float("inf")})


def test_randomize_refuses_bad_participant_data() -> None:
    spec, state = SPECS[1], SPECS[1].initial_state()
    with pytest.raises(ProtocolError, match="'y'"):
        spec.randomize(0, state, {"x": np.zeros(4)})
    with pytest.raises(ProtocolError, match=r"shape \(4,\)"):
        spec.randomize(0, state, {"x": np.zeros(3), "y": 0.0})
    with pytest.raises(ProtocolError, match="finite"):
        spec.randomize(0, state, {"x": [0.0, np.nan, 0.0, 0.0], "y": 0.0})
    report = spec.randomize(0, state, {"x": np.ones(4), "y": 1.0}, np.random.default_rng(0))
    assert {k: v.shape for k, v in report.items()} == {"xx": (10,), "xy": (4,)}


# ---------------------------------------------------------------------------------------------------- validators
@pytest.fixture
def stein_batch() -> tuple[SteinGlmSpec, ReportSchema, dict[str, np.ndarray]]:
    spec = SPECS[1]
    rng = np.random.default_rng(1)
    batch = spec.randomize(0, spec.initial_state(), {"x": rng.normal(size=(50, 4)), "y": rng.uniform(-1, 1, 50)}, rng)
    return spec, spec.report_schema(0, spec.initial_state()), batch


def test_honest_batches_pass(stein_batch) -> None:  # noqa: ANN001
    spec, schema, batch = stein_batch
    arrays = schema.validate({k: v.tolist() for k, v in batch.items()})  # JSON-style lists are fine
    assert arrays["xx"].shape == (50, 10) and arrays["xy"].shape == (50, 4)
    # many honest reports of extreme participants stay inside the allowed range
    rng = np.random.default_rng(2)
    extreme = spec.randomize(0, spec.initial_state(), {"x": np.full((20_000, 4), 100.0), "y": np.full(20_000, 5.0)},
                             rng)
    schema.validate(extreme)
    # the range is the grid interval of the clipped range plus the discrete Gaussian's 1e-9 tail (14 entries)
    for field, noise, bound in ((schema.fields[0], spec.noise.xx_noise, spec.norm_bound**2),
                                (schema.fields[1], spec.noise.xy_noise, spec.norm_bound * spec.label_bound)):
        assert field.grid == noise.grid
        assert field.high == noise.grid * (np.ceil(bound / noise.grid) + noise.tail_units(14))


@pytest.mark.parametrize(
    ("mutate", "field", "index", "pattern"),
    [
        (lambda b: b.pop("xy"), "xy", None, "'xy' is missing"),
        (lambda b: b.update(extra=np.zeros(50)), "extra", None, "unknown field 'extra'"),
        (lambda b: b.update(xy=b["xy"][:, :3]), "xy", None, r"shape \(k, 4\)"),
        (lambda b: b.update(xy=b["xy"][:40]), "xy", None, "40 reports"),
        (lambda b: b["xx"].__setitem__((17, 3), np.nan), "xx", 17, "report 17: field 'xx'.*finite"),
        (lambda b: b["xy"].__setitem__((33, 0), 1e12), "xy", 33, "report 33: field 'xy'.*outside"),
        (lambda b: b["xy"].__setitem__((5, 2), -np.inf), "xy", 5, "report 5"),
        (lambda b: b.update(xx=np.array([["a"] * 10] * 50)), "xx", None, "must hold numbers"),
    ],
)
def test_malformed_batches_are_refused_naming_field_and_index(stein_batch, mutate, field, index, pattern) -> None:  # noqa: ANN001
    _, schema, batch = stein_batch
    mutate(batch)
    with pytest.raises(ReportError, match=pattern) as caught:
        schema.validate(batch)
    assert caught.value.field == field and caught.value.index == index


def test_the_first_bad_report_is_named() -> None:
    schema = ReportSchema((FieldSchema("value", (), -1.0, 1.0),))
    values = np.zeros(1000)
    values[[412, 700]] = 5.0
    with pytest.raises(ReportError, match="report 412") as caught:
        schema.validate({"value": values})
    assert caught.value.index == 412


def test_stack_builds_a_batch_from_single_reports(stein_batch) -> None:  # noqa: ANN001
    _, schema, batch = stein_batch
    reports = [{name: batch[name][i].tolist() for name in batch} for i in range(50)]
    stacked = schema.stack(reports)
    assert all(np.array_equal(stacked[name], batch[name]) for name in batch)
    reports[9] = {**reports[9], "xy": [1.0, 2.0]}
    with pytest.raises(ReportError, match="report 9: field 'xy'") as caught:
        schema.stack(reports)
    assert caught.value.index == 9
    # the right number of entries in the wrong shape is refused too
    reshaped = [{**r, "xy": np.reshape(r["xy"], (2, 2)).tolist()} if i == 4 else r for i, r in enumerate(reports[:9])]
    with pytest.raises(ReportError, match="report 4: field 'xy'"):
        schema.stack(reshaped)
    with pytest.raises(ReportError, match="report 2: field 'xx' is missing"):
        schema.stack([reports[0], reports[1], {"xy": [0.0] * 4}])


def test_schemas_of_every_protocol(stein_batch) -> None:  # noqa: ANN001
    avg = SPECS[0]
    schema = avg.report_schema(0, avg.initial_state())
    assert schema.names == ("value",) and schema.fields[0].shape == ()
    assert SPECS[2].report_schema(0, SPECS[2].initial_state()).names == ("xy",)
    two = SPECS[4]
    state = two.projection_state([1.0, 0.0, 0.0], 2.0)
    projection = two.report_schema(1, state)
    assert projection.names == ("projection",)
    report = two.randomize(1, state, {"x": np.ones((7, 3))}, np.random.default_rng(3))
    projection.validate(report)
    assert ReportSchema.from_json(json.loads(json.dumps(projection.to_json()))) == projection
    assert GroupSpec.from_json({"name": "g", "size": None}) == GroupSpec("g")
    assert RoundSpec.from_json({"group": "g", "epsilon": 1}) == RoundSpec("g", 1.0, 0.0)
