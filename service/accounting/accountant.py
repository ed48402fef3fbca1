"""The privacy accountant: budgets, check-and-charge, refunds, and what is left.

Every charge is checked and written in ONE serialised transaction (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE`` on the budget row), so concurrent requests can never
overspend. The ledger is append-only (database triggers refuse UPDATE and DELETE); the remaining
budget is the ``budget_remaining`` view over it. The composition rule is in
:func:`service.privacy.filter.budget_holds` and derived in docs/privacy.md.

Every charge row stores its epsilon, delta and rho, and what its epsilon costs in the rule
(``epsilon_priced_units``: the epsilon itself before the zCDP anchor, the Renyi divergence of randomized response
after it), so an auditor recomputes the composed epsilon from plain SQL sums (docs/privacy.md 6.4).
:class:`BudgetStatus` says what can still be spent (the largest epsilon of an (epsilon, delta) release, the delta
and the largest rho); :func:`budget_effect` says what one charge cost in the budget's own epsilon.

What one charge would write is a pure function of the ledger's sums, its anchor, the budget and the cost:
:func:`quote_charge`, whose :class:`ChargeQuote` holds the ledger row's amounts, the composed epsilon before and
after, and the refusal when it does not fit. :func:`charge_in_session` writes exactly that row (or raises exactly that
refusal), and :func:`preview_charge` shows it and writes nothing (the dry runs of docs/privacy.md 6.6), so a preview
and the charge it previews cannot disagree: there is no second formula.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from db import ledger_chain
from db.engine import serialized_transaction, transaction
from db.models import ALPHA_SCALE, DELTA_SCALE, EPSILON_SCALE, Budget, Dataset, LedgerEntry, Release, utcnow
from service.errors import BudgetExceeded, InvalidInput, NotFound, ServiceError
from service.observability.logs import event as log_event
from service.privacy.cost import PrivacyCost, ceil_units, check_amount, exact, floor_units, from_units
from service.privacy.filter import (
    ZcdpAnchor,
    budget_holds,
    composed_epsilon,
    price_epsilon,
    remaining_delta,
    remaining_epsilon,
    remaining_rho,
    zcdp_anchor,
)
from workloads import parameters

#: The default ``delta_reserve`` of a budget, as a fraction of its delta: enough for (epsilon, delta) releases
#: (objective perturbation) at delta_B / 10 in all after zCDP releases have started, for about 1 % less rho
#: (docs/privacy.md 6.3, "delta_reserve").
DEFAULT_RESERVE_SHARE = Fraction(1, 10)
#: The ledger's mechanism name of a stored table's rows played through a campaign (docs/privacy.md 8.7.7).
SIMULATION_MECHANISM = "campaign-simulation"


@dataclass(frozen=True)
class BudgetStatus:
    """What a budget has spent and what it can still spend, as the accountant's rule (docs/privacy.md 6.3) sees it."""

    dataset: str
    epsilon_total: Fraction
    delta_total: Fraction
    epsilon_pure_spent: Fraction  # E: sum of (epsilon, delta)-DP charges' epsilons
    delta_spent: Fraction  # D
    rho_spent: Fraction  # R
    epsilon_spent: Fraction  # the composed epsilon of the whole ledger (rounded up to the grid)
    anchored: bool = False  # whether zCDP charges have fixed the rule's anchor
    epsilon_priced_spent: Fraction = Fraction(0)  # C: the sum of the (epsilon, delta) charges' prices
    delta_reserve: Fraction = Fraction(0)
    anchor: ZcdpAnchor | None = None
    epsilon_spendable: Fraction = Fraction(0)  # the largest epsilon of one more (epsilon, delta) charge
    delta_spendable: Fraction = Fraction(0)  # the delta (epsilon, delta) charges can still spend
    rho_spendable: Fraction = Fraction(0)  # the largest rho of one more zCDP charge

    @property
    def epsilon_remaining(self) -> Fraction:
        """What is left in the budget's own (composed) epsilon."""
        return self.epsilon_total - self.epsilon_spent

    @property
    def delta_remaining(self) -> Fraction:
        """The delta (epsilon, delta) releases can still spend (delta_B - delta_z - D once zCDP releases hold
        delta_z; delta_B - D before)."""
        return self.delta_spendable

    def can_still_spend(self) -> str:
        """One sentence: what one more release may cost, in the units it would be charged."""
        eps = float(self.epsilon_spendable)
        if eps > 0 and self.delta_spendable > 0:
            pure = f"an (epsilon, delta) release with epsilon up to {eps:.6g} and delta up to " \
                   f"{float(self.delta_spendable):.3g}"
        elif eps > 0:
            pure = f"a pure-DP release with epsilon up to {eps:.6g} (no delta is left for (epsilon, delta) releases)"
        else:
            pure = "no (epsilon, delta) release"
        zcdp_part = (f"a zCDP release with rho up to {float(self.rho_spendable):.6g}" if self.rho_spendable > 0
                     else "no zCDP release")
        return f"{pure}, or {zcdp_part}"

    def explain_delta(self) -> str:
        if self.anchor is None:
            return f"delta_spent={float(self.delta_spent):.3g} of delta={float(self.delta_total):.3g}"
        return (f"the zCDP releases hold delta_zcdp={float(self.anchor.delta_z):.3g} of the budget's "
                f"delta={float(self.delta_total):.3g} and (epsilon, delta) releases have spent "
                f"{float(self.delta_spent):.3g}")

    def to_json(self) -> dict[str, object]:
        anchor = self.anchor
        return {
            "dataset": self.dataset,
            "epsilon_total": float(self.epsilon_total),
            "delta_total": float(self.delta_total),
            "delta_reserve": float(self.delta_reserve),
            "epsilon_spent": float(self.epsilon_spent),
            "delta_spent": float(self.delta_spent),
            "rho_spent": float(self.rho_spent),
            "epsilon_pure_spent": float(self.epsilon_pure_spent),
            "epsilon_priced_spent": float(self.epsilon_priced_spent),
            "epsilon_remaining": float(self.epsilon_remaining),
            "delta_remaining": float(self.delta_remaining),
            "epsilon_spendable": float(self.epsilon_spendable),
            "delta_spendable": float(self.delta_spendable),
            "rho_spendable": float(self.rho_spendable),
            "zcdp_anchor_fixed": self.anchored,
            "zcdp_alpha": None if anchor is None else float(anchor.alpha),
            "zcdp_delta": None if anchor is None else float(anchor.delta_z),
            "zcdp_offset": None if anchor is None else float(anchor.offset),
        }


