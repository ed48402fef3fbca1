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
from tests.support.canary_tables import HEALTHY
from tests.support.console import SECRET, csrf_of, refused, sign_in

ROLES = ("steward", "scoped_steward", "analyst", "auditor")


def pages(dataset: str, release_id: int) -> Iterator[tuple[str, str]]:
    """(route, URL) of every page about ``dataset`` and its healthy release."""
    yield from (("/console/datasets", "/console/datasets"), ("/console/releases", "/console/releases"),
                ("/console/datasets/{name}", f"/console/datasets/{dataset}"),
                ("/console/datasets/{name}/ledger", f"/console/datasets/{dataset}/ledger"),
                ("/console/datasets/{name}/ledger.csv", f"/console/datasets/{dataset}/ledger.csv"),
                ("/console/datasets/{name}/plan", f"/console/datasets/{dataset}/plan"),
                ("/console/datasets/{name}/fit", f"/console/datasets/{dataset}/fit"),
                ("/console/releases/{release_id}", f"/console/releases/{release_id}"),
                ("/console/releases/{release_id}/synthetic.csv",
                 f"/console/releases/{release_id}/synthetic.csv?rows=50"),
                ("/console/releases/{release_id}/marginal", f"/console/releases/{release_id}/marginal?columns=age"),
                ("/console/releases/{release_id}/marginal.csv",
                 f"/console/releases/{release_id}/marginal.csv?columns=hours&columns=sex"),
                ("/console/releases/{release_id}/quality",
                 f"/console/releases/{release_id}/quality?columns=age&columns=smoker"))


def walk_the_console(ctx: Context, findings: Findings) -> None:
    """Every page as every role on every canary dataset, then a release's and a fit's preview and the release and the
    fit themselves (jobs whose pages are searched once they end) of each, for each role (only the roles the table
    admits go through), and the campaign pages. A page or form the role table refuses a role
    whatever it points at is sent on the first dataset only: the refusal comes before anything is read."""
    client = TestClient(create_app(ctx.world.engine, console_secret=SECRET), raise_server_exceptions=False)
    variants = [HEALTHY.name, *(v.name for v in ctx.tables.built)]
    for role in ROLES:
        assert sign_in(client, ctx.world.keys[role]) == 303
        token = csrf_of(client)
        for number, dataset in enumerate(variants):
            release_id = ctx.tables.releases[dataset]
            for route, page in pages(dataset, release_id):
                if number == 0 or not refused("GET", route, role):
                    findings.response(client.get(page), f"console GET {route}", role, dataset, page)
            release_form = {"csrf_token": token, "workload": "columns", "columns": ["hours", "age"],
                            "mechanism": "laplace", "aim": "epsilon", "epsilon": "0.01"}
            fit_form = {"csrf_token": token, "task": "linear", "target": "hours", "features": ["age", "sex"],
                        "method": "dd-ssp", "epsilon": "0.5", "delta": "1e-6"}
            for action, form in (("plan", release_form), ("release", release_form), ("fit/plan", fit_form),
                                 ("fit", fit_form)):
                where = f"/console/datasets/{{name}}/{action}"
                if number > 0 and refused("POST", where, role):
                    continue
                answer = client.post(f"/console/datasets/{dataset}/{action}", data=form, follow_redirects=False)
                findings.response(answer, f"console POST {where}", role, dataset, action)
                if answer.status_code == 303 and answer.headers["location"].startswith("/console/jobs/"):
                    job = answer.headers["location"]
                    findings.response(_ended(client, job), f"console GET {job}", role, dataset, f"the {action} job")
        campaign = f"/console/campaigns/{ctx.tables.campaign}"
        survey = f"/console/campaigns/{ctx.world.marginals_campaign}"  # a marginals campaign's answers
        for route, page in (("/console/campaigns", "/console/campaigns"), ("/console/campaigns/{name}", campaign),
                            ("/console/campaigns/{name}/fit", f"{campaign}/fit?model=mean"),
                            ("/console/campaigns/{name}", survey),
                            ("/console/campaigns/{name}/marginal", f"{survey}/marginal?columns=a&columns=b"),
                            ("/console/campaigns/{name}/marginal.csv", f"{survey}/marginal.csv?columns=a"),
                            ("/console/campaigns/{name}/marginal", f"{survey}/marginal?columns=zz"),
                            ("/console/campaigns/{name}/synthetic.csv", f"{survey}/synthetic.csv?rows=5")):
            findings.response(client.get(page), f"console GET {route}", role, None, page)


def _ended(client: TestClient, job: str):  # noqa: ANN202 - the job page's response
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and client.get(job + "/progress").json()["state"] == "running":
        time.sleep(0.05)
    return client.get(job)
