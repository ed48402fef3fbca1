"""The accountant charges exactly, refuses overspending, and the SQL views agree with it."""

from __future__ import annotations

import json
import multiprocessing
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from service import accountant, datasets, releases, zcdp
from service.cost import PrivacyCost
from service.errors import BudgetExceeded, InvalidInput, ServiceError
from tests.charging_child import charge_once


@pytest.fixture
def tiny(engine, tmp_path: Path):  # noqa: ANN001, ANN201
    csv = tmp_path / "tiny.csv"
    csv.write_text("a,b\n" + "\n".join(f"{i % 3},{i % 2}" for i in range(60)) + "\n")
    domain = tmp_path / "tiny.json"
    domain.write_text(json.dumps({"a": 3, "b": 2}))
    datasets.load_coded_csv(engine, "tiny", csv, domain)
    return datasets.get_dataset(engine, "tiny")


def _charge(engine, dataset, cost: PrivacyCost) -> int:  # noqa: ANN001
    release_id, _ = accountant.reserve_release(engine, dataset.name, "marginals", "test", cost, {}, "tester")
    return release_id


def test_ten_charges_of_a_tenth_exhaust_one_exactly(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "1", "1e-6")
    for _ in range(10):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10)))
    status = accountant.budget_status(engine, "tiny")
    assert status.epsilon_spent == 1 and status.epsilon_remaining == 0
    with pytest.raises(BudgetExceeded, match="remains"):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10)))
    # The refused request left no release and no charge behind.
    with engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 10
        assert connection.execute(text("SELECT COUNT(*) FROM ledger_entries WHERE entry = 'charge'")).scalar_one() == 10


def test_float_input_is_read_as_its_decimal(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", 1.0, 0)
    for _ in range(10):
        _charge(engine, tiny, PrivacyCost(epsilon=0.1))
    assert accountant.budget_status(engine, "tiny").epsilon_remaining == 0


def test_views_recompute_every_figure(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "2", "1e-5")
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(3, 10)))
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 100)))
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 200)))
    status = accountant.budget_status(engine, "tiny")
    with engine.connect() as connection:
        view = connection.execute(text("SELECT * FROM budget_remaining WHERE dataset = 'tiny'")).mappings().one()
        sums = connection.execute(text(
            "SELECT SUM(epsilon_units), SUM(delta_units), SUM(rho_units) FROM privacy_ledger WHERE dataset = 'tiny'"
        )).one()
    assert int(view["epsilon_pure_spent_units"]) == int(sums[0]) == 3 * 10**11
    assert int(view["rho_spent_units"]) == int(sums[2]) == 15 * 10**9
    assert Fraction(int(view["epsilon_spent_units"]), 10**12) == status.epsilon_spent
    assert Fraction(int(view["epsilon_remaining_units"]), 10**12) == status.epsilon_remaining
    # The composed epsilon is what the documented rule gives: the anchor is fixed by the first rho
    # charge from the sums before it (E=0.3, D=0), then epsilon spent = E + alpha R + t.
    anchor = zcdp.zcdp_anchor(Fraction(2), Fraction(1, 10**5), Fraction(3, 10), Fraction(0))
    expected = zcdp.epsilon_spent(Fraction(3, 10), Fraction(0), Fraction(15, 1000), Fraction(1, 10**5), anchor)
    assert 0 <= status.epsilon_spent - Fraction(expected) <= Fraction(1, 10**12)
    # An auditor recomputes it from the SQL sums and the anchor columns in integer units.
    alpha_u, offset_u = int(view["anchor_alpha_units"]), int(view["anchor_offset_units"])
    assert Fraction(alpha_u, 10**9) == anchor.alpha
    recomputed = int(sums[0]) + -(-alpha_u * int(sums[2]) // 10**9) + offset_u
    assert abs(recomputed - int(view["epsilon_spent_units"])) <= 1


def test_rule_is_exactly_as_tight_as_cks_for_zcdp_only(engine, tiny) -> None:  # noqa: ANN001
    # With only rho charges, the anchored rule admits exactly cdp_rho(eps_B, delta_B) in all.
    accountant.set_budget(engine, "tiny", "1", "1e-5")
    full = Fraction(zcdp.cdp_rho(1.0, 1e-5))
    _charge(engine, tiny, PrivacyCost(rho=full * Fraction(999, 1000)))
    with pytest.raises(BudgetExceeded, match="largest zCDP charge"):
        _charge(engine, tiny, PrivacyCost(rho=full * Fraction(2, 1000)))
    status = accountant.budget_status(engine, "tiny")
    assert status.epsilon_spent <= 1 and status.epsilon_spent > Fraction(99, 100)


def test_pure_charges_after_zcdp_are_priced_on_the_anchor(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "1", "1e-5")
    half = Fraction(zcdp.cdp_rho(1.0, 1e-5)) / 2
    _charge(engine, tiny, PrivacyCost(rho=half))
    # docs/privacy.md 6.3: after half the rho, 0.272 of pure epsilon is left (not the 0.314 of the unsafe rule)
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(27, 100)))
    with pytest.raises(BudgetExceeded):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 100)))
    # and no approximate-DP charge may spend delta once the zCDP charges hold all of it (reserve 0)
    with pytest.raises(BudgetExceeded):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10**6), delta=Fraction(1, 10**9)))


