"""What the canary suite sends to every operation of the OpenAPI document: valid requests pointed at the canary
datasets (:mod:`tests.support.canary_tables`), their releases and jobs, and invalid ones (wrong types, missing
fields, unknown columns, bad and huge ids, cells that break the attach check).

:data:`REQUESTS` maps each operation ``(METHOD, path)`` to a function ``(context, caller) -> [Call, ...]``; an
operation of the document without an entry fails ``tests/system/test_canaries.py``, naming it (as ``ROLE_TABLE``
does in tests/service/api/test_api_roles.py). The local-DP routes read no sensitive table: their valid bodies are the
role test's (``_request`` there), pointed at the world of tests/support/apihelpers.py, plus the same invalid ones.
:data:`LATE` lists the operations called after all others, so that they see every release and job the others made
(the jobs of failed releases included).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import select

from db.engine import transaction
from db.models import Dataset, Job, Release
from service.regression import methods
from tests.support.apihelpers import World
from tests.support.canary_tables import (
    ATTACH_TABLES,
    HEALTHY,
    SPEC,
    CanaryTables,
    bad_cells,
    canary_frame,
    with_cells,
)
from tests.support.roles import role_request

#: A request without a body (not even ``null``).
NO_BODY = object()
#: Path ids that name nothing, are not ASCII decimals, or do not fit 64 bits (issue 27, finding 4).
BAD_IDS = ("0", "-1", "999999999", str(2**63), "99999999999999999999999999", "%C2%B2", "%D9%A3")
BAD_NAMES = ("no such thing", "99999999999999999999999999", "%C2%B2")
#: The regression methods' requests: target and features per task, and the settings each method needs. A method of
#: the registry without an entry fails the suite (its fits would go unprobed).
FIT_DESIGNS = {"linear": ("hours", ["age", "sex", "smoker"]), "logistic": ("sex", ["age", "hours", "smoker"])}
FIT_SETTINGS: dict[str, dict[str, object]] = {"dd-ssp": {}, "adassp": {}, "objpert": {}, "aim-synth": {},
                                              "dp-iht": {"sparsity": 1}}
RELEASE_BODIES = (
    {"mechanism": "laplace", "workload": [["age", "hours"]], "epsilon": 0.1},
    {"mechanism": "gaussian", "workload": [["age", "sex"]], "rho": 0.01},
    {"mechanism": "mst", "rho": 0.01},
)


@dataclass(frozen=True)
class Call:
    """One request: ``label`` says what it is (for the report); ``variant`` names the canary dataset it points at
    (None when it points at none); ``valid`` whether its body is meant to pass validation."""

    label: str
    url: str
    body: Any = NO_BODY
    variant: str | None = None
    valid: bool = True


@dataclass
class Context:
    """What the request builders point at: the role world and the canary tables of one service database."""

    world: World
    tables: CanaryTables
    counter: itertools.count = field(default_factory=itertools.count)
    #: the name of each dataset ``POST /datasets/attach`` may create -> its source (what a job of it read)
    attach_names: dict[str, str] = field(default_factory=dict)

    def unique(self, prefix: str) -> str:
        return f"{prefix} {next(self.counter)}"

    def datasets(self) -> list[str]:
        return [v.name for v in self.tables.built] + [HEALTHY.name]

    def canary_releases(self) -> list[tuple[str, int]]:
        """(dataset, id) of releases of the canary datasets: per dataset the newest of each status (the healthy
        release, a failed one), and of the healthy dataset the newest of each mechanism too (every kind of payload
        answers). Not every failed release: they are hundreds, and alike."""
        names = set(self.datasets())
        with transaction(self.world.engine) as session:
            rows = session.execute(select(Dataset.name, Release.id, Release.status, Release.mechanism)
                                   .join(Release, Release.dataset_id == Dataset.id).order_by(Release.id)).all()
        newest: dict[tuple[str, str], int] = {}
        for name, release_id, status, mechanism in rows:
            if name in names:
                newest[(name, status)] = release_id
                if name == HEALTHY.name:
                    newest[(name, f"{status} {mechanism}")] = release_id
        return sorted({(name, release_id) for (name, _), release_id in newest.items()}, key=lambda r: r[1])

    def jobs(self) -> list[tuple[str, int]]:
        """(dataset, id) of the newest job of each dataset and state, and of each kind and state (failed releases'
        jobs included; every job's record is also searched where it is stored)."""
        with transaction(self.world.engine) as session:
            rows = session.execute(select(Job.dataset, Job.id, Job.kind, Job.state).order_by(Job.id)).all()
        newest = {key: (dataset, job_id) for dataset, job_id, kind, state in rows
                  for key in ((dataset, state), (kind, state))}
        return sorted(set(newest.values()), key=lambda j: j[1])

    def variant_of(self, dataset: str) -> str | None:
        """``dataset`` when it is a canary dataset, the source a suite's attach read it from, else None."""
        return dataset if dataset in self.datasets() else self.attach_names.get(dataset)


Builder = Callable[[Context, str], list[Call]]


# invalid bodies -------------------------------------------------------------------------------------------------
def wrong_types(body: dict[str, object]) -> list[tuple[str, object]]:
    """``body`` with each top-level field in turn given a value of the wrong JSON type."""
    out = []
    for key, value in body.items():
        wrong: object = 12345 if isinstance(value, str) else "text" if not isinstance(value, dict) else [1]
        if isinstance(value, bool):
            wrong = "yes"
        out.append((f"{key} of the wrong type", {**body, key: wrong}))
    return out


def invalid_bodies(body: dict[str, object] | None) -> list[tuple[str, object]]:
    """Bodies no route should accept: none, not an object, empty, an unknown field, each field of a wrong type."""
    out: list[tuple[str, object]] = [("no body", NO_BODY), ("a list instead of an object", [1, 2])]
    if body:
        out += [("an empty object", {}), ("an unknown field", {**body, "unknown_field": 1}), *wrong_types(body)]
    return out


def _invalid(url: str, body: dict[str, object] | None, variant: str | None = None) -> list[Call]:
    return [Call(f"invalid: {label}", url, b, variant, valid=False) for label, b in invalid_bodies(body)]


# the sensitive tables' routes ------------------------------------------------------------------------------------
def _each_dataset(ctx: Context, template: str) -> list[tuple[str, str]]:
    return [(name, template.replace("{name}", name)) for name in ctx.datasets()]


def _bad_names(template: str) -> list[Call]:
    return [Call(f"a bad name {n!r}", template.replace("{name}", n), valid=False) for n in BAD_NAMES]


def _reads(template: str) -> Builder:
    """A GET of a dataset's metadata: every canary dataset, and names that are none."""
    def build(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
        return [Call("valid", url, variant=name) for name, url in _each_dataset(ctx, template)] + _bad_names(template)
    return build


def upload(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    frame = canary_frame(ctx.tables.canaries)
    calls = [Call(f"valid upload ({engine})", "/datasets",
                  {"name": ctx.unique("canary upload"), "csv": frame.to_csv(index=False), "bins": SPEC,
                   "engine": engine}, f"new table ({engine})") for engine in ("duckdb", "sql")]
    for label, cells in bad_cells(ctx.tables.canaries).items():
        calls.append(Call(f"invalid upload: {label}", "/datasets",
                          {"name": ctx.unique("canary upload"), "csv": with_cells(frame, cells).to_csv(index=False),
                           "bins": SPEC}, "new table (duckdb)", valid=False))
    return calls + _invalid("/datasets", {"name": "canary upload", "csv": "a\n1\n", "bins": SPEC})


def budget_put(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    template, body = "/datasets/{name}/budget", {"epsilon": 50.0, "delta": 1e-5}
    calls = [Call("valid", url, body, name) for name, url in _each_dataset(ctx, template)]
    first = ctx.datasets()[0]
    return calls + _invalid(template.replace("{name}", first), body, first) + [
        Call("invalid: a huge epsilon", template.replace("{name}", first), {"epsilon": 1e300}, first, valid=False)]


def release(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    template = "/datasets/{name}/releases/marginals"
    calls = []
    for name, url in _each_dataset(ctx, template):
        calls += [Call(f"valid {b['mechanism']} release", url, b, name) for b in RELEASE_BODIES]
        calls += [Call("invalid: an unknown column", url, {"mechanism": "laplace", "workload": [["no_such_column"]],
                                                           "epsilon": 0.1}, name, valid=False),
                  Call("invalid: an epsilon far beyond the budget", url,
                       {"mechanism": "laplace", "workload": [["sex"]], "epsilon": 1e6}, name, valid=False)]
    first = ctx.datasets()[0]
    return calls + _invalid(template.replace("{name}", first), dict(RELEASE_BODIES[0]), first) + _bad_names(template)


def fit(task: str) -> Builder:
    template = f"/datasets/{{name}}/fit/{task}"
    target, features = FIT_DESIGNS[task]

    def build(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
        calls = []
        for name, url in _each_dataset(ctx, template):
            for spec in methods.specs():
                if task not in spec.tasks:
                    continue
                body = {"target": target, "features": features, "method": spec.name, "epsilon": 0.5, "delta": 1e-6,
                        **FIT_SETTINGS[spec.name]}
                calls.append(Call(f"valid {spec.name} fit", url, body, name))
            calls += [
                Call("valid: answered from the healthy release", url,
                     {"target": target, "features": features, "release": ctx.tables.releases[name],
                      "allow_unmeasured": True}, name),
                Call("invalid: an unknown target", url, {"target": "no_such_column", "features": features,
                                                         "epsilon": 0.5, "delta": 1e-6}, name, valid=False),
                Call("invalid: an unknown feature", url, {"target": target, "features": ["no_such_column"],
                                                          "epsilon": 0.5, "delta": 1e-6}, name, valid=False),
                Call("invalid: a release that does not exist", url,
                     {"target": target, "features": features, "release": 2**62}, name, valid=False),
            ]
        first = ctx.datasets()[0]
        body = {"target": target, "features": features, "method": "dd-ssp", "epsilon": 0.5, "delta": 1e-6}
        return calls + _invalid(template.replace("{name}", first), body, first) + _bad_names(template)
    return build


def planned(build: Builder, extra: tuple[dict[str, object], ...] = ()) -> Builder:
    """A dry run's requests: those of the release or fit it plans, sent to its ``/plan`` route, plus ``extra`` valid
    bodies of its own (a target error) for every canary dataset."""
    def plan(ctx: Context, caller: str) -> list[Call]:
        calls = [replace(c, url=f"{c.url}/plan") for c in build(ctx, caller)]
        for body in extra:
            calls += [Call(f"valid plan: {sorted(body)}", f"{url}/plan", body, name)
                      for name, url in _each_dataset(ctx, "/datasets/{name}/releases/marginals")]
        return calls
    return plan


def attach(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    bins = copy.deepcopy(SPEC)

    def body(source: str, what: dict[str, object], **extra: object) -> dict[str, object]:
        name = ctx.unique("canary attach")
        ctx.attach_names[name] = source
        return {"name": name, "source": source, **what, "bins": bins, **extra}

    lake = "canary lake"
    calls = [Call("valid: a clean file", "/datasets/attach", body(lake, {"parquet": [ATTACH_TABLES["clean"]]})),
             Call("valid: a clean file, one row per ssn", "/datasets/attach",
                  body(lake, {"parquet": [ATTACH_TABLES["clean"]]}, privacy_unit="ssn")),
             Call("valid: a clean SQLite table", "/datasets/attach", body("canary sqlite", {"table": "people"}))]
    for key in ("outside", "restrung", "mixed"):
        calls.append(Call(f"invalid: the {key} table", "/datasets/attach",
                          body(lake, {"parquet": [ATTACH_TABLES[key]]}), valid=False))
    narrow = copy.deepcopy(SPEC)
    narrow["columns"]["age"]["edges"] = [0, 30]
    calls += [
        Call("invalid: a SQLite table with a canary string in age", "/datasets/attach",
             body("canary sqlite", {"table": "restrung"}), valid=False),
        Call("invalid: a privacy unit that is no column", "/datasets/attach",
             body(lake, {"parquet": [ATTACH_TABLES["clean"]]}, privacy_unit="no_such_column"), valid=False),
        Call("invalid: a spec narrower than the values (age in [0, 30])", "/datasets/attach",
             {**body(lake, {"parquet": [ATTACH_TABLES["clean"]]}), "bins": narrow}, valid=False),
        Call("invalid: a spec column the table lacks", "/datasets/attach",
             {**body(lake, {"parquet": [ATTACH_TABLES["clean"]]}),
              "bins": {"columns": {**SPEC["columns"], "no_such_column": {"values": ["a"]}}}}, valid=False),
        Call("invalid: a path leaving the folder", "/datasets/attach", body(lake, {"parquet": ["../x.parquet"]}),
             valid=False),
        Call("invalid: a 300-character file name", "/datasets/attach",
             body(lake, {"parquet": ["a" * 300 + ".parquet"]}), valid=False),
        Call("invalid: an unknown source", "/datasets/attach", body("no such source", {"parquet": ["x.parquet"]}),
             valid=False),
    ]
    if ctx.tables.postgres_url is not None:
        calls.append(Call("valid: the PostgreSQL table (tampered: a canary string in age)", "/datasets/attach",
                          body("canary postgres", {"table": "people"})))
    if ctx.tables.spark_views:
        calls += [Call("valid: a clean Spark table", "/datasets/attach",
                       body("canary spark", {"table": "canary_clean"})),
                  Call("invalid: a Spark table with a canary string in age", "/datasets/attach",
                       body("canary spark", {"table": "canary_restrung"}), valid=False)]
    calls += _invalid("/datasets/attach", body(lake, {"parquet": [ATTACH_TABLES["clean"]]}))
    return [replace(c, variant=c.body["source"]) if isinstance(c.body, dict) and isinstance(c.body.get("source"), str)
            else c for c in calls]  # each call points at the table of its source


def migrate(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    template = "/datasets/{name}/migrate"
    calls = [Call(f"valid: to {engine}", url, {"engine": engine}, name)
             for name, url in _each_dataset(ctx, template) for engine in ("duckdb", "sql")]
    first = ctx.datasets()[0]
    return calls + _invalid(template.replace("{name}", first), {"engine": "duckdb"}, first) + _bad_names(template)


def list_releases(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    return [Call("valid: all", "/releases")] + [Call("valid: one dataset", f"/releases?dataset={name}", variant=name)
                                                  for name in ctx.datasets()]


def _release_calls(ctx: Context, suffix: str, body: dict[str, object] | None,
                   invalid: list[tuple[str, object]] = ()) -> list[Call]:
    calls = []
    for name, release_id in ctx.canary_releases():
        url = f"/releases/{release_id}{suffix}"
        calls.append(Call("valid", url, NO_BODY if body is None else body, name))
        calls += [Call(f"invalid: {label}", url, b, name, valid=False) for label, b in invalid]
    calls += [Call(f"a bad id {i!r}", f"/releases/{i}{suffix}", NO_BODY if body is None else body, valid=False)
              for i in BAD_IDS]
    if body is not None:
        first = ctx.canary_releases()[0]
        calls += _invalid(f"/releases/{first[1]}{suffix}", body, first[0])
    return calls


def get_release(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    return _release_calls(ctx, "", None)


def marginal(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    return _release_calls(ctx, "/marginal", {"attributes": ["sex"]},
                          [("an unknown column", {"attributes": ["no_such_column"]}),
                           ("a binned column the release never measured", {"attributes": ["age", "hours"]})])


def synthetic(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    return _release_calls(ctx, "/synthetic", {"rows": 3}, [("a huge row count", {"rows": 10**12})])


def get_job(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
    calls = [Call("valid", f"/jobs/{job_id}", variant=ctx.variant_of(dataset)) for dataset, job_id in ctx.jobs()]
    return calls + [Call(f"a bad id {i!r}", f"/jobs/{i}", valid=False) for i in BAD_IDS]


# the local-DP routes (no sensitive table) -----------------------------------------------------------------------
def collection(route: str, method: str) -> Builder:
    """The role test's valid request for ``route``, the invalid bodies, and bad names and indexes in its path."""
    def build(ctx: Context, caller: str) -> list[Call]:
        url, body = role_request(route, caller, ctx.world)
        if method == "GET":  # the role test's bodies are keyed by path: a GET's is its POST's
            body = None
        calls = [Call("valid", url, NO_BODY if body is None else body)]
        if method in ("POST", "PUT"):
            calls += _invalid(url, body)
        if "{name}" in route:  # the second segment of the path names the campaign or public table
            calls += [Call(f"a bad name {n!r}", "/".join([*url.split("/")[:2], n, *url.split("/")[3:]]),
                           NO_BODY if body is None else body, valid=False) for n in BAD_NAMES]
        if "{index}" in route:
            calls += [Call(f"a bad index {i!r}", url.replace("/rounds/0/", f"/rounds/{i}/"), valid=False)
                      for i in BAD_IDS]
        if route == "/public-tables/{name}/rows":
            calls += [Call("invalid: a huge offset", f"{url}?offset={2**63}&limit=5", valid=False),
                      Call("invalid: a negative limit", f"{url}?limit=-1", valid=False)]
        return calls
    return build


def plain(route: str) -> Builder:
    def build(ctx: Context, caller: str) -> list[Call]:  # noqa: ARG001
        return [Call("valid", route)]
    return build


REQUESTS: dict[tuple[str, str], Builder] = {
    ("GET", "/health"): plain("/health"),
    ("GET", "/health/ready"): plain("/health/ready"),
    ("GET", "/metrics"): plain("/metrics"),
    ("GET", "/datasets"): plain("/datasets"),
    ("POST", "/datasets"): upload,
    ("POST", "/datasets/attach"): attach,
    ("GET", "/datasets/{name}"): _reads("/datasets/{name}"),
    ("GET", "/datasets/{name}/budget"): _reads("/datasets/{name}/budget"),
    ("PUT", "/datasets/{name}/budget"): budget_put,
    ("POST", "/datasets/{name}/releases/marginals"): release,
    ("GET", "/datasets/{name}/ledger"): _reads("/datasets/{name}/ledger"),
    ("POST", "/datasets/{name}/migrate"): migrate,
    ("POST", "/datasets/{name}/fit/linear"): fit("linear"),
    ("POST", "/datasets/{name}/fit/logistic"): fit("logistic"),
    ("POST", "/datasets/{name}/releases/marginals/plan"): planned(release, (
        {"mechanism": "laplace", "workload": [["age", "hours"]], "target_error": 0.1},
        {"mechanism": "residual", "workload": [["age", "sex"]], "delta": 1e-6, "target_error": 0.05})),
    ("POST", "/datasets/{name}/fit/linear/plan"): planned(fit("linear")),
    ("POST", "/datasets/{name}/fit/logistic/plan"): planned(fit("logistic")),
    ("GET", "/releases"): list_releases,
    ("GET", "/releases/{release_id}"): get_release,
    ("POST", "/releases/{release_id}/marginal"): marginal,
    ("POST", "/releases/{release_id}/synthetic"): synthetic,
    ("GET", "/jobs/{job_id}"): get_job,
    **{(m, r): collection(r, m) for m, r in [
        ("GET", "/public-tables"), ("POST", "/public-tables"), ("GET", "/public-tables/{name}"),
        ("GET", "/public-tables/{name}/rows"), ("POST", "/campaigns"), ("POST", "/campaigns/plan"),
        ("GET", "/campaigns"), ("GET", "/campaigns/{name}"), ("POST", "/campaigns/{name}/close"),
        ("POST", "/campaigns/{name}/rounds/{index}/close"), ("GET", "/campaigns/{name}/state"),
        ("POST", "/campaigns/{name}/reports"), ("POST", "/campaigns/{name}/fit"),
        ("POST", "/campaigns/{name}/marginal"), ("POST", "/campaigns/{name}/synthetic"), ("GET", "/local-caps/default"),
        ("PUT", "/local-caps/default"), ("PUT", "/local-caps/participant"),
    ]},
}
#: Called last, in this order: they read what the others made.
LATE = (("GET", "/releases"), ("GET", "/releases/{release_id}"), ("POST", "/releases/{release_id}/marginal"),
        ("POST", "/releases/{release_id}/synthetic"), ("GET", "/datasets/{name}/ledger"), ("GET", "/jobs/{job_id}"))
