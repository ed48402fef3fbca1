"""Signing in to the console from a test: through the sign-in form as a person does (:func:`sign_in`), and the
CSRF token a page's forms carry (:func:`csrf_of`)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

SECRET = "a console secret of the tests, 40 chars"


def form_value(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"no field {name!r} in the page"
    return found.group(1)


def sign_in(client: TestClient, key: str) -> int:
    """Sign ``client`` in with ``key`` through the form (a fresh pre-session cookie and its token); the status."""
    client.cookies.clear()
    page = client.get("/console/sign-in")
    answer = client.post("/console/sign-in", data={"key": key, "sign_in_token": form_value(page.text, "sign_in_token"),
                                                   "next": "/console/datasets"}, follow_redirects=False)
    return answer.status_code


def csrf_of(client: TestClient, page: str = "/console/datasets") -> str:
    """The CSRF token of the signed-in client's session, as a page's forms carry it."""
    return form_value(client.get(page).text, "csrf_token")
