"""A tiny table for the dry-run tests (4 columns, 240 rows: every mechanism runs in a fraction of a second) and what
they compare: the tables a dry run must leave alone, and a release's ledger row in its exact units."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import text

from service.accounting import accountant
from service.data import datasets

TINY = "tiny"
DOMAIN = {"a": 4, "b": 3, "s": 2, "y": 5}
WORKLOAD = [["a", "b"], ["s"], ["b", "y"]]
#: Every table of the service database a dry run must leave alone.
WATCHED = ("ledger_entries", "releases", "release_models", "jobs", "idempotency_keys")


def load_tiny(engine, folder: Path, epsilon: str = "50", delta: str = "1e-3") -> None:  # noqa: ANN001
    rng = np.random.default_rng(29)
    frame = pd.DataFrame({c: rng.integers(0, n, 240) for c, n in DOMAIN.items()})
    frame["y"] = np.clip(frame["a"] + frame["s"] + rng.integers(-1, 2, 240), 0, 4)
    frame.to_csv(folder / "tiny.csv", index=False)
    (folder / "tiny-domain.json").write_text(json.dumps(DOMAIN))
    datasets.load_coded_csv(engine, TINY, folder / "tiny.csv", folder / "tiny-domain.json", ("s",))
    accountant.set_budget(engine, TINY, epsilon, delta)


def snapshot(engine) -> dict[str, list[tuple]]:  # noqa: ANN001
    with engine.connect() as connection:
        return {table: [tuple(r) for r in connection.execute(text(f"SELECT * FROM {table} ORDER BY 1"))]
                for table in WATCHED}


def charge_row(engine, release_id: int) -> dict[str, object]:  # noqa: ANN001
    columns = ("epsilon_units", "delta_units", "rho_units", "epsilon_priced_units", "epsilon_spent_after_units",
               "anchor_alpha_units", "anchor_delta_z_units", "anchor_offset_units")
    with engine.connect() as connection:
        row = connection.execute(text(f"SELECT {', '.join(columns)} FROM ledger_entries WHERE entry = 'charge' "
                                      "AND release_id = :r"), {"r": release_id}).one()
    return {c: None if v is None else int(v) for c, v in zip(columns, row, strict=True)}
