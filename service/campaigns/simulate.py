"""The simulator: plays participants through the real randomizer and the real submission path, in process.

A steward's tool (``marginalia simulate``). Rows come from a CSV of private values, a stored dataset's codes
(:mod:`service.campaigns.table_simulation`, which charges that dataset's budget first), or a synthetic design
(``estimators.local.glm.synthetic``). Each row is one participant, named ``simulator:<run>`` / row number.
Participants are assigned to the protocol's groups in row order (each group its planned size, the rest shared); each
open round's group randomizes (:mod:`workloads.local.device`) and submits in batches through
:func:`service.campaigns.submission.submit_reports`, the function the HTTP batch route calls. A round left open
after its group reported is closed (the steward's right) when a later round waits for it.

A closed campaign is refused before anything is read or randomized. A ``seed`` makes the simulated devices' noise
reproducible by whoever knows it, so the campaign is first marked ``seeded`` (it then answers nothing over HTTP;
docs/privacy.md 7 and 8.7.7): in-process callers (tests, benchmarks) pass one freely, the command line only under
``MARGINALIA_UNSAFE_SEEDED_RELEASES=1``. A stop request (Ctrl-C, :mod:`service.interrupts`) is honoured
between batches: the batches stored stand, the rest are never randomized. What a run reports is what was stored.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from service import interrupts
from service.campaigns.campaigns import close_round, get_campaign, mark_seeded, public_state
from service.campaigns.public_tables import get_public_table, public_matrix
from service.campaigns.submission import Submitter, submit_reports
from service.campaigns.types import CampaignInfo
from service.errors import Conflict, InvalidInput
from workloads.local.clipping import Clipped, merge
from workloads.local.device import clipped, make_report

BATCH = 20_000


@dataclass(frozen=True)
class SimulationResult:
    """What a run stored: ``participants`` simulated participants (of the ``rows`` given) stored ``reports`` per
    round."""

    campaign: str
    run: str
    participants: int
    reports: dict[int, int]
    seconds: float
    rows: int = 0
    #: per bound, the rows it clipped on the simulated devices (``None``: not counted, a stored dataset's rows)
    clipped: tuple[Clipped, ...] | None = ()

    @property
    def stored(self) -> int:
        return sum(self.reports.values())

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "run": self.run, "rows": self.rows, "participants": self.participants,
                "reports": {str(k): v for k, v in self.reports.items()}, "stored": self.stored,
                "seconds": self.seconds,
                "reports_per_second": self.stored / self.seconds if self.seconds > 0 else None,
                "clipped": None if self.clipped is None else [item.to_json() for item in self.clipped]}

    def describe(self) -> str:
        """One sentence: what was stored, and how many rows had no open round to report in."""
        rounds = ", ".join(f"round {k}: {v:,}" for k, v in self.reports.items()) or "no open round had room for them"
        unused = self.rows - self.participants
        tail = (f"; {unused:,} of the {self.rows:,} rows reported nothing (no open round of their group)"
                if unused > 0 else "")
        clipped = ("\nclipped on the devices: " + "; ".join(item.sentence() for item in self.clipped)
                   if self.clipped else "")
        return (f"{self.stored:,} reports from {self.participants:,} simulated participants stored in campaign "
                f"{self.campaign} ({rounds}) in {self.seconds:.1f} s{tail}{clipped}")


@dataclass
class Tally:
    """What a run has done so far: whether anything was randomized, and what was stored (for its error messages)."""

    campaign: str
    rows: int
    randomized: bool = False
    reports: dict[int, int] = field(default_factory=dict)
    reported: np.ndarray | None = None
    clipped: dict[str, Clipped] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.reported = np.zeros(self.rows, dtype=bool)

    def stored(self, index: int, rows: np.ndarray) -> None:
        self.reports[index] = self.reports.get(index, 0) + len(rows)
        self.reported[rows] = True

    @property
    def total(self) -> int:
        return sum(self.reports.values())

    def sentence(self) -> str:
        rounds = ", ".join(f"round {k}: {v:,}" for k, v in self.reports.items())
        return (f"{self.total:,} simulated reports were stored in campaign {self.campaign!r}"
                + (f" ({rounds})" if rounds else "") + (" and stand" if self.total else ""))


def check_open(campaign: CampaignInfo) -> None:
    """Refuse a campaign that accepts no reports, before anything is read, charged or randomized."""
    if campaign.status != "open":
        when = f" (closed at {campaign.closed_at.isoformat()})" if campaign.closed_at is not None else ""
        raise Conflict(f"campaign {campaign.name!r} is {campaign.status}{when}: it accepts no reports, so nothing "
                       "was simulated", code="campaign_closed")


def check_rows(campaign: CampaignInfo, x: np.ndarray, y: np.ndarray | None, batch: int = BATCH) -> np.ndarray:
    """``x`` as floats, checked against the campaign's features and target (and ``batch``)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(campaign.features) or x.shape[0] == 0:
        raise InvalidInput(f"the simulator needs rows of the {len(campaign.features)} features "
                           f"{list(campaign.features)}, got shape {x.shape}", code="invalid_parameter")
    if (y is None) != (campaign.target is None) or (y is not None and np.shape(y) != (x.shape[0],)):
        raise InvalidInput(f"campaign {campaign.name!r} needs {'a label per row' if campaign.target else 'no label'}",
                           code="invalid_parameter")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInput(f"batch must be a positive integer, got {batch}", code="invalid_parameter")
    return x


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
             batch: int = BATCH, progress: Callable[[int, int], None] | None = None,
             count_clipped: bool = True) -> SimulationResult:
    """Every row of ``x`` (raw features, ``(n, p)``) and ``y`` reports in the rounds of its group.

    ``count_clipped``: count, per public bound, the rows the simulated devices clip (``result.clipped``); the caller's
    own rows only (a stored dataset's simulation passes ``False``: the count would be a release of its rows that no
    budget pays for).

    Any exception it raises carries the run's :class:`Tally` as ``exc.simulation`` (whether anything was
    randomized, what was stored) and, as a note, what was stored; a stop request between batches raises
    :class:`~service.interrupts.Interrupted` saying so."""
    campaign = get_campaign(engine, campaign_name)
    tally = Tally(campaign.name, int(np.shape(x)[0]) if np.ndim(x) >= 1 else 0)
    try:
        return _run(engine, campaign, x, y, seed, batch, progress, tally, count_clipped)
    except BaseException as exc:
        exc.simulation = tally  # type: ignore[attr-defined]
        if not isinstance(exc, interrupts.Interrupted) and tally.randomized:
            exc.add_note(tally.sentence())
        raise


