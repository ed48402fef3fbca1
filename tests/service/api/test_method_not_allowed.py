"""Every 405 carries ``Allow`` with the methods of its path (RFC 9110 15.5.6; issue 27, finding 8: no 405 had one).
Generated from the OpenAPI document: every path, every method it does not take. The expected methods are those of
every path of the document that the URL matches (``/datasets/attach`` is also ``/datasets/{name}``), which is what
the resource at that URL takes; starlette's own header named only the first route whose path matched."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from starlette.routing import compile_path

from service.api import create_app

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DOCUMENT = create_app(None).openapi()  # type: ignore[arg-type]  # the document touches no database


def _url(path: str) -> str:
    return path.replace("{index}", "0").replace("{release_id}", "1").replace("{job_id}", "1").replace(
        "{name}", "x")


def _taken(url: str) -> set[str]:
    """The methods of every path template of the document that ``url`` matches."""
    return {method.upper() for path, operations in DOCUMENT["paths"].items() if compile_path(path)[0].match(url)
            for method in operations}


@pytest.mark.parametrize("path", sorted(DOCUMENT["paths"]))
def test_every_405_says_which_methods_the_path_takes(path: str) -> None:
    client = TestClient(create_app(None), raise_server_exceptions=False)  # type: ignore[arg-type]  # no key needed
    url = _url(path)
    taken = _taken(url)
    assert {m.upper() for m in DOCUMENT["paths"][path]} <= taken
    for method in sorted(set(METHODS) - taken):
        response = client.request(method, url)
        assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed"), (method, url)
        assert response.headers.get("allow") == ", ".join(sorted(taken)), (method, url, response.headers)
        assert all(m in response.json()["message"] for m in taken)


def test_a_path_two_routes_share_lists_both_methods() -> None:
    """``GET`` and ``PUT /datasets/{name}/budget`` are two routes: a ``DELETE`` is told both."""
    response = TestClient(create_app(None)).delete("/datasets/x/budget")  # type: ignore[arg-type]
    assert response.status_code == 405 and response.headers["allow"] == "GET, PUT"
