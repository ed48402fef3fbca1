"""The privacy accountant: budgets, check-and-charge, refunds, and what is left.

Every charge is checked and written in ONE serialised transaction (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE`` on the budget row), so concurrent requests can never
overspend. The ledger is append-only (database triggers refuse UPDATE and DELETE); the remaining
budget is the ``budget_remaining`` view over it. The composition rule is in
:func:`service.zcdp.budget_holds` and derived in docs/privacy.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from db.engine import serialized_transaction, transaction
from db.models import ALPHA_SCALE, DELTA_SCALE, EPSILON_SCALE, Budget, Dataset, LedgerEntry, Release, utcnow
from service import zcdp
from service.cost import PrivacyCost, ceil_units, check_amount, exact, floor_units, from_units
from service.errors import BudgetExceeded, NotFound, ServiceError
from service.zcdp import ZcdpAnchor


@dataclass(frozen=True)
class BudgetStatus:
    dataset: str
    epsilon_total: Fraction
    delta_total: Fraction
    epsilon_pure_spent: Fraction  # E: sum of (epsilon, delta)-DP charges' epsilons
    delta_spent: Fraction  # D
    rho_spent: Fraction  # R
    epsilon_spent: Fraction  # the composed epsilon of the whole ledger (rounded up to the grid)
    anchored: bool = False  # whether zCDP charges have fixed the rule's anchor

    @property
    def epsilon_remaining(self) -> Fraction:
        return self.epsilon_total - self.epsilon_spent

    @property
    def delta_remaining(self) -> Fraction:
        return self.delta_total - self.delta_spent

    def to_json(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "epsilon_total": float(self.epsilon_total),
            "delta_total": float(self.delta_total),
            "epsilon_spent": float(self.epsilon_spent),
            "delta_spent": float(self.delta_spent),
            "rho_spent": float(self.rho_spent),
            "epsilon_pure_spent": float(self.epsilon_pure_spent),
            "epsilon_remaining": float(self.epsilon_remaining),
            "delta_remaining": float(self.delta_remaining),
            "zcdp_anchor_fixed": self.anchored,
        }


def dataset_by_name(session: Session, name: str) -> Dataset:
    dataset = session.execute(select(Dataset).where(Dataset.name == name)).scalar_one_or_none()
    if dataset is None:
        raise NotFound(f"no dataset named {name!r}", code="dataset_not_found")
    return dataset


def _sums(session: Session, dataset_id: int) -> tuple[int, int, int]:
    row = session.execute(
        select(
            func.coalesce(func.sum(LedgerEntry.epsilon_units), 0),
            func.coalesce(func.sum(LedgerEntry.delta_units), 0),
            func.coalesce(func.sum(LedgerEntry.rho_units), 0),
        ).where(LedgerEntry.dataset_id == dataset_id)
    ).one()
    return int(row[0]), int(row[1]), int(row[2])


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


def _composed_units(e_units: int, d_units: int, r_units: int, budget: Budget, anchor: ZcdpAnchor | None) -> int:
    """The composed epsilon of sums (E, D, R) (docs/privacy.md 6.3), rounded UP to the grid."""
    if r_units == 0:
        return e_units  # basic composition: exactly E, no float round trip
    spent = zcdp.epsilon_spent(
        from_units(e_units, EPSILON_SCALE),
        from_units(d_units, DELTA_SCALE),
        from_units(r_units, EPSILON_SCALE),
        from_units(budget.delta_units, DELTA_SCALE),
        anchor if r_units > 0 else None,
    )
    return ceil_units(Fraction(spent), EPSILON_SCALE)


def _holds(e_units: int, d_units: int, r_units: int, budget: Budget, anchor: ZcdpAnchor | None) -> bool:
    return zcdp.budget_holds(
        from_units(e_units, EPSILON_SCALE),
        from_units(d_units, DELTA_SCALE),
        from_units(r_units, EPSILON_SCALE),
        from_units(budget.epsilon_units, EPSILON_SCALE),
        from_units(budget.delta_units, DELTA_SCALE),
        anchor if r_units > 0 else None,
    )


def _locked_budget(session: Session, dataset: Dataset) -> Budget:
    budget = session.execute(
        select(Budget).where(Budget.dataset_id == dataset.id).with_for_update()
    ).scalar_one_or_none()
    if budget is None:
        raise ServiceError(
            f"dataset {dataset.name!r} has no privacy budget yet; a steward sets one with "
            f"`marginalia budget set {dataset.name} --epsilon E --delta D`",
            code="no_budget",
            status=409,
        )
    return budget


def _status(session: Session, dataset: Dataset, budget: Budget) -> BudgetStatus:
    e, d, r = _sums(session, dataset.id)
    anchor = _anchor(session, dataset.id)
    return BudgetStatus(
        dataset=dataset.name,
        epsilon_total=from_units(budget.epsilon_units, EPSILON_SCALE),
        delta_total=from_units(budget.delta_units, DELTA_SCALE),
        epsilon_pure_spent=from_units(e, EPSILON_SCALE),
        delta_spent=from_units(d, DELTA_SCALE),
        rho_spent=from_units(r, EPSILON_SCALE),
        epsilon_spent=from_units(_composed_units(e, d, r, budget, anchor), EPSILON_SCALE),
        anchored=anchor is not None,
    )


def set_budget(
    engine: Engine, name: str, epsilon: object, delta: object, principal: str = "cli", delta_reserve: object = 0
) -> BudgetStatus:
    """Set (or change) a dataset's total budget. Refused if what is already spent would not fit.

    ``delta_reserve`` is the part of delta kept for (epsilon, delta) charges made after zCDP charges
    have started (docs/privacy.md 6.3); it only matters until the first zCDP charge."""
    epsilon_b = check_amount(exact(zcdp.validate_epsilon(epsilon, "epsilon")), "epsilon")
    delta_b = exact(zcdp.validate_delta(delta, "delta"))
    reserve = exact(zcdp.validate_delta(delta_reserve, "delta_reserve"))
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
        e, d, r = _sums(session, dataset.id)
        anchor = _anchor(session, dataset.id)
        proposed = Budget(dataset_id=dataset.id, epsilon_units=eps_units, delta_units=delta_units,
                          delta_reserve_units=ceil_units(reserve, DELTA_SCALE))
        if (e or d or r) and not _holds(e, d, r, proposed, anchor):
            raise BudgetExceeded(
                f"dataset {name!r} has already spent more than a budget of epsilon={epsilon}, delta={delta} allows; "
                "a budget can only be lowered to what has been spent"
            )
        if budget is None:
            budget = proposed
            session.add(budget)
        else:
            budget.epsilon_units, budget.delta_units = proposed.epsilon_units, proposed.delta_units
            budget.delta_reserve_units, budget.updated_at = proposed.delta_reserve_units, utcnow()
        session.add(
            LedgerEntry(
                dataset_id=dataset.id,
                entry="budget",
                mechanism="budget",
                epsilon_units=0,
                delta_units=0,
                rho_units=0,
                epsilon_spent_after_units=_composed_units(e, d, r, proposed, anchor),
                principal=principal,
                note=f"budget set to epsilon={float(epsilon_b)!r}, delta={float(delta_b)!r}, "
                     f"delta_reserve={float(reserve)!r}",
            )
        )
        session.flush()
        return _status(session, dataset, budget)


def budget_status(engine: Engine, name: str) -> BudgetStatus:
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        budget = session.execute(select(Budget).where(Budget.dataset_id == dataset.id)).scalar_one_or_none()
        if budget is None:
            raise ServiceError(f"dataset {name!r} has no privacy budget yet", code="no_budget", status=409)
        return _status(session, dataset, budget)


def charge_in_session(
    session: Session,
    dataset: Dataset,
    cost: PrivacyCost,
    *,
    mechanism: str,
    release_id: int | None,
    principal: str,
    note: str = "",
) -> LedgerEntry:
    """Check that ``cost`` fits the budget and append its charge, inside the caller's serialised
    transaction (see :func:`db.engine.serialized_transaction`)."""
    budget = _locked_budget(session, dataset)
    e, d, r = _sums(session, dataset.id)
    de, dd, dr = cost.as_units()
    anchor = _anchor(session, dataset.id)
    new_anchor = None
    if dr > 0 and anchor is None:
        # The first zCDP charge fixes the rule's Renyi order and delta split from the sums before it.
        try:
            new_anchor = anchor = zcdp.zcdp_anchor(
                from_units(budget.epsilon_units, EPSILON_SCALE), from_units(budget.delta_units, DELTA_SCALE),
                from_units(e, EPSILON_SCALE), from_units(d, DELTA_SCALE),
                from_units(budget.delta_reserve_units, DELTA_SCALE),
            )
        except zcdp.PrivacyParameterError as exc:
            raise BudgetExceeded(f"dataset {dataset.name!r}: no budget is left for a zCDP release ({exc})") from None
    if not _holds(e + de, d + dd, r + dr, budget, anchor):
        status = _status(session, dataset, budget)
        room = ""
        if anchor is not None:
            rho_left = zcdp.remaining_rho(
                from_units(e, EPSILON_SCALE), from_units(d, DELTA_SCALE), from_units(r, EPSILON_SCALE),
                from_units(budget.epsilon_units, EPSILON_SCALE), from_units(budget.delta_units, DELTA_SCALE), anchor)
            room = f"; the largest zCDP charge that still fits is rho={float(rho_left):.6g}"
        raise BudgetExceeded(
            f"dataset {dataset.name!r}: this request costs {_describe(cost)} but only epsilon="
            f"{float(status.epsilon_remaining):.6g} (delta={float(status.delta_remaining):.3g}) of the budget "
            f"epsilon={float(status.epsilon_total):g}, delta={float(status.delta_total):g} remains{room}"
        )
    alpha_u, delta_z_u, offset_u = _anchor_units(new_anchor) if new_anchor is not None else (None, None, None)
    entry = LedgerEntry(
        dataset_id=dataset.id,
        release_id=release_id,
        entry="charge",
        mechanism=mechanism,
        epsilon_units=de,
        delta_units=dd,
        rho_units=dr,
        epsilon_spent_after_units=_composed_units(e + de, d + dd, r + dr, budget, anchor),
        anchor_alpha_units=alpha_u,
        anchor_delta_z_units=delta_z_u,
        anchor_offset_units=offset_u,
        principal=principal,
        note=note,
    )
    session.add(entry)
    session.flush()
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
) -> tuple[int, int]:
    """Check-and-charge for a release: insert the ``pending`` release and its charge in one
    serialised transaction. Raises :class:`BudgetExceeded` (nothing written) when the cost does not
    fit. Returns (release id, charge id). ``runner`` fills the release's ``runner_*`` columns."""
    with serialized_transaction(engine) as session:
        dataset = dataset_by_name(session, dataset_name)
        release = Release(dataset_id=dataset.id, kind=kind, mechanism=mechanism, params_json=json.dumps(params),
                          status="pending", details_json="{}", principal=principal, **(runner or {}))
        session.add(release)
        session.flush()
        entry = charge_in_session(session, dataset, cost, mechanism=mechanism, release_id=release.id,
                                  principal=principal, note=f"{kind} release {release.id}")
        return release.id, entry.id


