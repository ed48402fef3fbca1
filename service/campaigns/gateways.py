"""A steward's control of gateway keys: the campaigns each may submit to and its quotas (issue 18, finding 7).

A gateway key submits batches for participants it names by pseudonyms; it may submit only to a campaign a steward
named in its scope, at most ``reports`` reports over that campaign and ``per_round`` in any one round. The check is
:func:`db.gateways.charge_quota`, in the transaction that stores the batch (service/campaigns/submission.py);
this module sets, removes and shows scopes (``marginalia keys scope | unscope | scopes``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.engine import serialized_transaction, transaction
from db.gateways import scope_of, used_reports
from db.models import ApiKey, Campaign, GatewayScope, utcnow
from service.errors import InvalidInput, NotFound

#: The largest quota a steward may set (reports; far above any campaign's planned size).
MAX_QUOTA = 10**12


@dataclass(frozen=True)
class GatewayScopeInfo:
    key_id: int
    campaign: str
    reports: int
    per_round: int | None
    used: int
    used_per_round: dict[int, int]

    def to_json(self) -> dict[str, object]:
        return {"key_id": self.key_id, "campaign": self.campaign, "reports": self.reports,
                "per_round": self.per_round, "used": self.used,
                "used_per_round": {str(k): v for k, v in sorted(self.used_per_round.items())}}


def _quota(value: object, name: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUOTA:
        raise InvalidInput(f"{name} must be an integer in [1, {MAX_QUOTA:.0e}], got {value!r}",
                           code="invalid_parameter")
    return value


def _gateway_key(session: Session, key_id: int) -> ApiKey:
    key = session.get(ApiKey, key_id)
    if key is None or key.role != "gateway":
        raise NotFound(f"no gateway key with id {key_id}", code="key_not_found")
    return key


def _campaign(session: Session, name: str) -> Campaign:
    row = session.execute(select(Campaign).where(Campaign.name == name)).scalar_one_or_none()
    if row is None:
        raise NotFound(f"no campaign named {name!r}", code="campaign_not_found")
    return row


def _info(session: Session, key_id: int, campaign: Campaign, scope: GatewayScope) -> GatewayScopeInfo:
    used = used_reports(session, key_id, campaign.id)
    return GatewayScopeInfo(key_id, campaign.name, int(scope.max_reports),
                            None if scope.max_reports_per_round is None else int(scope.max_reports_per_round),
                            sum(used.values()), used)


def set_scope(engine: Engine, key_id: int, campaign: str, reports: object, per_round: object = None,
              principal: str = "cli") -> GatewayScopeInfo:
    """Open ``campaign`` to gateway key ``key_id`` with a quota of ``reports`` over the campaign and ``per_round``
    in any one round (``None``: only the campaign's quota); replaces the key's earlier quotas there. A quota below
    what the gateway has already sent is allowed: it refuses every later batch."""
    total = _quota(reports, "reports")
    round_quota = _quota(per_round, "per_round", optional=True)
    with serialized_transaction(engine) as session:
        _gateway_key(session, key_id)
        row = _campaign(session, campaign)
        scope = scope_of(session, key_id, row.id)
        if scope is None:
            scope = GatewayScope(api_key_id=key_id, campaign_id=row.id)
            session.add(scope)
        scope.max_reports, scope.max_reports_per_round = total, round_quota
        scope.principal, scope.updated_at = principal[:200], utcnow()
        session.flush()
        return _info(session, key_id, row, scope)


def remove_scope(engine: Engine, key_id: int, campaign: str) -> None:
    """Close ``campaign`` to the gateway key (its reports already accepted stay)."""
    with serialized_transaction(engine) as session:
        _gateway_key(session, key_id)
        row = _campaign(session, campaign)
        scope = scope_of(session, key_id, row.id)
        if scope is None:
            raise NotFound(f"gateway key {key_id} has no scope on campaign {campaign!r}", code="scope_not_found")
        session.delete(scope)


def list_scopes(engine: Engine, key_id: int | None = None) -> list[GatewayScopeInfo]:
    """Every gateway scope (of one key when ``key_id`` is given), with what each gateway has used."""
    with transaction(engine) as session:
        query = select(GatewayScope, Campaign).join(Campaign, Campaign.id == GatewayScope.campaign_id)
        if key_id is not None:
            _gateway_key(session, key_id)
            query = query.where(GatewayScope.api_key_id == key_id)
        rows = session.execute(query.order_by(GatewayScope.api_key_id, Campaign.name)).all()
        return [_info(session, int(scope.api_key_id), campaign, scope) for scope, campaign in rows]
