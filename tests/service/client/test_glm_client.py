"""The ``glm`` campaign through the HTTP API and the client: a steward creates it on a public table, a participant
reports from her device (the public constants come with the campaign's state), a gateway reports a batch, an analyst
fits every link as a CampaignModel whose answer carries standard errors; the device refuses a label the protocol
cannot take before anything is sent."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from service.client import CampaignModel, MarginaliaError
from tests.support.campaign_keys import open_to_gateways

NAMES = ["a", "b"]


def test_glm_through_the_client(clients, engine) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    rng = np.random.default_rng(0)
    steward.load_public_table("pub", pd.DataFrame(rng.normal(size=(3000, 2)) * [1.0, 3.0] + [0.0, 5.0],
                                                  columns=NAMES))
    with pytest.raises(MarginaliaError, match="delta must be 0 with the privunit randomizer") as refused:
        steward.create_campaign("moments", "glm", NAMES, target="y", public="pub", epsilon=4, delta=1e-6)
    assert refused.value.code == "invalid_parameter"
    steward.create_campaign("moments", "glm", NAMES, target="y", public="pub", epsilon=4)
    open_to_gateways(engine, "moments", 20_000)
    me = clients["participant"].campaign("moments")
    with pytest.raises(ValueError, match="'y' must be 0 or 1"):  # refused on the device
        me.submit([0.3, 4.0], 2.0)
    assert me.submit([0.3, 4.0], 1.0)["accepted"] == 1
    x = rng.normal(size=(20_000, 2)) * [1.0, 3.0] + [0.0, 5.0]
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(x @ [1.0, -0.5] + 2.5)))).astype(float)
    results = clients["gateway"].campaign("moments").submit_batch(x, y, [f"g{i}" for i in range(20_000)],
                                                                  batch=10_000, single_precision=True)
    assert [r["accepted"] for r in results] == [10_000, 10_000]
    model = analyst.campaign("moments").fit("logistic")
    assert isinstance(model, CampaignModel) and model.cost["epsilon"] == 0 and model.kind == "classifier"
    errors = model.answer["standard_errors"]
    assert set(errors) == {"a", "b", "(intercept)"}
    for name, value in (("a", 1.0), ("b", -0.5), ("(intercept)", 2.5)):
        assert abs(model.coefficients()[name] - value) < 4 * errors[name], name
    frame = pd.DataFrame(x[:5], columns=NAMES)
    proba = model.predict_proba(frame)
    assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1)
    for link in ("probit", "linear", "poisson"):
        assert analyst.campaign("moments").fit(link).model == link
    with pytest.raises(MarginaliaError, match="model must be one of"):
        analyst.campaign("moments").fit("cubic")
