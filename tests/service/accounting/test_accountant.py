"""The accountant charges exactly, refuses overspending, and the SQL views agree with it."""

from __future__ import annotations

import json
import math
import multiprocessing
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import text

from service.accounting import accountant
from service.data import datasets
from service.errors import BudgetExceeded, InvalidInput, ServiceError
from service.mechanisms import registry
from service.privacy import conversions
from service.privacy.cost import PrivacyCost, from_units
from service.privacy.filter import composed_epsilon, price_epsilon, zcdp_anchor
from tests.support.charging_child import charge_once
from tests.support.ledger import budget_audit, net_charge


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
    accountant.set_budget(engine, "tiny", "2", "1e-5", delta_reserve="0")
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(3, 10)))
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 100)))
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 200)))
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 20)))  # after the anchor: priced below its epsilon
    status = accountant.budget_status(engine, "tiny")
    with engine.connect() as connection:
        view = connection.execute(text("SELECT * FROM budget_remaining WHERE dataset = 'tiny'")).mappings().one()
        sums = connection.execute(text(
            "SELECT SUM(epsilon_units), SUM(delta_units), SUM(rho_units), SUM(epsilon_priced_units) "
            "FROM privacy_ledger WHERE dataset = 'tiny'"
        )).one()
        priced_rows = connection.execute(text(
            "SELECT epsilon_units, epsilon_priced_units FROM ledger_entries WHERE entry = 'charge' ORDER BY id"
        )).all()
    assert int(view["epsilon_pure_spent_units"]) == int(sums[0]) == 35 * 10**10
    assert int(view["rho_spent_units"]) == int(sums[2]) == 15 * 10**9
    assert int(view["epsilon_priced_spent_units"]) == int(sums[3])
    assert Fraction(int(view["epsilon_spent_units"]), 10**12) == status.epsilon_spent
    assert Fraction(int(view["epsilon_remaining_units"]), 10**12) == status.epsilon_remaining
    # Each row's priced epsilon: the epsilon itself before the anchor, D_alpha of randomized response after.
    anchor = zcdp_anchor(Fraction(2), Fraction(1, 10**5), Fraction(3, 10), Fraction(0))
    after = price_epsilon(Fraction(1, 20), anchor.alpha)
    assert [tuple(r) for r in priced_rows] == [(3 * 10**11, 3 * 10**11), (0, 0), (0, 0),
                                               (5 * 10**10, int(after * 10**12))]
    assert after < Fraction(1, 20)
    # The composed epsilon is what the documented rule gives, C + alpha R + t, rounded up to the ledger's grid.
    expected = composed_epsilon(Fraction(7, 20), Fraction(0), Fraction(15, 1000), Fraction(1, 10**5), anchor,
                                priced=Fraction(3, 10) + after)
    assert status.epsilon_spent == Fraction(math.ceil(expected * 10**12), 10**12)
    # An auditor recomputes it from the SQL sums and the anchor columns in integer units.
    alpha_u, offset_u = int(view["anchor_alpha_units"]), int(view["anchor_offset_units"])
    assert Fraction(alpha_u, 10**9) == anchor.alpha
    recomputed = int(sums[3]) + -(-alpha_u * int(sums[2]) // 10**9) + offset_u
    assert recomputed == int(view["epsilon_spent_units"])
    # and the delta the view says (epsilon, delta) releases can still spend is delta_B - delta_z - D (here 0)
    assert int(view["delta_remaining_units"]) == 0 == status.delta_remaining


def test_rule_is_exactly_as_tight_as_cks_for_zcdp_only(engine, tiny) -> None:  # noqa: ANN001
    # With only rho charges (and no delta reserve), the anchored rule admits exactly cdp_rho(eps_B, delta_B) in all.
    accountant.set_budget(engine, "tiny", "1", "1e-5", delta_reserve="0")
    full = Fraction(conversions.cdp_rho(1.0, 1e-5))
    _charge(engine, tiny, PrivacyCost(rho=full * Fraction(999, 1000)))
    with pytest.raises(BudgetExceeded, match="largest zCDP charge"):
        _charge(engine, tiny, PrivacyCost(rho=full * Fraction(2, 1000)))
    status = accountant.budget_status(engine, "tiny")
    assert status.epsilon_spent <= 1 and status.epsilon_spent > Fraction(99, 100)


def test_pure_charges_after_zcdp_are_priced_at_randomized_response(engine, tiny) -> None:  # noqa: ANN001
    """Finding 3 of issue 11: after the anchor an (epsilon, delta) charge costs D_alpha(RR_eps), not eps. At budget
    (1, 1e-5) with half the rho spent, the pure epsilon still allowed goes from 0.272 (linear price) to 0.305."""
    accountant.set_budget(engine, "tiny", "1", "1e-5", delta_reserve="0")
    half = Fraction(conversions.cdp_rho(1.0, 1e-5)) / 2
    _charge(engine, tiny, PrivacyCost(rho=half))
    status = accountant.budget_status(engine, "tiny")
    assert Fraction(304, 1000) < status.epsilon_spendable < Fraction(305, 1000)
    with pytest.raises(BudgetExceeded, match="its epsilon does not fit"):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(306, 1000)))
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(30, 100)))  # refused at the linear price (0.272 left)
    with engine.connect() as connection:
        priced = connection.execute(text(
            "SELECT epsilon_priced_units FROM ledger_entries WHERE epsilon_units = 300000000000")).scalar_one()
    assert priced == int(price_epsilon(Fraction(3, 10), accountant.budget_status(engine, "tiny").anchor.alpha)
                         * 10**12)
    # no approximate-DP charge may spend delta once the zCDP charges hold all of it (reserve 0) ...
    with pytest.raises(BudgetExceeded, match="its delta does not fit.*can spend delta=0 more"):
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10**6), delta=Fraction(1, 10**9)))
    # ... and the status says so: delta_remaining is delta_B - delta_z - D, not delta_B - D (finding 4)
    status = accountant.budget_status(engine, "tiny")
    assert status.delta_remaining == status.delta_spendable == 0
    assert status.to_json()["delta_remaining"] == 0.0 and status.to_json()["zcdp_delta"] == 1e-5