@dataclass(frozen=True)
class BudgetEffect:
    """What one charge cost in the budget's own epsilon: the composed epsilon spent before and after it, and why."""

    epsilon_total: Fraction
    epsilon_before: Fraction
    epsilon_after: Fraction
    note: str = ""

    def to_json(self) -> dict[str, object]:
        return {"epsilon_total": float(self.epsilon_total), "epsilon_spent_before": float(self.epsilon_before),
                "epsilon_spent_after": float(self.epsilon_after), "note": self.note}

    @property
    def epsilon_charged(self) -> Fraction:
        """What the charge cost in the budget's own (composed) epsilon: after minus before."""
        return self.epsilon_after - self.epsilon_before

    def describe(self) -> str:
        line = (f"budget epsilon spent {float(self.epsilon_before):.6g} -> {float(self.epsilon_after):.6g} "
                f"of {float(self.epsilon_total):.6g}")
        return f"{line}\n{self.note}" if self.note else line


def charge_note(anchor: ZcdpAnchor | None, fixes_anchor: bool, epsilon_units: int, rho_units: int,
                priced_units: int | None) -> str:
    """One sentence on why a charge cost what it did in the budget's epsilon, when that is not just its epsilon: the
    first zCDP charge fixes the anchor (alpha, delta_z, the offset t paid once), a later zCDP charge costs alpha * rho,
    and an (epsilon, delta) charge after the anchor is priced below its epsilon (docs/privacy.md 6.3). ``anchor`` is
    the anchor in force once the charge is made; empty when nothing needs saying. Shared by a charge's
    :func:`budget_effect` and its preview (:meth:`ChargeQuote.effect`)."""
    if anchor is None:
        return ""
    if fixes_anchor:
        rho = from_units(rho_units, EPSILON_SCALE)
        return (f"this is the first zCDP release on this budget: it fixes the accountant's Renyi order "
                f"alpha={float(anchor.alpha):.6g} and sets aside delta_zcdp={float(anchor.delta_z):.3g}, paid once "
                f"as an offset t={float(anchor.offset):.6g} in epsilon; it costs alpha*rho + t = "
                f"{float(anchor.alpha * rho):.6g} + {float(anchor.offset):.6g}, every later zCDP release only "
                f"alpha*rho (docs/privacy.md 6.3)")
    if priced_units is not None and priced_units < epsilon_units:  # made after the anchor: priced below its epsilon
        return (f"after zCDP releases, epsilon={float(from_units(epsilon_units, EPSILON_SCALE)):.6g} is "
                f"priced at the Renyi divergence of randomized response at alpha={float(anchor.alpha):.6g}: "
                f"{float(from_units(priced_units, EPSILON_SCALE)):.6g} (docs/privacy.md 6.3)")
    if rho_units > 0:
        return f"a zCDP release costs alpha*rho with alpha={float(anchor.alpha):.6g} (docs/privacy.md 6.3)"
    return ""


