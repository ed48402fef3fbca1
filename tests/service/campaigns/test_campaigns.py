"""Campaigns: what creation stores, every bad parameter refused naming it with nothing stored, rounds and closing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.campaigns import campaigns
from service.errors import Conflict, InvalidInput, NotFound
from tests.support.campaign_data import FEATURES, gaussian_rows, load_public


def test_a_stein_campaign_stores_its_spec_rounds_transform_and_guarantee(engine, tmp_path: Path) -> None:  # noqa: ANN001
    rows = gaussian_rows(500) + np.array([10.0, 0.0, -3.0])
    load_public(engine, tmp_path, rows)
    info = campaigns.create_campaign(engine, "glm", "stein-glm", "a,b,c", "y", "pub", 2, 1e-6,
                                     {"label_bound": 1, "participants": 1000, "variant": "paper"})
    assert (info.protocol, info.features, info.target, info.public_table) == ("stein-glm", tuple(FEATURES), "y", "pub")
    assert info.epsilon == 2 and info.delta == 1e-6 and info.status == "open"
    assert info.spec.dimension == 3 and info.spec.participants == 1000
    np.testing.assert_allclose(info.transform.center, rows.mean(axis=0))  # standardized with public statistics
    np.testing.assert_allclose(info.transform.scale, rows.std(axis=0))
    assert [(r.index, r.group, r.status, r.expected) for r in info.rounds] == [(0, "all", "open", 1000)]
    state = campaigns.public_state(info)
    assert state["round"] == 0 and state["state"] == {"round_index": 0, "values": {}}
    assert set(state) >= {"spec", "features", "transform", "round_epsilon"} and "reports" not in state
    assert [c.name for c in campaigns.list_campaigns(engine)] == ["glm"]
    assert campaigns.get_campaign(engine, info.id).name == "glm"


def test_two_round_campaign_splits_the_budget_and_waits_for_round_zero(engine) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "alg5", "stein-glm-2round", ["a", "b"], "y", None, 2, 1e-5,
                                     {"norm_bound": 3})
    assert info.epsilon == 2 and [(r.epsilon, r.delta, r.status) for r in info.rounds] == [
        (1.0, 1e-5, "open"), (1.0, 0.0, "pending")]
    assert info.transform.source == "identity"
    with pytest.raises(Conflict, match="cannot close yet") as refused:  # no reports: no state for round 1
        campaigns.close_round(engine, "alg5")
    assert refused.value.code == "round_not_ready"
    assert campaigns.get_campaign(engine, "alg5").rounds[0].status == "open"
    closed = campaigns.close_campaign(engine, "alg5")
    assert closed.status == "closed" and [r.status for r in closed.rounds] == ["closed", "pending"]
    again = campaigns.close_campaign(engine, "alg5")  # idempotent: the first closing time stays
    assert again.closed_at.replace(tzinfo=None) == closed.closed_at.replace(tzinfo=None)


BAD = [
    ({"epsilon": 0}, "epsilon must be"),
    ({"epsilon": -1}, "epsilon must be"),
    ({"epsilon": float("nan")}, "epsilon must be"),
    ({"epsilon": "abc"}, "epsilon must be"),
    ({"delta": 1}, "delta must satisfy 0 <= delta < 1, got 1"),
    ({"delta": -0.1}, "delta must satisfy"),
    ({"delta": 0}, r"delta must be in \(0, 1\) for stein-glm"),
    ({"protocol": "ldp-avg", "target": None}, "dimension mismatch: ldp-avg averages one feature"),
    ({"options": {"norm_bound": 3, "dimension": 3}}, "dimension mismatch: option dimension=3"),
    ({"public": "nope"}, "no public table named 'nope'"),
    ({"public": "pub", "features": "a,zz"}, "has no column 'zz'"),
    ({"options": {"norm_bound": 3, "norm": "l3"}}, r"option norm must be one of \['l2', 'l1'\]"),
    ({"options": {"norm_bound": -3}}, "option norm_bound must be a finite positive number"),
    ({"options": {"norm_bound": 3, "colour": "red"}}, "option 'colour' is not an option of protocol 'stein-glm'"),
    ({"options": {}}, "norm_bound is needed"),
    ({"target": None}, "needs a target"),
    ({"features": "a,a"}, "features name 'a' more than once"),
    ({"features": "a,y"}, "target 'y' cannot also be a feature"),
    ({"protocol": "no-such-protocol"}, "unknown protocol 'no-such-protocol'"),
    ({"epsilon": 20}, "exceeds the default per-participant cap"),
    ({"protocol": "ldp-avg", "features": "a", "target": None, "delta": 0.0}, "needs the public bounds"),
    ({"protocol": "ldp-avg", "features": "a", "target": None, "delta": 1e-6,
      "options": {"lower": 0, "upper": 1}}, "delta must be 0 for ldp-avg"),
    ({"name": ""}, "campaign name must be"),
    ({"protocol": "ldp-avg", "features": "a", "target": None, "delta": 0.0,
      "options": {"lower": 0, "upper": 1, "standardize": "true"}}, "options standardize and feature_bounds do not"),
]


@pytest.mark.parametrize("changes, fragment", BAD)
def test_bad_parameters_are_refused_and_nothing_is_stored(engine, tmp_path: Path, changes: dict,  # noqa: ANN001
                                                          fragment: str) -> None:
    load_public(engine, tmp_path, gaussian_rows(50))
    request = {"name": "c", "protocol": "stein-glm", "features": "a,b", "target": "y", "public": None, "epsilon": 1,
               "delta": 1e-6, "options": {"norm_bound": 3}, **changes}
    with pytest.raises((InvalidInput, NotFound), match=fragment):
        campaigns.create_campaign(engine, **request)
    assert campaigns.list_campaigns(engine) == []


def test_names_are_unique_and_lookups_name_the_campaign(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", "v", None, None, 1, 0, {"lower": 0, "upper": 10})
    with pytest.raises(Conflict, match="exists already"):
        campaigns.create_campaign(engine, "avg", "ldp-avg", "v", None, None, 1, 0, {"lower": 0, "upper": 10})
    with pytest.raises(NotFound, match="no campaign named 'other'"):
        campaigns.get_campaign(engine, "other")


def test_stated_bounds_give_the_transform(engine) -> None:  # noqa: ANN001
    info = campaigns.create_campaign(engine, "b", "stein-glm", "a,b", "y", None, 1, 1e-6,
                                     {"norm_bound": 2, "feature_bounds": "a=0:10;b=-1:1"})
    assert info.transform.center == (5.0, 0.0) and info.transform.scale == (5.0, 1.0)
    with pytest.raises(InvalidInput, match="feature_bounds: 'b' needs finite lo < hi"):
        campaigns.create_campaign(engine, "b2", "stein-glm", "a,b", "y", None, 1, 1e-6,
                                  {"norm_bound": 2, "feature_bounds": {"a": [0, 1], "b": [1, 1]}})
