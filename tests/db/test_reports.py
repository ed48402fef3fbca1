"""The local ledger's check-and-append (db/reports.py): every refusal names the report and stores nothing, the cap
holds under concurrent submissions, and pseudonyms map to one participant per namespace, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import Engine, text

from db.engine import make_engine, serialized_transaction, transaction
from db.models import LocalCapDefault, Participant
from db.reports import (
    ReportRefused,
    append_reports,
    key_participant,
    lock_reports,
    lock_round,
    participant_ids,
    read_payloads,
    spent_units,
)
from tests.support.collections_rows import UNIT, make_campaign, make_key


def submit(engine: Engine, campaign: int, round_index: int, pseudonyms: list[str], payloads: object = None,
           namespace: str = "test") -> None:
    values = np.arange(len(pseudonyms) * 2, dtype=float).reshape(-1, 2) if payloads is None else payloads
    with serialized_transaction(engine) as session:
        lock_reports(session)
        round_row = lock_round(session, campaign, round_index)
        ids = participant_ids(session, namespace, pseudonyms)
        append_reports(session, round_row, ids, values)


def count(engine: Engine, table: str = "reports") -> int:
    with engine.connect() as connection:
        return int(connection.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def test_a_batch_is_stored_counted_and_read_back(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0)])
    payloads = np.array([[1.5, -2.0], [3.0, 1e-300], [0.0, 7.0]])
    submit(engine, campaign, 0, ["a", "b", "c"], payloads)
    with transaction(engine) as session:
        assert read_payloads(session, campaign, 0, 2).tolist() == payloads.tolist()
        assert lock_round(session, campaign, 0).report_count == 3
        ids = participant_ids(session, "test", ["c", "a"], create=False)
        assert spent_units(session, ids)[0].tolist() == [UNIT, UNIT]


@pytest.mark.parametrize("pseudonyms, reason, index", [
    (["x", "y", "x"], "duplicate_in_batch", 2),
    (["x", "a"], "already_reported", 1),
])
def test_refusals_name_the_report_and_store_nothing(engine, pseudonyms, reason, index) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0)])
    submit(engine, campaign, 0, ["a"])
    with pytest.raises(ReportRefused, match=f"report {index}:") as refused:
        submit(engine, campaign, 0, pseudonyms)
    assert (refused.value.reason, refused.value.index, refused.value.field) == (reason, index, "participant")
    assert count(engine) == 1 and count(engine, "participants") == 1  # the batch's new pseudonyms rolled back too


def test_closed_and_pending_rounds_accept_nothing(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0), ("all", 1.0, 0.0)])
    with pytest.raises(ReportRefused, match="round 1 of campaign .* is pending") as refused:
        submit(engine, campaign, 1, ["a"])
    assert refused.value.reason == "round_not_open" and refused.value.field == "round"
    with engine.begin() as connection:
        connection.execute(text("UPDATE campaign_rounds SET status = 'closed' WHERE round_index = 0"))
    with pytest.raises(ReportRefused, match="is closed"):
        submit(engine, campaign, 0, ["a"])
    assert count(engine) == 0


def test_a_participant_belongs_to_one_group(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("first", 1.0, 0.0), ("second", 1.0, 0.0)])
    submit(engine, campaign, 0, ["a", "b"])
    with engine.begin() as connection:
        connection.execute(text("UPDATE campaign_rounds SET status = 'closed' WHERE round_index = 0"))
        connection.execute(text("UPDATE campaign_rounds SET status = 'open', state_json = '{}' WHERE round_index = 1"))
    with pytest.raises(ReportRefused, match="report 1: .*another group") as refused:
        submit(engine, campaign, 1, ["c", "b"])
    assert refused.value.reason == "other_group"
    submit(engine, campaign, 1, ["c", "d"])
    assert count(engine) == 4


def test_the_cap_counts_every_campaign_and_honours_overrides(engine) -> None:  # noqa: ANN001
    with transaction(engine) as session:
        session.get(LocalCapDefault, 1).epsilon_units = 3 * UNIT
    campaigns = [make_campaign(engine, f"c{i}", [("all", 1.0, 0.0)]) for i in range(4)]
    for campaign in campaigns[:3]:
        submit(engine, campaign, 0, ["a", "b"])
    spent = r"report 1: its participant has spent epsilon 3, delta 0 of her cap \(epsilon 3,"
    with pytest.raises(ReportRefused, match=spent) as refused:
        submit(engine, campaigns[3], 0, ["new", "a"])
    assert refused.value.reason == "cap_exceeded" and count(engine) == 6
    with transaction(engine) as session:  # a steward raises b's cap
        session.query(Participant).filter_by(pseudonym="b").one().cap_epsilon_units = 4 * UNIT
    submit(engine, campaigns[3], 0, ["new", "b"])
    assert count(engine) == 8


def test_the_delta_cap_is_checked_too(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 2e-4)])  # the default delta cap is 1e-4
    with pytest.raises(ReportRefused, match="delta 0.0002 more"):
        submit(engine, campaign, 0, ["a"])


def test_payloads_must_match_the_participants(engine) -> None:  # noqa: ANN001
    campaign = make_campaign(engine, "c", [("all", 1.0, 0.0)])
    with pytest.raises(ReportRefused, match="one participant per report") as refused:
        submit(engine, campaign, 0, ["a", "b"], np.zeros((3, 2)))
    assert refused.value.reason == "bad_batch"
    with pytest.raises(ReportRefused, match="report 1: a pseudonym must have 1 to 200 characters"):
        submit(engine, campaign, 0, ["a", ""])
    assert count(engine) == 0


def test_pseudonyms_are_per_namespace_and_keys_are_participants(engine) -> None:  # noqa: ANN001
    key = make_key(engine, "participant", "p")
    with transaction(engine) as session:
        first = participant_ids(session, "gateway:1", ["a", "b", "a"])
        again = participant_ids(session, "gateway:1", ["b"])
        other = participant_ids(session, "gateway:2", ["a"])
        assert participant_ids(session, "gateway:3", ["zz"], create=False).tolist() == [-1]
        mine = key_participant(session, key)
        assert key_participant(session, key) == mine
    assert first[0] == first[2] and again[0] == first[1] and other[0] not in first and mine not in (*first, *other)


@pytest.mark.slow
def test_concurrent_submissions_never_pass_the_cap(engine, database_url: str) -> None:  # noqa: ANN001
    """Twelve writers, each on its own connection, submit one report of epsilon 1 for the same participant to twelve
    campaigns at once; her cap is 5, so exactly five are stored (without the lock both backends let more through)."""
    with transaction(engine) as session:
        session.get(LocalCapDefault, 1).epsilon_units = 5 * UNIT
    campaigns = [make_campaign(engine, f"c{i}", [("all", 1.0, 0.0)]) for i in range(12)]
    barrier, outcomes = threading.Barrier(len(campaigns)), []

    def writer(campaign: int) -> None:
        own = make_engine(database_url)
        barrier.wait()
        try:
            submit(own, campaign, 0, ["alice"])
            outcomes.append("ok")
        except ReportRefused as refused:
            outcomes.append(refused.reason)
        except Exception as error:  # noqa: BLE001
            outcomes.append(f"error: {type(error).__name__}: {error}")
        finally:
            own.dispose()

    threads = [threading.Thread(target=writer, args=(c,)) for c in campaigns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["cap_exceeded"] * 7 + ["ok"] * 5, outcomes
    with engine.connect() as connection:
        spent = connection.execute(text("SELECT epsilon_units FROM participant_local_spend WHERE pseudonym = 'alice'"))
        assert int(spent.scalar_one()) == 5 * UNIT
