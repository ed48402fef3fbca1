"""Issue 18, finding 3 and the simulator's smaller items, in process: playing a stored dataset's rows through a campaign
is charged to that dataset's budget (checked and charged before any report is randomized, refunded if nothing was,
one ledger row naming the campaign); a seed marks the campaign seeded; a stop request ends a run at the next batch
with what was stored standing; a closed campaign is refused before anything happens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from service import interrupts
from service.accounting import accountant
from service.campaigns import campaigns, simulate, table_simulation
from service.errors import BudgetExceeded, Conflict, InvalidInput
from tests.support.datasets import titanic_with_budget

FARE = {"lower": 0, "upper": 10}


@pytest.fixture
def stop_requests() -> Iterator[None]:
    interrupts.clear()
    yield
    interrupts.clear()


def _count(engine, sql: str, **params: object) -> int:  # noqa: ANN001
    with engine.connect() as connection:
        return int(connection.execute(text(sql), params).scalar_one())


def _reports(engine, name: str) -> int:  # noqa: ANN001
    return _count(engine, "SELECT COUNT(*) FROM reports r JOIN campaigns c ON c.id = r.campaign_id WHERE c.name = :n",
                  n=name)


def _charges(engine) -> list[dict]:  # noqa: ANN001
    return [r for r in accountant.ledger_rows(engine, "titanic") if r["entry"] != "budget"]


def test_a_stored_table_is_charged_to_its_budget_with_a_ledger_row_naming_the_campaign(
        engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "5", "1e-6")
    info = campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 2, 0, FARE)
    outcome = table_simulation.simulate_table(engine, "fare", "titanic", rows=300)
    assert outcome.result.stored == 300 and outcome.result.participants == 300 and _reports(engine, "fare") == 300
    [charge] = _charges(engine)
    assert (charge["entry"], charge["mechanism"], charge["campaign_id"]) == ("charge", "campaign-simulation", info.id)
    assert (charge["epsilon"], charge["delta"], charge["rho"]) == (2.0, 0.0, 0.0)
    assert "campaign 'fare'" in charge["note"] and "8.7.7" in charge["note"]
    status = accountant.budget_status(engine, "titanic")
    assert float(status.epsilon_spent) == 2.0 and outcome.cost.epsilon == 2
    # an auditor's plain SQL: the charge row and the campaign it paid for
    assert _count(engine, "SELECT COUNT(*) FROM ledger_entries l JOIN campaigns c ON c.id = l.campaign_id "
                          "WHERE l.mechanism = 'campaign-simulation' AND c.name = 'fare'") == 1


def test_an_over_budget_simulation_is_refused_and_nothing_is_submitted(engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "3", "1e-6")
    campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 2, 0, FARE)
    table_simulation.simulate_table(engine, "fare", "titanic", rows=100)
    with pytest.raises(BudgetExceeded, match="epsilon=2"):
        table_simulation.simulate_table(engine, "fare", "titanic", rows=100)
    assert _reports(engine, "fare") == 100 and len(_charges(engine)) == 1
    assert _count(engine, "SELECT COUNT(*) FROM participants") == 100  # no pseudonym of the refused run either


def test_the_number_of_participants_is_stated_and_checked_before_any_charge(engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "5", "1e-6")
    campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 1, 0, FARE)
    with pytest.raises(InvalidInput, match="--rows N"):
        table_simulation.simulate_table(engine, "fare", "titanic", rows=None)
    with pytest.raises(InvalidInput, match="fewer than the 100,000 rows"):
        table_simulation.simulate_table(engine, "fare", "titanic", rows=100_000)
    with pytest.raises(InvalidInput, match="no column 'Wealth'"):
        table_simulation.simulate_table(engine, "fare", "titanic", rows=10, features=["Wealth"])
    assert _charges(engine) == [] and _reports(engine, "fare") == 0


def test_rows_are_drawn_at_random_and_a_seed_reproduces_the_draw(engine, data_dir: Path) -> None:  # noqa: ANN001
    titanic_with_budget(engine, data_dir, "5", "1e-6")
    info = campaigns.get_campaign(engine, campaigns.create_campaign(
        engine, "age", "ldp-avg", ["Fare"], None, None, 1, 0, FARE).name)
    first = table_simulation.sample_rows(engine, info, "titanic", None, 200, seed=5)[0]
    again = table_simulation.sample_rows(engine, info, "titanic", None, 200, seed=5)[0]
    other = table_simulation.sample_rows(engine, info, "titanic", None, 200)[0]
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    everything = table_simulation.sample_rows(engine, info, "titanic", None, 887, seed=1)[0]
    assert len(np.unique(everything)) > 1 and not np.all(np.diff(everything[:, 0]) >= 0)  # not the stored order


def test_a_run_that_randomized_nothing_is_refunded(engine, data_dir: Path, monkeypatch) -> None:  # noqa: ANN001
    """A steward closes the campaign between the charge and the first batch: nothing was randomized, so the charge
    is refunded, as a release that fails before any noise is."""
    titanic_with_budget(engine, data_dir, "5", "1e-6")
    campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 2, 0, FARE)
    charge = table_simulation.accountant.charge_simulation

    def charge_then_close(*args, **kwargs) -> int:  # noqa: ANN002, ANN003
        entry = charge(*args, **kwargs)
        campaigns.close_campaign(engine, "fare")
        return entry

    monkeypatch.setattr(table_simulation.accountant, "charge_simulation", charge_then_close)
    with pytest.raises(Conflict, match="is closed") as refused:
        table_simulation.simulate_table(engine, "fare", "titanic", rows=50)
    assert "was refunded" in " ".join(refused.value.__notes__)
    assert [r["entry"] for r in _charges(engine)] == ["charge", "refund"]
    assert float(accountant.budget_status(engine, "titanic").epsilon_spent) == 0 and _reports(engine, "fare") == 0


def test_a_stop_request_ends_a_table_run_at_the_next_batch_and_its_charge_stands(
        engine, data_dir: Path, stop_requests: None) -> None:  # noqa: ANN001, ARG001
    titanic_with_budget(engine, data_dir, "5", "1e-6")
    campaigns.create_campaign(engine, "fare", "ldp-avg", ["Fare"], None, None, 2, 0, FARE)
    seen = []

    def ctrl_c(done: int, total: int) -> None:
        seen.append(done)
        interrupts.request()  # what the command line's SIGINT handler does

    with pytest.raises(interrupts.Interrupted) as stopped:
        table_simulation.simulate_table(engine, "fare", "titanic", rows=500, batch=100, progress=ctrl_c)
    assert seen == [100] and _reports(engine, "fare") == 100
    message = stopped.value.message
    assert "100 simulated reports were stored in campaign 'fare'" in message and "stand" in message
    assert "400 were never randomized" in message and "(ledger entry" in message and "stands" in message
    assert [r["entry"] for r in _charges(engine)] == ["charge"]


def test_a_progress_callback_raising_keyboard_interrupt_stops_the_run(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0, {"lower": 0, "upper": 1})

    def ctrl_c(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as stopped:
        simulate.simulate(engine, "avg", np.full((1000, 1), 0.5), batch=250, progress=ctrl_c)
    assert _reports(engine, "avg") == 250
    assert stopped.value.simulation.total == 250
    assert "250 simulated reports were stored in campaign 'avg' (round 0: 250) and stand" in stopped.value.__notes__


def test_a_closed_campaign_is_refused_before_anything_and_counts_are_what_was_stored(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0,
                              {"lower": 0, "upper": 1, "participants": 30})
    result = simulate.simulate(engine, "avg", np.full((50, 1), 0.5))  # the round closes at its planned 30
    assert (result.stored, result.participants, result.rows) == (30, 30, 50) and _reports(engine, "avg") == 30
    assert "30 reports from 30 simulated participants" in result.describe() and "20 of the 50 rows" in \
        result.describe()
    with pytest.raises(Conflict, match="campaign 'avg' is closed .*nothing was simulated") as refused:
        simulate.simulate(engine, "avg", np.full((10, 1), 0.5), seed=1)
    assert refused.value.code == "campaign_closed" and _reports(engine, "avg") == 30
    assert campaigns.get_campaign(engine, "avg").seeded is False  # refused before it was marked


def test_a_seeded_simulation_marks_its_campaign(engine) -> None:  # noqa: ANN001
    campaigns.create_campaign(engine, "avg", "ldp-avg", ["v"], None, None, 1, 0, {"lower": 0, "upper": 1})
    simulate.simulate(engine, "avg", np.full((10, 1), 0.5))
    assert campaigns.get_campaign(engine, "avg").seeded is False
    simulate.simulate(engine, "avg", np.full((10, 1), 0.5), seed=7)
    info = campaigns.get_campaign(engine, "avg")
    assert info.seeded is True and info.to_json()["seeded"] is True
    with pytest.raises(Conflict, match="seeded simulation") as refused:
        info.refuse_if_seeded()
    assert refused.value.code == "seeded_campaign"
