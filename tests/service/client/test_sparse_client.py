"""The sparse-regression campaigns through the HTTP API and the client: a steward creates an LDP-IHT campaign, a
participant and a gateway report round after round (the client fetches each round's published theta), an analyst
fits the model as the project's linear-model type; the label protocol's two models answer from one collection."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from service.client import CampaignModel, MarginaliaError
from tests.support.campaign_keys import open_to_gateways

NAMES = ["a", "b", "c"]


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.choice([-1.0, 1.0], size=(n, len(NAMES)))
    return x, x @ np.array([0.6, 0.0, -0.8])


def test_ldp_iht_through_the_client(clients, engine) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    with pytest.raises(MarginaliaError, match="sparsity must be at most the number of features p=3") as refused:
        steward.create_campaign("iht", "ldp-iht", NAMES, target="y", epsilon=4, sparsity=4, rounds=2)
    assert refused.value.code == "invalid_parameter"
    campaign = steward.create_campaign("iht", "ldp-iht", NAMES, target="y", epsilon=4, sparsity=2, rounds=2,
                                       participants=4001)
    assert [r["expected_reports"] for r in campaign.info()["rounds"]] == [2000, 2001]
    open_to_gateways(engine, "iht", 4000)
    assert clients["participant"].campaign("iht").submit([1.0, -1.0, 1.0], 0.2)["accepted"] == 1
    x, y = _rows(4000, seed=1)
    gateway = clients["gateway"].campaign("iht")
    first = gateway.submit_batch(x[:1999], y[:1999], [f"g{i}" for i in range(1999)], single_precision=True)
    assert first[-1]["round_status"] == "closed"  # the group's planned size reported: round 1 opens with theta_1
    state = analyst.campaign("iht").state()
    assert state["round"] == 1 and len(state["state"]["values"]["theta"]) == 3
    second = gateway.submit_batch(x[1999:], y[1999:], [f"h{i}" for i in range(2001)])
    assert second[-1]["campaign_status"] == "closed"
    model = analyst.campaign("iht").fit("iht")
    assert isinstance(model, CampaignModel) and model.model == "iht" and model.cost["epsilon"] == 0
    assert model.kind == "regressor" and model.coef_.shape == (3,) and np.count_nonzero(model.coef_) <= 2
    frame = pd.DataFrame(x[:5], columns=NAMES)
    np.testing.assert_allclose(model.predict(frame), x[:5] @ model.coef_ + model.intercept_)
    with pytest.raises(MarginaliaError, match="model must be one of \\['iht'\\]"):
        analyst.campaign("iht").fit("lasso")


def test_label_ldp_through_the_client(clients, engine) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    x, y = _rows(3000, seed=2)
    steward.load_public_table("pub", pd.DataFrame(x, columns=NAMES))
    steward.create_campaign("labels", "label-ldp", NAMES, target="y", public="pub", epsilon=4, delta=1e-6,
                            sparsity=2, standardize=False)
    open_to_gateways(engine, "labels", 3000)
    # features are the public table's: each participant names her row by its id (issue 18 finding 4)
    clients["gateway"].campaign("labels").submit_batch(np.arange(3000)[:, np.newaxis], y,
                                                       [f"g{i}" for i in range(3000)])
    iht, lasso = (analyst.campaign("labels").fit(model) for model in ("iht", "lasso"))
    assert iht.model == "iht" and lasso.model == "lasso" and lasso.answer["details"]["alpha"] > 0
    for model in (iht, lasso):
        assert isinstance(model, CampaignModel) and model.coef_.shape == (3,)


def test_linear_ssp_through_the_client(clients, engine) -> None:  # noqa: ANN001
    """A steward creates a linear-ssp campaign with the Gaussian option, a participant and a gateway report through
    the client's device, an analyst fits the linear model with its intercept and standard errors."""
    steward, analyst = clients["steward"], clients["analyst"]
    with pytest.raises(MarginaliaError, match="protocol 'linear-ssp': delta must be in \\(0, 1\\)") as refused:
        steward.create_campaign("ssp", "linear-ssp", NAMES, target="y", epsilon=2, randomizer="gaussian",
                                norm_bound=2.0)
    assert refused.value.code == "invalid_parameter"
    steward.create_campaign("ssp", "linear-ssp", NAMES, target="y", epsilon=8, delta=1e-6, randomizer="gaussian",
                            norm_bound=math.sqrt(3), label_bound=2.0)
    open_to_gateways(engine, "ssp", 3000)
    assert clients["participant"].campaign("ssp").submit([1.0, -1.0, 1.0], 0.2)["accepted"] == 1
    x, y = _rows(3000, seed=3)
    clients["gateway"].campaign("ssp").submit_batch(x, y, [f"g{i}" for i in range(3000)])
    model = analyst.campaign("ssp").fit("linear")
    assert isinstance(model, CampaignModel) and model.model == "linear" and model.cost["epsilon"] == 0
    assert model.coef_.shape == (3,) and set(model.standard_errors) == {*NAMES, "(intercept)"}
    frame = pd.DataFrame(x[:5], columns=NAMES)
    np.testing.assert_allclose(model.predict(frame), x[:5] @ model.coef_ + model.intercept_)
