"""Fixtures of the estimators' tests: a 5,000-row Adult training sample, the Adult test set, titanic."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.paths import DATA
from workloads.domain import Domain


@pytest.fixture(scope="module")
def adult_train() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult" / "adult_train.csv").sample(5000, random_state=0)


@pytest.fixture(scope="module")
def adult_test() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult" / "adult_test.csv")


@pytest.fixture(scope="module")
def titanic() -> tuple[Domain, pd.DataFrame]:
    domain = Domain.from_json(
        (DATA / "titanic" / "titanic-domain.json").read_text(), ["Survived", "Sex", "Embarked", "Cabin", "Pclass"]
    )
    return domain, pd.read_csv(DATA / "titanic" / "titanic.csv")