def test_refusal_messages_agree_with_the_status(engine, tiny) -> None:  # noqa: ANN001
    """Finding 4: what a refusal says can still be spent is what the status shows, and it can be spent."""
    accountant.set_budget(engine, "tiny", "1", "1e-5", delta_reserve="2e-6")
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 100)))
    status = accountant.budget_status(engine, "tiny")
    assert status.delta_spendable == Fraction(2, 10**6) and status.anchor.delta_z == Fraction(8, 10**6)
    with pytest.raises(BudgetExceeded) as refused:
        _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 10), delta=Fraction(3, 10**6)))
    message = str(refused.value)
    assert "its delta does not fit" in message and "can spend delta=2e-06 more" in message
    assert f"epsilon up to {float(status.epsilon_spendable):.6g}" in message
    assert f"rho up to {float(status.rho_spendable):.6g}" in message
    # every figure the refusal offers is indeed accepted
    _charge(engine, tiny, PrivacyCost(rho=status.rho_spendable))
    status = accountant.budget_status(engine, "tiny")
    _charge(engine, tiny, PrivacyCost(epsilon=status.epsilon_spendable, delta=status.delta_spendable))
    status = accountant.budget_status(engine, "tiny")
    assert status.epsilon_spendable == 0 and status.delta_spendable == 0 and status.rho_spendable == 0


def test_default_reserve_keeps_objective_perturbation_possible(engine, tiny) -> None:  # noqa: ANN001
    """Issue 12: without --delta-reserve a tenth of delta stays for (epsilon, delta) releases after zCDP ones."""
    status = accountant.set_budget(engine, "tiny", "4", "1e-5")
    assert status.delta_reserve == Fraction(1, 10**6) and status.delta_spendable == Fraction(1, 10**5)
    _charge(engine, tiny, PrivacyCost(rho=Fraction(3, 100)))
    status = accountant.budget_status(engine, "tiny")
    assert status.anchor.delta_z == Fraction(9, 10**6) and status.delta_spendable == Fraction(1, 10**6)
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 2), delta=Fraction(1, 10**6)))  # an ObjPert fit fits
    # the price of the reserve: the zCDP releases get delta 0.9 delta_B (about 1 % less rho at (1, 1e-5))
    assert conversions.cdp_rho(1.0, 9e-6) / conversions.cdp_rho(1.0, 1e-5) > 0.985


def test_budget_set_without_delta_after_zcdp_names_delta(engine, tiny) -> None:  # noqa: ANN001
    accountant.set_budget(engine, "tiny", "4", "1e-5")
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 100)))
    with pytest.raises(BudgetExceeded, match=r"delta=0 cannot hold.*delta_zcdp=9e-06.*at least 9e-06.*forget delta\?"):
        accountant.set_budget(engine, "tiny", "8", "0")
    with pytest.raises(BudgetExceeded, match="epsilon=0.1 cannot hold"):
        accountant.set_budget(engine, "tiny", "0.1", "1e-5")
    assert accountant.set_budget(engine, "tiny", "8", "1e-5").epsilon_total == 8


