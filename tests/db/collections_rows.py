"""Rows for the collections tables written straight through the models (the db layer's tests need no service)."""

from __future__ import annotations

from sqlalchemy import Engine

from db.engine import transaction
from db.models import ApiKey, Campaign, CampaignRound

UNIT = 10**12  # epsilon units per 1.0


def make_campaign(engine: Engine, name: str, rounds: list[tuple[str, float, float]],
                  status: str = "open") -> int:
    """A campaign with ``rounds`` (group, epsilon, delta); round 0 open, the others pending. Returns its id."""
    epsilon_units = max(sum(int(e * UNIT) for g, e, _ in rounds if g == group) for group, _, _ in rounds)
    with transaction(engine) as session:
        campaign = Campaign(name=name, protocol="ldp-avg", spec_json="{}", features_json="[]",
                            epsilon_units=epsilon_units, delta_units=0, status=status)
        session.add(campaign)
        session.flush()
        for index, (group, epsilon, delta) in enumerate(rounds):
            session.add(CampaignRound(
                campaign_id=campaign.id, round_index=index, group_name=group, epsilon_units=int(epsilon * UNIT),
                delta_units=int(delta * 10**18), status="open" if index == 0 else "pending",
                state_json="{}" if index == 0 else None, report_count=0))
        return int(campaign.id)


def make_key(engine: Engine, role: str, name: str = "k") -> int:
    with transaction(engine) as session:
        key = ApiKey(name=name, role=role, key_hash=f"{name}-{role}".ljust(64, "0")[:64])
        session.add(key)
        session.flush()
        return int(key.id)
