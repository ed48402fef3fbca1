"""Gateway keys are bound to the campaigns a steward names, with quotas per campaign and per round (issue 18, 7):
a batch outside the scope is 403, one past a quota is refused whole with nothing stored, and concurrent batches never
pass a quota, on SQLite and PostgreSQL; the steward's commands set, show and remove scopes."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from db.engine import make_engine
from service.campaigns import campaigns, gateways
from service.campaigns.submission import Submitter, submit_reports
from service.cli import app
from service.client.device import make_report
from service.errors import InvalidInput, NotFound, ServiceError
from tests.support.collections_rows import make_key

INVENTED = [f"invented-{i}" for i in range(1000)]


def _planned_for_1000(engine, name: str = "avg") -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, name, "ldp-avg", "v", None, None, 1, 0,
                              {"lower": 0, "upper": 1, "participants": 1000})


def _counts(engine) -> dict[str, object]:  # noqa: ANN001
    """What campaign 'avg' and the tables around it hold."""
    with engine.connect() as connection:
        tables = {t: connection.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                  for t in ("reports", "participants", "gateway_usage")}
        round_row = connection.execute(text(
            "SELECT r.status, r.report_count, r.aggregate_json, c.status FROM campaign_rounds r JOIN campaigns c ON "
            "c.id = r.campaign_id WHERE c.name = 'avg' AND r.round_index = 0")).one()
    return {**tables, "round": tuple(round_row)}


NOTHING = {"reports": 0, "participants": 0, "gateway_usage": 0, "round": ("open", 0, None, "open")}


def test_an_unscoped_gateway_cannot_fill_a_campaign_with_invented_pseudonyms(engine) -> None:  # noqa: ANN001
    """The audit's attack: one batch of 1,000 invented pseudonyms filled and closed a campaign planned for 1,000."""
    _planned_for_1000(engine)
    gateway = make_key(engine, "gateway", "g")
    with pytest.raises(ServiceError, match=f"gateway key {gateway} may not submit to campaign 'avg'") as refused:
        submit_reports(engine, "avg", 0, {"value": np.full(1000, 0.875)}, Submitter.gateway(gateway), INVENTED)
    assert (refused.value.status, refused.value.code) == (403, "campaign_out_of_scope")
    assert _counts(engine) == NOTHING


def test_a_batch_past_the_quota_is_refused_whole(engine) -> None:  # noqa: ANN001
    _planned_for_1000(engine)
    _planned_for_1000(engine, "other")
    gateway = make_key(engine, "gateway", "g")
    gateways.set_scope(engine, gateway, "avg", 100)
    with pytest.raises(ServiceError, match="quota of 100 reports in campaign 'avg' \\(0 accepted so far\\)") as over:
        submit_reports(engine, "avg", 0, {"value": np.full(1000, 0.875)}, Submitter.gateway(gateway), INVENTED)
    assert (over.value.status, over.value.code) == (409, "gateway_quota_exceeded")
    assert _counts(engine) == NOTHING
    result = submit_reports(engine, "avg", 0, {"value": np.full(100, 0.5)}, Submitter.gateway(gateway), INVENTED[:100])
    assert (result.accepted, result.round_status) == (100, "open")
    with pytest.raises(ServiceError, match="\\(100 accepted so far\\)"):
        submit_reports(engine, "avg", 0, {"value": [0.5]}, Submitter.gateway(gateway), ["one more"])
    with pytest.raises(ServiceError, match="may not submit to campaign 'other'"):  # scoped to 'avg' only
        submit_reports(engine, "other", 0, {"value": [0.5]}, Submitter.gateway(gateway), ["x"])
    counts = _counts(engine)
    assert (counts["reports"], counts["participants"], counts["round"][:2]) == (100, 100, ("open", 100))
    [shown] = gateways.list_scopes(engine, gateway)
    assert shown.to_json() == {"key_id": gateway, "campaign": "avg", "reports": 100, "per_round": None, "used": 100,
                               "used_per_round": {"0": 100}}
    gateways.set_scope(engine, gateway, "avg", 150)  # a steward raises it: 50 more
    submit_reports(engine, "avg", 0, {"value": np.full(50, 0.5)}, Submitter.gateway(gateway), INVENTED[100:150])
    gateways.remove_scope(engine, gateway, "avg")
    with pytest.raises(ServiceError, match="may not submit"):
        submit_reports(engine, "avg", 0, {"value": [0.5]}, Submitter.gateway(gateway), ["late"])
    assert _counts(engine)["reports"] == 150


