"""DP-IHT through the HTTP API and the client: the sparse answer, the exact charge, reuse, bad settings (issue 10).

The table is the known sparse problem of ``tests/service/regression/test_dp_iht.py``: eight fair bits and a target
coded ``x0 + x1``, so the encoded target is exactly ``0.5 x0 + 0.5 x1``. The tolerance is that file's (six standard
deviations of a coefficient's accumulated noise, derived there).
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from estimators.central.dp_iht import dp_iht_calibration
from service.accounting.accountant import release_costs
from service.api import create_app
from service.client import Client, MarginaliaError
from service.mechanisms.dp_iht import COUNT_SHARE
from service.privacy import conversions
from service.privacy.cost import PrivacyCost, floor_to_grid
from tests.support.apihelpers import World, bearer
from tests.support.dp_iht import FEATURES, TRUTH, noise_tolerance

ROWS = 2000


def _client(world: World, role: str) -> Client:
    return Client("http://testserver", world.keys[role], http=TestClient(create_app(world.engine)))


def _sparse_dataset(world: World) -> tuple[str, pd.DataFrame]:
    bits = np.random.default_rng(11).integers(0, 2, size=(ROWS, len(FEATURES)))
    frame = pd.DataFrame(bits, columns=FEATURES).assign(y=bits[:, 0] + bits[:, 1])
    name = f"sparse-{uuid.uuid4().hex[:8]}"
    steward = _client(world, "steward")
    steward.load_dataset(name, frame.to_csv(index=False), domain={**{f: 2 for f in FEATURES}, "y": 3})
    steward.set_budget(name, 50.0, 1e-4)
    return name, frame


def test_client_fits_dp_iht_charges_exactly_and_reuses_the_model(world: World) -> None:
    name, frame = _sparse_dataset(world)
    analyst = _client(world, "analyst")
    settings = {"sparsity": 2, "iterations": 30, "step": 0.5, "intercept": False}
    fit = analyst.fit_linear(name, "y", FEATURES, method="dp-iht", epsilon=10.0, delta=1e-5, **settings)
    assert not fit.reused and fit.method == "dp-iht"
    rho = floor_to_grid(conversions.cdp_rho(10.0, 1e-5))
    calibration = dp_iht_calibration(rho, 30, 2 * math.sqrt(8), COUNT_SHARE)
    assert release_costs(world.engine, [fit.release_id])[fit.release_id] == PrivacyCost(rho=calibration.rho_total)
    assert calibration.rho_total == rho and fit.cost["rho"] == float(rho)
    encoded = fit.encoded_model_  # the model as DP-IHT fitted it, on the encoded scale (issue 29: coef_ is per code)
    assert set(np.flatnonzero(encoded.coef_)) == {0, 1} and encoded.intercept_ == 0.0
    X = 2.0 * frame[["x0", "x1"]].to_numpy(float) - 1.0
    curvature = float(np.linalg.eigvalsh(X.T @ X / ROWS)[0])
    assert np.max(np.abs(encoded.coef_ - TRUTH)) < noise_tolerance(calibration.sigma_gradient, 0.5, ROWS, curvature)
    assert fit.predict(frame.head(5)).shape == (5,)
    again = analyst.fit_linear(name, "y", FEATURES, method="dp-iht", epsilon=10.0, delta=1e-5, **settings)
    assert again.reused and again.release_id == fit.release_id and again.cost == {"epsilon": 0, "delta": 0, "rho": 0}
    np.testing.assert_array_equal(again.coef_, fit.coef_)
    clf = analyst.fit_logistic(name, "x0", ["x1", "x2"], method="dp-iht", epsilon=1.0, delta=1e-5, sparsity=2,
                               l2=1e-3)
    proba = clf.predict_proba(frame.head(5))
    assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1)
    assert len(_client(world, "auditor").ledger(name)) == 3  # the budget and two charges


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"sparsity": 9}, "sparsity must be at most the number of coefficients p=8"),
        ({}, "sparsity is required"),
        ({"sparsity": 0}, "sparsity"),
        ({"sparsity": 2, "iterations": 0}, "iterations"),
        ({"sparsity": 2, "step": 0}, "step"),
        ({"sparsity": 2, "step": -1}, "step"),
        ({"sparsity": 2, "l2": -1}, "l2"),
        ({"sparsity": 2, "seed": 3}, "seed"),
        ({"sparsity": 2, "epsilon": 0}, "epsilon"),
        ({"sparsity": 2, "delta": 1}, "delta"),
        ({"sparsity": 2, "method": "dd-ssp"}, "apply to method dp-iht only"),
    ],
)
def test_bad_dp_iht_requests_are_refused_and_charge_nothing(world: World, body: dict, fragment: str) -> None:
    name, _ = _sparse_dataset(world)
    client = TestClient(create_app(world.engine), raise_server_exceptions=False)
    request = {"target": "y", "features": FEATURES, "method": "dp-iht", "intercept": False, "epsilon": 1.0,
               "delta": 1e-5} | body
    response = client.post(f"/datasets/{name}/fit/linear", json=request, headers=bearer(world.keys["analyst"]))
    assert response.status_code == 422, response.text
    assert fragment in response.text
    assert len(_client(world, "auditor").ledger(name)) == 1  # the budget only
    with pytest.raises(MarginaliaError, match="sparsity"):
        _client(world, "analyst").fit_linear(name, "y", FEATURES, method="dp-iht", epsilon=1.0, delta=1e-5,
                                             sparsity=20)
