"""The numpy estimator (entropic mirror descent): exact measurements give back the data's marginals."""

from __future__ import annotations

import numpy as np

from estimators.graphical import mirror_descent
from estimators.graphical.mirror_descent import Measurement
from tests.support.tables import titanic_oracle


def test_fit_recovers_consistent_marginals() -> None:
    """With exact (noise-free) measurements the optimum of the loss is the data's own marginals,
    so a converged fit must reproduce them; the tolerance is 0.5 % of N in L1 per marginal."""
    oracle = titanic_oracle()
    cliques = [("Survived", "Sex"), ("Pclass", "Sex"), ("Survived", "Pclass"), ("SibSp", "Parch"), ("Embarked",)]
    exact = [Measurement(c, oracle.counts(c).astype(float), 1.0) for c in cliques]
    fitted = mirror_descent.fit(oracle.domain, exact, iters=2000)
    for c in cliques:
        assert np.abs(fitted.marginal(c) - oracle.counts(c)).sum() < 0.005 * oracle.rows
    assert fitted.marginal(("Sex", "Survived")).shape == (2, 3)  # axes in the order asked