def test_delta_reserve_keeps_delta_for_later_approximate_dp(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "2", "1e-5", delta_reserve="2e-6")
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 100)))
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10), delta=Fraction(2, 10**6)))
    with pytest.raises(BudgetExceeded):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10), delta=Fraction(1, 10**9)))


def test_refund_returns_the_budget_and_is_appended(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "1", "0")
    release_id, charge_id = accountant.reserve_release(engine, "tiny", "marginals", "test",
                                                       PrivacyCost(epsilon=Fraction(1, 2)), {}, "t")
    accountant.refund(engine, charge_id, "failed before noise")
    assert accountant.budget_status(engine, "tiny").epsilon_spent == 0
    with pytest.raises(ServiceError, match="already refunded"):
        accountant.refund(engine, charge_id, "again")
    entries = [row["entry"] for row in accountant.ledger_rows(engine, "tiny")]
    assert entries == ["budget", "charge", "refund"]


def test_budget_cannot_drop_below_spending(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "1", "0")
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 2)))
    with pytest.raises(BudgetExceeded, match="already spent"):
        accountant.set_budget(engine, "tiny", "0.4", "0")
    assert accountant.set_budget(engine, "tiny", "0.5", "0").epsilon_remaining == 0


def test_no_budget_means_no_release(engine, tiny) -> None:  # noqa: ANN001
    with pytest.raises(ServiceError, match="no privacy budget"):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10)))


@pytest.mark.parametrize(("epsilon", "delta", "fragment"), [
    ("nan", "0", "epsilon"), ("-1", "0", "epsilon"), ("0", "0", "epsilon"), ("inf", "0", "epsilon"),
    ("1", "1", "delta"), ("1", "-0.1", "delta"), ("1", "nan", "delta"), ("abc", "0", "epsilon"),
])
def test_bad_budget_parameters_name_the_parameter(engine, tiny, epsilon: str, delta: str, fragment: str) -> None:  # noqa: ANN001
    with pytest.raises((ValueError, ServiceError)) as info:
        accountant.set_budget(engine, "tiny", epsilon, delta)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("mechanism", "kwargs", "fragment"), [
    ("laplace", {"rho": "0.1"}, "--epsilon, not --rho"),
    ("laplace", {"epsilon": "1", "delta": "1e-5"}, "delta"),
    ("gaussian", {"epsilon": "1"}, "--delta"),
    ("gaussian", {"epsilon": "1", "delta": "0"}, "delta > 0"),
    ("gaussian", {"rho": "-1"}, "rho"),
    ("gaussian", {"rho": "0.1", "epsilon": "1", "delta": "1e-5"}, "either"),
    ("magic", {"epsilon": "1"}, "mechanism"),
])
def test_marginal_cost_validation(mechanism: str, kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        releases.marginal_cost(mechanism, kwargs.get("epsilon"), kwargs.get("delta"), kwargs.get("rho"))


def test_gaussian_at_epsilon_delta_is_charged_the_converted_rho() -> None:
    cost = releases.marginal_cost("gaussian", "1", "1e-5", None)
    assert cost.epsilon == 0 and cost.delta == 0
    assert abs(float(cost.rho) - zcdp.cdp_rho(1.0, 1e-5)) < 1e-12
    assert cost.rho.denominator in (1, 10**12) or (10**12 % cost.rho.denominator == 0)


@pytest.mark.slow
def test_twenty_processes_never_overspend(engine, tiny, database_url: str) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "1", "0")
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(20), context.Queue()
    processes = [context.Process(target=charge_once, args=(database_url, barrier, results)) for _ in range(20)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert sorted(outcomes) == ["ok"] * 10 + ["refused"] * 10, outcomes
    assert accountant.budget_status(engine, "tiny").epsilon_remaining == 0
