"""Z^T Z from marginals (Ferrando & Sheldon, "Private Regression via Data-Dependent Sufficient Statistic
Perturbation", Prop. 3.2) and the layout of GramStatistics."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.central.reference import counting_marginal
from estimators.central.sufficient_stats import (
    GramStatistics,
    estimate_total,
    gram_from_marginals,
    gram_from_rows,
    statistics_from_rows,
)
from tests.support.central_designs import LOGISTIC_FEATURES, linear_design, relative_error
from workloads.encodings import DesignEncoding


# --- Z^T Z from marginals (Prop. 3.2) -------------------------------------------------------------
@pytest.mark.parametrize("intercept", [True, False])
def test_gram_from_exact_marginals_equals_rows_titanic_mixed_encodings(titanic, intercept):
    domain, rows = titanic
    overrides = {
        "Pclass": "one_hot",  # full one-hot
        "Embarked": np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 0.0]]),  # an arbitrary 2 x 3 A_j
        "Cabin": "scalar",  # a categorical column encoded as a scalar
    }
    design = DesignEncoding(domain, ["Pclass", "Sex", "Age", "Embarked", "Cabin", "SibSp"], "Fare",
                            intercept=intercept, overrides=overrides)  # fmt: skip
    stats = gram_from_marginals(design, counting_marginal(rows, domain))
    X, y = design.encode(rows)
    exact = gram_from_rows(X, y, intercept)
    assert relative_error(stats.zz, exact) < 1e-9
    assert relative_error(stats.xtx, exact[:-1, :-1]) < 1e-9
    assert relative_error(stats.xty, exact[:-1, -1]) < 1e-9
    assert stats.n == pytest.approx(len(rows), rel=1e-12)  # every exact marginal sums to n


@pytest.mark.parametrize("intercept", [True, False])
def test_gram_from_exact_marginals_equals_rows_adult(adult_domain, adult_train, intercept):
    for design in (
        linear_design(adult_domain, intercept),
        DesignEncoding(adult_domain, LOGISTIC_FEATURES, "income>50K", "logistic", intercept=intercept),
    ):
        stats = gram_from_marginals(design, counting_marginal(adult_train, adult_domain))
        exact = statistics_from_rows(design, adult_train)
        assert relative_error(stats.zz, exact.zz) < 1e-9
        assert stats.feature_names == exact.feature_names == design.feature_names


def test_logistic_xty_is_sum_of_signed_rows(adult_domain, adult_train):
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    stats = gram_from_marginals(design, counting_marginal(adult_train, adult_domain))
    X, y = design.encode(adult_train)
    positive, negative = X[y > 0].sum(axis=0), X[y < 0].sum(axis=0)
    assert np.allclose(stats.xty[1:], positive - negative)  # sum_i y_i x_i with y in {-1, +1}
    assert stats.xty[0] == pytest.approx(np.sum(y))  # the intercept entry: sum_i y_i
    assert stats.yty == pytest.approx(len(adult_train))  # y_i^2 = 1


def test_estimate_total_weights_by_inverse_cells():
    # sums 10 (2 cells) and 14 (4 cells): (10/2 + 14/4) / (1/2 + 1/4) = 8.5 / 0.75
    assert estimate_total([np.array([4.0, 6.0]), np.full((2, 2), 3.5)]) == pytest.approx(8.5 / 0.75)


def test_noisy_marginals_give_symmetric_gram_and_use_the_total(adult_domain, adult_train):
    design = DesignEncoding(adult_domain, ["age", "race", "sex"], "income>50K", "logistic")
    exact = counting_marginal(adult_train, adult_domain)
    rng = np.random.default_rng(7)
    noisy = {attrs: exact(attrs) + rng.normal(0.0, 30.0, exact(attrs).shape) for attrs in design.required_marginals()}
    stats = gram_from_marginals(design, noisy.__getitem__)
    assert np.array_equal(stats.zz, stats.zz.T)
    assert stats.n == pytest.approx(estimate_total(noisy.values()))
    assert stats.zz[0, 0] == stats.n
    fixed = gram_from_marginals(design, noisy.__getitem__, total=5000.0)
    assert fixed.zz[0, 0] == 5000.0 and fixed.n == 5000.0


def test_marginal_with_wrong_shape_is_rejected(adult_domain, adult_train):
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    exact = counting_marginal(adult_train, adult_domain)
    with pytest.raises(EstimatorError, match="axes in the order asked"):
        gram_from_marginals(design, lambda attrs: exact(attrs).T)


def test_gram_statistics_validates_its_layout():
    with pytest.raises(EstimatorError, match="3 x 3"):
        GramStatistics(np.eye(2), ("a",), "y", True, 10.0)
