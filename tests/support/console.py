"""The console in tests: who may open which page (``CONSOLE_TABLE``, walked by
``tests/service/api/console/test_console_roles.py`` and shown in docs/console.md), signing in through the form as a
person does (:func:`sign_in`), and the CSRF token a page's forms carry (:func:`csrf_of`)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

SECRET = "a console secret of the tests, 40 chars"

VISITORS = ("steward", "scoped_steward", "analyst", "auditor", "participant", "no_session", "revoked", "expired")
HEADINGS = ("steward", "steward scoped to another dataset", "analyst", "auditor", "participant", "no session",
            "key revoked after sign-in", "expired session")

# (method, route): expected status for each visitor, in the order of VISITORS. 303 for a page without a session is
# the way to the sign-in page; a form without a session is 401.
CONSOLE_TABLE: dict[tuple[str, str], tuple[int, ...]] = {
    ("GET", "/console"): (303, 303, 303, 303, 303, 303, 303, 303),
    ("GET", "/console/sign-in"): (200, 200, 200, 200, 200, 200, 200, 200),
    ("POST", "/console/sign-in"): (303, 303, 303, 303, 403, 401, 401, 303),  # with the visitor's own key
    ("POST", "/console/sign-out"): (303, 303, 303, 303, 401, 401, 401, 401),
    ("GET", "/console/datasets"): (200, 200, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/datasets/{name}"): (200, 403, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/datasets/{name}/ledger"): (200, 403, 403, 200, 303, 303, 303, 303),
    ("GET", "/console/datasets/{name}/ledger.csv"): (200, 403, 403, 200, 303, 303, 303, 303),
    ("GET", "/console/datasets/{name}/plan"): (200, 403, 403, 403, 303, 303, 303, 303),
    ("POST", "/console/datasets/{name}/plan"): (200, 403, 403, 403, 401, 401, 401, 401),
    ("POST", "/console/datasets/{name}/release"): (303, 403, 403, 403, 401, 401, 401, 401),
    ("GET", "/console/datasets/{name}/fit"): (200, 403, 200, 403, 303, 303, 303, 303),
    ("POST", "/console/datasets/{name}/fit/plan"): (200, 403, 200, 403, 401, 401, 401, 401),
    ("POST", "/console/datasets/{name}/fit"): (303, 403, 303, 403, 401, 401, 401, 401),
    ("GET", "/console/releases"): (200, 200, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/releases/{release_id}"): (200, 403, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/releases/{release_id}/marginal"): (200, 403, 200, 403, 303, 303, 303, 303),
    ("GET", "/console/releases/{release_id}/marginal.csv"): (200, 403, 200, 403, 303, 303, 303, 303),
    ("GET", "/console/releases/{release_id}/synthetic.csv"): (200, 403, 200, 403, 303, 303, 303, 303),
    # the table's exact marginal beside the release's: stewards only, each look recorded
    ("GET", "/console/releases/{release_id}/quality"): (200, 403, 403, 403, 303, 303, 303, 303),
    ("GET", "/console/campaigns"): (200, 200, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/campaigns/{name}"): (200, 200, 200, 200, 303, 303, 303, 303),
    ("GET", "/console/campaigns/{name}/fit"): (200, 200, 200, 403, 303, 303, 303, 303),  # as POST /campaigns/{name}/fit
    # a marginals campaign's answers: as POST /campaigns/{name}/marginal and /synthetic
    ("GET", "/console/campaigns/{name}/marginal"): (200, 200, 200, 403, 303, 303, 303, 303),
    ("GET", "/console/campaigns/{name}/marginal.csv"): (200, 200, 200, 403, 303, 303, 303, 303),
    ("GET", "/console/campaigns/{name}/synthetic.csv"): (200, 200, 200, 403, 303, 303, 303, 303),
    # the world's job is the steward's: its owner and stewards whose scope covers it (GET /jobs/{id})
    ("GET", "/console/jobs/{job_id}"): (200, 404, 404, 404, 303, 303, 303, 303),
    ("GET", "/console/jobs/{job_id}/progress"): (200, 404, 404, 404, 303, 303, 303, 303),
    # the world's job has ended: nothing to stop (409) for whom may see it
    ("POST", "/console/jobs/{job_id}/cancel"): (409, 404, 404, 404, 401, 401, 401, 401),
}


def refused(method: str, route: str, visitor: str) -> bool:
    """Whether the table refuses ``visitor`` this route whatever it points at (401, 403): one target then shows it."""
    statuses = CONSOLE_TABLE.get((method, route))
    return statuses is not None and statuses[VISITORS.index(visitor)] in (401, 403)


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
