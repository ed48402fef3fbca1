"""The SQL-backed count oracle: exact marginals of a stored dataset, counted by the database."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Engine

from db import tables
from service.datasets import StoredDataset
from workloads.domain import Domain


class SqlCountOracle:
    """:class:`service.mechanisms.base.CountOracle` over a dataset's ``data_<id>`` table.

    Each marginal is one ``GROUP BY`` query; results are cached for the oracle's lifetime (one
    release), since AIM asks for the same candidates round after round."""

    def __init__(self, engine: Engine, dataset: StoredDataset) -> None:
        self.engine = engine
        self.dataset = dataset
        self.domain: Domain = dataset.domain
        self._table = tables.data_table(dataset.data_table, [a.size for a in dataset.domain.attributes])
        self._cache: dict[tuple[str, ...], np.ndarray] = {}
        self.queries = 0

    def counts(self, attributes: tuple[str, ...]) -> np.ndarray:
        attributes = tuple(attributes)
        cached = self._cache.get(attributes)
        if cached is None:
            columns = [self.dataset.sql_columns[a] for a in attributes]
            with self.engine.connect() as connection:
                cached = tables.count_marginal(connection, self._table, columns, self.domain.shape(attributes))
            self.queries += 1
            self._cache[attributes] = cached
        return cached.copy()
