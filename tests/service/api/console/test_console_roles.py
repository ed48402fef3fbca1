"""Every console page and action, opened by every kind of visitor, answers with the status of one table (the table
docs/console.md shows): the same roles and scopes as the API route it mirrors. A console route added without a row
here fails the test."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from service.access import auth
from service.api import create_app
from service.api.console.access import ConsoleRoute
from service.api.console.sessions import SESSION_COOKIE
from tests.support.apihelpers import World
from tests.support.console import CONSOLE_TABLE, HEADINGS, SECRET, VISITORS, csrf_of, sign_in
from tests.support.paths import REPO

RELEASE_FORM = {"workload": "columns", "columns": ["Sex"], "mechanism": "laplace", "aim": "epsilon",
                "epsilon": "0.01"}

FIT_FORM = {"task": "linear", "target": "Survived", "features": ["Pclass"], "method": "dd-ssp"}


def render_table() -> str:
    lines = ["| page or action | " + " | ".join(HEADINGS) + " |", "|---|" + "---|" * len(HEADINGS)]
    for (method, route), statuses in CONSOLE_TABLE.items():
        lines.append(f"| `{method} {route}` | " + " | ".join(str(s) for s in statuses) + " |")
    return "\n".join(lines)


def concrete(route: str, world: World) -> str:
    query = {"/marginal": "?columns=Sex", "/marginal.csv": "?columns=Sex", "/synthetic.csv": "?rows=3",
             "/quality": "?columns=Sex", "/fit": "?model=mean"}
    name = world.campaign if route.startswith("/console/campaigns") else world.dataset
    if route.startswith("/console/campaigns/{name}/") and not route.endswith("/fit"):  # a marginals campaign's
        name = world.marginals_campaign
        query = {"/marginal": "?columns=a&columns=b", "/marginal.csv": "?columns=a", "/synthetic.csv": "?rows=3"}
    url = route.format(name=name, release_id=world.release_id, job_id=world.job_id)
    return url + next((q for suffix, q in query.items() if url.endswith(suffix)), "")


class Visitor:
    """A test client signed in as one kind of visitor (or not), with its form's CSRF token when it has one."""

    def __init__(self, world: World, kind: str) -> None:
        self.app = create_app(world.engine, console_secret=SECRET)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.kind, self.world, self.csrf = kind, world, ""
        self.key = self._key()
        if kind in ("no_session", "participant"):
            return
        assert sign_in(self.client, self.key) == 303
        self.csrf = csrf_of(self.client)
        if kind == "revoked":
            auth.revoke_key(world.engine, auth.lookup_key(world.engine, self.key).key_id)
        if kind == "expired":
            self.app.state.console_sessions.clock = lambda: 2**40  # long after the session's expiry

    def _key(self) -> str:
        if self.kind in ("steward", "scoped_steward", "analyst", "auditor", "participant"):
            return self.world.keys[self.kind]
        role = "analyst" if self.kind != "no_session" else "steward"
        return auth.create_key(self.world.engine, role, f"console {self.kind}")[1]

    def call(self, method: str, route: str) -> int:
        url = concrete(route, self.world)
        if (method, route) == ("POST", "/console/sign-in"):
            return sign_in(self.client, self.key) if self.kind not in ("no_session", "revoked") else \
                sign_in(self.client, "mgl_not_a_key")
        form = FIT_FORM if "/fit" in route else RELEASE_FORM if "/datasets/" in route else {}
        data = {"csrf_token": self.csrf, **form, "release": str(self.world.release_id)}
        answer = self.client.request(method, url, data=data if method == "POST" else None, follow_redirects=False)
        if answer.status_code == 303 and method == "GET" and route != "/console":
            assert answer.headers["location"].startswith("/console/sign-in?next="), answer.headers
        if route.startswith("/console/") and answer.headers.get("content-type", "").startswith("text/html"):
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        if answer.status_code == 303 and answer.headers["location"].startswith("/console/jobs/"):
            joined(int(answer.headers["location"].rsplit("/", 1)[1]))
        return answer.status_code


def joined(job_id: int) -> None:
    """Wait for the thread of the job ``job_id`` (service/api/background.py names it ``job-<id>``): a test leaves no
    release running behind it (a later test of the worker measuring memory would count its allocations)."""
    for thread in threading.enumerate():
        if thread.name == f"job-{job_id}":
            thread.join(timeout=120)


