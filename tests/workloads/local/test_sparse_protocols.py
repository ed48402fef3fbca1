"""The sparse-regression protocols' specs (Wang & Xu 2019): LDP-IHT's rounds and groups, the label protocol's
reports, their schemas (the l2-ball reports' norm check) and the parameters refused before any report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workloads.local.protocols import ProtocolError, ReportError, ReportSchema, RoundState, spec_from_json
from workloads.local.protocols.label_ldp import LabelLdpSpec
from workloads.local.protocols.ldp_iht import LdpIhtSpec, group_sizes
from workloads.local.randomizers.gaussian_label import label_noise_sigma
from workloads.local.randomizers.l2ball import l2_ball_output_norm

IHT = LdpIhtSpec(dimension=6, sparsity=2, steps=3, eta=1.0, epsilon=2.0, residual_bound=3.0, feature_norm_bound=2.0,
                 participants=100)
LABEL = LabelLdpSpec(dimension=4, label_bound=2.0, feature_bound=1.0, epsilon=1.0, delta=1e-3, sparsity=2,
                     iterations=5, eta=1.0, public_rows=10, participants=50)


@pytest.mark.parametrize("spec", [IHT, LABEL, LdpIhtSpec(3, 1, 1, 0.5, 1.0, 1.0, 1.0),
                                  LabelLdpSpec(3, 1.0, 1.0, 1.0, 1e-6, 1, 1, 1.0, alpha=0.1, public_rows=7)],
                         ids=["ldp-iht", "label-ldp", "ldp-iht-open", "label-ldp-alpha"])
def test_specs_round_trip_through_json(spec) -> None:  # noqa: ANN001
    assert spec_from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_ldp_iht_has_t_rounds_of_t_disjoint_groups_each_spending_epsilon_once() -> None:
    assert [g.size for g in IHT.groups()] == [33, 33, 34] == group_sizes(100, 3)
    assert [r.group for r in IHT.rounds()] == ["group-1", "group-2", "group-3"]
    for group in IHT.groups():  # Alg. 1: each participant reports once, so her spend is one round's epsilon
        assert IHT.participant_cost(group.name) == (2.0, 0.0)
    assert IHT.max_participant_cost() == (2.0, 0.0)
    assert [g.size for g in LdpIhtSpec(3, 1, 4, 1.0, 1.0, 1.0, 1.0).groups()] == [None] * 4


def test_ldp_iht_state_report_and_schema() -> None:
    state = IHT.initial_state()
    np.testing.assert_array_equal(state.vector("theta", 6), np.zeros(6))
    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 1.0], size=(40, 6))
    report = IHT.randomize(0, state, {"x": x, "y": x[:, 0]}, rng)
    bound = l2_ball_output_norm(6, 2.0 * 3.0, 2.0)
    np.testing.assert_allclose(np.linalg.norm(report["gradient"], axis=1), bound, rtol=1e-12)
    schema = IHT.report_schema(0, state)
    assert ReportSchema.from_json(json.loads(json.dumps(schema.to_json()))) == schema  # the norm survives JSON
    schema.validate(report)
    # every entry inside [-B, B] but the norm 1.5 B: not an honest report, refused by the norm check
    forged = report["gradient"].copy()
    forged[3] = np.full(6, 1.5 * bound / math.sqrt(6))
    with pytest.raises(ReportError, match=r"report 3: field 'gradient' has l2 norm"):
        schema.validate({"gradient": forged})
    with pytest.raises(ProtocolError, match="outside the ball"):
        IHT.theta_state(1, np.full(6, 1.0))
    with pytest.raises(ProtocolError, match="length 6"):
        IHT.report_schema(1, RoundState(1, {"theta": [0.0, 0.0]}))
    with pytest.raises(ProtocolError, match="participant data 'y'"):
        IHT.randomize(0, state, {"x": x, "y": np.zeros(3)}, rng)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [({"sparsity": 7}, "sparsity must be at most the number of features p=6"),
     ({"sparsity": 0}, "sparsity"),
     ({"steps": 0}, r"rounds \(T\)"),
     ({"eta": 0.0}, "eta"),
     ({"eta": -1.0}, "eta"),
     ({"epsilon": 0.0}, "epsilon"),
     ({"residual_bound": float("inf")}, "residual_bound"),
     ({"participants": 2}, "at least the number of rounds T=3")],
)
def test_ldp_iht_bad_parameters(change: dict, pattern: str) -> None:
    with pytest.raises(ProtocolError, match=pattern):
        spec_from_json({**IHT.to_json(), **change})


@pytest.mark.parametrize(
    ("change", "pattern"),
    [({"sparsity": 5}, "sparsity"), ({"iterations": 0}, "iterations"), ({"eta": 0}, "eta"),
     ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"), ({"alpha": -0.1}, "alpha"),
     ({"feature_bound": 0.0}, "feature_bound"), ({"public_rows": 0}, "public_rows")],
)
def test_label_ldp_bad_parameters(change: dict, pattern: str) -> None:
    with pytest.raises(ProtocolError, match=pattern):
        spec_from_json({**LABEL.to_json(), **change})


def test_label_report_is_the_public_row_id_and_the_noisy_label_unbiased() -> None:
    """Issue 18 finding 4: the report is (public row id, tilde y); the server forms x tilde y from its own table."""
    rng = np.random.default_rng(1)
    k = 200_000
    state = LABEL.initial_state()
    reports = LABEL.randomize(0, state, {"row": np.full(k, 3.0), "y": np.full(k, 5.0)}, rng)
    assert set(reports) == {"row", "label"} and np.all(reports["row"] == 3.0)
    labels = reports["label"]  # tilde y = clip(5, -2, 2) + N(0, sigma^2)
    sigma = label_noise_sigma(2.0, 1.0, 1e-3)
    # mean of k labels: standard error sigma / sqrt(k); 5 standard errors fail with probability < 1e-6
    assert abs(labels.mean() - 2.0) < 5 * sigma / math.sqrt(k)
    assert abs(labels.std() - sigma) < 5 * sigma / math.sqrt(2 * k)
    batch = LABEL.report_schema(0, state).validate(reports)
    LABEL.check_reports(0, state, batch)
    public = np.zeros((10, 4))
    public[3] = [1.0, -1.0, 0.5, 3.0]  # the last entry is clipped to feature_bound = 1 by the server
    summed = LABEL.aggregate_input(0, state, batch, public)["xy"]
    np.testing.assert_array_equal(summed, labels[:, np.newaxis] * np.array([1.0, -1.0, 0.5, 1.0]))
    LABEL.aggregate_schema(0, state).validate({"xy": summed})
    with pytest.raises(ReportError, match="outside its allowed range"):
        LABEL.report_schema(0, state).validate({"row": [0.0], "label": [1e6]})
    with pytest.raises(ReportError, match="outside its allowed range"):  # no row 10 in a table of 10
        LABEL.report_schema(0, state).validate({"row": [10.0], "label": [0.0]})
    with pytest.raises(ReportError, match="whole-number id"):
        LABEL.check_reports(0, state, {"row": np.array([2.5]), "label": np.array([0.0])})
    with pytest.raises(ProtocolError, match="ids of the public table's rows"):
        LABEL.randomize(0, state, {"row": 10.0, "y": 1.0})
    with pytest.raises(ReportError, match="whole-number id"):  # inside the schema's [-1/2, 9.5], not an id
        LABEL.check_reports(0, state, {"row": np.array([-0.25]), "label": np.array([0.0])})


def test_a_label_campaign_stored_before_row_ids_loads_and_refuses_reports() -> None:
    """A spec stored before issue 18 (no public_rows) still loads (listing, fitting from its stored sums) and refuses
    new reports with a message saying why."""
    old = {key: value for key, value in LABEL.to_json().items() if key != "public_rows"}
    spec = spec_from_json(old)
    assert spec.public_rows is None
    with pytest.raises(ProtocolError, match="created before reports named public rows"):
        spec.report_schema(0, spec.initial_state())
