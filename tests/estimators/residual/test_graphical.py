"""The graphical model fitted to a residual release (estimators/residual/graphical.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from estimators.residual.basis import ResidualError
from estimators.residual.graphical import fit_model, model_cliques
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import plan_residuals
from tests.support.tables import titanic_oracle


def _release(rho: str, seed: int):
    oracle = titanic_oracle()
    small = [a for a in oracle.domain.names if oracle.domain.size(a) <= 9]
    pairs = list(itertools.combinations(small, 2))
    plan = plan_residuals(oracle.domain, pairs, rho)
    rng = np.random.default_rng(seed)
    return oracle, pairs, measure_residuals(plan, lambda attrs: oracle.counts(attrs).astype(float),
                                            lambda sigma, size: rng.normal(0.0, sigma, size))


def test_model_reproduces_a_precise_release() -> None:
    """At a large rho (noise sd about 0.1 count per cell) the model fitted to the release gives back the table's
    pairs it kept: within 1 % of N in L1 each (the fit's own convergence error; noise alone is far smaller)."""
    oracle, pairs, release = _release("1000", 0)
    fitted = fit_model(release, iters=3000)
    kept = [c for c in model_cliques(release, 80.0) if len(c) == 2]
    assert kept, "some pair must fit the model"
    for clique in kept:
        assert np.abs(fitted.marginal(clique) - oracle.counts(clique)).sum() < 0.01 * oracle.rows
    assert 0 < fitted.iterations <= 3000


def test_model_size_cap_keeps_the_strongest_pairs() -> None:
    """A tiny cap keeps fewer pairs than the default one, and the first pair kept is the one of largest
    signal-to-noise ratio."""
    _, pairs, release = _release("1", 1)
    small = set(model_cliques(release, 0.01))
    large = set(model_cliques(release, 80.0))
    assert len(small) < len(large)
    strongest = max(large, key=lambda c: float((release.values[c] ** 2).sum()) / release.scales[c]
                    / np.prod([release.domain.size(a) - 1 for a in c]))
    assert model_cliques(release, 0.01)[0] == strongest
    with pytest.raises(ResidualError, match="NoisyResiduals"):
        fit_model("release")  # type: ignore[arg-type]