@dataclass(frozen=True)
class ChargeQuote:
    """What the accountant writes for one charge, or why it refuses it (:func:`quote_charge`): the ledger row's
    amounts in its integer units, the composed epsilon spent before and after it, the anchor in force afterwards and
    whether this charge fixes it. :func:`charge_in_session` writes exactly this row; :func:`preview_charge` returns it
    without writing anything (module docstring).

    ``refusal`` is the :class:`BudgetExceeded` the charge is refused with (None when it fits); the real charge raises
    that very exception. ``epsilon_after_units`` is None only when no zCDP charge can fit at all (no anchor can be
    fixed: no delta or no epsilon left)."""

    dataset: str
    cost: PrivacyCost
    epsilon_units: int
    delta_units: int
    rho_units: int
    priced_units: int
    epsilon_total_units: int
    epsilon_before_units: int
    epsilon_after_units: int | None
    anchor: ZcdpAnchor | None
    fixes_anchor: bool
    refusal: BudgetExceeded | None = None

    @property
    def fits(self) -> bool:
        return self.refusal is None

    def anchor_columns(self) -> tuple[int | None, int | None, int | None]:
        """The ledger row's ``anchor_*_units``: the anchor when this charge fixes it, else three NULLs."""
        return _anchor_units(self.anchor) if self.fixes_anchor and self.anchor is not None else (None, None, None)

    def effect(self) -> BudgetEffect | None:
        """What the charge costs in the budget's own epsilon (before -> after, with its note), exactly as
        :func:`budget_effect` reports it once made; None when no anchor can be fixed (nothing to compose)."""
        if self.epsilon_after_units is None:
            return None
        return BudgetEffect(from_units(self.epsilon_total_units, EPSILON_SCALE),
                            from_units(self.epsilon_before_units, EPSILON_SCALE),
                            from_units(self.epsilon_after_units, EPSILON_SCALE),
                            charge_note(self.anchor, self.fixes_anchor, self.epsilon_units, self.rho_units,
                                        self.priced_units))

    def ledger_units(self) -> dict[str, int | None]:
        """The ledger row this charge writes, column by column (``ledger_entries``' integer units)."""
        alpha, delta_z, offset = self.anchor_columns()
        return {"epsilon_units": self.epsilon_units, "delta_units": self.delta_units, "rho_units": self.rho_units,
                "epsilon_priced_units": self.priced_units, "epsilon_spent_after_units": self.epsilon_after_units,
                "anchor_alpha_units": alpha, "anchor_delta_z_units": delta_z, "anchor_offset_units": offset}

    def to_json(self) -> dict[str, object]:
        effect = self.effect()
        return {"fits": self.fits, "cost": self.cost.to_json(),
                "budget": None if effect is None else effect.to_json(),
                "epsilon_charged": None if effect is None else float(effect.epsilon_charged),
                "fixes_anchor": self.fixes_anchor, "ledger": self.ledger_units(),
                "refusal": None if self.refusal is None else self.refusal.to_json()}


def dataset_by_name(session: Session, name: str) -> Dataset:
    dataset = session.execute(select(Dataset).where(Dataset.name == name)).scalar_one_or_none()
    if dataset is None:
        raise NotFound(f"no dataset named {name!r}", code="dataset_not_found")
    return dataset


@dataclass(frozen=True)
class _Sums:
    """Ledger sums in units: E (epsilon), D (delta), R (rho) and C (the priced epsilons)."""

    e: int
    d: int
    r: int
    c: int

    def plus(self, e: int, d: int, r: int, c: int) -> _Sums:
        return _Sums(self.e + e, self.d + d, self.r + r, self.c + c)

    def exact(self) -> tuple[Fraction, Fraction, Fraction, Fraction]:
        return (from_units(self.e, EPSILON_SCALE), from_units(self.d, DELTA_SCALE), from_units(self.r, EPSILON_SCALE),
                from_units(self.c, EPSILON_SCALE))


def _sums(session: Session, dataset_id: int) -> _Sums:
    row = session.execute(
        select(
            func.coalesce(func.sum(LedgerEntry.epsilon_units), 0),
            func.coalesce(func.sum(LedgerEntry.delta_units), 0),
            func.coalesce(func.sum(LedgerEntry.rho_units), 0),
            func.coalesce(func.sum(func.coalesce(LedgerEntry.epsilon_priced_units, LedgerEntry.epsilon_units)), 0),
        ).where(LedgerEntry.dataset_id == dataset_id)
    ).one()
    return _Sums(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def _anchor(session: Session, dataset_id: int) -> ZcdpAnchor | None:
    """The anchor of the accountant's rule, written with the dataset's first rho charge (if any)."""
    row = session.execute(
        select(LedgerEntry.anchor_alpha_units, LedgerEntry.anchor_delta_z_units, LedgerEntry.anchor_offset_units)
        .where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.anchor_alpha_units.is_not(None))
        .order_by(LedgerEntry.id)
        .limit(1)
    ).first()
    if row is None:
        return None
    return ZcdpAnchor(
        alpha=from_units(row[0], ALPHA_SCALE), delta_z=from_units(row[1], DELTA_SCALE),
        offset=from_units(row[2], EPSILON_SCALE),
    )


def _anchor_units(anchor: ZcdpAnchor) -> tuple[int, int, int]:
    """The anchor in ledger units. alpha and delta_z are on the grid already; t is rounded up."""
    alpha_units = anchor.alpha * ALPHA_SCALE
    delta_z_units = anchor.delta_z * DELTA_SCALE
    if alpha_units.denominator != 1 or delta_z_units.denominator != 1:
        raise RuntimeError(f"anchor {anchor} is not on the ledger's grid")
    return int(alpha_units), int(delta_z_units), ceil_units(anchor.offset, EPSILON_SCALE)


def _budget_exact(budget: Budget) -> tuple[Fraction, Fraction]:
    return from_units(budget.epsilon_units, EPSILON_SCALE), from_units(budget.delta_units, DELTA_SCALE)


def _composed_units(sums: _Sums, budget: Budget, anchor: ZcdpAnchor | None) -> int:
    """The composed epsilon of the sums (docs/privacy.md 6.3), rounded UP to the grid."""
    if anchor is None:
        return sums.e  # basic composition: exactly E, no float round trip
    e, d, r, c = sums.exact()
    return ceil_units(composed_epsilon(e, d, r, _budget_exact(budget)[1], anchor, priced=c), EPSILON_SCALE)


