"""The HTTP API in-process: JSON errors with the right status, idempotent charging, uploads that
store nothing when bad, the Python client, the key commands and the committed OpenAPI schema."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from db.models import IdempotencyRecord
from service.access import auth, idempotency
from service.api import create_app
from service.api.openapi import SCHEMA_FILE, current_schema, render
from service.api.schemas import MarginalReleaseIn
from service.client import Client, ExtrapolationWarning, MarginaliaError
from service.mechanisms import direct
from service.releases import answers
from tests.support.apihelpers import World, bearer, snapshot
from tests.support.dead_runner import gone_runner_columns
from tests.support.paths import DATA

TINY = {"csv": "a,b\n0,1\n1,0\n2,1\n1,1\n", "domain": {"a": 3, "b": 2}}


def steward(world: World) -> dict[str, str]:
    return bearer(world.keys["steward"])


def tiny_dataset(client: TestClient, world: World, budget: float | None = None) -> str:
    """A fresh 4-row dataset (unique name) with an optional budget."""
    name = f"tiny-{uuid.uuid4().hex[:8]}"
    assert client.post("/datasets", headers=steward(world), json={"name": name, **TINY}).status_code == 201
    if budget is not None:
        response = client.put(f"/datasets/{name}/budget", headers=steward(world), json={"epsilon": budget})
        assert response.status_code == 200
    return name


def assert_error(response, status: int, code: str | None = None) -> dict[str, object]:  # noqa: ANN001
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) - {"fields"} == {"error", "message"}, body
    assert isinstance(body["message"], str) and body["message"]
    assert "Traceback" not in response.text
    if code is not None:
        assert body["error"] == code, body
    return body


def charges(world: World, dataset: str) -> int:
    from service.accounting.accountant import ledger_rows

    return sum(1 for row in ledger_rows(world.engine, dataset) if row["entry"] == "charge")


# errors -------------------------------------------------------------------------------------------
def test_malformed_json_is_400(client: TestClient, world: World) -> None:
    response = client.post("/datasets/titanic/releases/marginals", content=b'{"mechanism": "laplace",',
                           headers={**steward(world), "Content-Type": "application/json"})
    assert_error(response, 400, "malformed_json")


def test_bad_idempotency_key_is_400(client: TestClient, world: World) -> None:
    before = snapshot(world.engine)
    response = client.post("/datasets/titanic/releases/marginals", json={"mechanism": "laplace", "epsilon": 0.1},
                           headers={**steward(world), "Idempotency-Key": "has spaces"})
    assert_error(response, 400, "invalid_idempotency_key")
    assert snapshot(world.engine) == before


def test_missing_unknown_and_revoked_keys_are_401(client: TestClient, world: World) -> None:
    for headers in ({}, bearer("mgl_not-a-key"), bearer(world.keys["revoked"]), {"Authorization": "Basic abc"}):
        assert_error(client.get("/datasets", headers=headers), 401, "unauthorized")


def test_wrong_role_is_403(client: TestClient, world: World) -> None:
    body = assert_error(client.put("/datasets/titanic/budget", headers=bearer(world.keys["analyst"]),
                                   json={"epsilon": 1}), 403, "forbidden")
    assert "analyst" in body["message"]


@pytest.mark.parametrize(("method", "path", "code"), [
    ("GET", "/datasets/nope", "dataset_not_found"),
    ("GET", "/datasets/nope/budget", "dataset_not_found"),
    ("GET", "/releases/999999", "release_not_found"),
    ("GET", "/no/such/route", "not_found"),
])
def test_unknown_things_are_404(client: TestClient, world: World, method: str, path: str, code: str) -> None:
    assert_error(client.request(method, path, headers=steward(world)), 404, code)


def test_budget_exceeded_is_409_with_the_remaining_budget(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=0.25)
    body = {"mechanism": "laplace", "workload": [["a"]], "epsilon": 0.2}
    assert client.post(f"/datasets/{name}/releases/marginals", headers=steward(world), json=body).status_code == 201
    before = snapshot(world.engine)
    refused = assert_error(client.post(f"/datasets/{name}/releases/marginals", headers=steward(world), json=body),
                           409, "budget_exceeded")
    remaining = float(re.search(r"epsilon=([-0-9.e]+) remains", refused["message"]).group(1))
    assert remaining == pytest.approx(0.05, abs=1e-9)
    assert snapshot(world.engine) == before


def test_conflicts_are_409(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world)
    assert_error(client.post("/datasets", headers=steward(world), json={"name": name, **TINY}), 409,
                 "duplicate_dataset")
    assert_error(client.post(f"/datasets/{name}/releases/marginals", headers=steward(world),
                             json={"mechanism": "laplace", "workload": [["a"]], "epsilon": 0.1}), 409, "no_budget")


@pytest.mark.parametrize(("body", "field"), [
    ({"mechanism": "laplace", "epsilon": -1}, "body.epsilon"),
    ({"mechanism": "laplace", "epsilon": 0}, "body.epsilon"),
    ({"mechanism": "laplace", "epsilon": "lots"}, "body.epsilon"),
    ({"mechanism": "gaussian", "rho": -0.5}, "body.rho"),
    ({"mechanism": "gaussian", "epsilon": 1, "delta": 1.5}, "body.delta"),
    ({"mechanism": "laplace", "epsilon": 1, "seed": -3}, "body.seed"),
    ({"mechanism": "nope", "epsilon": 1}, "body.mechanism"),
    ({"mechanism": "laplace", "epsilon": 1, "workload": "/etc/passwd"}, "body.workload"),
    ({"mechanism": "laplace", "epsilon": 1, "surprise": 1}, "body.surprise"),
    ({"mechanism": "laplace", "epsilon": 1, "options": {"rounds": 3}}, "body"),
])
def test_invalid_release_requests_are_422_naming_the_field(
    client: TestClient, world: World, body: dict[str, object], field: str
) -> None:
    before = snapshot(world.engine)
    refused = assert_error(client.post("/datasets/titanic/releases/marginals", headers=steward(world), json=body),
                           422, "invalid_request")
    assert any(f == field or f.startswith(field + ".") for f in refused["fields"]), refused
    assert snapshot(world.engine) == before


@pytest.mark.parametrize("text", ['{"mechanism": "laplace", "epsilon": NaN}',
                                  '{"mechanism": "laplace", "epsilon": Infinity}',
                                  '{"mechanism": "gaussian", "rho": -Infinity}'])
def test_non_finite_privacy_parameters_are_422(client: TestClient, world: World, text: str) -> None:
    before = snapshot(world.engine)
    response = client.post("/datasets/titanic/releases/marginals", content=text.encode(),
                           headers={**steward(world), "Content-Type": "application/json"})
    assert_error(response, 422, "invalid_request")
    assert snapshot(world.engine) == before


@pytest.mark.parametrize(("body", "code"), [
    ({"mechanism": "laplace", "epsilon": 0.1, "workload": [["Sex", "Nope"]]}, "invalid_workload"),
    ({"mechanism": "laplace", "epsilon": 0.1, "workload": "target:Nope"}, "invalid_workload"),
    ({"mechanism": "laplace", "epsilon": 0.1, "workload": "all-99way"}, "invalid_workload"),
    ({"mechanism": "laplace", "rho": 0.1}, "invalid_parameter"),
    ({"mechanism": "gaussian", "epsilon": 0.5}, "invalid_parameter"),
    ({"mechanism": "laplace", "epsilon": 0.1, "workload": [["Age", "Fare", "Cabin", "SibSp", "Parch", "Pclass",
                                                              "Survived", "Sex", "Embarked"]]}, "workload_too_large"),
])
def test_service_refusals_are_422_and_store_nothing(
    client: TestClient, world: World, body: dict[str, object], code: str
) -> None:
    before = snapshot(world.engine)
    assert_error(client.post("/datasets/titanic/releases/marginals", headers=steward(world), json=body), 422, code)
    assert snapshot(world.engine) == before


def test_marginal_of_unknown_column_is_422(client: TestClient, world: World) -> None:
    response = client.post(f"/releases/{world.release_id}/marginal", headers=bearer(world.keys["analyst"]),
                           json={"attributes": ["Sex", "Nope"]})
    assert "Nope" in assert_error(response, 422, "invalid_attributes")["message"]


def test_body_over_the_limit_is_413(world: World) -> None:
    client = TestClient(create_app(world.engine, max_body_bytes=1000), raise_server_exceptions=False)
    before = snapshot(world.engine)
    body = {"name": "big", "csv": "a\n" + "0\n" * 2000, "domain": {"a": 1}}
    assert_error(client.post("/datasets", headers=steward(world), json=body), 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        yield json.dumps(body).encode()

    assert_error(client.post("/datasets", headers={**steward(world), "Content-Type": "application/json"},
                             content=chunks()), 413, "payload_too_large")
    assert snapshot(world.engine) == before


def test_internal_errors_are_500_without_internals(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(answers, "answer_marginal", broken)
    response = client.post(f"/releases/{world.release_id}/marginal", headers=bearer(world.keys["analyst"]),
                           json={"attributes": ["Sex"]})
    body = assert_error(response, 500, "internal_error")
    assert "secret" not in response.text and "RuntimeError" not in response.text
    assert "reference" in body["message"]


# uploads: data goes in, never out -----------------------------------------------------------------
@pytest.mark.parametrize(("csv", "fragment"), [
    ("a,b\n0,1\n3,1\n", "column 'a'"),
    ("a\n0\n", "missing from the file"),
    ("a,b\n", "no data rows"),
])
def test_bad_uploads_are_422_and_store_nothing(client: TestClient, world: World, csv: str, fragment: str) -> None:
    before = snapshot(world.engine)
    body = {"name": "bad", "csv": csv, "domain": {"a": 3, "b": 2}}
    response = client.post("/datasets", headers=steward(world), json=body)
    assert fragment in assert_error(response, 422)["message"]
    assert snapshot(world.engine) == before


def test_raw_upload_with_a_binning_spec(client: TestClient, world: World) -> None:
    bins = {"columns": {"age": {"kind": "ordinal", "edges": [0, 30, 60, 120]},
                        "sex": {"kind": "categorical", "values": ["f", "m"]}}}
    name = f"raw-{uuid.uuid4().hex[:8]}"
    created = client.post("/datasets", headers=steward(world),
                          json={"name": name, "csv": "age,sex\n25,f\n61,m\n33,m\n", "bins": bins})
    assert created.status_code == 201, created.text
    assert created.json()["domain"] == {"age": {"size": 3, "kind": "ordinal"},
                                        "sex": {"size": 2, "kind": "categorical"}}
    before = snapshot(world.engine)
    bad = client.post("/datasets", headers=steward(world),
                      json={"name": name + "x", "csv": "age,sex\n25,f\n61,x\n", "bins": bins})
    assert "sex" in assert_error(bad, 422)["message"]
    assert snapshot(world.engine) == before


def test_row_counts_are_for_stewards_only(client: TestClient, world: World) -> None:
    assert client.get("/datasets/titanic", headers=steward(world)).json()["rows"] == 1304
    for role in ("analyst", "auditor"):
        shown = client.get("/datasets/titanic", headers=bearer(world.keys[role])).json()
        assert shown["rows"] is None and set(shown["domain"]) == {
            "Survived", "Pclass", "Sex", "Age", "SibSp", "Parch", "Fare", "Embarked", "Cabin"}


# idempotency --------------------------------------------------------------------------------------
def release_body(name: str, epsilon: float = 0.1) -> dict[str, object]:
    return {"mechanism": "laplace", "workload": [["a"]], "epsilon": epsilon}


def test_retry_with_the_same_key_never_charges_twice(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=1.0)
    headers = {**steward(world), "Idempotency-Key": str(uuid.uuid4())}
    first = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    for _ in range(3):
        again = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
        assert again.status_code == 201 and again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == f"/releases/{first.json()['release_id']}"
    assert charges(world, name) == 1
    other = client.post(f"/datasets/{name}/releases/marginals", headers={**steward(world), "Idempotency-Key": "k2"},
                        json=release_body(name))
    assert other.status_code == 201 and other.json()["release_id"] != first.json()["release_id"]
    assert charges(world, name) == 2


def test_same_key_with_a_different_body_is_422(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=1.0)
    headers = {**steward(world), "Idempotency-Key": "reused"}
    first = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
    assert first.status_code == 201
    for changed in (release_body(name, epsilon=0.2), {**release_body(name), "workload": [["b"]]}):
        response = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=changed)
        assert_error(response, 422, "idempotency_key_reused")
    other_path = tiny_dataset(client, world, budget=1.0)
    before = snapshot(world.engine)
    response = client.post(f"/datasets/{other_path}/releases/marginals", headers=headers, json=release_body(name))
    assert_error(response, 422, "idempotency_key_reused")
    assert snapshot(world.engine) == before
    assert charges(world, name) == 1


def test_keys_are_per_api_key(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=1.0)
    _, second_steward = auth.create_key(world.engine, "steward", "second steward")
    for key in (world.keys["steward"], second_steward):
        response = client.post(f"/datasets/{name}/releases/marginals",
                               headers={**bearer(key), "Idempotency-Key": "shared"}, json=release_body(name))
        assert response.status_code == 201
    assert charges(world, name) == 2


def test_a_refused_request_frees_its_key(client: TestClient, world: World) -> None:
    """The accountant's refusal charges nothing, so the same key works once the budget allows."""
    name = tiny_dataset(client, world, budget=0.05)
    headers = {**steward(world), "Idempotency-Key": "after-refusal"}
    assert_error(client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name)),
                 409, "budget_exceeded")
    assert client.put(f"/datasets/{name}/budget", headers=steward(world), json={"epsilon": 1}).status_code == 200
    response = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
    assert response.status_code == 201 and "idempotent-replayed" not in response.headers
    assert charges(world, name) == 1


