"""Submission: validated reports stored with their running sums in one transaction; every refusal names the field
or report and leaves nothing; rounds close on their group's size and open the next with its state."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from sqlalchemy import text

from db.engine import transaction
from db.reports import read_payloads
from service.campaigns import campaigns, gateways
from service.campaigns.submission import Submitter, submit_reports
from service.client.device import make_report
from service.errors import ServiceError
from tests.support.collections_rows import make_key


def _avg(engine, participants: int | None = None) -> campaigns.CampaignInfo:  # noqa: ANN001
    options = {"lower": 0, "upper": 10, **({"participants": participants} if participants else {})}
    return campaigns.create_campaign(engine, "avg", "ldp-avg", "v", None, None, 1, 0, options)


def _stored(engine) -> int:  # noqa: ANN001
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT COUNT(*) FROM reports")).scalar_one())


def _aggregate(engine, round_index: int = 0) -> dict:  # noqa: ANN001
    with engine.connect() as connection:
        raw = connection.execute(text("SELECT aggregate_json FROM campaign_rounds WHERE round_index = :r"),
                                 {"r": round_index}).scalar_one()
    return json.loads(raw)


def test_participant_keys_report_once_and_the_sums_follow(engine) -> None:  # noqa: ANN001
    info = _avg(engine)
    keys = [make_key(engine, "participant", f"p{i}") for i in range(3)]
    values = [1.0, 2.5, -4.0]
    for key, value in zip(keys, values, strict=True):
        result = submit_reports(engine, "avg", 0, {"value": [value]}, Submitter.participant(key))
        assert result.accepted == 1 and result.round_status == "open"
    with pytest.raises(ServiceError, match=r"report 0: its participant has already reported") as refused:
        submit_reports(engine, "avg", 0, {"value": [5.0]}, Submitter.participant(keys[0]))
    assert (refused.value.code, refused.value.status) == ("already_reported", 409)
    aggregate = _aggregate(engine)
    assert aggregate["count"] == 3 and aggregate["sums"]["value"] == sum(values)
    with transaction(engine) as session:
        assert sorted(read_payloads(session, info.id, 0, 1)[:, 0]) == sorted(values)


@pytest.mark.parametrize("fields, fragment, code", [
    ({"value": [1.0, 1e9]},
     r"report 1: field 'value' has 1000000000.0, outside its allowed range \[-214.168, 224.168\]", "invalid_report"),
    ({"value": [1.0, float("nan")]}, "report 1: field 'value' has a value that is not a finite number",
     "invalid_report"),
    ({"value": [[1.0, 2.0]]}, r"field 'value' must have shape \(k, \)", "invalid_report"),
    ({"valeur": [1.0, 2.0]}, "field 'value' is missing", "invalid_report"),
    ({"value": [1.0, 2.0], "extra": [1, 2]}, "unknown field 'extra'", "invalid_report"),
])
def test_malformed_batches_store_nothing(engine, fields: dict, fragment: str, code: str) -> None:  # noqa: ANN001
    _avg(engine)
    with pytest.raises(ServiceError, match=fragment) as refused:
        submit_reports(engine, "avg", 0, fields, Submitter.simulator("t"), ["a", "b"])
    assert refused.value.code == code and _stored(engine) == 0
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM participants")).scalar_one() == 0
        assert connection.execute(text("SELECT aggregate_json FROM campaign_rounds")).scalar_one() is None


def test_gateway_batches_need_a_pseudonym_per_report_and_a_refusal_keeps_the_sums(engine) -> None:  # noqa: ANN001
    _avg(engine)
    gateway = make_key(engine, "gateway", "g")
    gateways.set_scope(engine, gateway, "avg", 100)
    submit_reports(engine, "avg", 0, {"value": [1.0, 2.0, 3.0]}, Submitter.gateway(gateway), ["a", "b", "c"])
    before = _aggregate(engine)
    with pytest.raises(ServiceError, match="report 1: its participant has already reported"):
        submit_reports(engine, "avg", 0, {"value": [4.0, 5.0]}, Submitter.gateway(gateway), ["d", "b"])
    with pytest.raises(ServiceError, match="report 1: names a participant an earlier report of the batch names"):
        submit_reports(engine, "avg", 0, {"value": [4.0, 5.0]}, Submitter.gateway(gateway), ["d", "d"])
    with pytest.raises(ServiceError, match="needs 2 pseudonyms"):
        submit_reports(engine, "avg", 0, {"value": [4.0, 5.0]}, Submitter.gateway(gateway), ["d"])
    assert _aggregate(engine) == before and _stored(engine) == 3
    other = make_key(engine, "gateway", "h")  # another gateway's "b" is another participant
    gateways.set_scope(engine, other, "avg", 100)
    submit_reports(engine, "avg", 0, {"value": [4.0]}, Submitter.gateway(other), ["b"])
    assert _stored(engine) == 4


def test_closed_rounds_and_campaigns_accept_nothing(engine) -> None:  # noqa: ANN001
    _avg(engine)
    campaigns.close_campaign(engine, "avg")
    with pytest.raises(ServiceError, match="campaign 'avg' is closed: it accepts no reports") as refused:
        submit_reports(engine, "avg", 0, {"value": [1.0]}, Submitter.simulator("t"), ["a"])
    assert refused.value.code == "round_closed" and _stored(engine) == 0
    with pytest.raises(ServiceError, match=r"round must be an integer in \[0, 0\]"):
        submit_reports(engine, "avg", 1, {"value": [1.0]}, Submitter.simulator("t"), ["a"])


def test_the_cap_refuses_a_participant_past_it(engine) -> None:  # noqa: ANN001
    with engine.begin() as connection:
        connection.execute(text("UPDATE local_cap_default SET epsilon_units = 1500000000000"))  # epsilon 1.5
    for name in ("one", "two"):
        campaigns.create_campaign(engine, name, "ldp-avg", "v", None, None, 1, 0, {"lower": 0, "upper": 1})
    key = make_key(engine, "participant", "p")
    submit_reports(engine, "one", 0, {"value": [0.5]}, Submitter.participant(key))
    with pytest.raises(ServiceError, match="has spent epsilon 1, delta 0 of her cap") as refused:
        submit_reports(engine, "two", 0, {"value": [0.5]}, Submitter.participant(key))
    assert (refused.value.code, refused.value.status) == ("local_cap_exceeded", 409) and _stored(engine) == 1


def test_a_round_closes_at_its_group_size_and_the_next_opens_with_its_state(engine) -> None:  # noqa: ANN001
    """Alg. 5 in two groups of 2000: round 1 opens with round 0's OLS estimate once round 0's group has reported;
    a participant of the first group cannot report in the second round."""
    campaigns.create_campaign(engine, "alg5", "stein-glm-2round", "a,b", "y", None, 8, 1e-5,
                              {"norm_bound": 4, "layout": "split-groups", "first_size": 2000, "second_size": 2000})
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 2))
    y = (rng.random(4000) < 1 / (1 + np.exp(-x @ np.array([1.0, -1.0])))).astype(float)
    state = campaigns.public_state(campaigns.get_campaign(engine, "alg5"))
    index, fields = make_report(state, x[:1000], y[:1000], rng)
    result = submit_reports(engine, "alg5", index, fields, Submitter.simulator("t"), [str(i) for i in range(1000)])
    assert (result.round_status, result.round_reports) == ("open", 1000)
    index, fields = make_report(state, x[1000:2000], y[1000:2000], rng)
    result = submit_reports(engine, "alg5", index, fields, Submitter.simulator("t"),
                            [str(i) for i in range(1000, 2000)])
    assert (result.round_status, result.campaign_status) == ("closed", "open")
    info = campaigns.get_campaign(engine, "alg5")
    assert [r.status for r in info.rounds] == ["closed", "open"]
    published = info.rounds[1].state["values"]
    assert len(published["coef"]) == 2 and published["bound"] > 0
    state = campaigns.public_state(info)
    index, fields = make_report(state, x[2000:], y[2000:], rng)
    with pytest.raises(ServiceError, match="report 0: its participant reported in a round of another group"):
        submit_reports(engine, "alg5", index, {k: v[:1] for k, v in fields.items()}, Submitter.simulator("t"), ["0"])
    with pytest.raises(ServiceError, match="round 0 of campaign 'alg5' is closed"):
        submit_reports(engine, "alg5", 0, {"xx": np.zeros((1, 3)), "xy": np.zeros((1, 2))}, Submitter.simulator("t"),
                       ["new"])
    result = submit_reports(engine, "alg5", index, fields, Submitter.simulator("t"),
                            [str(i) for i in range(2000, 4000)])
    assert (result.round_status, result.campaign_status) == ("closed", "closed")


@pytest.mark.slow
def test_closing_under_concurrent_submissions_loses_nothing(engine, database_url: str) -> None:  # noqa: ANN001
    """Eight writers submit batches while a steward closes the round twice: every stored report is counted in the
    round's aggregate, and none arrives after the close."""
    from db.engine import make_engine

    _avg(engine)
    barrier, outcomes = threading.Barrier(9), []

    def writer(i: int) -> None:
        own = make_engine(database_url)
        barrier.wait()
        try:
            submit_reports(own, "avg", 0, {"value": np.full(50, float(i))}, Submitter.simulator(f"w{i}"),
                           [str(k) for k in range(50)])
            outcomes.append("ok")
        except ServiceError as error:
            outcomes.append(error.code)
        finally:
            own.dispose()

    def closer() -> None:
        own = make_engine(database_url)
        barrier.wait()
        campaigns.close_round(own, "avg", 0)
        campaigns.close_round(own, "avg", 0)
        own.dispose()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)] + [threading.Thread(target=closer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert set(outcomes) <= {"ok", "round_closed"} and len(outcomes) == 8
    info = campaigns.get_campaign(engine, "avg")
    assert info.status == "closed" and info.rounds[0].reports == _stored(engine) == 50 * outcomes.count("ok")
    if _stored(engine):
        assert _aggregate(engine)["count"] == _stored(engine)
