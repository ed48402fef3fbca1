"""Playing a stored sensitive dataset's rows through a campaign: a release of that dataset, charged to its budget.

The reports a run stores (and every estimate and published state made from them) are outputs computed from the
dataset's rows, so the run is a central mechanism on the dataset and must be paid for by its budget. The derivation
is docs/privacy.md 8.7.7; in short, with (epsilon, delta) the campaign's per-participant local guarantee (the largest
any one participant spends over all its rounds, ``ProtocolSpec.max_participant_cost``, stored on the campaign):

1. the number of simulated participants ``N`` is a public parameter the steward states (``rows``), never the
   table's row count (which is private under add/remove-one neighbours, docs/privacy.md 1): a run needs ``N`` and
   refuses a table with fewer rows;
2. ``N`` rows are drawn uniformly without replacement, in uniformly random order (:func:`sample_rows`), and each
   position of that order is one simulated participant (pseudonym = position, not the row);
3. the run is then (epsilon, delta)-DP for the table under add/remove-one neighbours: the same (epsilon, delta), no
   factor 2 (docs/privacy.md 8.7.7 gives the coupling), and that is what the ledger is charged.

:func:`simulate_table` validates everything, then checks and charges the budget in one serialised transaction
(:func:`service.accounting.accountant.charge_simulation`: mechanism ``campaign-simulation``, the row naming the
campaign) BEFORE any report is randomized; a budget that cannot hold the charge refuses it and nothing is submitted.
A run that fails or is stopped before its first batch is randomized is refunded, as a release that fails before any
noise is; after that the charge stands, whatever was stored.

Who may run it: the dataset's steward, in process (the command line holds the database). No HTTP route plays a
stored table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import DELTA_SCALE, EPSILON_SCALE, Campaign
from service import interrupts
from service.accounting import accountant
from service.campaigns.campaigns import get_campaign
from service.campaigns.simulate import (
    BATCH,
    SimulationResult,
    Tally,
    check_open,
    check_rows,
    feature_map,
    rows_from_frame,
    simulate,
)
from service.campaigns.types import CampaignInfo
from service.data.datasets import get_dataset
from service.data.oracle import TableCountOracle
from service.errors import InvalidInput
from service.privacy.cost import PrivacyCost, from_units
from service.privacy.noise import NoiseSource


@dataclass(frozen=True)
class TableSimulation:
    """A run on a stored dataset: what it stored, what it was charged, and the budget before and after."""

    result: SimulationResult
    dataset: str
    cost: PrivacyCost
    charge_id: int
    budget: accountant.BudgetEffect

    def to_json(self) -> dict[str, Any]:
        return {**self.result.to_json(), "dataset": self.dataset, "cost": self.cost.to_json(),
                "charge_id": self.charge_id, "budget": self.budget.to_json()}

    def describe(self) -> str:
        return (f"{self.result.describe()}\ndataset {self.dataset} was charged "
                f"{accountant.describe_cost(self.cost)} (ledger entry {self.charge_id}, campaign-simulation); "
                f"{self.budget.describe()}")


def participant_cost(engine: Engine, campaign: CampaignInfo) -> PrivacyCost:
    """The campaign's per-participant (epsilon, delta), exactly as stored (rounded up at creation)."""
    with transaction(engine) as session:
        eps_units, delta_units = session.execute(select(Campaign.epsilon_units, Campaign.delta_units)
                                                 .where(Campaign.id == campaign.id)).one()
    return PrivacyCost(from_units(eps_units, EPSILON_SCALE), from_units(delta_units, DELTA_SCALE))