def test_each_release_reports_its_cost_in_the_budgets_epsilon(engine, tiny) -> None:  # noqa: ANN001
    """Issue 12: the composed epsilon before -> after each charge, and why the first zCDP charge costs more."""
    accountant.set_budget(engine, "tiny", "4", "1e-5")
    _, first = accountant.reserve_release(engine, "tiny", "marginals", "laplace", PrivacyCost(epsilon=Fraction(1, 2)),
                                          {}, "t")
    effect = accountant.budget_effect(engine, first)
    assert (effect.epsilon_before, effect.epsilon_after, effect.note) == (0, Fraction(1, 2), "")
    rho = Fraction(round(conversions.cdp_rho(1.0, 1e-5) * 10**12), 10**12)  # on the ledger's grid
    _, second = accountant.reserve_release(engine, "tiny", "marginals", "gaussian", PrivacyCost(rho=rho), {}, "t")
    effect = accountant.budget_effect(engine, second)
    anchor = accountant.budget_status(engine, "tiny").anchor
    assert effect.epsilon_before == Fraction(1, 2)
    assert abs(effect.epsilon_after - (Fraction(1, 2) + anchor.alpha * rho + anchor.offset)) <= Fraction(1, 10**12)
    assert effect.epsilon_after - effect.epsilon_before > 1  # more than the nominal epsilon 1: the note says why
    assert "first zCDP release" in effect.note and "alpha*rho + t" in effect.note
    assert "->" in effect.describe() and effect.to_json()["epsilon_spent_before"] == 0.5
    _, third = accountant.reserve_release(engine, "tiny", "marginals", "gaussian", PrivacyCost(rho=rho / 10), {}, "t")
    later = accountant.budget_effect(engine, third)
    unit = Fraction(1, 10**12)  # the charge is rounded up to the grid, the composed epsilon too
    assert later.epsilon_after - later.epsilon_before <= anchor.alpha * (rho / 10 + unit) + unit
    assert "first" not in later.note


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