def test_a_failure_after_noise_is_replayed_not_recharged(
    client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = tiny_dataset(client, world, budget=1.0)
    original = direct.run_laplace

    def fails_after_noise(*args: object, **kwargs: object) -> None:
        original(*args, **kwargs)  # draws the noise
        raise RuntimeError("disk full")

    monkeypatch.setattr(direct, "run_laplace", fails_after_noise)
    headers = {**steward(world), "Idempotency-Key": "fails"}
    first = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
    assert_error(first, 500, "internal_error")
    monkeypatch.setattr(direct, "run_laplace", original)
    again = client.post(f"/datasets/{name}/releases/marginals", headers=headers, json=release_body(name))
    assert again.status_code == 500 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert charges(world, name) == 1
    assert [r.status for r in answers.list_releases(world.engine, name)] == ["failed_after_noise"]


def test_an_interrupted_claim_answers_request_interrupted(client: TestClient, world: World) -> None:
    name = tiny_dataset(client, world, budget=1.0)
    path = f"/datasets/{name}/releases/marginals"
    validated = MarginalReleaseIn(**release_body(name)).model_dump(mode="json")
    fingerprint = idempotency.request_hash("POST", path, validated)
    claimed = idempotency.claim(world.engine, world.key_ids["steward"], "crashed", fingerprint)
    assert isinstance(claimed, idempotency.Claim)
    headers = {**steward(world), "Idempotency-Key": "crashed"}
    assert_error(client.post(path, headers=headers, json=release_body(name)), 409, "idempotency_in_progress")
    assert idempotency.recover_interrupted_claims(world.engine) == 0  # its runner (this process) lives: untouched
    assert_error(client.post(path, headers=headers, json=release_body(name)), 409, "idempotency_in_progress")
    with world.engine.begin() as connection:  # the server that claimed it died
        connection.execute(IdempotencyRecord.__table__.update().where(
            IdempotencyRecord.__table__.c.id == claimed.record_id).values(**gone_runner_columns()))
    assert idempotency.recover_interrupted_claims(world.engine) == 1
    assert_error(client.post(path, headers=headers, json=release_body(name)), 409, "request_interrupted")
    assert charges(world, name) == 0


# the Python client --------------------------------------------------------------------------------
def api_client(world: World, role: str) -> Client:
    return Client("http://testserver", world.keys[role], http=TestClient(create_app(world.engine)))


def test_client_reads_and_answers(world: World) -> None:
    analyst = api_client(world, "analyst")
    assert "titanic" in [d["name"] for d in analyst.datasets()]
    assert analyst.domain("titanic")["Sex"] == {"size": 2, "kind": "categorical"}
    assert analyst.budget("titanic")["epsilon_total"] == 5.0
    with pytest.warns(ExtrapolationWarning):  # the release measured Sex and Pclass x Survived, not this pair
        table = analyst.marginal(world.release_id, ["Survived", "Sex"])
    answer = answers.answer_marginal(world.engine, world.release_id, ["Survived", "Sex"])
    assert list(table.columns) == ["Survived", "Sex", "count"] and len(table) == 3 * 2
    expected = np.asarray(answer["counts"])
    for row in table.itertuples(index=False):
        assert row.count == pytest.approx(expected[row.Survived, row.Sex])
    sample = analyst.synthetic(world.release_id, rows=3)
    assert sample.shape == (3, 9) and list(sample.columns) == list(analyst.domain("titanic"))
    assert analyst.release(world.release_id)["status"] == "complete"
    with pytest.raises(MarginaliaError) as refused:
        analyst.ledger("titanic")
    assert (refused.value.code, refused.value.status) == ("forbidden", 403)


def test_client_releases_and_reads_the_ledger(world: World) -> None:
    steward_client = api_client(world, "steward")
    name = f"client-{uuid.uuid4().hex[:8]}"
    steward_client.load_dataset(name, TINY["csv"], domain=TINY["domain"], categorical=["b"])
    steward_client.set_budget(name, 0.3)
    release = steward_client.release_marginals(name, "laplace", [["a"], ["a", "b"]], epsilon=0.2)
    assert release["cost"] == {"epsilon": 0.2, "delta": 0.0, "rho": 0.0}
    with pytest.raises(MarginaliaError) as refused:
        steward_client.release_marginals(name, "laplace", [["a"]], epsilon=0.2)
    assert refused.value.status == 409 and "remains" in refused.value.message
    ledger = api_client(world, "auditor").ledger(name)
    assert list(ledger["entry"]) == ["budget", "charge"]
    assert ledger.loc[1, "release_id"] == release["release_id"] and ledger.loc[1, "epsilon"] == 0.2


def test_client_fits_charge_once_then_reuse_for_free(world: World) -> None:
    steward_client, analyst = api_client(world, "steward"), api_client(world, "analyst")
    name = f"fit-{uuid.uuid4().hex[:8]}"
    frame = pd.read_csv(DATA / "titanic/titanic.csv")
    steward_client.load_dataset(name, frame.to_csv(index=False),
                                domain=json.loads((DATA / "titanic/titanic-domain.json").read_text()),
                                categorical=["Sex", "Embarked"])
    steward_client.set_budget(name, 2.0, 1e-6)
    fit = analyst.fit_linear(name, "Fare", ["Pclass", "Sex", "Age"], method="dd-ssp", epsilon=1.0, delta=1e-6)
    assert not fit.reused and fit.cost["rho"] > 0
    ledger = api_client(world, "auditor").ledger(name)
    assert list(ledger["entry"]) == ["budget", "charge"] and ledger.loc[1, "release_id"] == fit.release_id
    assert ledger.loc[1, "rho"] == pytest.approx(fit.cost["rho"])
    # The same question again, and a logistic one on the same release: answered for free.
    again = analyst.fit_linear(name, "Fare", ["Pclass", "Sex", "Age"], method="dd-ssp", epsilon=1.0, delta=1e-6)
    assert again.reused and again.release_id == fit.release_id and again.cost == {"epsilon": 0, "delta": 0, "rho": 0}
    np.testing.assert_allclose(again.coef_, fit.coef_)
    clf = analyst.fit_logistic(name, "Sex", ["Pclass", "Fare"], release=fit.release_id)
    assert clf.cost == {"epsilon": 0, "delta": 0, "rho": 0}
    assert len(api_client(world, "auditor").ledger(name)) == 2
    # Predictions from rows of codes and the encoded model on their encoding agree; probabilities are probabilities;
    # labels are the target's codes (titanic's domain labels none), not -1 / +1.
    rows = frame.head(20)
    proba = clf.predict_proba(rows)
    assert proba.shape == (20, 2) and np.allclose(proba.sum(axis=1), 1) and ((proba >= 0) & (proba <= 1)).all().all()
    np.testing.assert_allclose(clf.decision_function(rows),
                               clf.encoded_model_.decision_function(clf.design_.encode_features(rows)))
    assert set(np.unique(clf.predict(rows))) <= {0, 1} and list(clf.classes_) == [0, 1]
    assert fit.predict(rows).shape == (20,)


# keys on the command line -------------------------------------------------------------------------
def test_keys_commands(engine) -> None:  # noqa: ANN001 - conftest's engine; the CLI sees the same database
    from service.cli import app

    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--role", "steward", "--name", "ann", "--dataset", "adult",
                                  "--json"])
    assert created.exit_code == 0, created.output
    shown = json.loads(created.output)
    principal = auth.lookup_key(engine, shown["key"])
    assert principal is not None and principal.scope == ("adult",) and principal.role == "steward"
    listed = runner.invoke(app, ["keys", "list", "--json"])
    assert shown["key"] not in listed.output and auth.hash_key(shown["key"]) not in listed.output
    assert json.loads(listed.output)[0]["datasets"] == ["adult"]
    assert runner.invoke(app, ["keys", "revoke", str(shown["id"]), "--json"]).exit_code == 0
    assert auth.lookup_key(engine, shown["key"]) is None
    again = runner.invoke(app, ["keys", "revoke", str(shown["id"]), "--json"])
    assert again.exit_code == 2 and json.loads(again.output)["error"] == "already_revoked"
    bad = runner.invoke(app, ["keys", "create", "--role", "admin", "--name", "x", "--json"])
    assert bad.exit_code == 2 and json.loads(bad.output)["error"] == "invalid_parameter"