def _holds(sums: _Sums, budget: Budget, anchor: ZcdpAnchor | None) -> bool:
    e, d, r, c = sums.exact()
    return budget_holds(e, d, r, *_budget_exact(budget), anchor, priced=c)


def _price_units(epsilon_units: int, anchor: ZcdpAnchor | None) -> int:
    """What a charge's epsilon costs in the rule: itself before the anchor, ``price_epsilon`` after."""
    if anchor is None or epsilon_units == 0:
        return epsilon_units
    return ceil_units(price_epsilon(from_units(epsilon_units, EPSILON_SCALE), anchor.alpha), EPSILON_SCALE)


def _locked_budget(session: Session, dataset: Dataset, *, lock: bool = True) -> Budget:
    """The dataset's budget row (locked for the charge with ``lock``; a preview reads it unlocked), or the refusal of
    a dataset without one."""
    query = select(Budget).where(Budget.dataset_id == dataset.id)
    budget = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if budget is None:
        raise ServiceError(
            f"dataset {dataset.name!r} has no privacy budget yet; a steward sets its epsilon and delta (PUT "
            f"/datasets/{dataset.name}/budget, or `marginalia budget set`)",
            code="no_budget",
            status=409,
        )
    return budget


def _status_of(name: str, sums: _Sums, budget: Budget, anchor: ZcdpAnchor | None) -> BudgetStatus:
    e, d, r, c = sums.exact()
    eps_b, delta_b = _budget_exact(budget)
    reserve = from_units(budget.delta_reserve_units, DELTA_SCALE)
    return BudgetStatus(
        dataset=name,
        epsilon_total=eps_b,
        delta_total=delta_b,
        epsilon_pure_spent=e,
        delta_spent=d,
        rho_spent=r,
        epsilon_spent=from_units(_composed_units(sums, budget, anchor), EPSILON_SCALE),
        anchored=anchor is not None,
        epsilon_priced_spent=c,
        delta_reserve=reserve,
        anchor=anchor,
        epsilon_spendable=remaining_epsilon(e, d, r, eps_b, delta_b, anchor, priced=c),
        delta_spendable=remaining_delta(d, delta_b, anchor),
        rho_spendable=from_units(floor_units(remaining_rho(e, d, r, eps_b, delta_b, anchor, reserve, priced=c),
                                             EPSILON_SCALE), EPSILON_SCALE),  # on the grid: chargeable as it is
    )


def _status(session: Session, dataset: Dataset, budget: Budget) -> BudgetStatus:
    return _status_of(dataset.name, _sums(session, dataset.id), budget, _anchor(session, dataset.id))


def _budget_refusal(name: str, epsilon_b: Fraction, delta_b: Fraction, sums: _Sums,
                    anchor: ZcdpAnchor | None) -> str:
    """Why a proposed budget cannot hold what the ledger has already spent, naming the parameter at fault."""
    e, d, r, _c = sums.exact()
    if anchor is not None and d > delta_b - anchor.delta_z:
        needed = anchor.delta_z + d
        return (f"dataset {name!r}: a budget with delta={float(delta_b):.3g} cannot hold what is already spent: the "
                f"zCDP releases were given delta_zcdp={float(anchor.delta_z):.3g} of delta (and (epsilon, delta) "
                f"releases spent {float(d):.3g}), so delta must be at least {float(needed):.3g}"
                + ("; did you forget delta?" if delta_b == 0 else ""))
    if anchor is None and d > delta_b:
        return (f"dataset {name!r}: a budget with delta={float(delta_b):.3g} cannot hold the delta={float(d):.3g} "
                "already spent")
    return (f"dataset {name!r}: a budget with epsilon={float(epsilon_b):g} cannot hold what is already spent "
            f"(epsilon {float(e):.6g} by (epsilon, delta) releases, rho {float(r):.6g} by zCDP releases); "
            "a budget can only be lowered to what has been spent")


