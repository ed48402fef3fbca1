"""Public tables and campaigns for the collections' tests (in process, on the ``engine`` fixture's database)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from service.campaigns.public_tables import load_public_csv

FEATURES = ["a", "b", "c"]


def gaussian_rows(count: int, seed: int = 0) -> np.ndarray:
    """Zero-mean Gaussian features with unequal scales (the Stein-lemma setting)."""
    return np.random.default_rng(seed).normal(size=(count, len(FEATURES))) * np.array([1.0, 0.5, 2.0])


def logistic_labels(x: np.ndarray, coef: np.ndarray, seed: int = 1) -> np.ndarray:
    return (np.random.default_rng(seed).random(x.shape[0]) < 1.0 / (1.0 + np.exp(-x @ coef))).astype(float)


def load_public(engine: Engine, tmp_path: Path, rows: np.ndarray, name: str = "pub",
                columns: list[str] | None = None) -> str:
    path = tmp_path / f"{name}.csv"
    pd.DataFrame(rows, columns=columns or FEATURES).to_csv(path, index=False)
    load_public_csv(engine, name, path)
    return name
