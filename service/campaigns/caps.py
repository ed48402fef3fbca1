"""The per-participant cap on local spend: a default for everyone and a steward's overrides per participant.

The cap bounds a participant's total over every campaign (basic composition of her reports' local (epsilon, delta),
docs/privacy.md 8.7); :func:`db.reports.append_reports` refuses a report that would pass it, in the serialised
transaction that stores it. Caps are stored rounded down to the ledger's grid (1e-12 epsilon, 1e-18 delta).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, select

from db.engine import serialized_transaction, transaction
from db.models import DELTA_SCALE, EPSILON_SCALE, ApiKey, LocalCapDefault, Participant, utcnow
from db.reports import KEY_NAMESPACE, cap_units, gateway_namespace, participant_ids, spent_units
from service.errors import InvalidInput, NotFound
from service.privacy.cost import check_amount, exact, floor_units
from workloads.parameters import PrivacyParameterError, nonnegative_exact


@dataclass(frozen=True)
class Cap:
    epsilon: float
    delta: float

    def to_json(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}


def _units(epsilon: object, delta: object) -> tuple[int, int]:
    try:  # checked as numbers, then read at their shortest decimal (1e-6 is exactly one millionth)
        nonnegative_exact(epsilon, "epsilon")
        nonnegative_exact(delta, "delta")
        eps, dlt = check_amount(exact(epsilon), "epsilon"), exact(delta)
    except (PrivacyParameterError, ValueError, TypeError) as error:
        raise InvalidInput(str(error), code="invalid_parameter") from None
    if dlt >= 1:
        raise InvalidInput(f"delta must satisfy 0 <= delta < 1, got {float(dlt)}", code="invalid_parameter")
    return floor_units(exact(eps), EPSILON_SCALE), floor_units(exact(dlt), DELTA_SCALE)


def default_cap(engine: Engine) -> Cap:
    with transaction(engine) as session:
        row = session.get(LocalCapDefault, 1)
        return Cap(row.epsilon_units / EPSILON_SCALE, row.delta_units / DELTA_SCALE)


def set_default_cap(engine: Engine, epsilon: object, delta: object, principal: str = "cli") -> Cap:
    eps_units, delta_units = _units(epsilon, delta)
    with serialized_transaction(engine) as session:
        row = session.get(LocalCapDefault, 1)
        row.epsilon_units, row.delta_units, row.principal, row.updated_at = eps_units, delta_units, principal, utcnow()
    return default_cap(engine)


def participant_namespace(key_id: int | None = None, gateway_id: int | None = None) -> str:
    if (key_id is None) == (gateway_id is None):
        raise InvalidInput("name a participant by her key id, or by a gateway key id and a pseudonym",
                           code="invalid_parameter")
    return KEY_NAMESPACE if key_id is not None else gateway_namespace(gateway_id)


def set_participant_cap(engine: Engine, epsilon: object, delta: object, key_id: int | None = None,
                        gateway_id: int | None = None, pseudonym: str | None = None) -> Cap:
    """Override the cap of one participant (created if she has not reported yet)."""
    eps_units, delta_units = _units(epsilon, delta)
    namespace = participant_namespace(key_id, gateway_id)
    name = str(key_id) if key_id is not None else pseudonym
    if not name:
        raise InvalidInput("a gateway's participant is named by her pseudonym", code="invalid_parameter")
    if key_id is None and len(name) > 200:
        raise InvalidInput("a pseudonym has at most 200 characters", code="invalid_parameter")
    with serialized_transaction(engine) as session:
        role = "participant" if key_id is not None else "gateway"
        key = session.get(ApiKey, key_id if key_id is not None else gateway_id)
        if key is None or key.role != role:
            raise NotFound(f"no {role} key with id {key_id if key_id is not None else gateway_id}",
                           code="key_not_found")
        if key_id is not None:
            row = session.execute(select(Participant).where(Participant.api_key_id == key_id)).scalar_one_or_none()
            if row is None:
                row = Participant(namespace=namespace, pseudonym=name, api_key_id=key_id, created_at=utcnow())
                session.add(row)
        else:
            ids = participant_ids(session, namespace, [name])
            row = session.get(Participant, int(ids[0]))
        row.cap_epsilon_units, row.cap_delta_units = eps_units, delta_units
    return Cap(eps_units / EPSILON_SCALE, delta_units / DELTA_SCALE)


def key_spend(engine: Engine, key_id: int) -> dict[str, float]:
    """A participant key's own spend and cap (what her device may show her)."""
    with transaction(engine) as session:
        row = session.execute(select(Participant.id).where(Participant.api_key_id == key_id)).scalar_one_or_none()
        if row is None:
            cap = session.get(LocalCapDefault, 1)
            return {"epsilon_spent": 0.0, "delta_spent": 0.0, "epsilon_cap": cap.epsilon_units / EPSILON_SCALE,
                    "delta_cap": cap.delta_units / DELTA_SCALE}
        ids = np.array([row], dtype=np.int64)
        (eps,), (dlt,) = spent_units(session, ids)
        (cap_eps,), (cap_dlt,) = cap_units(session, ids)
        return {"epsilon_spent": eps / EPSILON_SCALE, "delta_spent": dlt / DELTA_SCALE,
                "epsilon_cap": cap_eps / EPSILON_SCALE, "delta_cap": cap_dlt / DELTA_SCALE}
