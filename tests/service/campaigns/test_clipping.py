"""Values clipped by a campaign's public bounds are counted on the device (issue 20, section 3): per bound, exactly
the rows the randomizer changes; the simulator reports the totals (its JSON and its sentence), the client's submit
raises a ``UserWarning`` naming the bound and the rows; a stored dataset's simulation counts nothing (that count
would be a release of its rows), and no count is ever part of a report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.campaigns import campaigns, simulate
from service.campaigns.campaigns import public_state
from service.client.device import clipped, make_report
from tests.support.campaign_data import FEATURES, load_public

NAMES = ["a", "b"]


def _counts(engine, name: str, x, y=None) -> dict[str, int]:  # noqa: ANN001
    state = public_state(campaigns.get_campaign(engine, name))
    return {item.name: item.rows for item in clipped(state, np.asarray(x, dtype=float), y)}


def test_each_protocol_counts_the_rows_its_bounds_clip(engine, tmp_path: Path) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1.0, 0.0, {"lower": 0, "upper": 10})
    assert _counts(engine, "avg", [[-1.0], [5.0], [11.0], [12.0]]) == {"lower": 1, "upper": 2}
    assert _counts(engine, "avg", [[1.0], [5.0]]) == {}

    campaigns.create_campaign(engine, "glm", "stein-glm", NAMES, "y", None, 4.0, 1e-6, {"norm_bound": 2})
    x = np.array([[1.0, 1.0], [3.0, 0.0], [0.0, -2.5], [0.1, 0.1]])  # norms 1.41, 3, 2.5, 0.14
    assert _counts(engine, "glm", x, np.array([1.0, 0.5, -3.0, 2.0])) == {"norm_bound": 2, "label_bound": 2}

    campaigns.create_campaign(engine, "iht", "ldp-iht", NAMES, "y", None, 1.0, 0.0,
                              {"sparsity": 1, "residual_bound": 1.0, "feature_norm_bound": 1.5})
    # theta = 0: the residual is -y; gradients |y| ||x|| (residual clipped at 1) beyond 1.5 * 1
    x = np.array([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    assert _counts(engine, "iht", x, np.array([0.5, 2.0, 0.5])) == {"residual_bound": 1}
    assert _counts(engine, "iht", x, np.array([0.5, 2.0, 0.9])) == {"residual_bound": 1, "feature_norm_bound": 1}

    rows = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    load_public(engine, tmp_path, rows, columns=NAMES)
    campaigns.create_campaign(engine, "labels", "label-ldp", NAMES, "y", "pub", 1.0, 0.0,
                              {"sparsity": 1, "label_bound": 1.0})
    assert _counts(engine, "labels", [[0.0], [2.0], [1.0]], np.array([0.5, -1.5, 3.0])) == {"label_bound": 2}

    campaigns.create_campaign(engine, "bern", "bernstein", ["a"], "y", None, 1.0, 0.0, {"loss_scale": 1.0})
    # the box [-1, 1]: the largest squared residual of (x, y) over it is (|x| + |y|)^2
    assert _counts(engine, "bern", [[0.2], [0.5], [1.0]], np.array([0.3, 0.6, 0.0])) == {"loss_scale": 1}


def test_the_simulator_reports_what_was_clipped(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1.0, 0.0, {"lower": 0, "upper": 10})
    values = np.concatenate([np.full(30, 12.0), np.full(70, 5.0), np.full(5, -2.0)])[:, np.newaxis]
    result = simulate.simulate(engine, "avg", values, seed=1, batch=40)  # totals over batches
    assert sorted((c["bound"], c["rows"], c["value"]) for c in result.to_json()["clipped"]) == [
        ("lower", 5, 0.0), ("upper", 30, 10.0)]
    assert "30 row(s) had a value beyond upper = 10 and were clipped to it" in result.describe()
    campaigns.create_campaign(engine, "quiet", "ldp-avg", ["v"], None, None, 1.0, 0.0, {"lower": 0, "upper": 10})
    assert simulate.simulate(engine, "quiet", np.full((10, 1), 5.0), seed=1).to_json()["clipped"] == []
    assert simulate.simulate(engine, "quiet", values, seed=1, count_clipped=False).to_json()["clipped"] is None


def test_the_report_carries_no_count(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", None, 4.0, 1e-6, {"norm_bound": 2})
    state = public_state(campaigns.get_campaign(engine, "glm"))
    _, report = make_report(state, np.array([[9.0, 9.0, 9.0]]), np.array([5.0]), np.random.default_rng(0))
    assert set(report) == {"xx", "xy"}


def test_the_clients_submit_warns_naming_the_bound_and_the_rows(engine, tmp_path: Path) -> None:  # noqa: ANN001
    from fastapi.testclient import TestClient

    from service.api import create_app
    from service.client import Client, Device
    from tests.support.campaign_keys import new_key

    campaigns.create_campaign(engine, "glm", "stein-glm", FEATURES, "y", None, 4.0, 1e-6, {"norm_bound": 2})
    _, token = new_key(engine, "participant", "her")
    her = Client("http://testserver", token, http=TestClient(create_app(engine)),
                 device=Device(spend_file=tmp_path / "spend.json"))
    with pytest.warns(UserWarning, match=r"1 row\(s\) had a feature row's l2 norm beyond norm_bound = 2") as caught:
        assert her.campaign("glm").submit([3.0, 0.0, 0.0], 1.0)["accepted"] == 1
    assert "label_bound" not in str(caught[0].message)  # her label 1.0 was within its bound


def test_every_protocol_counts_its_clipping() -> None:
    """Every registered protocol's spec says what its bounds clip (a spec without bounds would override it too, to
    return nothing, saying so)."""
    from workloads.local.protocols import PROTOCOLS, ProtocolSpec

    missing = sorted(name for name, spec in PROTOCOLS.items() if spec.clipped is ProtocolSpec.clipped)
    assert not missing, f"protocols whose spec does not count its clipping (ProtocolSpec.clipped): {missing}"
