"""A fit's settings are the server's to check (issue 28 point 2): the client sends every option it does not read
itself as a setting, without a catalog of its own, so it never refuses a setting a newer server accepts; the server
refuses one the method does not take with a 422 ``invalid_request`` naming it, before anything is charged."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from service.accounting.accountant import ledger_rows
from service.client import MarginaliaError
from tests.support.datasets import titanic_with_budget


def _charges(engine, dataset: str) -> list[dict[str, object]]:  # noqa: ANN001
    return [row for row in ledger_rows(engine, dataset) if row["entry"] == "charge"]


@pytest.mark.parametrize("method", ["dp-iht", "dd-ssp"])
def test_an_unknown_setting_reaches_the_server_which_names_it(engine, data_dir: Path, clients,  # noqa: ANN001
                                                              method: str) -> None:
    titanic_with_budget(engine, data_dir, "100", "1e-5")
    steward = clients["steward"]
    steward.domain("titanic")
    sent: list[httpx.Request] = []
    steward._http.event_hooks["request"] = [sent.append]
    with pytest.raises(MarginaliaError) as refused:
        steward.fit_linear("titanic", "Fare", ["Pclass", "Sex"], method=method, epsilon=1.0, delta=1e-6,
                           sparsity=1, sparsityy=2)
    assert refused.value.status == 422 and refused.value.code == "invalid_request"
    assert refused.value.message.startswith("body.sparsityy: not a field of this request (it takes target, ")
    assert "sparsity, iterations" in refused.value.message  # the settings it does take
    assert json.loads(sent[0].content)["sparsityy"] == 2  # sent as given: the server, not the client, knows settings
    assert _charges(engine, "titanic") == []


def test_a_setting_of_another_method_is_refused_naming_its_method(engine, data_dir: Path, clients) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "100", "1e-5")
    with pytest.raises(MarginaliaError, match="sparsity apply to method dp-iht only") as refused:
        clients["steward"].fit_linear("titanic", "Fare", ["Pclass", "Sex"], epsilon=1.0, delta=1e-6, sparsity=1)
    assert refused.value.status == 422 and refused.value.code == "invalid_request"
    assert _charges(engine, "titanic") == []


def test_an_unknown_option_inside_the_body_names_where_it_is(engine, data_dir: Path, clients) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "100", "1e-5")
    with pytest.raises(MarginaliaError) as refused:
        clients["steward"].release_marginals("titanic", "laplace", [["Sex"]], epsilon=1.0, options={"bogus": 1})
    assert refused.value.status == 422 and refused.value.code == "invalid_request"
    assert "body.options.bogus: not a field of body.options" in refused.value.message
    assert _charges(engine, "titanic") == []
