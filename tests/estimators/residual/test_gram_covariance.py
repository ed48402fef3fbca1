"""The closed-form noise covariance of a linear form of ``Z^T Z`` read from noisy residuals
(estimators/residual/gram_covariance.py): its Jacobians are exactly the map ``gram_from_marginals`` applies, and the
covariance matches the spread of the form over redrawn residual noise."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from estimators.central.sufficient_stats import gram_from_marginals
from estimators.residual.basis import project
from estimators.residual.gram_covariance import centred_basis, gram_form_covariance, gram_form_jacobians
from estimators.residual.reconstruct import NoisyResiduals
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

DOMAIN = Domain.from_dict({"a": {"size": 3, "kind": "ordinal"}, "b": {"size": 2, "kind": "categorical"},
                           "c": {"size": 4, "kind": "categorical"}, "y": {"size": 3, "kind": "ordinal"}})


def _residuals(rng: np.random.Generator, scale: float = 1.0) -> NoisyResiduals:
    cliques = [(), *[(n,) for n in DOMAIN.names], *itertools.combinations(DOMAIN.names, 2)]
    values = {c: project(rng.normal(size=DOMAIN.shape(c))) if c else np.asarray(rng.normal() + 50.0)
              for c in cliques}
    return NoisyResiduals(DOMAIN, values, {c: scale * (1 + i % 3) for i, c in enumerate(cliques)})


def _form(residuals: NoisyResiduals, design: DesignEncoding, weights: np.ndarray) -> np.ndarray:
    def read(attributes: tuple[str, ...]) -> np.ndarray:
        ordered = tuple(a for a in DOMAIN.names if a in attributes)
        return np.transpose(residuals.marginal(ordered), [ordered.index(a) for a in attributes])

    stats = gram_from_marginals(design, read, total=float(residuals.marginal(())))
    return stats.zz[:-1] @ weights


@pytest.mark.parametrize("intercept", [True, False])
def test_the_jacobians_are_the_map_gram_from_marginals_applies(intercept: bool) -> None:
    rng = np.random.default_rng(1)
    design = DesignEncoding(DOMAIN, ["c", "a", "b"], "y", intercept=intercept)
    weights = rng.normal(size=len(design.gram_names))
    residuals = _residuals(rng)
    jacobians = gram_form_jacobians(residuals, design, weights)
    expected = _form(residuals, design, weights)
    total = np.zeros_like(expected)
    for clique, jacobian in jacobians.items():
        columns = np.ones((1, 1))  # Q_A: the Kronecker product of the centred bases, attributes in domain order
        for a in clique:
            columns = np.kron(columns, centred_basis(DOMAIN.size(a)))
        total += jacobian @ (columns.T @ np.asarray(residuals.values[clique]).reshape(-1))
    assert np.allclose(total, expected)


@pytest.mark.slow
def test_the_covariance_matches_redrawn_noise() -> None:
    rng = np.random.default_rng(2)
    design = DesignEncoding(DOMAIN, ["a", "c"], "y")
    weights = rng.normal(size=len(design.gram_names))
    residuals = _residuals(rng, scale=4.0)
    covariance = gram_form_covariance(residuals, design, weights)
    draws = []
    for _ in range(2000):
        noise = {c: project(rng.normal(scale=np.sqrt(s), size=DOMAIN.shape(c))) if c else
                 np.asarray(rng.normal(scale=np.sqrt(s))) for c, s in residuals.scales.items()}
        draws.append(_form(NoisyResiduals(DOMAIN, noise, residuals.scales), design, weights))
    empirical = np.cov(np.stack(draws).T)
    assert np.allclose(np.diag(covariance), np.diag(empirical), rtol=0.12)
    assert np.allclose(covariance, empirical, atol=0.12 * np.sqrt(np.outer(np.diag(covariance),
                                                                           np.diag(covariance))).max())
