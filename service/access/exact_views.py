"""The record of who looked at a table's exact figures: one append-only row (``exact_views``, migration 0017) per
look, written before the exact figures are shown, so a look that is not recorded is a look that did not happen.

Only stewards see exact figures, and only in the web console's quality view (a release's answers beside the table's
exact marginal: :mod:`service.api.console.pages.quality`); auditors read the record beside the ledger.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import ExactView, utcnow
from service.access.auth import Principal
from service.accounting.accountant import dataset_by_name


@dataclass(frozen=True)
class ExactLook:
    """One recorded look: at which release's quality, by whom, over which columns, when."""

    id: int
    dataset: str
    release_id: int | None
    principal: str
    attributes: tuple[str, ...]
    created_at: datetime


def record(engine: Engine, dataset: str, release_id: int | None, principal: Principal,
           attributes: tuple[str, ...]) -> None:
    """Record that ``principal`` is about to see the exact marginal over ``attributes`` of ``dataset``."""
    with transaction(engine) as session:
        session.add(ExactView(dataset_id=dataset_by_name(session, dataset).id, release_id=release_id,
                              api_key_id=principal.key_id,
                              principal=principal.label, attributes_json=json.dumps(list(attributes)),
                              created_at=utcnow()))


def looks(engine: Engine, dataset: str) -> list[ExactLook]:
    """Every recorded look at ``dataset``'s exact figures, oldest first."""
    with transaction(engine) as session:
        dataset_id = dataset_by_name(session, dataset).id
        rows = session.execute(select(ExactView).where(ExactView.dataset_id == dataset_id).order_by(ExactView.id))
        return [ExactLook(r.id, dataset, r.release_id, r.principal, tuple(json.loads(r.attributes_json)),
                          r.created_at) for r in rows.scalars()]
