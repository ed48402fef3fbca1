"""The simulator: plays participants through the real randomizer and the real submission path, in process.

A steward's tool (``marginalia simulate``): simulated participants are not people, so ``seed`` is allowed here (it
makes a run reproducible); no campaign and no route take a seed. Rows come from a CSV of private values, a stored
dataset's codes, or a synthetic design (``estimators.local.glm.synthetic``). Each row is one participant, named
``simulator:<run>`` / row number. Participants are assigned to the protocol's groups in row order (each group its
planned size, the rest shared); each open round's group randomizes (:mod:`service.client.device`) and submits
in batches through :func:`service.collections.submission.submit_reports`, the function the HTTP batch route calls. A
round left open after its group reported is closed (the steward's right) when a later round waits for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from service.client.device import make_report
from service.collections.campaigns import CampaignInfo, close_round, get_campaign, public_state
from service.collections.public_tables import get_public_table, public_matrix
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
    if campaign.spec.aggregates_public_rows:
        x = public_row_ids(engine, campaign, x)
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
    return rows_from_frame(campaign.name, frame, _feature_map(campaign.features, features), campaign.target, rows,
                           str(path))


def rows_from_dataset(engine: Engine, campaign_name: str, dataset: str, target: str | None,
                      features: Sequence[str] | None = None, rows: int | None = None,
                      ) -> tuple[np.ndarray, np.ndarray | None]:
    """Participants from a stored dataset's integer codes (a steward's in-process tool: the rows never leave)."""
    from sqlalchemy import text

    from service.data.datasets import get_dataset

    campaign = get_campaign(engine, campaign_name)
    stored = get_dataset(engine, dataset)
    columns = _feature_map(campaign.features, features)
    wanted = [*columns, *([target] if target else [])]
    unknown = [c for c in wanted if c not in stored.sql_columns]
    if unknown:
        raise InvalidInput(f"dataset {dataset!r} has no column {unknown[0]!r} (columns: {list(stored.sql_columns)})",
                           code="unknown_column")
    if (target is None) != (campaign.target is None):
        raise InvalidInput(f"campaign {campaign.name!r} {'needs a --target' if campaign.target else 'takes no target'}",
                           code="invalid_parameter")
    select_list = ", ".join(f'"{stored.sql_columns[c]}"' for c in wanted)
    limit = f" LIMIT {int(rows)}" if rows is not None else ""
    with engine.connect() as connection:
        values = connection.execute(text(f'SELECT {select_list} FROM "{stored.data_table}"{limit}')).all()
    frame = pd.DataFrame(values, columns=wanted)
    return rows_from_frame(campaign.name, frame, columns, target, rows, f"dataset {dataset!r}")


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


def _feature_map(campaign_features: Sequence[str], given: Sequence[str] | None) -> list[str]:
    """The source's column names for the campaign's features (``--features`` renames them, in order)."""
    if given is None:
        return list(campaign_features)
    if len(given) != len(campaign_features):
        raise InvalidInput(f"dimension mismatch: --features names {len(given)} columns, the campaign has "
                           f"{len(campaign_features)} features {list(campaign_features)}", code="invalid_parameter")
    return list(given)
