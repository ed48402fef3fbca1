"""DD-SSP linear regression (Ferrando & Sheldon, Alg. 1) from exact and noisy statistics."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.central.linear import DDSSPLinearRegression
from estimators.central.reference import OLSReference, counting_marginal, fit_on_rows
from estimators.central.sufficient_stats import (
    GramStatistics,
    gram_from_marginals,
    statistics_from_rows,
)
from estimators.psd import project_psd, smallest_eigenvalue
from tests.support.central_designs import linear_design


# --- DD-SSP linear (Alg. 1) -----------------------------------------------------------------------
@pytest.mark.parametrize("intercept", [True, False])
def test_ddssp_linear_with_exact_marginals_equals_ols(adult_domain, adult_train, intercept):
    design = linear_design(adult_domain, intercept)
    stats = gram_from_marginals(design, counting_marginal(adult_train, adult_domain))
    model = DDSSPLinearRegression().fit(stats)
    X, y = design.encode(adult_train)
    ols = OLSReference(fit_intercept=intercept).fit(X, y, design.feature_names)
    # this subsample misses some levels (e.g. workclass=?), so X^T X is singular: both are minimum-norm solutions
    assert np.max(np.abs(model.coef_ - ols.coef_)) <= 1e-8 * np.max(np.abs(ols.coef_))
    assert model.intercept_ == pytest.approx(ols.intercept_, abs=1e-8)
    assert np.allclose(model.predict(X), ols.predict(X), atol=1e-8)
    assert model.feature_names_ == design.feature_names
    assert fit_on_rows(adult_train, design).coef_ == pytest.approx(ols.coef_, abs=1e-12)


def test_ddssp_linear_handles_indefinite_noisy_statistics(adult_domain, adult_train):
    design = linear_design(adult_domain, True)
    stats = statistics_from_rows(design, adult_train)
    noise = np.random.default_rng(3).normal(0.0, 20.0, stats.zz.shape)
    noisy = GramStatistics.for_design(design, stats.zz + noise + noise.T, stats.n)
    assert smallest_eigenvalue(noisy.xtx) < 0
    model = DDSSPLinearRegression().fit(noisy)
    theta = np.concatenate([[model.intercept_], model.coef_])
    # the estimate is the minimum-norm solution on the PSD projection (eigenvalues <= 1e-10 * max dropped)
    expected = np.linalg.pinv(project_psd(noisy.xtx), rcond=1e-10, hermitian=True) @ noisy.xty
    assert np.allclose(theta, expected, rtol=1e-8, atol=1e-10)
    ridged = DDSSPLinearRegression(ridge=100.0).fit(noisy)
    expected_ridge = np.linalg.solve(project_psd(noisy.xtx) + 100.0 * np.eye(noisy.dimension), noisy.xty)
    assert np.allclose(np.concatenate([[ridged.intercept_], ridged.coef_]), expected_ridge)