def test_quotas_per_round_and_per_campaign_across_rounds(engine) -> None:  # noqa: ANN001
    """Alg. 5 in two groups of 50: 50 a round at most, 80 over the campaign."""
    campaigns.create_campaign(engine, "alg5", "stein-glm-2round", "a,b", "y", None, 8, 1e-5,
                              {"norm_bound": 4, "layout": "split-groups", "first_size": 50, "second_size": 50})
    gateway = make_key(engine, "gateway", "g")
    gateways.set_scope(engine, gateway, "alg5", 80, per_round=50)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 2))
    y = (rng.random(100) < 1 / (1 + np.exp(-x @ np.array([1.0, -1.0])))).astype(float)

    def send(lo: int, hi: int) -> object:
        state = campaigns.public_state(campaigns.get_campaign(engine, "alg5"))
        index, fields = make_report(state, x[lo:hi], y[lo:hi], rng)
        names = [f"p{i}" for i in range(lo, hi)]
        return submit_reports(engine, "alg5", index, fields, Submitter.gateway(gateway), names)

    with pytest.raises(ServiceError, match="quota of 50 reports per round in round 0 of campaign 'alg5'") as over:
        send(0, 51)
    assert over.value.code == "gateway_quota_exceeded"
    assert send(0, 50).round_status == "closed"  # the group's 50 reported: round 1 opens
    with pytest.raises(ServiceError, match="quota of 80 reports in campaign 'alg5' \\(50 accepted so far\\)"):
        send(50, 90)
    assert send(50, 80).accepted == 30
    assert gateways.list_scopes(engine)[0].used_per_round == {0: 50, 1: 30}


def test_concurrent_batches_never_pass_the_quota(engine, database_url: str) -> None:  # noqa: ANN001
    """Eight batches of 10 at once, each on its own connection, under a quota of 25: exactly two are stored."""
    _planned_for_1000(engine)
    gateway = make_key(engine, "gateway", "g")
    gateways.set_scope(engine, gateway, "avg", 25)
    barrier, outcomes = threading.Barrier(8), []

    def writer(i: int) -> None:
        own = make_engine(database_url)
        barrier.wait()
        try:
            submit_reports(own, "avg", 0, {"value": np.full(10, 0.5)}, Submitter.gateway(gateway),
                           [f"w{i}-{k}" for k in range(10)])
            outcomes.append("ok")
        except ServiceError as error:
            outcomes.append(error.code)
        except Exception as error:  # noqa: BLE001
            outcomes.append(f"error: {type(error).__name__}: {error}")
        finally:
            own.dispose()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["gateway_quota_exceeded"] * 6 + ["ok"] * 2, outcomes
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM reports WHERE submitted_by = :k"),
                                  {"k": gateway}).scalar_one() == 20
    assert gateways.list_scopes(engine, gateway)[0].used == 20


def test_a_steward_sets_scopes_naming_what_is_wrong(engine) -> None:  # noqa: ANN001
    _planned_for_1000(engine)
    gateway, analyst = make_key(engine, "gateway", "g"), make_key(engine, "analyst", "a")
    for reports, per_round, fragment in [(0, None, "reports must be an integer"), (True, None, "reports"),
                                         (1.5, None, "reports"), (10, 0, "per_round must be an integer")]:
        with pytest.raises(InvalidInput, match=fragment):
            gateways.set_scope(engine, gateway, "avg", reports, per_round)
    with pytest.raises(NotFound, match=f"no gateway key with id {analyst}"):
        gateways.set_scope(engine, analyst, "avg", 10)
    with pytest.raises(NotFound, match="no campaign named 'nope'"):
        gateways.set_scope(engine, gateway, "nope", 10)
    with pytest.raises(NotFound, match="has no scope on campaign 'avg'"):
        gateways.remove_scope(engine, gateway, "avg")
    assert gateways.list_scopes(engine) == []


def test_the_scope_commands(engine) -> None:  # noqa: ANN001
    _planned_for_1000(engine)
    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--role", "gateway", "--name", "relay", "--json"])
    key_id = json.loads(created.output)["id"]
    scoped = runner.invoke(app, ["keys", "scope", str(key_id), "--campaign", "avg", "--reports", "500",
                                 "--per-round", "200", "--json"])
    assert scoped.exit_code == 0, scoped.output
    assert json.loads(scoped.output) == {"key_id": key_id, "campaign": "avg", "reports": 500, "per_round": 200,
                                         "used": 0, "used_per_round": {}}
    listed = runner.invoke(app, ["keys", "scopes", "--json"])
    assert [s["campaign"] for s in json.loads(listed.output)] == ["avg"]
    bad = runner.invoke(app, ["keys", "scope", str(key_id), "--campaign", "avg", "--reports", "0", "--json"])
    assert bad.exit_code == 2 and "reports must be an integer" in json.loads(bad.output)["message"]
    removed = runner.invoke(app, ["keys", "unscope", str(key_id), "--campaign", "avg"])
    assert removed.exit_code == 0 and "may no longer submit to campaign avg" in removed.output
    assert json.loads(runner.invoke(app, ["keys", "scopes", str(key_id), "--json"]).output) == []
