"""Objective perturbation (Kifer, Smith & Thakurta 2012) with a certified minimiser and output noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.central.logistic import ObjPertLogisticRegression
from estimators.central.objpert import objpert_noise_scale, objpert_objective, objpert_regularization
from workloads.encodings import DesignEncoding


# --- ObjPert (App. C, Alg. 3) ---------------------------------------------------------------------
def test_objpert_calibration_by_hand():
    # epsilon = 1 and delta = 2 e^{-1.5} make 8 log(2/delta) + 4 eps = 16: sigma = ||X|| * 4 / 1
    assert objpert_noise_scale(1.0, 2 * math.exp(-1.5), 3.0) == pytest.approx(12.0)
    assert objpert_regularization(1.0, 3.0) == pytest.approx(4.5)  # ||X||^2 / (2 eps)
    assert objpert_regularization(0.5, 2.0) == pytest.approx(4.0)
    with pytest.raises(EstimatorError, match="delta"):
        objpert_noise_scale(1.0, 0.0, 3.0)


def _objective_by_hand(theta, X, y, noise, delta_reg):
    n = X.shape[0]
    return np.mean(np.log1p(np.exp(-y * (X @ theta)))) + delta_reg / (2 * n) * theta @ theta + noise @ theta / n


@pytest.mark.parametrize("noise_scale", [0.0, 1.0])
def test_objpert_minimises_the_stated_objective(adult_domain, adult_train, noise_scale):
    design = DesignEncoding(adult_domain, ["age", "education-num", "sex", "race"], "income>50K", "logistic")
    rows = adult_train.iloc[:1500]
    X, y = design.encode(rows)
    epsilon, delta, bound = 1.0, 1e-5, design.feature_norm_bound()
    sigma = objpert_noise_scale(epsilon, delta, bound) * noise_scale
    noise = np.random.default_rng(11).normal(0.0, 1.0, X.shape[1] + 1) * sigma
    model = ObjPertLogisticRegression(epsilon, delta, bound).fit(X, y, noise, design.feature_names)
    # nothing data-dependent about the solver is kept (issue 11, finding 2)
    assert not any(hasattr(model, name) for name in ("converged_", "gradient_norm_", "n_iter_"))
    theta = np.concatenate([[model.intercept_], model.coef_])
    D = np.column_stack([np.ones(len(X)), X])
    reg = bound**2 / (2 * epsilon)
    assert reg <= model.regularization_ <= reg * (1 + 1e-13)  # rounded up, never down
    # central differences of the objective written out independently (divided by n: the same minimiser):
    # truncation ~h^2 f''' and rounding ~1e-16 / h, both below 1e-9 with h = 1e-5, so a true minimiser shows
    # |gradient| < 1e-7
    h = 1e-5
    steps = h * np.eye(theta.size)
    grad = np.array(
        [(_objective_by_hand(theta + e, D, y, noise, reg) - _objective_by_hand(theta - e, D, y, noise, reg)) / (2 * h)
         for e in steps]
    )  # fmt: skip
    assert np.max(np.abs(grad)) < 1e-7
    value, analytic = objpert_objective(theta, D, y, noise, model.regularization_)
    n = len(X)
    assert value / n == pytest.approx(_objective_by_hand(theta, D, y, noise, model.regularization_), rel=1e-12)
    assert np.max(np.abs(analytic / n - grad)) < 1e-7


def test_objpert_certifies_the_undivided_gradient_and_adds_output_noise(adult_domain, adult_train):
    """Issue 11, finding 2: the solver stops on the gradient of the un-divided objective (certified in decimal
    arithmetic, whatever n is, n = 0 included) and the model is that point plus the output noise."""
    b = np.array([0.3, -1.2, 2.5])
    empty = ObjPertLogisticRegression(1.0, 1e-5, 2.0).fit(np.zeros((0, 2)), np.zeros(0), b)
    reg = empty.regularization_
    # no rows: J = reg/2 ||theta||^2 + b.theta, minimised exactly at -b / reg; the certified distance is 1e-10
    assert np.max(np.abs(np.r_[empty.intercept_, empty.coef_] + b / reg)) <= 1e-10
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    X, y = design.encode(adult_train.iloc[:3000])
    noise = np.array([5.0, -3.0, 1.0])
    base = ObjPertLogisticRegression(1.0, 1e-5, design.feature_norm_bound()).fit(X, y, noise)
    tolerance = base.gradient_tolerance_
    assert tolerance == pytest.approx(1e-10 * base.regularization_)
    D = np.column_stack([np.ones(len(X)), X])
    theta = np.r_[base.intercept_, base.coef_]
    margins = y * (D @ theta)
    # the un-divided gradient at the (float-rounded) certified point, summed exactly (fsum); rounding theta to float
    # moves it by at most ||H|| * 1e-16 ||theta|| (H <= reg + n ||X||^2 / 4), far below the slack used here
    terms = D * (-y / (1.0 + np.exp(margins)))[:, None]
    gradient = np.array([math.fsum(terms[:, j]) for j in range(D.shape[1])]) + base.regularization_ * theta + noise
    slack = (base.regularization_ + len(X) * 3.0 / 4) * 4e-16 * np.linalg.norm(theta) * 10
    assert np.linalg.norm(gradient) <= tolerance + slack
    shift = np.array([1e-3, -2e-3, 5e-4])
    moved = ObjPertLogisticRegression(1.0, 1e-5, design.feature_norm_bound()).fit(X, y, noise, output_noise=shift)
    np.testing.assert_allclose(np.r_[moved.intercept_, moved.coef_] - theta, shift, rtol=0, atol=1e-14)


def test_objpert_rejects_bad_input(adult_domain, adult_train):
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    X, y = design.encode(adult_train.iloc[:200])
    with pytest.raises(EstimatorError, match="row_norm_bound") as too_small:
        ObjPertLogisticRegression(1.0, 1e-5, 1.0).fit(X, y, np.zeros(3))  # true bound is sqrt(3)
    assert "1.73" not in str(too_small.value) and "200" not in str(too_small.value)  # no row norm, no n
    with pytest.raises(EstimatorError, match="noise"):
        ObjPertLogisticRegression(1.0, 1e-5, 2.0).fit(X, y, np.zeros(2))
    with pytest.raises(EstimatorError, match="label") as labels:
        ObjPertLogisticRegression(1.0, 1e-5, 2.0).fit(X, (y > 0).astype(float), np.zeros(3))
    assert "200" not in str(labels.value)
    with pytest.raises(EstimatorError, match="epsilon"):
        ObjPertLogisticRegression(0.0, 1e-5, 2.0).fit(X, y, np.zeros(3))


# --- weighted distinct rows (issue 22): the same objective in memory bounded by the distinct rows ---------------------
def _distinct(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    unique, counts = np.unique(np.column_stack([X, y]), axis=0, return_counts=True)
    return unique[:, :-1], unique[:, -1], counts


def test_distinct_rows_with_counts_give_the_same_objective_gradient_hessian_and_fit(adult_domain, adult_train):
    """sum_i l(x_i, y_i) = sum_r count_r l(x_r, y_r): the value, gradient and Hessian of J agree to rounding, the
    calibration (Delta, the noise scale: functions of ||X|| and eps only) is untouched, and the two certified fits
    with the same noise are both within tau = 1e-10 of the same exact minimiser."""
    from estimators.central.objpert import objpert_hessian

    design = DesignEncoding(adult_domain, ["age", "education-num", "sex", "race"], "income>50K", "logistic")
    X, y = design.encode(adult_train.iloc[:4000])
    Xd, yd, counts = _distinct(X, y)
    assert len(Xd) < len(X) / 3 and counts.sum() == len(X)
    epsilon, delta, bound = 1.0, 1e-5, design.feature_norm_bound()
    regularization = objpert_regularization(epsilon, bound)
    noise = np.random.default_rng(3).normal(0.0, objpert_noise_scale(epsilon, delta, bound), X.shape[1] + 1)
    Z, Zd = (np.column_stack([np.ones(len(m)), m]) for m in (X, Xd))
    theta = np.random.default_rng(4).normal(0.0, 0.3, Z.shape[1])
    value, gradient = objpert_objective(theta, Z, y, noise, regularization)
    value_w, gradient_w = objpert_objective(theta, Zd, yd, noise, regularization, weights=counts.astype(float))
    assert value_w == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(gradient_w, gradient, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(objpert_hessian(theta, Zd, yd, regularization, weights=counts.astype(float)),
                               objpert_hessian(theta, Z, y, regularization), rtol=1e-10, atol=1e-9)
    rows = ObjPertLogisticRegression(epsilon, delta, bound).fit(X, y, noise, design.feature_names)
    weighted = ObjPertLogisticRegression(epsilon, delta, bound).fit(Xd, yd, noise, design.feature_names,
                                                                   sample_weight=counts)
    assert weighted.regularization_ == rows.regularization_ == regularization
    assert abs(weighted.intercept_ - rows.intercept_) <= 2e-10
    np.testing.assert_allclose(weighted.coef_, rows.coef_, rtol=0, atol=2e-10)


def test_sample_weight_must_be_row_counts(adult_domain, adult_train):
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    X, y = design.encode(adult_train.iloc[:50])
    model = ObjPertLogisticRegression(1.0, 1e-5, design.feature_norm_bound())
    for bad in (np.ones(49, dtype=int), np.full(50, 0.5), -np.ones(50, dtype=int)):
        with pytest.raises(EstimatorError, match="sample_weight"):
            model.fit(X, y, np.zeros(X.shape[1] + 1), sample_weight=bad)
