"""The steward's caps (default and per participant) and the simulator's sources, groups and reproducibility."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text

from service.campaigns import campaigns, caps, gateways, simulate
from service.campaigns.submission import Submitter, submit_reports
from service.errors import InvalidInput, ServiceError
from tests.support.campaign_data import FEATURES, gaussian_rows
from tests.support.collections_rows import make_key


def test_caps_round_down_refuse_bad_values_and_override_one_participant(engine) -> None:  # noqa: ANN001
    assert caps.default_cap(engine).to_json() == {"epsilon": 10.0, "delta": 1e-4}
    assert caps.set_default_cap(engine, "2.5", "1e-6").to_json() == {"epsilon": 2.5, "delta": 1e-6}
    for epsilon, delta, fragment in ((-1, 0, "epsilon must be >= 0"), (1, 1, "delta must satisfy"),
                                     ("x", 0, "epsilon"), (10**7, 0, "at most")):
        with pytest.raises(InvalidInput, match=fragment):
            caps.set_default_cap(engine, epsilon, delta)
    key = make_key(engine, "participant", "p")
    assert caps.key_spend(engine, key) == {"epsilon_spent": 0.0, "delta_spent": 0.0, "epsilon_cap": 2.5,
                                           "delta_cap": 1e-6}
    campaigns.create_campaign(engine, "one", "ldp-avg", "v", None, None, 2, 0, {"lower": 0, "upper": 1})
    campaigns.create_campaign(engine, "two", "ldp-avg", "v", None, None, 2, 0, {"lower": 0, "upper": 1})
    submit_reports(engine, "one", 0, {"value": [0.5]}, Submitter.participant(key))
    with pytest.raises(ServiceError, match="cap"):
        submit_reports(engine, "two", 0, {"value": [0.5]}, Submitter.participant(key))
    caps.set_participant_cap(engine, 4, 0, key_id=key)
    submit_reports(engine, "two", 0, {"value": [0.5]}, Submitter.participant(key))
    assert caps.key_spend(engine, key)["epsilon_spent"] == 4.0
    gateway = make_key(engine, "gateway", "g")
    gateways.set_scope(engine, gateway, "two", 10)
    assert caps.set_participant_cap(engine, 0, 0, gateway_id=gateway, pseudonym="zed").epsilon == 0
    with pytest.raises(ServiceError, match="cap"):
        submit_reports(engine, "two", 0, {"value": [0.125]}, Submitter.gateway(gateway), ["zed"])
    with pytest.raises(InvalidInput, match="name a participant"):
        caps.set_participant_cap(engine, 1, 0)


def test_groups_are_assigned_in_row_order() -> None:
    groups = simulate.assign_groups([("first", 3), ("second", None)], 10)
    assert groups["first"].tolist() == [0, 1, 2] and groups["second"].tolist() == list(range(3, 10))
    split = simulate.assign_groups([("a", None), ("b", None)], 5)
    assert split["a"].tolist() == [0, 1] and split["b"].tolist() == [2, 3, 4]
    assert simulate.assign_groups([("all", 100)], 4)["all"].tolist() == [0, 1, 2, 3]


def _sums(engine, name: str) -> str:  # noqa: ANN001
    with engine.connect() as connection:
        return connection.execute(text("SELECT r.aggregate_json FROM campaign_rounds r JOIN campaigns c ON "
                                       "c.id = r.campaign_id WHERE c.name = :n"), {"n": name}).scalar_one()


def test_same_seed_same_reports_and_sources_name_their_columns(engine, tmp_path: Path) -> None:  # noqa: ANN001
    for name in ("s1", "s2"):
        campaigns.create_campaign(engine, name, "stein-glm", FEATURES, "y", None, 2, 1e-6, {"norm_bound": 3})
    frame = pd.DataFrame(gaussian_rows(300), columns=FEATURES).assign(y=np.arange(300) % 2)
    frame.to_csv(tmp_path / "people.csv", index=False)
    x, y = simulate.rows_from_csv(engine, "s1", tmp_path / "people.csv", rows=250)
    assert x.shape == (250, 3) and y.tolist()[:3] == [0, 1, 0]
    first = simulate.simulate(engine, "s1", x, y, seed=11, batch=100)
    simulate.simulate(engine, "s2", x, y, seed=11, batch=100)
    assert first.reports == {0: 250} and _sums(engine, "s1") == _sums(engine, "s2")
    seen = []
    simulate.simulate(engine, "s1", x[:10], y[:10], progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (10, 10)
    frame.drop(columns="b").to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(InvalidInput, match="has no column 'b'"):
        simulate.rows_from_csv(engine, "s1", tmp_path / "short.csv")
    renamed = simulate.rows_from_csv(engine, "s1", tmp_path / "short.csv", features=["a", "a", "c"])[0]
    assert np.array_equal(renamed[:, 0], renamed[:, 1])
    with pytest.raises(InvalidInput, match="dimension mismatch: --p 4"):
        simulate.rows_from_design(engine, "s1", "gaussian", 10, 4)
    x, y = simulate.rows_from_design(engine, "s1", "bernoulli", 50, 3, seed=1)
    assert x.shape == (50, 3) and set(np.unique(y)) <= {0.0, 1.0}
    with pytest.raises(InvalidInput, match="needs rows of the 3 features"):
        simulate.simulate(engine, "s1", np.zeros((5, 2)), np.zeros(5))