def set_budget(
    engine: Engine,
    name: str,
    epsilon: object,
    delta: object,
    principal: str = "cli",
    delta_reserve: object = None,
) -> BudgetStatus:
    """Set (or change) a dataset's total budget. Refused if what is already spent would not fit.

    ``delta_reserve`` is the part of delta kept for (epsilon, delta) charges made after zCDP charges have started
    (docs/privacy.md 6.3); it only matters until the first zCDP charge. ``None`` (the default) keeps
    ``DEFAULT_RESERVE_SHARE`` (a tenth) of delta, so that objective perturbation stays possible after zCDP
    releases; pass 0 to give all of delta to zCDP releases."""
    epsilon_b = check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon")
    delta_b = exact(parameters.validate_delta(delta, "delta"))
    if delta_reserve is None:
        reserve = delta_b * DEFAULT_RESERVE_SHARE
    else:
        reserve = exact(parameters.validate_delta(delta_reserve, "delta_reserve"))
    if reserve > delta_b:
        raise ServiceError(f"delta_reserve {delta_reserve} exceeds delta {delta}", code="invalid_parameter")
    eps_units, delta_units = floor_units(epsilon_b, EPSILON_SCALE), floor_units(delta_b, DELTA_SCALE)
    if eps_units <= 0:
        raise ServiceError(f"epsilon {epsilon} is below the accountant's resolution 1e-12", code="invalid_parameter")
    with serialized_transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        budget = session.execute(
            select(Budget).where(Budget.dataset_id == dataset.id).with_for_update()
        ).scalar_one_or_none()
        sums = _sums(session, dataset.id)
        anchor = _anchor(session, dataset.id)
        proposed = Budget(dataset_id=dataset.id, epsilon_units=eps_units, delta_units=delta_units,
                          delta_reserve_units=min(ceil_units(reserve, DELTA_SCALE), delta_units))
        if (sums.e or sums.d or sums.r or anchor is not None) and not _holds(sums, proposed, anchor):
            raise BudgetExceeded(_budget_refusal(name, from_units(eps_units, EPSILON_SCALE),
                                                 from_units(delta_units, DELTA_SCALE), sums, anchor))
        if budget is None:
            budget = proposed
            session.add(budget)
        else:
            budget.epsilon_units, budget.delta_units = proposed.epsilon_units, proposed.delta_units
            budget.delta_reserve_units, budget.updated_at = proposed.delta_reserve_units, utcnow()
        entry = LedgerEntry(
            dataset_id=dataset.id,
            entry="budget",
            mechanism="budget",
            epsilon_units=0,
            delta_units=0,
            rho_units=0,
            epsilon_priced_units=0,
            epsilon_spent_after_units=_composed_units(sums, proposed, anchor),
            principal=principal,
            note=f"budget set to epsilon={float(epsilon_b)!r}, delta={float(delta_b)!r}, "
                 f"delta_reserve={float(from_units(proposed.delta_reserve_units, DELTA_SCALE))!r}",
        )
        session.add(entry)
        session.flush()
        ledger_chain.chain(session.connection(), entry)
        return _status(session, dataset, budget)


def budget_status(engine: Engine, name: str) -> BudgetStatus:
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        budget = session.execute(select(Budget).where(Budget.dataset_id == dataset.id)).scalar_one_or_none()
        if budget is None:
            raise ServiceError(f"dataset {name!r} has no privacy budget yet", code="no_budget", status=409)
        return _status(session, dataset, budget)


def _refusal(name: str, cost: PrivacyCost, status: BudgetStatus, reason: str) -> BudgetExceeded:
    """The one refusal message: what the request costs, why it does not fit, and what can still be spent (the same
    figures ``budget show`` prints)."""
    return BudgetExceeded(
        f"dataset {name!r}: this request costs {_describe(cost)} but {reason}; of the budget "
        f"epsilon={float(status.epsilon_total):g}, delta={float(status.delta_total):g} "
        f"(epsilon spent {float(status.epsilon_spent):.6g}, epsilon={float(status.epsilon_remaining):.6g} remains) "
        f"what can still be spent is {status.can_still_spend()}"
    )


def _why_refused(cost: PrivacyCost, status: BudgetStatus) -> str:
    if cost.delta > status.delta_spendable:
        return (f"its delta does not fit: (epsilon, delta) releases can spend delta={float(status.delta_spendable):.3g}"
                f" more ({status.explain_delta()})")
    if cost.rho > 0 and cost.rho > status.rho_spendable:
        return f"its rho does not fit: the largest zCDP charge that still fits is rho={float(status.rho_spendable):.6g}"
    return (f"its epsilon does not fit: the largest epsilon of an (epsilon, delta) release that still fits is "
            f"{float(status.epsilon_spendable):.6g}")


def quote_charge(name: str, sums: _Sums, budget: Budget, anchor: ZcdpAnchor | None, cost: PrivacyCost) -> ChargeQuote:
    """What charging ``cost`` to a ledger with these ``sums`` and ``anchor`` under ``budget`` writes, or why it is
    refused (the rule of docs/privacy.md 6.3): a pure function, no database. Its epsilon is priced with the anchor in
    force BEFORE the charge; the first zCDP charge fixes the anchor from the sums before it."""
    de, dd, dr = cost.as_units()
    price = _price_units(de, anchor)
    before = _composed_units(sums, budget, anchor)
    quote = {"dataset": name, "cost": cost, "epsilon_units": de, "delta_units": dd, "rho_units": dr,
             "priced_units": price, "epsilon_total_units": budget.epsilon_units, "epsilon_before_units": before}
    fixes = dr > 0 and anchor is None
    in_force = anchor
    if fixes:
        # The first zCDP charge fixes the rule's Renyi order and delta split from the sums before it.
        try:
            e, d, _r, _c = sums.exact()
            in_force = zcdp_anchor(*_budget_exact(budget), e, d, from_units(budget.delta_reserve_units, DELTA_SCALE))
        except parameters.PrivacyParameterError as exc:
            refusal = _refusal(name, cost, _status_of(name, sums, budget, None), f"no zCDP release fits ({exc})")
            return ChargeQuote(**quote, epsilon_after_units=None, anchor=None, fixes_anchor=False, refusal=refusal)
    after = sums.plus(de, dd, dr, price)
    refusal = None
    if not _holds(after, budget, in_force):
        status = _status_of(name, sums, budget, anchor)
        refusal = _refusal(name, cost, status, _why_refused(cost, status))
    return ChargeQuote(**quote, epsilon_after_units=_composed_units(after, budget, in_force), anchor=in_force,
                       fixes_anchor=fixes, refusal=refusal)


