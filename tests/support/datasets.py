"""The titanic table stored in a test database, with a budget (the fixture most service tests start from)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from service.accounting import accountant
from service.data import datasets
from service.data.datasets import StoredDataset


def load_titanic(engine: Engine, data_dir: Path, name: str = "titanic") -> None:
    folder = data_dir / "titanic"
    datasets.load_coded_csv(engine, name, folder / "titanic.csv", folder / "titanic-domain.json", ("Sex", "Embarked"))


def titanic_with_budget(engine: Engine, data_dir: Path, epsilon: str, delta: str) -> StoredDataset:
    """titanic loaded (Sex and Embarked unordered) with the budget (epsilon, delta)."""
    load_titanic(engine, data_dir)
    accountant.set_budget(engine, "titanic", epsilon, delta)
    return datasets.get_dataset(engine, "titanic")
