"""Issue 29 section 7: every glm fit said "no bound on one report's influence: see --json". A fit for which no bound
is derived now says in its notes (and the command line under its table) what that means: what the standard errors
cover, what a forged report may do, and what is known instead."""

from __future__ import annotations

import pytest

from estimators.local.influence import Influence
from service.campaigns import estimates
from service.campaigns.types import CampaignFit

BASIS = "no bound derived: the moment equation's root moves with the reports non-linearly"


def _answer(influence: Influence) -> CampaignFit:
    return CampaignFit("c", "glm", "logistic", "classifier", "y", ("a",), {"a": 1.0, "(intercept)": 0.0}, 1000,
                       influence=influence, standard_errors={"a": 0.1, "(intercept)": 0.1})


@pytest.mark.parametrize("bound", [None, 0.01])
def test_a_fit_without_an_influence_bound_says_what_that_means(monkeypatch: pytest.MonkeyPatch,
                                                               bound: float | None) -> None:
    influence = Influence(bound, "l2", "coefficients", BASIS)
    monkeypatch.setattr(estimates, "_fit", lambda *args: _answer(influence))
    notes = estimates.fit_campaign(None, "c", "logistic").to_json()["notes"]  # type: ignore[arg-type]
    said = [note for note in notes if "forged report" in note]
    if bound is not None:
        assert said == []
        return
    (note,) = said
    assert "no bound on how far one report can move these coefficients" in note
    assert "standard errors measure the randomizers' noise when every report is honest" in note
    assert note.endswith(f"What is known: {BASIS}") and "--json" not in note