def preview_charge(engine: Engine, name: str, cost: PrivacyCost) -> ChargeQuote:
    """What charging ``cost`` to dataset ``name`` now would write, or the refusal it would meet, by the very function
    the charge uses (:func:`quote_charge`); it reads the ledger and writes nothing. A dataset without a budget is
    refused as the charge refuses it (``no_budget``). Another release made in between changes the answer: a preview
    is a quote, not a reservation."""
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        budget = _locked_budget(session, dataset, lock=False)
        return quote_charge(dataset.name, _sums(session, dataset.id), budget, _anchor(session, dataset.id), cost)


ledger_log = logging.getLogger("marginalia.ledger")


def _appended(session: Session, entry: LedgerEntry, dataset: str) -> None:
    """What follows every charge and refund in its transaction: its link in the ledger's hash chain
    (:mod:`db.ledger_chain`) and its log line once committed."""
    ledger_chain.chain(session.connection(), entry)
    _log_when_committed(session, entry, dataset)


def _log_when_committed(session: Session, entry: LedgerEntry, dataset: str) -> None:
    """One ``marginalia.ledger`` line for ``entry`` once its transaction commits (none if it rolls back): what it
    charged or refunded, on which dataset, for which mechanism and principal (docs/operations.md, "Logs")."""
    fields = {"entry": entry.id, "dataset": dataset, "mechanism": entry.mechanism, "release_id": entry.release_id,
              "epsilon": float(from_units(entry.epsilon_units, EPSILON_SCALE)),
              "delta": float(from_units(entry.delta_units, DELTA_SCALE)),
              "rho": float(from_units(entry.rho_units, EPSILON_SCALE)), "principal": entry.principal}

    def committed(_session: Session) -> None:
        log_event(ledger_log, f"{entry.entry} {fields['entry']}", kind=entry.entry, **fields)

    event.listen(session, "after_commit", committed, once=True)


def charge_in_session(
    session: Session,
    dataset: Dataset,
    cost: PrivacyCost,
    *,
    mechanism: str,
    release_id: int | None,
    principal: str,
    note: str = "",
    campaign_id: int | None = None,
) -> LedgerEntry:
    """Check that ``cost`` fits the budget and append its charge, inside the caller's serialised
    transaction (see :func:`db.engine.serialized_transaction`): the row :func:`quote_charge` computes, or its refusal.
    ``campaign_id`` names the campaign a ``campaign-simulation`` charge paid for."""
    budget = _locked_budget(session, dataset)
    quote = quote_charge(dataset.name, _sums(session, dataset.id), budget, _anchor(session, dataset.id), cost)
    if quote.refusal is not None:
        raise quote.refusal
    alpha_u, delta_z_u, offset_u = quote.anchor_columns()
    entry = LedgerEntry(
        dataset_id=dataset.id,
        release_id=release_id,
        campaign_id=campaign_id,
        entry="charge",
        mechanism=mechanism,
        epsilon_units=quote.epsilon_units,
        delta_units=quote.delta_units,
        rho_units=quote.rho_units,
        epsilon_priced_units=quote.priced_units,
        epsilon_spent_after_units=quote.epsilon_after_units,
        anchor_alpha_units=alpha_u,
        anchor_delta_z_units=delta_z_u,
        anchor_offset_units=offset_u,
        principal=principal,
        note=note,
    )
    session.add(entry)
    session.flush()
    _appended(session, entry, dataset.name)
    return entry


def reserve_release(
    engine: Engine,
    dataset_name: str,
    kind: str,
    mechanism: str,
    cost: PrivacyCost,
    params: dict[str, object],
    principal: str,
    runner: dict[str, object] | None = None,
    *,
    seeded: bool = False,
) -> tuple[int, int]:
    """Check-and-charge for a release: insert the ``pending`` release and its charge in one
    serialised transaction. Raises :class:`BudgetExceeded` (nothing written) when the cost does not
    fit. Returns (release id, charge id). ``runner`` fills the release's ``runner_*`` columns; ``seeded`` marks a
    release whose noise comes from a caller's seed."""
    with serialized_transaction(engine) as session:
        dataset = dataset_by_name(session, dataset_name)
        release = Release(dataset_id=dataset.id, kind=kind, mechanism=mechanism, params_json=json.dumps(params),
                          status="pending", details_json="{}", principal=principal, seeded=bool(seeded),
                          **(runner or {}))
        session.add(release)
        session.flush()
        entry = charge_in_session(session, dataset, cost, mechanism=mechanism, release_id=release.id,
                                  principal=principal, note=f"{kind} release {release.id}")
        return release.id, entry.id


def charge_simulation(engine: Engine, dataset_name: str, campaign_id: int, cost: PrivacyCost, principal: str,
                      note: str) -> int:
    """Check-and-charge, in one serialised transaction, a stored dataset's rows played through campaign
    ``campaign_id`` (mechanism ``campaign-simulation``, docs/privacy.md 8.7.7). Raises :class:`BudgetExceeded`
    (nothing written) when ``cost`` does not fit. Returns the charge's id (:func:`refund` reverses it)."""
    with serialized_transaction(engine) as session:
        dataset = dataset_by_name(session, dataset_name)
        return charge_in_session(session, dataset, cost, mechanism=SIMULATION_MECHANISM, release_id=None,
                                 principal=principal, note=note, campaign_id=campaign_id).id


