"""The client's side of the collections: a participant's submit (randomized on the device, refused there before
anything is sent when the server would refuse), a gateway's binary batches, public tables as DataFrames, fitted
models with predict/predict_proba; and the module imports no server stack."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from service.client import CampaignModel, CollectionError, MarginaliaError
from tests.support.campaign_keys import open_to_gateways


def test_participants_gateways_and_analysts(clients, engine) -> None:  # noqa: ANN001
    steward, analyst = clients["steward"], clients["analyst"]
    rng = np.random.default_rng(0)
    steward.load_public_table("pub", pd.DataFrame(rng.normal(size=(2000, 2)), columns=["a", "b"]))
    table = analyst.public_table("pub", page=700)
    assert table.shape == (2000, 2) and list(table.columns) == ["a", "b"]
    campaign = steward.create_campaign("glm", "stein-glm", ["a", "b"], target="y", public="pub", epsilon=8,
                                       delta=1e-6, norm_bound=4, gram=False, variant="paper")
    assert campaign.info()["status"] == "open"
    open_to_gateways(engine, "glm", 20_000)
    me = clients["participant"].campaign("glm")
    answer = me.submit([0.3, -1.2], 1.0)
    assert answer["accepted"] == 1
    with pytest.raises(CollectionError, match="already_reported"):  # refused on the device, nothing sent
        me.submit([0.3, -1.2], 1.0)
    with pytest.raises(ValueError, match="one participant's features"):
        me.submit([[0.3, -1.2]], [1.0])
    x = rng.normal(size=(20_000, 2))
    y = (rng.random(20_000) < 1 / (1 + np.exp(-x @ [1.0, -0.5]))).astype(float)
    results = clients["gateway"].campaign("glm").submit_batch(x, y, [f"g{i}" for i in range(20_000)], batch=8000,
                                                              single_precision=True)
    assert [r["accepted"] for r in results] == [8000, 8000, 4000]
    try:
        model = analyst.campaign("glm").fit("logistic")
    except MarginaliaError as error:  # unseeded device noise: a link without a root stays a clear error
        assert error.code == "no_root"
        model = analyst.campaign("glm").fit("linear")
    assert isinstance(model, CampaignModel) and model.cost["epsilon"] == 0 and model.campaign == "glm"
    frame = pd.DataFrame(x[:5], columns=["a", "b"])
    np.testing.assert_allclose(model.decision_function(frame), x[:5] @ model.coef_ + model.intercept_)
    if model.kind == "classifier":
        proba = model.predict_proba(frame)
        assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1)
        assert set(model.predict(frame)) <= {0, 1}
    with pytest.raises(MarginaliaError, match="forbidden"):
        clients["participant"].campaign("glm").fit("linear")
    with pytest.raises(MarginaliaError, match="forbidden"):
        clients["participant"].public_table("pub")


def test_the_device_refuses_what_the_server_would(clients) -> None:  # noqa: ANN001
    steward = clients["steward"]
    steward._request("PUT", "/local-caps/default", json={"epsilon": 1.5, "delta": 0})
    for name in ("one", "two"):
        steward.create_campaign(name, "ldp-avg", ["v"], epsilon=1, lower=0, upper=1)
    me = clients["participant"]
    me.campaign("one").submit([0.5])
    with pytest.raises(CollectionError, match="local_cap_exceeded"):
        me.campaign("two").submit([0.5])
    steward.campaign("two").close()
    with pytest.raises(CollectionError, match="round_closed"):
        me.campaign("two").submit([0.5])
    means = {"logistic": 0.5, "probit": 0.5, "poisson": 1.0, "linear": 0.0}
    for model, at_zero in means.items():
        fitted = CampaignModel({"campaign": "c", "model": model, "kind": "regressor", "cost": {},
                                "feature_names": ["a"], "coefficients": {"a": 1.0, "(intercept)": 0.0}})
        assert fitted.predict_mean(np.zeros((1, 1)))[0] == pytest.approx(at_zero)


def test_the_device_side_imports_no_server_stack() -> None:
    code = ("import sys, service.client; "
            "bad = [m for m in ('fastapi', 'sqlalchemy', 'jax', 'scipy', 'uvicorn') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_marginals_campaign_through_the_client(clients, engine) -> None:  # noqa: ANN001
    """Participants randomize on the device (one report each), a gateway sends a batch, and an analyst reads a
    marginal and synthetic rows from the campaign with the calls that read a release (issue 33)."""
    steward, analyst = clients["steward"], clients["analyst"]
    steward.create_campaign("survey", "marginals", ["a", "b"], epsilon=2.0, domain={"a": 3, "b": 2}, way=1)
    answer = clients["participant"].campaign("survey").submit([2, 1])
    assert answer["accepted"] == 1
    with pytest.raises(CollectionError, match="already_reported"):
        clients["participant"].campaign("survey").submit([2, 1])
    open_to_gateways(engine, "survey", 5_000)
    rng = np.random.default_rng(1)
    rows = np.stack([rng.choice(3, 4_000, p=[0.6, 0.3, 0.1]), rng.integers(0, 2, 4_000)], axis=1)
    results = clients["gateway"].campaign("survey").submit_batch(rows, None, [f"p{i}" for i in range(4_000)])
    assert sum(r["accepted"] for r in results) == 4_000
    frame = analyst.marginal(attrs=["a"], campaign="survey")
    assert list(frame.columns) == ["a", "count", "standard_error"] and frame.attrs["cost"]["epsilon"] == 0
    assert frame["count"].sum() == pytest.approx(4_001, rel=1e-6)
    assert frame["count"].iloc[0] > frame["count"].iloc[2]  # 0.6 against 0.1, far beyond the noise
    synthetic = analyst.synthetic(rows=7, campaign="survey")
    assert synthetic.shape == (7, 2)
    with pytest.raises(ValueError, match="exactly one of release"):
        analyst.marginal(3, ["a"], campaign="survey")
    with pytest.raises(MarginaliaError, match="forbidden"):
        clients["participant"].marginal(attrs=["a"], campaign="survey")
