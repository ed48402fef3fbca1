"""Bad input never yields a 5xx and never stores anything: schemathesis walks every operation of the
OpenAPI schema (inputs that fit it and inputs that break it) against the in-process app, as three callers (no key,
an analyst's key, a steward's key: :data:`CALLERS`), and hypothesis aims at the privacy parameters, column names and
workload sizes. A refused request (any 4xx) must leave the row count of every table as it was.

Everything is seeded (``derandomize=True``) and bounded (a fixed number of examples per operation and caller) so the
file is reproducible and stops by itself. The fuzzed dataset has NO budget: every release request is
validated in full and then refused (409 ``no_budget``) before a mechanism runs, which keeps the run
short and means no release request may ever change the database. Uploads that happen to be valid
do store a dataset (a 2xx); every 4xx must leave the database exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from sqlalchemy import inspect
from sqlalchemy import text as sql

from db.engine import make_engine
from db.migrate import upgrade_to_head
from service.access import auth
from service.api import create_app
from service.mechanisms import registry
from service.mechanisms.registry import ReleaseKind
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.apihelpers import SMALL_WORKLOAD, bearer, snapshot, table_counts
from tests.support.datasets import load_titanic

EXAMPLES_PER_OPERATION = 25
SETTINGS = settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
#: The callers schemathesis plays, and its examples per operation for each: the steward reaches every route's
#: validation and work; the analyst and no key are refused on most routes, so fewer cases cover their answers.
CALLERS = {"no_key": 10, "analyst": 10, "steward": EXAMPLES_PER_OPERATION}
TITANIC = ("Survived", "Pclass", "Sex", "Age", "SibSp", "Parch", "Fare", "Embarked", "Cabin")


class Fuzzed:
    def __init__(self, folder: Path, data_dir: Path) -> None:
        self.engine = make_engine(f"sqlite:///{folder / 'fuzz.db'}")
        upgrade_to_head(self.engine)
        load_titanic(self.engine, data_dir)  # no budget: releases are refused after validation
        load_titanic(self.engine, data_dir, "answered")
        from service.accounting import accountant

        accountant.set_budget(self.engine, "answered", 1.0, 1e-6)
        self.release_id = release_engine.release_marginals(self.engine, "answered", "laplace", SMALL_WORKLOAD,
                                                     epsilon=0.5).release_id
        answers.synthetic_frame(self.engine, self.release_id, 3, 0)  # compile the sampler once, up front
        _, self.key = auth.create_key(self.engine, "steward", "fuzzer")
        _, analyst = auth.create_key(self.engine, "analyst", "fuzzing analyst")
        self.keys = {"no_key": None, "analyst": analyst, "steward": self.key}
        self.tables = [t for t in inspect(self.engine).get_table_names() if t != "alembic_version"]
        self.app = create_app(self.engine)
        self.client = TestClient(self.app, raise_server_exceptions=False)

    def assert_titanic_has_no_budget(self) -> None:
        """A budget on the fuzzed dataset would let valid fuzz run real (slow) releases."""
        with self.engine.connect() as connection:
            budgets = connection.execute(sql("SELECT COUNT(*) FROM budget_remaining WHERE dataset = 'titanic'"))
            assert budgets.scalar() == 0

    def post_raw(self, path: str, text: str) -> Any:
        return self.client.post(path, content=text.encode("utf-8", "surrogatepass"),
                                headers={**bearer(self.key), "Content-Type": "application/json"})


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Fuzzed]:
    world = Fuzzed(tmp_path_factory.mktemp("fuzz"), data_dir)
    yield world
    world.engine.dispose()


def stored(fuzzed: Fuzzed) -> dict[str, object]:
    """What the database holds: the API's snapshot and the row count of every table."""
    return {**snapshot(fuzzed.engine), **table_counts(fuzzed.engine, fuzzed.tables)}


def check_response(response: Any, before: dict[str, object], after: dict[str, object], label: str) -> None:
    assert response.status_code < 500, f"{label}: {response.status_code} {response.text[:500]}"
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("error"), str) and isinstance(body.get("message"), str), (label, body)
        assert after == before, f"{label}: a {response.status_code} changed the database"


def _steer(case: Any, fuzzed: Fuzzed, aim_at_real: bool) -> None:
    """Point some cases at real objects so validation of the body, not a 404, is what answers;
    release requests only ever go to the budget-less dataset."""
    params = case.path_parameters
    if params is None:
        return
    path = case.operation.path
    if path.endswith("/releases/marginals"):
        params["name"] = "titanic"  # never given a budget
    elif "name" in params and aim_at_real:
        params["name"] = "answered"
    if "release_id" in params and aim_at_real:
        params["release_id"] = fuzzed.release_id
    # Each new synthetic row count compiles a new sampler in JAX (~15 s): keep valid counts at 3.
    real_release = str(params.get("release_id")) == str(fuzzed.release_id)
    if path.endswith("/synthetic") and real_release and isinstance(case.body, dict):
        rows = case.body.get("rows")
        if isinstance(rows, int | float) and not isinstance(rows, bool) and float(rows).is_integer():
            case.body["rows"] = 3  # 244 and 244.0 alike: pydantic reads both as the integer 244