def budget_effect(engine: Engine, charge_id: int) -> BudgetEffect:
    """What charge ``charge_id`` cost in the budget's own epsilon: the composed epsilon spent just before it (the
    previous ledger row) and just after it, with a one-line explanation when it fixed the zCDP anchor (why the
    first zCDP release costs more epsilon than its nominal epsilon) or was priced on that anchor. For a charge that
    was refunded, "after" is the spend once the refund was written (the refund's row), and there is no note; for one
    refunded in part (a release stopped on request part-way, docs/privacy.md 6.5) it is the same, and the note is
    about the rho it kept."""
    with transaction(engine) as session:
        charge = session.get(LedgerEntry, charge_id)
        if charge is None or charge.entry != "charge":
            raise NotFound(f"no charge with id {charge_id}", code="charge_not_found")
        before = session.execute(
            select(LedgerEntry.epsilon_spent_after_units)
            .where(LedgerEntry.dataset_id == charge.dataset_id, LedgerEntry.id < charge.id)
            .order_by(LedgerEntry.id.desc()).limit(1)
        ).scalar_one_or_none()
        refunded = session.execute(
            select(LedgerEntry.epsilon_spent_after_units, LedgerEntry.rho_units)
            .where(LedgerEntry.refunds_entry_id == charge.id)
        ).first()
        budget = session.execute(select(Budget).where(Budget.dataset_id == charge.dataset_id)).scalar_one()
        anchor = _anchor(session, charge.dataset_id)
    total = from_units(budget.epsilon_units, EPSILON_SCALE)
    before_eps = from_units(before or 0, EPSILON_SCALE)
    after_units, kept_rho_units = charge.epsilon_spent_after_units, charge.rho_units
    if refunded is not None:
        after_units, kept_rho_units = refunded[0], charge.rho_units + refunded[1]
        if kept_rho_units == 0:  # refunded whole
            return BudgetEffect(total, before_eps, from_units(after_units, EPSILON_SCALE))
    after_eps = from_units(after_units, EPSILON_SCALE)
    note = charge_note(anchor, charge.anchor_alpha_units is not None, charge.epsilon_units, kept_rho_units,
                       charge.epsilon_priced_units)
    return BudgetEffect(total, before_eps, after_eps, note)


def refund(engine: Engine, charge_id: int, reason: str, *, keep: PrivacyCost | None = None) -> LedgerEntry:
    """Append the reversal of a charge whose release failed before any noisy value existed; with ``keep``, the
    reversal of only the part of a zCDP charge beyond ``keep``: a release stopped on request after some of its steps
    drew noise keeps exactly their rho (docs/privacy.md 6.5). ``keep`` is put on the ledger's grid as every charge is
    (rounded up, :meth:`PrivacyCost.as_units`), so the charge less the refund is that rounded amount, exactly. A
    charge is refunded at most once (the ledger is append-only: the refund is a new row, the charge is never edited).
    """
    with serialized_transaction(engine) as session:
        charge = session.get(LedgerEntry, charge_id)
        if charge is None or charge.entry != "charge":
            raise NotFound(f"no charge with id {charge_id}", code="charge_not_found")
        already = session.execute(
            select(LedgerEntry.id).where(LedgerEntry.refunds_entry_id == charge_id)
        ).first()
        if already is not None:
            raise ServiceError(f"charge {charge_id} was already refunded", code="already_refunded", status=409)
        kept_rho = _kept_rho_units(charge, keep)
        dataset = session.get(Dataset, charge.dataset_id)
        budget = _locked_budget(session, dataset)
        price = charge.epsilon_units if charge.epsilon_priced_units is None else charge.epsilon_priced_units
        if kept_rho:  # a zCDP charge keeps part of its rho and nothing else: it has no epsilon, hence no price
            back = (0, 0, charge.rho_units - kept_rho, 0)
        else:
            back = (charge.epsilon_units, charge.delta_units, charge.rho_units, price)
        sums = _sums(session, dataset.id).plus(*(-amount for amount in back))
        anchor = _anchor(session, dataset.id)
        entry = LedgerEntry(
            dataset_id=charge.dataset_id,
            release_id=charge.release_id,
            campaign_id=charge.campaign_id,
            entry="refund",
            refunds_entry_id=charge.id,
            mechanism=charge.mechanism,
            epsilon_units=-back[0],
            delta_units=-back[1],
            rho_units=-back[2],
            epsilon_priced_units=-back[3],
            epsilon_spent_after_units=_composed_units(sums, budget, anchor),
            principal=charge.principal,
            note=reason,
        )
        session.add(entry)
        session.flush()
        _appended(session, entry, dataset.name)
        return entry


def _kept_rho_units(charge: LedgerEntry, keep: PrivacyCost | None) -> int:
    """The rho units a partial refund leaves on ``charge`` (0 for a whole refund). Only a zCDP charge (no epsilon,
    no delta) keeps a part, and that part is at most the charge and less than all of it."""
    if keep is None or keep.is_zero:
        return 0
    kept_e, kept_d, kept_r = keep.as_units()
    if kept_e or kept_d or charge.epsilon_units or charge.delta_units or not 0 < kept_r < charge.rho_units:
        raise ValueError(f"charge {charge.id} cannot keep {describe_cost(keep)}: only a part of a zCDP charge's rho, "
                         "above 0 and below the charge, is kept by a partial refund")
    return kept_r


