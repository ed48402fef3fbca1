"""Rows for the collections tables written straight through the models (the db layer's tests need no service)."""

from __future__ import annotations

from sqlalchemy import Engine, insert

from db.engine import transaction
from db.models import ApiKey, Campaign, CampaignRound, utcnow

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
    """A key row naming only the columns ``api_keys`` has had since its first revision, so that the migration tests
    can make keys on a downgraded schema too (later revisions added nullable columns: 0011 ``source_scope_json``)."""
    with engine.begin() as connection:
        inserted = connection.execute(insert(ApiKey.__table__).values(
            name=name, role=role, key_hash=f"{name}-{role}".ljust(64, "0")[:64], created_at=utcnow()))
        return int(inserted.inserted_primary_key[0])