def test_a_partial_refund_keeps_exactly_the_rho_given_rounded_up(engine, tiny) -> None:  # noqa: ANN001
    """A zCDP charge refunded in part (a release stopped on request part-way, docs/privacy.md 6.5) keeps the rho given,
    rounded up to the grid as every charge is: the charge less the refund is that amount exactly, the refund is a new
    row naming the charge, and ``budget show``, the release's effect and the audit view agree. A part is only ever a
    part of a zCDP charge's rho, and a charge is refunded at most once."""
    accountant.set_budget(engine, "tiny", "10", "1e-5")
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 3)))  # an earlier pure charge: the anchor's E_0 is not 0
    release_id, charge_id = accountant.reserve_release(engine, "tiny", "marginals", "test",
                                                       PrivacyCost(rho=Fraction(1, 3)), {}, "tester")
    pure_id, pure_charge = accountant.reserve_release(engine, "tiny", "marginals", "test",
                                                      PrivacyCost(epsilon=Fraction(1, 5)), {}, "tester")
    for charge, keep in ((charge_id, PrivacyCost(rho=Fraction(1, 3))), (charge_id, PrivacyCost(epsilon=Fraction(1, 7))),
                         (pure_charge, PrivacyCost(rho=Fraction(1, 7)))):
        with pytest.raises(ValueError, match="only a part of a zCDP charge"):
            accountant.refund(engine, charge, "not a part", keep=keep)
    entry = accountant.refund(engine, charge_id, "stopped part-way", keep=PrivacyCost(rho=Fraction(1, 7)))
    kept = math.ceil(Fraction(10**12, 7))  # 142857142858: rounded up, never below what was spent
    assert net_charge(engine, release_id) == (0, 0, kept)
    assert (entry.entry, entry.refunds_entry_id, entry.rho_units) == ("refund", charge_id, kept - 333333333334)
    assert (entry.epsilon_units, entry.delta_units, entry.epsilon_priced_units) == (0, 0, 0)
    status = accountant.budget_status(engine, "tiny")
    assert status.rho_spent == Fraction(kept, 10**12)
    stored, recomputed, agrees = budget_audit(engine, "tiny")
    assert stored == recomputed == _status_units(engine, "tiny") == entry.epsilon_spent_after_units and agrees == 1
    effect = accountant.budget_effect(engine, charge_id)
    assert effect.epsilon_after == from_units(entry.epsilon_spent_after_units, 10**12)
    assert "first zCDP release" in effect.note and f"{float(status.anchor.alpha * Fraction(kept, 10**12)):.6g}" \
        in effect.note  # the anchor's note, on the rho kept
    with pytest.raises(ServiceError, match="already refunded"):
        accountant.refund(engine, charge_id, "again")
    assert [row["entry"] for row in accountant.ledger_rows(engine, "tiny")] == [
        "budget", "charge", "charge", "charge", "refund"]
    assert net_charge(engine, pure_id) == (2 * 10**11, 0, 0)


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
    ("laplace", {"rho": "0.1"}, "give epsilon, not rho"),
    ("laplace", {"epsilon": "1", "delta": "1e-5"}, "delta"),
    ("gaussian", {"epsilon": "1"}, "give rho, or epsilon and delta"),
    ("gaussian", {"epsilon": "1", "delta": "0"}, "delta > 0"),
    ("gaussian", {"rho": "-1"}, "rho"),
    ("gaussian", {"rho": "0.1", "epsilon": "1", "delta": "1e-5"}, "either"),
    ("magic", {"epsilon": "1"}, "mechanism"),
])
def test_marginal_cost_validation(mechanism: str, kwargs: dict, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        registry.get(mechanism).cost(kwargs.get("epsilon"), kwargs.get("delta"), kwargs.get("rho"))


def test_gaussian_at_epsilon_delta_is_charged_the_converted_rho() -> None:
    cost = registry.get("gaussian").cost("1", "1e-5", None)
    assert cost.epsilon == 0 and cost.delta == 0
    assert abs(float(cost.rho) - conversions.cdp_rho(1.0, 1e-5)) < 1e-12
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


def _status_units(engine, name: str) -> int:  # noqa: ANN001
    spent = accountant.budget_status(engine, name).epsilon_spent * 10**12
    assert spent.denominator == 1
    return int(spent)


def test_the_audit_view_recomputes_the_composed_epsilon_exactly_where_int64_would_overflow(engine, tiny) -> None:  # noqa: ANN001
    """``budget_audit`` recomputes ``C + ceil(alpha R) + t`` in plain SQL and equals ``budget show`` in every budget
    state: empty, pure charges only, after the anchor (here ``alpha_units * R`` is far above 2^63, where SQLite's
    plain product silently becomes a REAL and loses the last units), after a pure charge priced under the anchor,
    and after the only zCDP charge is refunded (R = 0: ``min(E, C + t)``)."""
    accountant.set_budget(engine, "tiny", "100", "1e-5")
    states = []
    states.append(("empty", budget_audit(engine, "tiny"), _status_units(engine, "tiny")))
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(3, 10)))
    states.append(("pure", budget_audit(engine, "tiny"), _status_units(engine, "tiny")))
    release_id, _ = accountant.reserve_release(engine, "tiny", "marginals", "test", PrivacyCost(rho=Fraction(7, 3)),
                                               {}, "tester")
    states.append(("anchored", budget_audit(engine, "tiny"), _status_units(engine, "tiny")))
    _charge(engine, tiny, PrivacyCost(epsilon=Fraction(1, 7)))
    states.append(("priced", budget_audit(engine, "tiny"), _status_units(engine, "tiny")))
    with engine.connect() as connection:
        alpha_units, rho_units = connection.execute(text(
            "SELECT anchor_alpha_units, rho_spent_units FROM budget_remaining WHERE dataset = 'tiny'")).one()
        charge_id = connection.execute(text("SELECT id FROM ledger_entries WHERE release_id = :r AND entry = 'charge'"),
                                       {"r": release_id}).scalar_one()
    assert int(alpha_units) * int(rho_units) > 2**63  # the case the split exists for
    accountant.refund(engine, charge_id, "test: the release failed before noise")
    states.append(("refunded", budget_audit(engine, "tiny"), _status_units(engine, "tiny")))
    for state, (stored, recomputed, agrees), status in states:
        assert recomputed == stored == status and agrees == 1, (state, stored, recomputed, status)
    assert [s[2] for s in states][:2] == [0, 3 * 10**11]


def test_the_audit_view_catches_a_ledger_that_disagrees(engine, tiny) -> None:  # noqa: ANN001
    """The view recomputes, it does not copy: a ledger whose stored composed epsilon was written wrong (one unit too
    low, inserted as a bare row past the accountant) shows ``agrees = 0``."""
    accountant.set_budget(engine, "tiny", "10", "1e-5")
    _charge(engine, tiny, PrivacyCost(rho=Fraction(1, 10)))
    stored, recomputed, _ = budget_audit(engine, "tiny")
    with engine.begin() as connection:
        dataset_id = connection.execute(text("SELECT id FROM datasets WHERE name = 'tiny'")).scalar_one()
        connection.execute(text(
            "INSERT INTO ledger_entries (dataset_id, entry, mechanism, principal, epsilon_units, delta_units, "
            "rho_units, epsilon_priced_units, epsilon_spent_after_units, note, created_at) VALUES (:d, 'charge', "
            "'forged', 'x', 0, 0, 0, 0, :s, 'forged', CURRENT_TIMESTAMP)"), {"d": dataset_id, "s": stored - 1})
    assert budget_audit(engine, "tiny") == (stored - 1, recomputed, 0)