def refund(engine: Engine, charge_id: int, reason: str) -> LedgerEntry:
    """Append the reversal of a charge whose release failed before any noisy value existed."""
    with serialized_transaction(engine) as session:
        charge = session.get(LedgerEntry, charge_id)
        if charge is None or charge.entry != "charge":
            raise NotFound(f"no charge with id {charge_id}", code="charge_not_found")
        already = session.execute(
            select(LedgerEntry.id).where(LedgerEntry.refunds_entry_id == charge_id)
        ).first()
        if already is not None:
            raise ServiceError(f"charge {charge_id} was already refunded", code="already_refunded", status=409)
        dataset = session.get(Dataset, charge.dataset_id)
        budget = _locked_budget(session, dataset)
        e, d, r = _sums(session, dataset.id)
        e, d, r = e - charge.epsilon_units, d - charge.delta_units, r - charge.rho_units
        anchor = _anchor(session, dataset.id)
        entry = LedgerEntry(
            dataset_id=charge.dataset_id,
            release_id=charge.release_id,
            entry="refund",
            refunds_entry_id=charge.id,
            mechanism=charge.mechanism,
            epsilon_units=-charge.epsilon_units,
            delta_units=-charge.delta_units,
            rho_units=-charge.rho_units,
            epsilon_spent_after_units=_composed_units(e, d, r, budget, anchor),
            principal=charge.principal,
            note=reason,
        )
        session.add(entry)
        session.flush()
        return entry


def ledger_rows(engine: Engine, name: str) -> list[dict[str, object]]:
    """The dataset's ledger, oldest first, as plain dictionaries."""
    with transaction(engine) as session:
        dataset = dataset_by_name(session, name)
        entries = session.execute(
            select(LedgerEntry, Release.status)
            .outerjoin(Release, Release.id == LedgerEntry.release_id)
            .where(LedgerEntry.dataset_id == dataset.id)
            .order_by(LedgerEntry.id)
        ).all()
        return [
            {
                "entry_id": entry.id,
                "entry": entry.entry,
                "release_id": entry.release_id,
                "release_status": status,
                "mechanism": entry.mechanism,
                "epsilon": float(from_units(entry.epsilon_units, EPSILON_SCALE)),
                "delta": float(from_units(entry.delta_units, DELTA_SCALE)),
                "rho": float(from_units(entry.rho_units, EPSILON_SCALE)),
                "epsilon_spent_after": float(from_units(entry.epsilon_spent_after_units, EPSILON_SCALE)),
                "principal": entry.principal,
                "note": entry.note,
                "created_at": entry.created_at.isoformat(),
            }
            for entry, status in entries
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
