"""ResidualPlanner's measurement (estimators/residual/measure.py) on the real titanic table: the noise law, the
closed-form variances against repeated releases, unbiasedness, exact reconstruction without noise, determinism."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from estimators.residual import basis
from estimators.residual.basis import ResidualError
from estimators.residual.measure import measure_residuals
from estimators.residual.planner import plan_residuals
from tests.support.paths import DATA
from workloads.domain import Domain

SMALL = ("Survived", "Pclass", "Sex", "Embarked")
WORKLOAD = [("Survived", "Pclass"), ("Pclass", "Sex"), ("Sex", "Embarked"), ("Survived", "Embarked")]
REPETITIONS = 3000


@pytest.fixture(scope="module")
def table() -> tuple[Domain, Callable[[tuple[str, ...]], np.ndarray]]:
    sizes = json.loads((DATA / "titanic" / "titanic-domain.json").read_text())
    frame = pd.read_csv(DATA / "titanic" / "titanic.csv")
    domain = Domain.from_sizes(sizes)

    def counts(attributes: tuple[str, ...]) -> np.ndarray:
        shape = domain.shape(attributes)
        if not attributes:
            return np.array(float(len(frame)))
        index = np.ravel_multi_index([frame[a].to_numpy() for a in attributes], shape)
        return np.bincount(index, minlength=math.prod(shape)).reshape(shape).astype(float)

    return domain, counts


def _sampler(seed: int) -> Callable[[float, int], np.ndarray]:
    rng = np.random.default_rng(seed)
    return lambda sigma, size: rng.normal(0.0, sigma, size)


@pytest.fixture(scope="module")
def repeated(table: tuple) -> tuple:
    """REPETITIONS releases of the small workload at rho = 1/50, one seeded sampler."""
    domain, counts = table
    plan = plan_residuals(domain.project(SMALL), WORKLOAD, Fraction(1, 50))
    gaussian = _sampler(2024)
    releases = [measure_residuals(plan, counts, gaussian) for _ in range(REPETITIONS)]
    return plan, releases


def test_noise_of_a_residual_has_the_planned_covariance_and_is_gaussian(table: tuple, repeated: tuple) -> None:
    _, counts = table
    plan, releases = repeated
    residual = ("Survived", "Pclass")
    truth = basis.project(counts(residual))
    noise = np.array([r.values[residual].ravel() - truth.ravel() for r in releases])
    sigma2 = plan.sigma(residual) ** 2
    projection = np.kron(np.eye(3) - 1 / 3, np.eye(3) - 1 / 3)
    covariance = np.cov(noise, rowvar=False)
    # each entry of a sample covariance has standard deviation at most sigma^2 sqrt(2 / (R - 1)) (Gaussian data,
    # |correlation| <= 1); 5 of them is a tolerance a wrong covariance (e.g. sigma^2 I) fails by a wide margin.
    assert np.abs(covariance - sigma2 * projection).max() <= 5 * sigma2 * math.sqrt(2 / (REPETITIONS - 1))
    # whitened in ResidualPlanner's coordinates (R z ~ N(0, sigma^2 R R^T)) the noise is i.i.d. N(0, 1)
    sub = np.kron(basis.subtraction_matrix(3), basis.subtraction_matrix(3))
    whitening = np.linalg.cholesky(np.linalg.inv(sigma2 * sub @ sub.T))  # L L^T = C^-1, so x L has covariance I
    white = (noise @ sub.T) @ whitening
    assert stats.kstest(white.ravel(), "norm").pvalue > 1e-3
    # residuals are measured independently: noise of two residuals is uncorrelated
    other = np.array([r.values[("Sex",)].ravel() - basis.project(counts(("Sex",))).ravel() for r in releases])
    cross = np.corrcoef(noise[:, 0], other[:, 0])[0, 1]
    assert abs(cross) < 5 / math.sqrt(REPETITIONS)  # sd of a sample correlation near 0 is 1/sqrt(R)


def test_closed_form_variances_match_repeated_releases_and_answers_are_unbiased(table: tuple, repeated: tuple) -> None:
    _, counts = table
    plan, releases = repeated
    domain = plan.domain
    closure = basis.downward_closure(domain, WORKLOAD)
    scale = math.sqrt(2 / (REPETITIONS - 1))  # relative sd of a sample variance of Gaussian data
    for clique in closure:
        estimates = np.array([r.marginal(clique).ravel() for r in releases])
        truth = np.asarray(counts(clique), dtype=float).ravel()
        expected = plan.cell_variance(clique)
        assert releases[0].cell_variance(clique) == pytest.approx(expected, rel=1e-9)
        sample = estimates.var(axis=0, ddof=1)
        # per cell: (s^2 / sigma^2 - 1) / sqrt(2 / (R - 1)) is approximately N(0, 1); 4.5 allows ~40 cells
        assert np.abs(sample / expected - 1).max() < 4.5 * scale, clique
        # unbiased: the mean over R releases is within 4.5 standard errors of the truth in every cell
        z = (estimates.mean(axis=0) - truth) / math.sqrt(expected / REPETITIONS)
        assert np.abs(z).max() < 4.5, clique


def test_noise_free_measurements_reconstruct_every_marginal_of_the_closure_exactly(table: tuple) -> None:
    domain, counts = table
    workload = list(itertools.combinations(domain.names, 2))
    plan = plan_residuals(domain, workload, Fraction(1))
    release = measure_residuals(plan, counts, lambda sigma, size: np.zeros(size))
    for clique in basis.downward_closure(domain, workload):
        assert np.allclose(release.marginal(clique), counts(clique), atol=1e-8), clique


def test_same_seed_same_release(table: tuple) -> None:
    domain, counts = table
    plan = plan_residuals(domain.project(SMALL), WORKLOAD, Fraction(1, 10))
    first = measure_residuals(plan, counts, _sampler(7))
    second = measure_residuals(plan, counts, _sampler(7))
    for residual in plan.residuals:
        assert np.array_equal(first.values[residual], second.values[residual])
    assert first.scales[()] == pytest.approx(float(plan.variance(())), rel=1e-12)


def test_bad_counts_and_samplers_are_reported(table: tuple) -> None:
    domain, counts = table
    plan = plan_residuals(domain.project(SMALL), WORKLOAD, Fraction(1, 10))
    with pytest.raises(ResidualError, match=r"counts\(\['Survived', 'Pclass'\]\) returned shape \(2,\)"):
        measure_residuals(plan, lambda attrs: np.zeros(2), _sampler(0))
    with pytest.raises(ResidualError, match="not finite"):
        measure_residuals(plan, lambda attrs: np.full(domain.shape(attrs), np.nan), _sampler(0))
    shifted = {("Survived", "Pclass"): counts(("Survived", "Pclass")) + 1}
    with pytest.raises(ResidualError, match="same table"):
        measure_residuals(plan, lambda attrs: shifted.get(attrs, counts(attrs)), _sampler(0))
    with pytest.raises(ResidualError, match="returned 1 values"):
        measure_residuals(plan, counts, lambda sigma, size: np.zeros(1))
    with pytest.raises(ResidualError, match="plan must be a ResidualPlan"):
        measure_residuals("plan", counts, _sampler(0))  # type: ignore[arg-type]
