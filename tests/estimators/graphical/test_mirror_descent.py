"""The numpy estimator (entropic mirror descent): exact measurements give back the data's marginals."""

from __future__ import annotations

import numpy as np
import pytest

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


def _noisy_titanic(seed: int) -> tuple[object, list[Measurement]]:
    oracle = titanic_oracle()
    rng = np.random.default_rng(seed)
    cliques = [("Survived", "Sex"), ("Pclass", "Sex"), ("Survived", "Pclass"), ("Embarked", "Pclass")]
    return oracle, [Measurement(c, oracle.counts(c) + rng.normal(0.0, 5.0, oracle.domain.shape(c)), 5.0)
                    for c in cliques]


def test_fit_stops_on_its_tolerance_and_reports_it() -> None:
    """The default tolerance stops a converged fit before ``iters`` (on a block boundary, reported in
    ``iterations``); ``tol=None`` runs them all. The answers of the two fits agree to a small fraction of the noise
    (5 % of its standard deviation, the documented promise of DEFAULT_TOLERANCE): a rule that stopped too early
    fails here."""
    oracle, measurements = _noisy_titanic(3)
    done = []
    early = mirror_descent.fit(oracle.domain, measurements, iters=2000, progress=lambda i, n: done.append((i, n)))
    full = mirror_descent.fit(oracle.domain, measurements, iters=2000, tol=None)
    assert full.iterations == 2000
    assert early.iterations < 2000 and early.iterations % mirror_descent.STOP_BLOCK == 0
    assert done[-1] == (early.iterations, early.iterations)
    for m in measurements:
        assert np.abs(early.marginal(m.attributes) - full.marginal(m.attributes)).max() < 0.05 * m.stddev


def test_fit_rejects_a_bad_tolerance() -> None:
    oracle, measurements = _noisy_titanic(0)
    with pytest.raises(ValueError, match="tol"):
        mirror_descent.fit(oracle.domain, measurements, iters=10, tol=-1.0)
