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
from sqlalchemy.orm import Session

from db.engine import transaction
from db.models import Dataset, ExactView, utcnow
from service.access.auth import Principal
from service.errors import NotFound


@dataclass(frozen=True)
class ExactLook:
    """One recorded look: at which release's quality, by whom, over which columns, when."""

    id: int
    dataset: str
    release_id: int | None
    principal: str
    attributes: tuple[str, ...]
    created_at: datetime

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "dataset": self.dataset, "release_id": self.release_id, "principal": self.principal,
                "attributes": list(self.attributes), "created_at": self.created_at.isoformat()}


def _dataset_id(session: Session, name: str) -> int:
    found = session.execute(select(Dataset.id).where(Dataset.name == name)).scalar_one_or_none()
    if found is None:
        raise NotFound(f"no dataset named {name!r}", code="dataset_not_found")
    return found


def record(engine: Engine, dataset: str, release_id: int | None, principal: Principal,
           attributes: tuple[str, ...]) -> None:
    """Record that ``principal`` is about to see the exact marginal over ``attributes`` of ``dataset``."""
    with transaction(engine) as session:
        session.add(ExactView(dataset_id=_dataset_id(session, dataset), release_id=release_id,
                              api_key_id=principal.key_id,
                              principal=principal.label, attributes_json=json.dumps(list(attributes)),
                              created_at=utcnow()))


def looks(engine: Engine, dataset: str) -> list[ExactLook]:
    """Every recorded look at ``dataset``'s exact figures, oldest first."""
    with transaction(engine) as session:
        dataset_id = _dataset_id(session, dataset)
        rows = session.execute(select(ExactView).where(ExactView.dataset_id == dataset_id).order_by(ExactView.id))
        return [ExactLook(r.id, dataset, r.release_id, r.principal, tuple(json.loads(r.attributes_json)),
                          r.created_at) for r in rows.scalars()]
