"""Small slices of the real tables, as in-memory count oracles, for tests of mechanisms and estimators."""

from __future__ import annotations

import json

import pandas as pd

from service.mechanisms.selection import ArrayOracle
from tests.support.paths import DATA
from workloads.domain import Domain

SMALL = ("Survived", "Pclass", "Sex", "SibSp", "Parch", "Embarked")


def titanic_oracle(columns: tuple[str, ...] = SMALL) -> ArrayOracle:
    sizes = json.loads((DATA / "titanic" / "titanic-domain.json").read_text())
    frame = pd.read_csv(DATA / "titanic" / "titanic.csv")
    domain = Domain.from_sizes({c: sizes[c] for c in columns})
    return ArrayOracle(domain, {c: frame[c].to_numpy() for c in columns})