# the committed schema -----------------------------------------------------------------------------
def test_committed_openapi_schema_is_current() -> None:
    assert SCHEMA_FILE.read_text() == render(current_schema()), (
        "docs/openapi.json is out of date: run `.venv/bin/python -m service.api.openapi`")


def test_residual_release_through_the_api_answers_with_standard_errors(client: TestClient, world: World) -> None:
    """Issue 9: a steward's residual release (options.loss) through the API, then the analyst's client gets a
    measured marginal with a standard_error column equal to the service's answer; a bad loss is a 422."""
    name = tiny_dataset(client, world)
    assert client.put(f"/datasets/{name}/budget", headers=steward(world),
                      json={"epsilon": 5, "delta": 1e-5}).status_code == 200
    path = f"/datasets/{name}/releases/marginals"
    bad = {"mechanism": "residual", "workload": [["a", "b"]], "epsilon": 0.5, "delta": 1e-6,
           "options": {"loss": "l1"}}
    assert client.post(path, headers=steward(world), json=bad).status_code == 422
    assert charges(world, name) == 0
    release = api_client(world, "steward").release_marginals(name, "residual", [["a", "b"]], epsilon=0.5,
                                                            delta=1e-6, options={"loss": "max_var"})
    assert release["mechanism"] == "residual" and charges(world, name) == 1
    table = api_client(world, "analyst").marginal(release["release_id"], ["b", "a"])
    answer = answers.answer_marginal(world.engine, release["release_id"], ["b", "a"])
    assert list(table.columns) == ["b", "a", "count", "standard_error"]
    assert np.allclose(table["standard_error"], np.asarray(answer["standard_errors"]).ravel())
    assert np.all(table["standard_error"] > 0) and np.all(table["count"] >= 0)