@pytest.mark.parametrize("kind", VISITORS)
def test_every_page_and_action_as_every_visitor(world: World, kind: str) -> None:
    mismatches = []
    for (method, route), expected in CONSOLE_TABLE.items():
        visitor = Visitor(world, kind)  # a fresh one each time: signing out or in changes the session
        got = visitor.call(method, route)
        want = expected[VISITORS.index(kind)]
        if got != want:
            mismatches.append(f"{method} {route} as {kind}: expected {want}, got {got}")
    assert not mismatches, "\n".join(mismatches)


def test_the_table_covers_every_console_route(world: World) -> None:
    """Every route of the console is in the table, and every console route is a ConsoleRoute left out of the API's
    OpenAPI document."""
    app = create_app(world.engine, console_secret=SECRET)
    every = [context.original_route for context in iter_route_contexts(app.routes)]  # type: ignore[arg-type]
    routes = [r for r in every if isinstance(r, APIRoute) and r.path.startswith("/console")]
    assert all(isinstance(r, ConsoleRoute) and not r.include_in_schema for r in routes)
    assert {(m, r.path) for r in routes for m in r.methods} == set(CONSOLE_TABLE)
    assert not [p for p in app.openapi()["paths"] if p.startswith("/console")]


def test_docs_show_the_table() -> None:
    text = (REPO / "docs" / "console.md").read_text()
    assert render_table() in text, "docs/console.md's role table differs from tests' CONSOLE_TABLE:\n" + render_table()


def test_the_session_cookie_is_httponly_strict_and_scoped_to_the_console(world: World) -> None:
    client = TestClient(create_app(world.engine, console_secret=SECRET))
    page = client.get("/console/sign-in")
    from tests.support.console import form_value

    answer = client.post("/console/sign-in", data={"key": world.keys["analyst"], "next": "/console/releases",
                                                   "sign_in_token": form_value(page.text, "sign_in_token")},
                         follow_redirects=False)
    cookie = next(v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith(SESSION_COOKIE))
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age"} <= attributes and "samesite=strict" in cookie.lower()
    assert "path=/console" in cookie.lower() and answer.headers["location"] == "/console/releases"
    assert world.keys["analyst"] not in cookie and world.keys["analyst"] not in client.get("/console/releases").text


@pytest.mark.parametrize("target", ["https://elsewhere.example/", "//elsewhere.example/", "/datasets", "/console\\x"])
def test_sign_in_goes_back_only_to_a_console_page(world: World, target: str) -> None:
    client = TestClient(create_app(world.engine, console_secret=SECRET))
    from tests.support.console import form_value

    page = client.get("/console/sign-in", params={"next": target})
    assert form_value(page.text, "next") == "/console/datasets"
    answer = client.post("/console/sign-in", data={"key": world.keys["auditor"], "next": target,
                                                   "sign_in_token": form_value(page.text, "sign_in_token")},
                         follow_redirects=False)
    assert answer.headers["location"] == "/console/datasets"


def test_a_sign_in_form_from_elsewhere_is_refused(world: World) -> None:
    """Login CSRF: a sign-in without the pre-session cookie and its token opens no session."""
    client = TestClient(create_app(world.engine, console_secret=SECRET))
    answer = client.post("/console/sign-in", data={"key": world.keys["steward"], "sign_in_token": "forged"},
                         follow_redirects=False)
    assert answer.status_code == 403 and f"{SESSION_COOKIE}=" not in answer.headers.get("set-cookie", "")
    assert "did not come from this console" in answer.text


def test_a_form_without_its_csrf_token_changes_nothing(world: World) -> None:
    from tests.support.apihelpers import table_counts

    visitor = Visitor(world, "steward")
    before = table_counts(world.engine)
    for token in (None, "", "0" * 64, Visitor(world, "analyst").csrf):
        data = {**RELEASE_FORM, **({} if token is None else {"csrf_token": token})}
        answer = visitor.client.post(f"/console/datasets/{world.dataset}/release", data=data, follow_redirects=False)
        assert answer.status_code == 403 and "CSRF token" in answer.text
    assert table_counts(world.engine) == before


def test_a_session_signed_with_another_secret_is_no_session(world: World, tmp_path: Path) -> None:  # noqa: ARG001
    visitor = Visitor(world, "auditor")
    other = TestClient(create_app(world.engine, console_secret="another secret of forty characters!!!"),
                       raise_server_exceptions=False)
    other.cookies.update(visitor.client.cookies)
    assert other.get("/console/datasets", follow_redirects=False).status_code == 303
