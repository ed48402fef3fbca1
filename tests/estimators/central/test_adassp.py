"""AdaSSP (Wang 2018, "Revisiting differentially private linear regression", Alg. 2): noise scales by hand,
the ridge formula without noise, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.central.adassp import (
    AdaSSPNoiseScales,
    adassp_entry_std,
    adassp_lambda_min_tilde,
    adassp_noise_scales,
    adassp_ridge,
    gram_sensitivity,
)
from estimators.central.linear import AdaSSPLinearRegression
from estimators.central.sufficient_stats import (
    GramStatistics,
    statistics_from_rows,
)
from estimators.psd import smallest_eigenvalue
from tests.support.central_designs import linear_design


# --- AdaSSP (App. B, Alg. 2) ----------------------------------------------------------------------
def test_adassp_noise_scales_by_hand():
    # delta = 6 e^{-4} makes sqrt(log(6/delta)) = 2; epsilon = 3 makes eps/3 = 1; failure_prob = 2/e with d = 1
    # makes log(2 d^2 / rho) = 1. With ||X|| = 2, ||Y|| = 1 (Alg. 2 as printed):
    # sigma_lambda = 2 * 4 = 8, shift = 4 * 4 = 16, sigma_xtx = 8, sigma_xty = 2 * 2 * 1 = 4, offset = sqrt(1*1) * 8
    paper = adassp_noise_scales(2.0, 1.0, 1, 6 * math.exp(-4), epsilon=3.0, failure_prob=2 / math.e,
                                include_yty=False)  # fmt: skip
    assert paper.calibration == "paper" and paper.epsilon_parts == (1.0, 1.0, 1.0)
    assert (paper.sigma_lambda_min, paper.lambda_min_shift, paper.sigma_xtx, paper.sigma_xty) == pytest.approx(
        (8.0, 16.0, 8.0, 4.0)
    )
    assert paper.ridge_offset == pytest.approx(8.0)
    # zCDP: rho = 1.5 -> 0.5 per part -> sigma = Delta / sqrt(2 * 0.5) = Delta; the y column [X^T y; y^T y] has
    # Delta = |y| ||z|| = 1 * sqrt(4 + 1)
    zcdp = adassp_noise_scales(2.0, 1.0, 1, 6 * math.exp(-4), rho=1.5, failure_prob=2 / math.e)
    assert zcdp.rho_parts == (0.5, 0.5, 0.5)
    assert (zcdp.sigma_lambda_min, zcdp.lambda_min_shift, zcdp.sigma_xtx, zcdp.sigma_xty) == pytest.approx(
        (4.0, 8.0, 4.0, math.sqrt(5.0))
    )
    assert zcdp.ridge_offset == pytest.approx(4.0)
    assert gram_sensitivity(math.sqrt(5.0)) == pytest.approx(5.0)
    std = adassp_entry_std(zcdp)
    assert std.shape == (2, 2) and std[0, 0] == pytest.approx(4.0)
    assert std[0, 1] == std[1, 0] == std[1, 1] == pytest.approx(math.sqrt(5.0))
    assert np.isnan(adassp_entry_std(paper)[1, 1]) and adassp_entry_std(paper)[0, 1] == pytest.approx(4.0)
    assert adassp_ridge(adassp_lambda_min_tilde(10.0, zcdp), zcdp) == pytest.approx(4.0 - 2.0)
    assert adassp_ridge(adassp_lambda_min_tilde(5.0, zcdp), zcdp) == pytest.approx(4.0)  # tilde clipped at 0


@pytest.mark.parametrize("budget", [{"epsilon": 1.0}, {"rho": 0.05}])
def test_adassp_without_noise_is_the_ridge_formula(adult_domain, adult_train, budget):
    design = linear_design(adult_domain, True)
    stats = statistics_from_rows(design, adult_train)
    bx, by, d, delta = design.feature_norm_bound(), design.target_bound(), stats.dimension, 1e-5
    scales = adassp_noise_scales(bx, by, d, delta, **budget)
    lambda_min = smallest_eigenvalue(stats.xtx)
    model = AdaSSPLinearRegression().fit(stats, lambda_min, scales)
    if "epsilon" in budget:  # Alg. 2 step 2-3 exactly as printed, with Z = 0
        eps3 = budget["epsilon"] / 3
        tilde = max(lambda_min - math.log(6 / delta) / eps3 * bx**2, 0.0)
        ridge = max(0.0, math.sqrt(d * math.log(6 / delta) * math.log(2 * d * d / 0.05)) * bx**2 / eps3 - tilde)
    else:
        sigma = bx**2 / math.sqrt(2 * budget["rho"] / 3)
        tilde = max(lambda_min - math.sqrt(math.log(6 / delta)) * sigma, 0.0)
        ridge = max(0.0, math.sqrt(d * math.log(2 * d * d / 0.05)) * sigma - tilde)
    assert model.ridge_ == pytest.approx(ridge, rel=1e-12) and ridge > 0
    expected = np.linalg.solve(stats.xtx + ridge * np.eye(d), stats.xty)
    assert np.allclose(np.concatenate([[model.intercept_], model.coef_]), expected, rtol=1e-9, atol=1e-12)
    # a release without y^T y (include_yty=False) stores NaN there; AdaSSP does not need it
    zz = stats.zz.copy()
    zz[-1, -1] = np.nan
    without_yty = GramStatistics.for_design(design, zz, stats.n)
    assert np.isnan(without_yty.yty)
    assert AdaSSPLinearRegression().fit(without_yty, lambda_min, scales).coef_ == pytest.approx(model.coef_)


def test_adassp_bad_inputs(adult_domain, adult_train):
    with pytest.raises(EstimatorError, match="exactly one of epsilon"):
        adassp_noise_scales(1.0, 1.0, 3, 1e-5, epsilon=1.0, rho=0.1)
    with pytest.raises(EstimatorError, match="epsilon"):
        adassp_noise_scales(1.0, 1.0, 3, 1e-5, epsilon=-1.0)
    with pytest.raises(EstimatorError, match="delta"):
        adassp_noise_scales(1.0, 1.0, 3, 1.0, rho=0.1)
    with pytest.raises(EstimatorError, match="bound_x"):
        adassp_noise_scales(0.0, 1.0, 3, 1e-5, rho=0.1)
    stats = statistics_from_rows(linear_design(adult_domain, True), adult_train)
    scales = adassp_noise_scales(2.0, 1.0, 3, 1e-5, rho=0.1)
    assert isinstance(scales, AdaSSPNoiseScales)
    with pytest.raises(EstimatorError, match="d=3"):
        AdaSSPLinearRegression().fit(stats, 1.0, scales)
