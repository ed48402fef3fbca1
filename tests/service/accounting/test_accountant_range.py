"""The accountant over the whole accepted range of every parameter (issue 27, finding 6).

A budget may name epsilon up to 1e6 and any delta in [0, 1); a charge any epsilon and rho up to 1e6 and any delta in
[0, 1) (``service.privacy.cost.MAX_AMOUNT``, ``workloads.parameters``). Whatever the ledger holds, a charge is either
accepted or refused as ``budget_exceeded`` naming what still fits; it never fails with an arithmetic error. Before
this, pricing an (epsilon, delta) charge after the zCDP anchor computed e^(alpha epsilon) in 60-digit decimals, which
overflows once alpha epsilon passes about 2.3e6: ``--epsilon 1e6`` after any zCDP release (or 1e5 on a budget whose
anchor has a large order) was ``internal_error: decimal.Overflow``.

The property tests draw budgets and charges from the accepted range, with their extremes over-represented (hypothesis
would rarely draw 1e6 or 1e-12 from a uniform range), and check the rule's own promises: what the status says can
still be spent is accepted, one ledger unit more is refused, a refusal writes nothing, and the spent epsilon never
passes the budget.
"""

from __future__ import annotations

import itertools
import json
import math
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from typer.testing import CliRunner

from db.engine import make_engine, serialized_transaction
from db.migrate import upgrade_to_head
from db.models import Dataset
from service.access import auth
from service.accounting import accountant
from service.api import create_app
from service.cli import app
from service.data import datasets
from service.errors import BudgetExceeded
from service.privacy.cost import MAX_AMOUNT, PrivacyCost
from service.privacy.filter import (
    budget_holds,
    price_epsilon,
    randomized_response_divergence,
    remaining_epsilon,
    remaining_rho,
    zcdp_anchor,
)
from service.regression.fit import fit
from service.releases import engine as release_engine

UNIT = Fraction(1, 10**12)  # the ledger's unit of epsilon and rho
SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture
def tiny(engine, tmp_path: Path) -> str:  # noqa: ANN001
    """A 60-row table: a (3 values) and b (2 values, the logistic target)."""
    csv = tmp_path / "tiny.csv"
    csv.write_text("a,b\n" + "\n".join(f"{i % 3},{i % 2}" for i in range(60)) + "\n")
    domain = tmp_path / "tiny.json"
    domain.write_text(json.dumps({"a": 3, "b": 2}))
    datasets.load_coded_csv(engine, "tiny", csv, domain)
    return "tiny"


def _after_a_zcdp_release(engine, name: str, epsilon: str = "4", delta: str = "1e-5",  # noqa: ANN001
                          rho: float = 0.01) -> None:
    accountant.set_budget(engine, name, epsilon, delta)
    release_engine.release_marginals(engine, name, "gaussian", [["a"]], rho=rho)


# ------------------------------------------------------------------------------------ finding 6, as reported
def test_a_huge_pure_release_after_a_zcdp_one_is_budget_exceeded(engine, tiny: str) -> None:  # noqa: ANN001
    _after_a_zcdp_release(engine, tiny)
    status = accountant.budget_status(engine, tiny)
    # reserved as a release reserves: a laplace release at epsilon 1e6 is now refused before it reaches the
    # accountant (its noise would vanish: privacy.md 8.1), so the accountant's range is checked at its own door
    with pytest.raises(BudgetExceeded) as refused:
        accountant.reserve_release(engine, tiny, "marginals", "laplace", PrivacyCost(epsilon=10**6), {}, "t")
    assert refused.value.code == "budget_exceeded"
    assert f"epsilon up to {float(status.epsilon_spendable):.6g}" in refused.value.message
    with engine.connect() as connection:  # the refused release left nothing behind
        assert connection.execute(text("SELECT COUNT(*) FROM releases")).scalar_one() == 1


