"""What the service stored of a campaign, read back with SQL: its rows of the local ledger (:func:`ledger_reports`)
and a round's running sums (:func:`aggregate_sums`).
"""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import text


def ledger_reports(engine, campaign: str) -> list[tuple[int, int, int, int]]:  # noqa: ANN001
    """The campaign's rows of the local ledger: participant, round, epsilon and delta units spent."""
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text(
            "SELECT r.participant_id, r.round_index, r.epsilon_units, r.delta_units FROM reports r JOIN campaigns c "
            "ON c.id = r.campaign_id WHERE c.name = :c"), {"c": campaign})]


def aggregate_sums(engine, campaign: str, round_index: int = 0) -> dict[str, np.ndarray]:  # noqa: ANN001
    """Round ``round_index``'s running sums as the service stored them."""
    from estimators.local.aggregate import ReportAggregate

    with engine.connect() as connection:
        raw = connection.execute(text("SELECT r.aggregate_json FROM campaign_rounds r JOIN campaigns c ON c.id = "
                                      "r.campaign_id WHERE c.name = :c AND r.round_index = :i"),
                                 {"c": campaign, "i": round_index}).scalar_one()
    return ReportAggregate.from_json(json.loads(raw)).sums
