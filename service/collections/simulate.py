"""The simulator: plays participants through the real randomizer and the real submission path, in process.

A steward's tool (``marginalia simulate``): simulated participants are not people, so ``seed`` is allowed here (it
makes a run reproducible); no campaign and no route take a seed. Rows come from a CSV of private values, a stored
dataset's codes, or a synthetic design (``estimators.local.synthetic``). Each row is one participant, named
``simulator:<run>`` / row number. Participants are assigned to the protocol's groups in row order (each group its
planned size, the rest shared); each open round's group randomizes (:mod:`service.collections.device`) and submits
in batches through :func:`service.collections.submission.submit_reports`, the function the HTTP batch route calls. A
round left open after its group reported is closed (the steward's right) when a later round waits for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine

from service.collections.campaigns import close_round, get_campaign, public_state
from service.collections.device import make_report
from service.collections.submission import Submitter, submit_reports
from service.errors import InvalidInput

BATCH = 20_000


@dataclass(frozen=True)
class SimulationResult:
    campaign: str
    run: str
    participants: int
    reports: dict[int, int]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "run": self.run, "participants": self.participants,
                "reports": {str(k): v for k, v in self.reports.items()}, "seconds": self.seconds,
                "reports_per_second": sum(self.reports.values()) / self.seconds if self.seconds > 0 else None}


def assign_groups(groups: list[tuple[str, int | None]], rows: int) -> dict[str, np.ndarray]:
    """Row indices per group, in row order: each sized group takes its size (as far as rows last), the open-ended
    groups share the rest equally."""
    out, start = {}, 0
    sized = sum(size or 0 for _, size in groups)
    open_ended = [name for name, size in groups if size is None]
    share = max(rows - sized, 0) // max(len(open_ended), 1)
    for index, (name, size) in enumerate(groups):
        take = size if size is not None else share
        if size is None and name == open_ended[-1] and index == len(groups) - 1:
            take = rows - start
        out[name] = np.arange(start, min(start + take, rows))
        start = min(start + take, rows)
    return out


def simulate(engine: Engine, campaign_name: str, x: np.ndarray, y: np.ndarray | None = None, seed: int | None = None,
             batch: int = BATCH, progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Every row of ``x`` (raw features, ``(n, p)``) and ``y`` reports in the rounds of its group."""
    campaign = get_campaign(engine, campaign_name)
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(campaign.features) or x.shape[0] == 0:
        raise InvalidInput(f"the simulator needs rows of the {len(campaign.features)} features "
                           f"{list(campaign.features)}, got shape {x.shape}", code="invalid_parameter")
    if (y is None) != (campaign.target is None) or (y is not None and np.shape(y) != (x.shape[0],)):
        raise InvalidInput(f"campaign {campaign.name!r} needs {'a label per row' if campaign.target else 'no label'}",
                           code="invalid_parameter")
    if batch < 1:
        raise InvalidInput(f"batch must be a positive integer, got {batch}", code="invalid_parameter")
    rng = np.random.default_rng(seed) if seed is not None else None
    run = f"{campaign.id}:{os.urandom(6).hex()}"
    submitter = Submitter.simulator(run)
    members = assign_groups([(g.name, g.size) for g in campaign.spec.groups()], x.shape[0])
    total = sum(len(members[r.group]) for r in campaign.rounds if r.status != "closed")
    done, reports, start = 0, {}, time.perf_counter()
    for round_info in campaign.rounds:
        campaign = get_campaign(engine, campaign.name)
        current = campaign.rounds[round_info.index]
        if current.status == "closed":
            continue
        if current.status != "open":
            break
        state = public_state(campaign)
        rows = members[current.group]
        for lo in range(0, len(rows), batch):
            chunk = rows[lo:lo + batch]
            index, fields = make_report(state, x[chunk], None if y is None else y[chunk], rng)
            submit_reports(engine, campaign.name, index, fields, submitter, [str(i) for i in chunk.tolist()],
                           campaign=campaign)
            done += len(chunk)
            reports[index] = reports.get(index, 0) + len(chunk)
            if progress is not None:
                progress(done, total)
        campaign = get_campaign(engine, campaign.name)
        later = round_info.index + 1 < len(campaign.rounds)
        if later and campaign.rounds[round_info.index].status == "open":
            close_round(engine, campaign.name, round_info.index)
    return SimulationResult(campaign.name, run, int(x.shape[0]), reports, time.perf_counter() - start)