def ledger_rows(engine: Engine, name: str, release_id: int | None = None) -> list[dict[str, object]]:
    """The dataset's ledger (only the rows of release ``release_id`` when given), oldest first, as plain dictionaries.
    The amounts are the stored units over their scale
    (Python's true division of two integers is correctly rounded: the same float as ``float(Fraction(units,
    scale))``), read as plain columns: 2,000 entries in a few milliseconds, for the console's ledger page."""
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        entries = session.execute(
            select(LedgerEntry.id, LedgerEntry.entry, LedgerEntry.release_id, Release.status, LedgerEntry.campaign_id,
                   LedgerEntry.mechanism, LedgerEntry.epsilon_units, LedgerEntry.delta_units, LedgerEntry.rho_units,
                   LedgerEntry.epsilon_priced_units, LedgerEntry.epsilon_spent_after_units, LedgerEntry.principal,
                   LedgerEntry.note, LedgerEntry.created_at)
            .outerjoin(Release, Release.id == LedgerEntry.release_id)
            .where(LedgerEntry.dataset_id == dataset.id,
                   *(() if release_id is None else (LedgerEntry.release_id == release_id,)))
            .order_by(LedgerEntry.id)
        ).all()
        return [
            {
                "entry_id": e.id,
                "entry": e.entry,
                "release_id": e.release_id,
                "release_status": e.status,
                "campaign_id": e.campaign_id,
                "mechanism": e.mechanism,
                "epsilon": int(e.epsilon_units) / EPSILON_SCALE,
                "delta": int(e.delta_units) / DELTA_SCALE,
                "rho": int(e.rho_units) / EPSILON_SCALE,
                "epsilon_priced": int(e.epsilon_units if e.epsilon_priced_units is None else e.epsilon_priced_units)
                / EPSILON_SCALE,
                "epsilon_spent_after": int(e.epsilon_spent_after_units) / EPSILON_SCALE,
                "principal": e.principal,
                "note": e.note,
                "created_at": e.created_at.isoformat(),
            }
            for e in entries
        ]


def _describe(cost: PrivacyCost) -> str:
    parts = []
    if cost.rho:
        parts.append(f"rho={float(cost.rho):.6g}")
    if cost.epsilon or not parts:
        parts.append(f"epsilon={float(cost.epsilon):.6g}")
    if cost.delta:
        parts.append(f"delta={float(cost.delta):.3g}")
    return ", ".join(parts)


def describe_cost(cost: PrivacyCost) -> str:
    """``rho=0.00664152`` or ``epsilon=0.5, delta=1e-06``: the non-zero parts of a cost."""
    return ", ".join(f"{k}={v:.6g}" for k, v in cost.to_json().items() if v) or "nothing"


def release_costs(engine: Engine, release_ids: Sequence[int]) -> dict[int, PrivacyCost]:
    """What the ledger charged each release (charges minus refunds), exactly."""
    if not release_ids:
        return {}
    with transaction(engine) as session:
        rows = session.execute(
            select(LedgerEntry.release_id, func.sum(LedgerEntry.epsilon_units), func.sum(LedgerEntry.delta_units),
                   func.sum(LedgerEntry.rho_units))
            .where(LedgerEntry.release_id.in_(list(release_ids)))
            .group_by(LedgerEntry.release_id)
        ).all()
    costs = {int(r[0]): PrivacyCost(from_units(int(r[1]), EPSILON_SCALE), from_units(int(r[2]), DELTA_SCALE),
                                    from_units(int(r[3]), EPSILON_SCALE)) for r in rows}
    return {i: costs.get(i, PrivacyCost()) for i in release_ids}


def ledger_head(engine: Engine, name: str) -> ledger_chain.Head:
    """The newest link of the dataset's hash chain, to publish (docs/operations.md, "A tamper-evident ledger")."""
    return verify_ledger(engine, name).head


def verify_ledger(engine: Engine, name: str, published: ledger_chain.Head | None = None) -> ledger_chain.Verdict:
    """The dataset's hash chain recomputed from its entries, and ``published`` (a head exported earlier) looked for
    in it (:func:`db.ledger_chain.verify`)."""
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        return ledger_chain.verify(session.connection(), dataset.name, dataset.id, published)


def published_head(name: str, given: object) -> ledger_chain.Head:
    """A head as ``--head`` printed it (``{"dataset", "entry_id", "entry_hash", ...}``), checked: the parameter
    ``published`` names what is wrong."""
    if not isinstance(given, dict):
        raise InvalidInput("published: a head is a JSON object {dataset, entry_id, entry_hash}, as the ledger's "
                           "head is printed",
                           code="invalid_parameter")
    entry_id, digest = given.get("entry_id"), given.get("entry_hash")
    if given.get("dataset") != name:
        raise InvalidInput(f"published: the head is of dataset {given.get('dataset')!r}, not {name!r}",
                           code="invalid_parameter")
    if isinstance(entry_id, bool) or not isinstance(entry_id, int) or entry_id < 0:
        raise InvalidInput("published: entry_id must be a non-negative integer", code="invalid_parameter")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InvalidInput("published: entry_hash must be 64 lowercase hex digits", code="invalid_parameter")
    return ledger_chain.Head(name, entry_id, digest, int(given.get("entries") or 0))