def test_a_large_order_anchor_refuses_1e5_as_budget_exceeded(engine, tiny: str) -> None:  # noqa: ANN001
    # a small epsilon and a tiny delta: the anchor's Renyi order is large, so alpha * 1e5 is far past 2.3e6
    _after_a_zcdp_release(engine, tiny, epsilon="0.5", delta="1e-15", rho=0.001)
    assert accountant.budget_status(engine, tiny).anchor.alpha > 30
    with pytest.raises(BudgetExceeded, match="its epsilon does not fit"):  # at the accountant's door, as above
        accountant.reserve_release(engine, tiny, "marginals", "laplace", PrivacyCost(epsilon=10**5), {}, "t")


def test_an_objpert_fit_of_epsilon_1e6_after_zcdp_is_budget_exceeded(engine, tiny: str) -> None:  # noqa: ANN001
    _after_a_zcdp_release(engine, tiny)
    with pytest.raises(BudgetExceeded):
        fit(engine, tiny, "logistic", "b", ["a"], method="objpert", epsilon=1e6, delta=1e-7, principal="t")


def test_the_cli_and_the_http_route_answer_budget_exceeded(engine, tiny: str) -> None:  # noqa: ANN001
    _after_a_zcdp_release(engine, tiny)
    # an objective-perturbation fit: a laplace release at 1e6 is refused before the accountant (privacy.md 8.1)
    result = CliRunner().invoke(app, ["fit", "logistic", tiny, "--target", "b", "--features", "a", "--method",
                                      "objpert", "--epsilon", "1e6", "--delta", "1e-7", "--json"])
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["error"] == "budget_exceeded"
    _, key = auth.create_key(engine, "steward", "s")
    client = TestClient(create_app(engine), raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {key}"}
    response = client.post(f"/datasets/{tiny}/fit/logistic", headers=headers,
                           json={"target": "b", "features": ["a"], "method": "objpert", "epsilon": 1e6, "delta": 1e-7})
    assert response.status_code == 409 and response.json()["error"] == "budget_exceeded", response.text
    response = client.post(f"/datasets/{tiny}/fit/logistic", headers=headers,
                           json={"target": "b", "features": ["a"], "method": "objpert", "epsilon": 1e6,
                                 "delta": 1e-7})
    assert response.status_code == 409 and response.json()["error"] == "budget_exceeded", response.text


# ------------------------------------------------------------------------------------ the pure rule, property-tested
def extreme_biased(low: float, high: float) -> st.SearchStrategy[float]:
    """A float in [low, high], its extremes (and a decade inside each) drawn often, the rest spread over the
    decades (hypothesis seldom draws 1e6 or 1e-12 from a uniform range)."""
    spread = st.floats(min_value=math.log10(low), max_value=math.log10(high)).map(lambda x: 10.0**x)
    edges = st.sampled_from([low, high, low * 10, high / 10])
    return st.one_of(edges, spread, st.floats(min_value=low, max_value=high)).map(lambda x: min(max(x, low), high))


amounts = extreme_biased(1e-12, float(MAX_AMOUNT))  # an epsilon or a rho
deltas = st.one_of(st.just(0.0), extreme_biased(1e-18, 0.999999))
orders = extreme_biased(1.000000001, 1e9)


def _direct_divergence(eps: float, alpha: float) -> Decimal:
    """D_alpha(RR_eps(0) || RR_eps(1)) by the direct formula ln((e^(alpha eps) + e^(-(alpha - 1) eps)) / (1 + e^eps))
    / (alpha - 1), in 120-digit decimals with the widest exponent range Python's decimal has: an independent check
    of the overflow-free form the service computes."""
    with localcontext(Context(prec=120, Emax=MAX_EMAX, Emin=MIN_EMIN)):
        e, a = Decimal(repr(eps)), Decimal(repr(alpha))
        return (((a * e).exp() + (-(a - 1) * e).exp()) / (1 + e.exp())).ln() / (a - 1)


@SETTINGS
@given(eps=amounts, alpha=orders)
def test_the_price_never_overflows_and_is_the_divergence_capped_at_epsilon(eps: float, alpha: float) -> None:
    exact_eps, exact_alpha = Fraction(repr(eps)), Fraction(repr(alpha))  # as the ledger holds them: decimals
    divergence = randomized_response_divergence(exact_eps, exact_alpha)
    reference = _direct_divergence(eps, alpha)
    # far below the margin of 1e-40 price_epsilon adds before rounding up to the ledger's 1e-12 grid
    assert abs(divergence - reference) <= Decimal("1e-45") * max(1, reference), (eps, alpha)
    price = price_epsilon(exact_eps, exact_alpha)
    capped = min(exact_eps, Fraction(divergence))
    assert capped <= price <= capped + UNIT  # rounded up to the ledger's grid, never down


@SETTINGS
@given(eps_b=amounts, delta_b=deltas.filter(lambda d: d > 0), reserve_share=st.fractions(0, 1),
       spent_share=st.fractions(0, 1), rho_share=st.fractions(0, 1))
def test_what_remains_fits_and_one_unit_more_does_not(eps_b: float, delta_b: float, reserve_share: Fraction,
                                                       spent_share: Fraction, rho_share: Fraction) -> None:
    """Anchored ledgers anywhere in the range (some pure epsilon spent before the first rho charge, some rho since):
    the remaining rho and epsilon are the largest charges the rule accepts on the ledger's grid, one unit more is
    refused, and nothing raises."""
    budget, delta = Fraction(repr(eps_b)), Fraction(repr(delta_b))
    e = _on_grid(budget * spent_share)
    reserve = Fraction(math.floor(delta * reserve_share * 10**18), 10**18)
    if remaining_rho(e, 0, 0, budget, delta, None, reserve) == 0:
        return  # no zCDP charge fits this budget: the first rho charge is refused (the accountant test below)
    anchor = zcdp_anchor(budget, delta, e, 0, reserve)
    r = _on_grid(remaining_rho(e, 0, 0, budget, delta, anchor, reserve) * rho_share)
    assert budget_holds(e, 0, r, budget, delta, anchor)
    rho_left = _on_grid(remaining_rho(e, 0, r, budget, delta, anchor))
    assert budget_holds(e, 0, r + rho_left, budget, delta, anchor)
    assert not budget_holds(e, 0, r + rho_left + 2 * UNIT, budget, delta, anchor)
    eps_left = remaining_epsilon(e, 0, r, budget, delta, anchor)
    for asked, fits in ((eps_left, True), (eps_left + UNIT, False), (Fraction(MAX_AMOUNT), eps_left >= MAX_AMOUNT)):
        if asked > 0:  # charged after the anchor, so priced (e was charged before it, at its epsilon)
            priced = e + price_epsilon(asked, anchor.alpha)
            assert budget_holds(e + asked, 0, r, budget, delta, anchor, priced=priced) == fits, (asked, fits)


def _on_grid(value: Fraction) -> Fraction:
    return Fraction(math.floor(value / UNIT)) * UNIT


# ------------------------------------------------------------------------------------ the accountant, property-tested
charges = st.lists(st.tuples(st.one_of(st.just(0.0), amounts), deltas, st.one_of(st.just(0.0), amounts)),
                   min_size=1, max_size=5)
_names = itertools.count()


@pytest.fixture(scope="module")
def ledger_engine(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """One SQLite database for every example; each example charges a dataset of its own."""
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'ledger.db'}")
    upgrade_to_head(engine)
    yield engine
    engine.dispose()


def _new_dataset(engine) -> str:  # noqa: ANN001
    """A dataset row to charge (the accountant reads only its id and name: no table is counted here)."""
    name = f"d{next(_names)}"
    with serialized_transaction(engine) as session:
        session.add(Dataset(name=name, domain_json=json.dumps({"columns": []}), data_table=f"none_{name}",
                            row_count=1, source="test", engine="sql"))
    return name


def _ledger_rows(engine, name: str) -> int:  # noqa: ANN001
    with engine.connect() as connection:
        return connection.execute(text(
            "SELECT COUNT(*) FROM ledger_entries l JOIN datasets d ON d.id = l.dataset_id WHERE d.name = :n"),
            {"n": name}).scalar_one()


def _charge(engine, name: str, cost: PrivacyCost) -> None:  # noqa: ANN001
    accountant.reserve_release(engine, name, "marginals", "test", cost, {}, "t")


@SETTINGS
@given(eps_b=amounts, delta_b=deltas, reserve_share=st.one_of(st.none(), st.fractions(0, 1)), asked=charges)
def test_every_charge_in_range_is_accepted_or_refused_with_what_fits(ledger_engine, eps_b: float,  # noqa: ANN001
                                                                      delta_b: float,
                                                                      reserve_share: Fraction | None,
                                                                      asked: list[tuple[float, float, float]]) -> None:
    engine, name = ledger_engine, _new_dataset(ledger_engine)
    reserve = None if reserve_share is None else float(Fraction(repr(delta_b)) * reserve_share)
    accountant.set_budget(engine, name, eps_b, delta_b, delta_reserve=reserve)
    for epsilon, delta, rho in asked:
        if epsilon == 0 and rho == 0:
            continue  # a charge of nothing is no release
        rows, status = _ledger_rows(engine, name), accountant.budget_status(engine, name)
        try:
            _charge(engine, name, PrivacyCost(epsilon=epsilon, delta=delta, rho=rho))
        except BudgetExceeded as refused:
            assert refused.code == "budget_exceeded" and "what can still be spent is" in refused.message
            assert _ledger_rows(engine, name) == rows  # a refusal writes nothing
            continue
        after = accountant.budget_status(engine, name)
        assert status.epsilon_spent <= after.epsilon_spent <= after.epsilon_total
    # what the status offers is accepted (the rho, then the epsilon with the delta that is left) ...
    status = accountant.budget_status(engine, name)
    if status.rho_spendable > 0:
        _charge(engine, name, PrivacyCost(rho=status.rho_spendable))
        status = accountant.budget_status(engine, name)
    if status.epsilon_spendable > 0:
        _charge(engine, name, PrivacyCost(epsilon=status.epsilon_spendable, delta=status.delta_spendable))
        status = accountant.budget_status(engine, name)
    assert status.epsilon_spent <= status.epsilon_total
    # ... and nothing more: one unit over what is offered, or the largest charge anyone may ask for
    for more in (PrivacyCost(epsilon=status.epsilon_spendable + UNIT), PrivacyCost(rho=status.rho_spendable + UNIT),
                 PrivacyCost(epsilon=MAX_AMOUNT), PrivacyCost(rho=MAX_AMOUNT)):
        if max(more.epsilon, more.rho) <= MAX_AMOUNT:
            with pytest.raises(BudgetExceeded):
                _charge(engine, name, more)


def test_a_budget_whose_delta_is_near_one_never_sees_its_spent_epsilon_drop(ledger_engine) -> None:  # noqa: ANN001
    """t(alpha, delta_z) < 0 when delta_z > c(alpha); the anchor's offset is then 0 (docs/privacy.md 6.3), so the
    first zCDP charge never lowers the epsilon spent below the (epsilon, delta) charges made before it. (The range
    test found a budget of delta 0.999999 whose spent epsilon went from 0 to -2.28 on a zCDP charge.)"""
    from service.privacy.filter import anchor_offset

    engine, name = ledger_engine, _new_dataset(ledger_engine)
    accountant.set_budget(engine, name, 1.0, 0.999999)
    _charge(engine, name, PrivacyCost(epsilon=Fraction(1, 2)))
    before = accountant.budget_status(engine, name)
    _charge(engine, name, PrivacyCost(rho=Fraction(1, 10**6)))
    after = accountant.budget_status(engine, name)
    assert anchor_offset(after.anchor.alpha, after.anchor.delta_z) < 0 <= after.anchor.offset == 0
    assert Fraction(1, 2) == before.epsilon_spent <= after.epsilon_spent <= after.epsilon_total