def operations(fuzzed: Fuzzed) -> list[Any]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzzed.app)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_schemathesis_every_operation(fuzzed: Fuzzed, mode: GenerationMode, caller: str) -> None:
    key = fuzzed.keys[caller]
    for operation in operations(fuzzed):
        takes_input = any(len(part) for part in (operation.path_parameters, operation.query, operation.body))
        if mode.is_negative and not takes_input:
            continue  # GET /health, GET /datasets: nothing to get wrong
        strategy = operation.as_strategy(generation_mode=mode)

        @settings(SETTINGS, max_examples=CALLERS[caller])
        @given(case=strategy, aim_at_real=st.booleans())
        def run(case: Any, aim_at_real: bool) -> None:
            _steer(case, fuzzed, aim_at_real)
            releasing = case.operation.path.endswith("/releases/marginals")
            if releasing:
                fuzzed.assert_titanic_has_no_budget()
            before = stored(fuzzed)
            response = case.call(headers=bearer(key))
            after = stored(fuzzed)
            check_response(response, before, after, f"{caller}: {case.operation.method.upper()} {case.formatted_path}")
            if releasing:
                assert after == before, "a release request changed the database of a budget-less dataset"

        run()


# aimed at the privacy parameters, columns and sizes -----------------------------------------------
def bad_numbers() -> st.SearchStrategy[object]:
    return st.one_of(
        st.sampled_from([float("nan"), float("inf"), float("-inf"), -1.0, 0.0, -1e-300, 1e300, 2.0]),
        st.floats(max_value=0.0), st.integers(max_value=0), st.integers(min_value=10**7),
        st.text(max_size=8), st.booleans(), st.lists(st.floats(), max_size=2),
    )


@SETTINGS
@given(mechanism=st.sampled_from([*registry.names(ReleaseKind.MARGINALS), "bogus"]),
       params=st.dictionaries(st.sampled_from(["epsilon", "delta", "rho", "seed"]),
                              st.one_of(bad_numbers(), st.floats(min_value=1e-6, max_value=1.0)), min_size=1))
def test_privacy_parameters(fuzzed: Fuzzed, mechanism: str, params: dict[str, object]) -> None:
    text = json.dumps({"mechanism": mechanism, "workload": [["Sex"]], **params}, allow_nan=True)
    before = snapshot(fuzzed.engine)
    fuzzed.assert_titanic_has_no_budget()
    response = fuzzed.post_raw("/datasets/titanic/releases/marginals", text)
    check_response(response, before, snapshot(fuzzed.engine), text)
    assert response.status_code in (409, 422), text  # never a release: no budget


names = st.one_of(st.sampled_from(TITANIC), st.text(max_size=12))


@SETTINGS
@given(workload=st.one_of(
    st.lists(st.lists(names, min_size=1, max_size=4), min_size=1, max_size=6),
    st.lists(st.fixed_dictionaries({"attributes": st.lists(names, max_size=3)},
                                   optional={"weight": bad_numbers()}), max_size=3),
    st.sets(st.sampled_from(TITANIC), min_size=7).map(lambda s: [sorted(s)]),  # > 50M cells: too large
    st.text(max_size=20).map(lambda s: f"target:{s}"),
    st.sampled_from(["all-0way", "all-10way", "all-99way", "../../etc/passwd", "/dev/zero", ""]),
))
def test_workloads(fuzzed: Fuzzed, workload: object) -> None:
    text = json.dumps({"mechanism": "laplace", "epsilon": 0.1, "workload": workload})
    before = snapshot(fuzzed.engine)
    fuzzed.assert_titanic_has_no_budget()
    response = fuzzed.post_raw("/datasets/titanic/releases/marginals", text)
    check_response(response, before, snapshot(fuzzed.engine), text)
    assert response.status_code in (409, 422), text


def test_oversized_workload_lists_are_refused(fuzzed: Fuzzed) -> None:
    before = snapshot(fuzzed.engine)
    body = {"mechanism": "laplace", "epsilon": 0.1, "workload": [["Sex"]] * 5001}
    response = fuzzed.post_raw("/datasets/titanic/releases/marginals", json.dumps(body))
    check_response(response, before, snapshot(fuzzed.engine), "5001 marginals")
    assert response.status_code == 422 and "body.workload" in response.json()["fields"][0]


@SETTINGS
@given(attributes=st.lists(names, min_size=0, max_size=3))
def test_marginal_columns(fuzzed: Fuzzed, attributes: list[str]) -> None:
    before = snapshot(fuzzed.engine)
    response = fuzzed.post_raw(f"/releases/{fuzzed.release_id}/marginal", json.dumps({"attributes": attributes}))
    check_response(response, before, snapshot(fuzzed.engine), str(attributes))
    valid = 0 < len(attributes) == len(set(attributes)) and set(attributes) <= set(TITANIC)
    assert response.status_code == (200 if valid else 422), (attributes, response.text)


@SETTINGS
@given(name=st.text(max_size=30), csv=st.text(max_size=60),
       domain=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(-2, 5), st.text(max_size=3)), max_size=3))
def test_uploads(fuzzed: Fuzzed, name: str, csv: str, domain: dict[str, object]) -> None:
    text = json.dumps({"name": name, "csv": csv, "domain": domain})
    before = snapshot(fuzzed.engine)
    response = fuzzed.post_raw("/datasets", text)
    check_response(response, before, snapshot(fuzzed.engine), text)


@SETTINGS
@given(text=st.one_of(st.text(max_size=40), st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
                      st.just('{"a": ' * 5000), st.just('"\\ud800"')))
def test_garbage_bodies(fuzzed: Fuzzed, text: str) -> None:
    for path in ("/datasets", "/datasets/titanic/releases/marginals", f"/releases/{fuzzed.release_id}/marginal"):
        before = snapshot(fuzzed.engine)
        response = fuzzed.post_raw(path, text)
        check_response(response, before, snapshot(fuzzed.engine), f"{path} {text[:80]!r}")
        assert response.status_code in (400, 422), (path, text[:80], response.text)
