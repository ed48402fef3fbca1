"""``Client.plan_campaign``: ``POST /campaigns/plan`` through the client, for an analyst (it reads public tables
only), with the AUC range from a public sample holding the target."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from service.client import MarginaliaError


def test_an_analyst_plans_a_stein_glm_campaign(clients) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2_000, 2))
    y = (rng.random(2_000) < 1.0 / (1.0 + np.exp(-x @ [1.0, -1.0]))).astype(int)
    clients["steward"].load_public_table("sample", pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": y}))
    analyst = clients["analyst"]
    plan = analyst.plan_campaign("stein-glm", ["a", "b"], target="y", public="sample", epsilon=4,
                                 participants=50_000, target_error=0.1)  # the default variant: public-gram, PrivUnit2
    assert plan["participants"] == 50_000 and plan["expected_relative_error"] > 0
    assert plan["participants_needed"] > 0 and plan["auc"]["low"] <= plan["auc"]["mean"] <= plan["auc"]["high"]
    assert plan["formulas"]["expected_error"].startswith("sqrt(E ||estimate - reference||^2)")
    assert analyst.campaigns() == []
    with pytest.raises(MarginaliaError, match="no planner for protocol 'bernstein'") as refused:
        analyst.plan_campaign("bernstein", ["a"], target="y", epsilon=1, participants=10)
    assert refused.value.code == "no_planner"


def test_an_analyst_plans_an_ldp_avg_campaign_with_its_bounds(clients) -> None:  # noqa: ANN001
    """ldp-avg has a planner (issue 29, section 6): its bounds as keywords, the absolute error without a public
    table, the planned participants the campaign's own option."""
    plan = clients["analyst"].plan_campaign("ldp-avg", ["a"], epsilon=1, participants=400, lower=0, upper=10)
    assert plan["participants"] == 400 and plan["expected_relative_error"] is None
    assert plan["expected_error"] == pytest.approx(((25 + 2 * 10**2) / 400) ** 0.5, rel=0.01)  # Popoviciu + Laplace