def sample_rows(engine: Engine, campaign: CampaignInfo, dataset: str, target: str | None, rows: int | None,
                features: Sequence[str] | None = None, seed: int | None = None,
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """``rows`` participants drawn uniformly without replacement from the stored dataset's codes, in uniformly random
    order (a steward's in-process tool: the rows never leave). The table is read in a canonical order (sorted by the
    columns read), so a ``seed`` reproduces the draw on either backend."""
    stored = get_dataset(engine, dataset)
    columns = feature_map(campaign.features, features)
    wanted = [*columns, *([target] if target else [])]
    unknown = [c for c in wanted if c not in stored.sql_columns]
    if unknown:
        raise InvalidInput(f"dataset {dataset!r} has no column {unknown[0]!r} (columns: {list(stored.sql_columns)})",
                           code="unknown_column")
    if (target is None) != (campaign.target is None):
        raise InvalidInput(f"campaign {campaign.name!r} {'needs a --target' if campaign.target else 'takes no target'}",
                           code="invalid_parameter")
    if rows is None:
        raise InvalidInput(
            f"rows: a simulation of dataset {dataset!r} needs the number of simulated participants (--rows N). It is "
            "published (every round's report count), so it cannot default to the table's row count, which is private "
            "(docs/privacy.md 1 and 8.7.7); N rows are drawn at random", code="invalid_parameter")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise InvalidInput(f"rows must be a positive integer, got {rows!r}", code="invalid_parameter")
    # The table in canonical order is its distinct rows (ascending) each repeated ``count`` times: row i of it is
    # distinct row searchsorted(cumsum(counts), i, "right"), so only the distinct rows are held in memory.
    with TableCountOracle(engine, stored) as oracle:
        codes, counts = oracle.distinct_rows(wanted)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    if total < rows:
        raise InvalidInput(f"rows: dataset {dataset!r} has fewer than the {rows:,} rows asked for; give a smaller "
                           "--rows", code="invalid_parameter")
    picked = NoiseSource(seed).numpy_generator().choice(total, size=rows, replace=False, shuffle=True)
    frame = pd.DataFrame(codes[np.searchsorted(ends, picked, side="right")], columns=wanted)
    return rows_from_frame(campaign.name, frame, columns, target, None, f"dataset {dataset!r}")


def simulate_table(engine: Engine, campaign_name: str, dataset: str, rows: int | None, target: str | None = None,
                   features: Sequence[str] | None = None, seed: int | None = None, batch: int = BATCH,
                   progress: Callable[[int, int], None] | None = None, principal: str = "cli") -> TableSimulation:
    """Sample ``rows`` of the stored ``dataset``, charge its budget the campaign's per-participant (epsilon, delta),
    then play them through the campaign (module docstring)."""
    campaign = get_campaign(engine, campaign_name)
    check_open(campaign)
    x, y = sample_rows(engine, campaign, dataset, target, rows, features, seed)
    check_rows(campaign, x, y, batch)
    cost = participant_cost(engine, campaign)
    interrupts.raise_if_requested(f"before dataset {dataset!r} was charged: nothing was charged or simulated")
    charge_id = accountant.charge_simulation(
        engine, dataset, campaign.id, cost, principal,
        f"{rows:,} rows played through campaign {campaign.name!r} (id {campaign.id}, {campaign.protocol}) at its "
        f"per-participant epsilon={float(cost.epsilon):g}, delta={float(cost.delta):g}"
        + (f"; SEEDED (seed {seed}): no privacy" if seed is not None else "") + " (docs/privacy.md 8.7.7)")
    try:
        result = simulate(engine, campaign.name, x, y, seed=seed, batch=batch, progress=progress,
                          count_clipped=False)  # the dataset's rows: a count would be an unpaid release
    except BaseException as exc:
        raise _settled(engine, dataset, charge_id, cost, exc) from None
    return TableSimulation(result, dataset, cost, charge_id, accountant.budget_effect(engine, charge_id))


def _settled(engine: Engine, dataset: str, charge_id: int, cost: PrivacyCost, exc: BaseException) -> BaseException:
    """Refund the charge if no report was randomized; say what became of it either way (the exception to raise)."""
    tally: Tally | None = getattr(exc, "simulation", None)
    randomized = tally is None or tally.randomized
    if randomized:
        sentence = (f"the charge of {accountant.describe_cost(cost)} to dataset {dataset!r} (ledger entry "
                    f"{charge_id}) stands: reports were randomized")
    else:
        accountant.refund(engine, charge_id, f"the simulation failed before any report was randomized: "
                                             f"{type(exc).__name__}: {exc}"[:2000])
        sentence = (f"nothing was randomized, so the charge of {accountant.describe_cost(cost)} to dataset "
                    f"{dataset!r} was refunded")
    if isinstance(exc, interrupts.Interrupted):
        return interrupts.Interrupted(f"{exc.message}; {sentence}")
    exc.add_note(sentence)
    return exc
