"""A fit answered from a named release spends nothing: the client asks it directly (issue 22), without the
idempotency claim, background job and polling of a request that may charge; one that may charge still goes that way."""

from __future__ import annotations

from pathlib import Path

import httpx

from service.client import Client
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget


def _record(client: Client) -> list[httpx.Request]:
    seen: list[httpx.Request] = []
    client._http.event_hooks["request"] = [seen.append]
    return seen


def test_a_fit_from_a_named_release_is_one_plain_request(engine, data_dir: Path, clients) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "100", "1e-5")
    release_id = release_engine.release_marginals(engine, "titanic", "laplace", "all-2way", epsilon=1).release_id
    analyst = clients["analyst"]
    analyst.domain("titanic")  # asked once per client
    seen = _record(analyst)
    fitted = analyst.fit_linear("titanic", "Fare", ["Pclass", "Sex"], release=release_id)
    assert fitted.release_id == release_id and fitted.cost["epsilon"] == 0
    assert [(r.method, r.url.path) for r in seen] == [("POST", "/datasets/titanic/fit/linear")]
    assert "prefer" not in seen[0].headers and "idempotency-key" not in seen[0].headers

    # a fit that may make (and charge) a new release keeps its idempotency key and background job
    seen.clear()
    clients["steward"].domain("titanic")
    seen = _record(clients["steward"])
    clients["steward"].fit_linear("titanic", "Fare", ["Pclass", "Sex"], epsilon=1.0, delta=1e-6)
    assert seen[0].headers["prefer"] == "respond-async" and "idempotency-key" in seen[0].headers
