"""Who may call which route: the role matrix (``ROLE_TABLE``, one row per operation of the API, the statuses in the
order of ``CALLERS``), a valid campaign per protocol (``PROTOCOL_CAMPAIGNS``) and the concrete request of a route
(:func:`role_request`). ``tests/service/api/test_api_roles.py`` checks them against the app and the docs; the
body-limit, path-id, registry-contract and canary tests walk them.
"""

from __future__ import annotations

from tests.support.apihelpers import ATTACHABLE, SMALL_WORKLOAD, World
from tests.support.binned import SPEC

CALLERS = ("steward", "scoped_steward", "analyst", "auditor", "participant", "gateway", "no_key", "revoked")


# (method, route): expected status for each caller, in the order of CALLERS.
ROLE_TABLE: dict[tuple[str, str], tuple[int, ...]] = {
    ("GET", "/health"): (200, 200, 200, 200, 200, 200, 200, 200),
    ("GET", "/health/ready"): (200, 200, 200, 200, 200, 200, 200, 200),  # for load balancers: no key
    ("GET", "/metrics"): (200, 403, 403, 200, 403, 403, 401, 401),  # names every dataset: unscoped stewards, auditors
    ("GET", "/datasets"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("POST", "/datasets"): (201, 403, 403, 403, 403, 403, 401, 401),
    ("POST", "/datasets/attach"): (201, 403, 403, 403, 403, 403, 401, 401),
    ("GET", "/datasets/{name}"): (200, 403, 200, 200, 403, 403, 401, 401),
    ("GET", "/datasets/{name}/budget"): (200, 403, 200, 200, 403, 403, 401, 401),
    ("PUT", "/datasets/{name}/budget"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/releases/marginals"): (201, 403, 403, 403, 403, 403, 401, 401),
    # a dry run: exactly the callers who may make the release it plans
    ("POST", "/datasets/{name}/releases/marginals/plan"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("GET", "/datasets/{name}/ledger"): (200, 403, 403, 200, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/migrate"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/fit/linear"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/fit/logistic"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/fit/linear/plan"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("POST", "/datasets/{name}/fit/logistic/plan"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("GET", "/releases"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("GET", "/releases/{release_id}"): (200, 403, 200, 200, 403, 403, 401, 401),
    ("POST", "/releases/{release_id}/marginal"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("POST", "/releases/{release_id}/synthetic"): (200, 403, 200, 403, 403, 403, 401, 401),
    ("GET", "/jobs/{job_id}"): (200, 404, 404, 404, 403, 403, 401, 401),  # the steward's job: its own and stewards'
    # local-DP collections: public tables are public (rows for stewards and analysts); a participant or a gateway
    # reaches only a campaign's public state and the report route; public tables, campaigns and caps are managed by
    # stewards whose key is not scoped to datasets
    ("GET", "/public-tables"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("POST", "/public-tables"): (201, 403, 403, 403, 403, 403, 401, 401),
    ("GET", "/public-tables/{name}"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("GET", "/public-tables/{name}/rows"): (200, 200, 200, 403, 403, 403, 401, 401),
    ("POST", "/campaigns"): (201, 403, 403, 403, 403, 403, 401, 401),
    ("POST", "/campaigns/plan"): (200, 200, 200, 200, 403, 403, 401, 401),  # public tables only: campaign readers
    ("GET", "/campaigns"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("GET", "/campaigns/{name}"): (200, 200, 200, 200, 403, 403, 401, 401),
    ("POST", "/campaigns/{name}/close"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("POST", "/campaigns/{name}/rounds/{index}/close"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("GET", "/campaigns/{name}/state"): (200, 200, 200, 403, 200, 200, 401, 401),
    ("POST", "/campaigns/{name}/reports"): (403, 403, 403, 403, 201, 201, 401, 401),
    ("POST", "/campaigns/{name}/fit"): (200, 200, 200, 403, 403, 403, 401, 401),
    # a marginals campaign's free answers: who may fit a campaign
    ("POST", "/campaigns/{name}/marginal"): (200, 200, 200, 403, 403, 403, 401, 401),
    ("POST", "/campaigns/{name}/synthetic"): (200, 200, 200, 403, 403, 403, 401, 401),
    ("GET", "/local-caps/default"): (200, 200, 403, 200, 403, 403, 401, 401),
    ("PUT", "/local-caps/default"): (200, 403, 403, 403, 403, 403, 401, 401),
    ("PUT", "/local-caps/participant"): (200, 403, 403, 403, 403, 403, 401, 401),
}


#: Every campaign protocol, created through ``POST /campaigns`` by every caller with that route's statuses: a valid
#: body per protocol (``{public}`` stands for the world's public table, with columns ``income`` and ``age``). A
#: protocol registered without an entry here fails ``tests/service/campaigns/test_protocol_contract.py``.
PROTOCOL_CAMPAIGNS: dict[str, dict[str, object]] = {
    "ldp-avg": {"features": ["value"], "epsilon": 1.0, "options": {"lower": 0, "upper": 1}},
    "glm": {"features": ["income", "age"], "target": "y", "public": "{public}", "epsilon": 1.0},
    "stein-glm": {"features": ["income", "age"], "target": "y", "public": "{public}", "epsilon": 1.0},
    "stein-glm-2round": {"features": ["income", "age"], "target": "y", "epsilon": 1.0, "delta": 1e-6,
                         "options": {"norm_bound": 2.0, "participants": 100}},
    "ldp-iht": {"features": ["a", "b", "c"], "target": "y", "epsilon": 1.0, "options": {"sparsity": 1, "rounds": 2}},
    "label-ldp": {"features": ["income", "age"], "target": "y", "public": "{public}", "epsilon": 1.0,
                  "delta": 1e-6, "options": {"sparsity": 1}},
    "bernstein": {"features": ["a"], "target": "y", "epsilon": 1.0, "options": {"degree": 2}},
    "bernstein-1bit": {"features": ["a"], "target": "y", "epsilon": 1.0, "options": {"degree": 2}},
    "dr-erm": {"features": ["a", "b"], "target": "y", "epsilon": 1.0, "options": {"rows": 3}},
    "linear-ssp": {"features": ["income", "age"], "target": "y", "public": "{public}", "epsilon": 1.0},
    "marginals": {"features": ["a", "b", "c"], "epsilon": 1.0,
                  "options": {"domain": {"a": 3, "b": 2, "c": 4}, "participants": 1000}},
}


def role_request(route: str, caller: str, world: World) -> tuple[str, dict[str, object] | None]:
    """The concrete URL and a VALID body for ``route``, so only the caller decides the status."""
    name = world.dataset
    if route.startswith("/public-tables/"):
        name = world.public_table
    elif route.endswith("/migrate"):  # the steward moves titanic's SQL twin to DuckDB
        name = world.sql_dataset
    elif route.startswith("/campaigns/"):  # the closing routes close a campaign of their own
        name = world.closing_campaign if route.endswith("/close") else world.campaign
        if route.endswith(("/marginal", "/synthetic")):  # a marginals campaign's answers
            name = world.marginals_campaign
    url = route.replace("{name}", name).replace("{release_id}", str(world.release_id)).replace(
        "{job_id}", str(world.job_id)).replace("{index}", "0")
    report = ({"round": 0, "report": {"value": 0.5}} if caller == "participant" else
              {"round": 0, "reports": {"value": [0.25]}, "pseudonyms": [f"roles {caller}"]})
    bodies: dict[str, dict[str, object]] = {
        "/datasets": {"name": f"upload {caller}", "csv": "a,b\n0,1\n1,0\n2,1\n", "domain": {"a": 3, "b": 2}},
        "/datasets/attach": {"name": f"attached {caller}", "source": world.source, "parquet": [ATTACHABLE],
                             "bins": SPEC},
        "/datasets/{name}/migrate": {"engine": "duckdb"},
        "/datasets/{name}/budget": {"epsilon": 5.0, "delta": 1e-6},
        "/datasets/{name}/releases/marginals": {"mechanism": "laplace", "workload": SMALL_WORKLOAD,
                                                "epsilon": 0.01},
        "/releases/{release_id}/marginal": {"attributes": ["Survived", "Sex"]},
        "/datasets/{name}/fit/linear": {"target": "Pclass", "features": ["Survived"], "release": world.release_id},
        "/datasets/{name}/fit/logistic": {"target": "Sex", "features": ["Pclass"], "release": world.release_id,
                                          "allow_unmeasured": True},  # the release never measured Sex x Pclass
        "/releases/{release_id}/synthetic": {"rows": 3},
        "/public-tables": {"name": f"public {caller}", "csv": "a,b\n0.5,1\n1.5,0\n"},
        "/campaigns": {"name": f"campaign {caller}", "protocol": "ldp-avg", "features": ["value"], "epsilon": 1.0,
                       "options": {"lower": 0, "upper": 1}},
        "/campaigns/plan": {"protocol": "stein-glm", "features": ["income", "age"], "target": "y",
                            "public": world.public_table, "epsilon": 1.0, "delta": 0.0, "participants": 1000},
        "/campaigns/{name}/reports": report,
        "/campaigns/{name}/fit": {"model": "mean"},
        "/campaigns/{name}/marginal": {"attributes": ["a", "b"]},
        "/campaigns/{name}/synthetic": {"rows": 3},
        "/local-caps/default": {"epsilon": 10.0, "delta": 1e-4},
        "/local-caps/participant": {"epsilon": 5.0, "delta": 0.0, "key_id": world.key_ids["participant"]},
    }
    bodies["/datasets/{name}/releases/marginals/plan"] = bodies["/datasets/{name}/releases/marginals"]
    for task in ("linear", "logistic"):  # a fit's dry run takes the fit's own body
        bodies[f"/datasets/{{name}}/fit/{task}/plan"] = bodies[f"/datasets/{{name}}/fit/{task}"]
    return url, bodies.get(route)
