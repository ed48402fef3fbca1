"""The console's pages for the canary suite (``tests/system/test_canaries.py``): every page and action, as every role
that may sign in, on every canary dataset (the healthy one and the tampered ones), their job pages included; each
answer is searched for the canaries (cells and locations) like an API answer."""

from __future__ import annotations

import time
from collections.abc import Iterator

from fastapi.testclient import TestClient

from service.api import create_app
from tests.support.canary_findings import Findings
from tests.support.canary_requests import Context
from tests.support.canary_tables import HEALTHY, SPEC
from tests.support.console import SECRET, csrf_of, sign_in

ROLES = ("steward", "scoped_steward", "analyst", "auditor")


def pages(dataset: str, release_id: int) -> Iterator[str]:
    yield from ("/console/datasets", "/console/releases", f"/console/datasets/{dataset}",
                f"/console/datasets/{dataset}/ledger", f"/console/datasets/{dataset}/ledger.csv",
                f"/console/datasets/{dataset}/plan", f"/console/releases/{release_id}",
                f"/console/releases/{release_id}/synthetic.csv?rows=50")
    for column in SPEC["columns"]:
        yield f"/console/releases/{release_id}/marginal?columns={column}"
        yield f"/console/releases/{release_id}/marginal.csv?columns={column}&columns=sex"


def walk_the_console(ctx: Context, findings: Findings) -> None:
    """Every page as every role on every canary dataset, then a preview and a release (a job whose page is searched
    once it ends) of each, for each role (only a steward's go through)."""
    client = TestClient(create_app(ctx.world.engine, console_secret=SECRET), raise_server_exceptions=False)
    variants = [*(v.name for v in ctx.tables.built), HEALTHY.name]
    for role in ROLES:
        assert sign_in(client, ctx.world.keys[role]) == 303
        token = csrf_of(client)
        for dataset in variants:
            release_id = ctx.tables.releases[dataset]
            for page in pages(dataset, release_id):
                findings.response(client.get(page), f"console GET {page.split('?')[0]}", role, dataset, page)
            form = {"csrf_token": token, "workload": "columns", "columns": ["hours", "age"], "mechanism": "laplace",
                    "aim": "epsilon", "epsilon": "0.01"}
            for action in ("plan", "release"):
                where = f"console POST /console/datasets/{{name}}/{action}"
                answer = client.post(f"/console/datasets/{dataset}/{action}", data=form, follow_redirects=False)
                findings.response(answer, where, role, dataset, action)
                if answer.status_code == 303 and answer.headers["location"].startswith("/console/jobs/"):
                    job = answer.headers["location"]
                    findings.response(_ended(client, job), f"console GET {job}", role, dataset, "the release's job")


def _ended(client: TestClient, job: str):  # noqa: ANN202 - the job page's response
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and client.get(job + "/progress").json()["state"] == "running":
        time.sleep(0.05)
    return client.get(job)
