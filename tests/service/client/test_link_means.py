"""The client's fitted campaign models predict with the estimators' link means: one implementation
(:mod:`workloads.links`), so a model answers the same ``E[y | x]`` on the server and in a notebook, in the tails too."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.local.glm.links import LINKS
from service.client.collections import CampaignModel

#: scores from the far tails to the far tails (past float64's exp overflow at 709)
SCORES = np.concatenate([np.linspace(-40.0, 40.0, 161), [-800.0, -300.0, 300.0, 800.0]])


def _model(model: str, kind: str = "regressor") -> CampaignModel:
    return CampaignModel({"campaign": "c", "model": model, "kind": kind, "cost": {}, "feature_names": ["a"],
                          "coefficients": {"a": 1.0, "(intercept)": 0.0}})


@pytest.mark.parametrize("link", sorted(LINKS))
def test_the_client_predicts_with_the_estimators_link_mean(link: str) -> None:
    with np.errstate(over="ignore"):
        server = LINKS[link].mean(SCORES)
    client = _model(link).predict_mean(SCORES[:, None])
    np.testing.assert_array_equal(client, server)


def test_the_tails_are_accurate() -> None:
    """``probit`` below -8 and ``logistic`` below -37 are tiny but not 0; ``poisson`` stays finite."""
    assert _model("probit").predict_mean(np.array([[-10.0]]))[0] == pytest.approx(7.61985302416e-24, rel=1e-9, abs=0)
    assert _model("logistic").predict_mean(np.array([[-40.0]]))[0] == pytest.approx(np.exp(-40.0), rel=1e-12, abs=0)
    assert np.isfinite(_model("poisson").predict_mean(np.array([[800.0]]))[0])
