"""The Gram matrix as Kronecker queries (estimators/residual/regression_queries.py): the queries reproduce
Prop. 3.2's ``Z^T Z`` from exact marginals, and a plan weighted by them lowers the Gram entries' variance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from estimators.central.sufficient_stats import gram_from_marginals
from estimators.residual.basis import ResidualError
from estimators.residual.planner import plan_residuals
from estimators.residual.regression_queries import gram_queries, gram_workload
from tests.support.paths import DATA
from workloads.domain import Domain
from workloads.encodings import DesignEncoding


@pytest.fixture(scope="module")
def titanic() -> tuple[Domain, pd.DataFrame]:
    domain = Domain.from_sizes(json.loads((DATA / "titanic" / "titanic-domain.json").read_text()))
    return domain, pd.read_csv(DATA / "titanic" / "titanic.csv")


def _counts(frame: pd.DataFrame, domain: Domain, attributes: tuple[str, ...]) -> np.ndarray:
    index = np.ravel_multi_index([frame[a].to_numpy() for a in attributes], domain.shape(attributes))
    return np.bincount(index, minlength=domain.cells(attributes)).reshape(domain.shape(attributes)).astype(float)


def _apply(query, counts: np.ndarray) -> np.ndarray:
    out = counts
    for axis, factor in enumerate(query.factors):  # (⊗ F_i) m: contract each axis with its factor
        out = np.moveaxis(np.tensordot(factor, out, axes=([1], [axis])), 0, axis)
    return out.ravel()


@pytest.mark.parametrize("intercept", [True, False])
def test_queries_reproduce_the_gram_matrix(titanic, intercept: bool) -> None:
    """Every query applied to the exact marginal gives the matching block of gram_from_marginals' Z^T Z (the same
    numbers, up to float rounding): a wrong factor, axis order or diagonal layout fails here."""
    domain, frame = titanic
    design = DesignEncoding(domain, ["Pclass", "Sex", "Age"], "Fare", "linear", intercept)
    gram = gram_from_marginals(design, lambda attrs: _counts(frame, domain, attrs))
    blocks = {enc.attribute: rows for enc, rows in design.gram_blocks()}
    queries = list(gram_queries(design))
    expected = []  # the documented order: per attribute its diagonal block (then its intercept row), then pairs
    for _, rows in design.gram_blocks():
        expected.append(gram.zz[rows, rows].ravel())
        if intercept:
            expected.append(gram.zz[0, rows])
    names = [enc.attribute for enc, _ in design.gram_blocks()]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            expected.append(gram.zz[blocks[a], blocks[b]].ravel())
    assert len(queries) == len(expected)
    for query, block in zip(queries, expected, strict=True):
        np.testing.assert_allclose(_apply(query, _counts(frame, domain, query.attributes)), block, rtol=1e-12,
                                   atol=1e-9)
    seen = len(queries)
    q = len(blocks)
    assert seen == q + q * (q - 1) // 2 + (q if intercept else 0)


def test_weighted_plan_lowers_the_gram_variance(titanic) -> None:
    """The plan whose loss counts the Gram entries has a smaller total Gram variance than the plain marginal plan at
    the same rho (it minimises exactly that sum, so anything else is a bug in the plumbing), and costs rho exactly."""
    domain, _ = titanic
    design = DesignEncoding(domain, ["Pclass", "Sex", "Age", "SibSp"], "Fare", "linear", True)
    queries = gram_queries(design, target_weight=3.0)
    workload = gram_workload(design)
    plain = plan_residuals(domain, workload, "1/10")
    weighted = plan_residuals(domain, [(c, 1e-9) for c in workload], "1/10", queries=queries)

    def gram_variance(plan) -> float:
        return sum(q.weight * float(plan.query_variances(q).sum()) for q in queries)

    assert weighted.cost() == plain.cost() == plain.rho
    assert gram_variance(weighted) < 0.9 * gram_variance(plain)


def test_bad_arguments(titanic) -> None:
    domain, _ = titanic
    design = DesignEncoding(domain, ["Pclass"], "Fare", "linear", True)
    with pytest.raises(ResidualError, match="target_weight"):
        gram_queries(design, target_weight=0.0)
    with pytest.raises(ResidualError, match="design"):
        gram_queries("Fare")  # type: ignore[arg-type]


@pytest.mark.slow
def test_gram_variances_match_repeated_releases() -> None:
    """The closed-form variance of every Gram entry (``plan.query_variances``) against the empirical variance of
    1,500 seeded releases of a small table. The relative standard error of a sample variance of n Gaussian draws is
    sqrt(2 / (n - 1)) = 0.037; 5 of them (18 %) bounds every entry's deviation with room for the 30-odd entries."""
    from estimators.residual.measure import measure_residuals
    from estimators.residual.regression_queries import regression_plan

    domain = Domain.from_json(json.dumps({"a": 3, "b": 4, "y": 3}), ["a"])
    design = DesignEncoding(domain, ["a", "b"], "y", "linear", True)
    rng = np.random.default_rng(11)
    joint = rng.integers(0, 30, size=(3, 4, 3)).astype(float)
    axes = {"a": 0, "b": 1, "y": 2}

    def counts(attrs: tuple[str, ...]) -> np.ndarray:
        kept = joint.sum(axis=tuple(i for n, i in axes.items() if n not in attrs))
        return np.transpose(kept, np.argsort(np.argsort([axes[a] for a in attrs])))

    plan = regression_plan(design, "1/2")
    assert plan.cost() == plan.rho
    queries = gram_queries(design)
    draws = []
    for _ in range(1500):
        release = measure_residuals(plan, counts, lambda sigma, size: rng.normal(0.0, sigma, size))
        draws.append(np.concatenate([_apply(q, release.marginal(q.attributes)) for q in queries]))
    empirical = np.var(np.array(draws), axis=0, ddof=1)
    predicted = np.concatenate([plan.query_variances(q) for q in queries])
    np.testing.assert_allclose(empirical, predicted, rtol=0.18)


def test_gram_noise_scale_is_the_same_from_the_plan_and_from_a_release(titanic) -> None:
    """The ridge scale read from a release's public scales equals the one computed from its plan (the scales are the
    plan's variances, rounded up to the sampling floats), and it is sqrt(p * mean X^T X variance) of the plan."""
    from estimators.residual.measure import measure_residuals
    from estimators.residual.regression_queries import gram_noise_scale, regression_plan

    domain, frame = titanic
    design = DesignEncoding(domain, ["Sex", "Pclass", "Embarked"], "Survived", "linear", True)
    plan = regression_plan(design, "1/5")
    rng = np.random.default_rng(0)
    release = measure_residuals(plan, lambda attrs: _counts(frame, domain, attrs),
                                lambda sigma, size: rng.normal(0.0, sigma, size))
    from_plan = gram_noise_scale(plan, design)
    assert gram_noise_scale(release, design) == pytest.approx(from_plan, rel=1e-12)
    entries = np.concatenate([plan.query_variances(q) for q in gram_queries(design) if "Survived" not in q.attributes])
    assert from_plan == pytest.approx(float(np.sqrt(len(design.gram_names) * entries.mean())), rel=1e-12)
