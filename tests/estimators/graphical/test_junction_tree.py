"""Junction trees: the model size of a set of cliques is mbi's, computed without networkx."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.graphical import factors, junction_tree
from tests.support.tables import titanic_oracle


def test_model_size_matches_mbi() -> None:
    from estimators.graphical._mbi import mbi, mbi_domain

    oracle = titanic_oracle(("Survived", "Pclass", "Sex", "Age", "SibSp", "Parch", "Fare", "Embarked", "Cabin"))
    domain, names = oracle.domain, oracle.domain.names
    rng = np.random.default_rng(0)
    for trial in range(60):
        if trial % 3 == 0:  # spanning trees take mbi's no-fill path
            order = rng.permutation(len(names))
            cliques = [(names[order[i]], names[order[rng.integers(0, i)]]) for i in range(1, len(names))]
        else:
            count = rng.integers(0, 9)
            cliques = [tuple(rng.choice(names, size=rng.integers(1, 4), replace=False)) for _ in range(count)]
        expected = mbi.junction_tree.hypothetical_model_size(
            mbi_domain(domain), [factors.canonical_clique(domain, c) for c in cliques]
        )
        assert junction_tree.model_size_mb(domain, cliques) == pytest.approx(expected, rel=1e-12)