def _run(engine: Engine, campaign: CampaignInfo, x: np.ndarray, y: np.ndarray | None, seed: int | None, batch: int,
         progress: Callable[[int, int], None] | None, tally: Tally, count_clipped: bool = True) -> SimulationResult:
    check_open(campaign)
    x = check_rows(campaign, x, y, batch)
    if campaign.spec.aggregates_public_rows:
        x = public_row_ids(engine, campaign, x)
    if seed is not None:
        mark_seeded(engine, campaign.id)  # before the first seeded report exists
    rng = np.random.default_rng(seed) if seed is not None else None
    run = f"{campaign.id}:{os.urandom(6).hex()}"
    submitter = Submitter.simulator(run)
    members = assign_groups([(g.name, g.size) for g in campaign.spec.groups()], x.shape[0])
    total = sum(len(members[r.group]) for r in campaign.rounds if r.status != "closed")
    done, start = 0, time.perf_counter()
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
            interrupts.raise_if_requested(f"at a batch boundary: {tally.sentence()}; the other "
                                          f"{total - done:,} were never randomized")
            chunk = rows[lo:lo + batch]
            tally.randomized = True
            index, fields = make_report(state, x[chunk], None if y is None else y[chunk], rng)
            if count_clipped:
                merge(tally.clipped, clipped(state, x[chunk], None if y is None else y[chunk]))
            submit_reports(engine, campaign.name, index, fields, submitter, [str(i) for i in chunk.tolist()],
                           campaign=campaign)
            tally.stored(index, chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        campaign = get_campaign(engine, campaign.name)
        later = round_info.index + 1 < len(campaign.rounds)
        if later and campaign.rounds[round_info.index].status == "open":
            close_round(engine, campaign.name, round_info.index)
    return SimulationResult(campaign.name, run, int(tally.reported.sum()), dict(tally.reports),
                            time.perf_counter() - start, int(x.shape[0]),
                            tuple(tally.clipped.values()) if count_clipped else None)


def public_row_ids(engine: Engine, campaign: CampaignInfo, x: np.ndarray) -> np.ndarray:
    """A column ``(n, 1)`` of the public row ids of ``x``'s rows (a protocol whose participants name their public row,
    label-ldp): each row must equal a row of the campaign's public table; an error names the first that does not."""
    table = get_public_table(engine, campaign.public_table)
    public = public_matrix(engine, table, campaign.features)
    ids = {tuple(row): index for index, row in reversed(list(enumerate(public.tolist())))}
    found = [ids.get(tuple(row)) for row in x.tolist()]
    missing = next((i for i, value in enumerate(found) if value is None), None)
    if missing is not None:
        raise InvalidInput(f"campaign {campaign.name!r} takes features from public table {campaign.public_table!r}: "
                           f"row {missing + 1} of the simulated rows is not a row of it", code="invalid_parameter")
    return np.asarray(found, dtype=float)[:, np.newaxis]


# ------------------------------------------------------------------------------------------------- participants' rows
def rows_from_frame(campaign_name: str, frame: pd.DataFrame, features: Sequence[str], target: str | None,
                    rows: int | None, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The features and target columns of ``frame`` as floats (the first ``rows`` rows), errors naming the column."""
    missing = [c for c in (*features, *([target] if target else [])) if c not in frame.columns]
    if missing:
        raise InvalidInput(f"{where} has no column {missing[0]!r}, which campaign {campaign_name!r} needs "
                           f"(columns: {list(frame.columns)})", code="unknown_column")
    if rows is not None:
        if rows < 1:
            raise InvalidInput(f"rows must be a positive integer, got {rows}", code="invalid_parameter")
        frame = frame.iloc[:rows]
    out = []
    for name in (*features, *([target] if target else [])):
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            raise InvalidInput(f"{where}, row {int(np.argmax(bad)) + 1}: column {name!r} is not a finite number",
                               code="invalid_value")
        out.append(values)
    x = np.column_stack(out[:len(features)])
    return x, (out[-1] if target else None)


def rows_from_csv(engine: Engine, campaign_name: str, path: Path, rows: int | None = None,
                  features: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Participants from a CSV of their private values: the campaign's feature columns and its target."""
    campaign = get_campaign(engine, campaign_name)
    try:
        frame = pd.read_csv(path, nrows=rows)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InvalidInput(f"cannot read {path}: {error}", code="invalid_csv") from None
    return rows_from_frame(campaign.name, frame, feature_map(campaign.features, features), campaign.target, rows,
                           str(path))


def rows_from_design(engine: Engine, campaign_name: str, design: str, n: int, p: int, link: str = "logistic",
                     seed: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Participants from a synthetic design of Sec. 6 (``estimators.local.glm.synthetic``): ``n`` rows of ``p``
    features, labels from ``link`` with ``w* = 1 / sqrt(p)``."""
    from estimators.base import EstimatorError
    from estimators.local.glm.synthetic import design_name, make_problem

    campaign = get_campaign(engine, campaign_name)
    if p != len(campaign.features):
        raise InvalidInput(f"dimension mismatch: --p {p}, but campaign {campaign.name!r} has "
                           f"{len(campaign.features)} features", code="invalid_parameter")
    try:
        problem = make_problem(design_name(design), link, n, 1, p, rng=seed)
    except EstimatorError as error:
        raise InvalidInput(str(error), code="invalid_parameter") from None
    return problem.features, problem.labels if campaign.target is not None else None


def feature_map(campaign_features: Sequence[str], given: Sequence[str] | None) -> list[str]:
    """The source's column names for the campaign's features (``--features`` renames them, in order)."""
    if given is None:
        return list(campaign_features)
    if len(given) != len(campaign_features):
        raise InvalidInput(f"dimension mismatch: --features names {len(given)} columns, the campaign has "
                           f"{len(campaign_features)} features {list(campaign_features)}", code="invalid_parameter")
    return list(given)
