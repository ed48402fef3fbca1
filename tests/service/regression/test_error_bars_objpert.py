"""Objective perturbation's error bars (issue 29, section 3): the curvature its release adds (the loss's Hessian at
the released coefficients, exact integer noise), its share of the charge, its sensitivity, its noise, and the delta
method that turns it into standard errors, checked against redrawn noise."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from estimators.central.logistic import ObjPertLogisticRegression
from estimators.central.objpert import objpert_covariance, objpert_hessian, objpert_noise_scale
from service.mechanisms import catalog, curvature
from service.mechanisms.base import MechanismError
from service.mechanisms.objpert import DEFAULT_CURVATURE_SHARE, OUTPUT_SHARE, ObjPertRelease
from service.privacy.cost import PrivacyCost
from service.privacy.noise import NoiseSource
from service.regression import error_bars
from service.regression.fit import fit as fit_regression
from tests.support.datasets import titanic_with_budget
from workloads import conversions
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

pytestmark = pytest.mark.usefixtures("fresh_answer_caches")

FEATURES = ["Pclass", "Fare"]


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-3")


def _small_design() -> DesignEncoding:
    domain = Domain.from_sizes({"a": 4, "b": 3, "c": 2, "y": 2})
    return DesignEncoding(domain, ["a", "b", "c"], "y", "logistic", overrides={"b": "one_hot"})


# the charge -------------------------------------------------------------------------------------------------------
def test_the_three_shares_compose_to_the_charge() -> None:
    design = _small_design()
    epsilon, delta = Fraction(1), Fraction(1, 100_000)
    release = ObjPertRelease(design, epsilon, delta)
    assert release.cost == PrivacyCost(epsilon=epsilon, delta=delta)
    details = release.public_details()
    parts_epsilon = (details["epsilon_objective"], details["epsilon_output"], details["epsilon_curvature"])
    parts_delta = (details["delta_objective"], details["delta_output"], details["delta_curvature"])
    assert parts_epsilon[1] == pytest.approx(float(OUTPUT_SHARE)) and parts_epsilon[2] == pytest.approx(0.1)
    # every float share is rounded down from its exact share, so their sum never exceeds the charge
    assert sum(Fraction(e) for e in parts_epsilon) <= epsilon and sum(Fraction(d) for d in parts_delta) <= delta
    assert float(sum(Fraction(e) for e in parts_epsilon)) == pytest.approx(1.0, abs=1e-15)
    # the curvature's rho converts back into no more than its (epsilon, delta) share
    rho = details["rho_curvature"]
    assert conversions.cdp_eps(rho, parts_delta[2]) <= parts_epsilon[2]
    # and the curvature's noise is its sensitivity over sqrt(2 rho)
    sensitivity = math.sqrt(curvature.sensitivity_squared(curvature.feature_scales(design)[1]))
    assert details["curvature_noise_std"] == pytest.approx(sensitivity / math.sqrt(2 * rho), rel=1e-12)
    # objective perturbation keeps the rest: its noise is calibrated to (1 - 1/1000 - 1/10) of the charge
    expected = objpert_noise_scale(0.899, 0.899e-5, design.feature_norm_bound())
    assert release.noise_std == pytest.approx(expected, rel=1e-12)


def test_the_declared_default_is_the_mechanism_default_and_zero_releases_no_curvature() -> None:
    (option,) = catalog.OBJPERT_OPTIONS
    assert option.name == "curvature_share" and Fraction(option.default) == Fraction(0.1)
    assert float(DEFAULT_CURVATURE_SHARE) == option.default
    off = ObjPertRelease(_small_design(), Fraction(1), Fraction(1, 100_000), curvature_share=0)
    assert off.curvature is None and off.epsilon == pytest.approx(0.999)
    for bad in (-0.1, 0.6):
        with pytest.raises(MechanismError, match="curvature_share"):
            ObjPertRelease(_small_design(), Fraction(1), Fraction(1, 100_000), curvature_share=bad)


# sensitivity ------------------------------------------------------------------------------------------------------
def test_the_sensitivity_bound_holds_for_every_row_and_is_attained() -> None:
    design = _small_design()
    scales, bounds = curvature.feature_scales(design)
    bound = math.sqrt(curvature.sensitivity_squared(bounds))
    domain = design.domain if hasattr(design, "domain") else None  # noqa: F841 - the codes below span the domain
    largest = 0.0
    for a, b, c in itertools.product(range(4), range(3), range(2)):
        X, _ = design.encode({"a": np.array([a]), "b": np.array([b]), "c": np.array([c]), "y": np.array([0])})
        x = np.concatenate([[1.0], X[0]])
        upper = (0.25 * np.outer(x, x))[np.triu_indices(x.size)]  # the largest weight p (1 - p) = 1/4
        largest = max(largest, float(np.linalg.norm(upper)))
    assert largest <= bound * (1 + 1e-12)
    assert largest == pytest.approx(bound, rel=1e-12)  # attained: the bound is the sensitivity


# exactness and noise ----------------------------------------------------------------------------------------------
def test_the_integer_sum_is_exact_across_digits_and_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    rows = rng.integers(-40, 41, size=(300, 4))
    weights = [int(w) for w in rng.integers(0, 2**62, size=300)]  # four base-2^20 digits
    by_hand = np.zeros((4, 4), dtype=object)
    for row, w in zip(rows.tolist(), weights, strict=True):
        for i, j in itertools.product(range(4), repeat=2):
            by_hand[i, j] += w * row[i] * row[j]
    assert (curvature.integer_curvature(rows, weights) == by_hand).all()
    monkeypatch.setattr(curvature, "_DIGIT_BITS", 7)  # more digits, and chunks of a few rows
    assert (curvature.integer_curvature(rows, weights) == by_hand).all()


def test_the_released_curvature_is_the_hessian_plus_noise_of_its_calibration() -> None:
    design = _small_design()
    rng = np.random.default_rng(2)
    codes = {"a": rng.integers(0, 4, 400), "b": rng.integers(0, 3, 400), "c": rng.integers(0, 2, 400),
             "y": rng.integers(0, 2, 400)}
    X, y = design.encode(codes)
    Z = np.column_stack([np.ones(len(X)), X])
    counts = rng.integers(1, 50, len(X))
    theta = np.array([0.3, -1.2, 0.4, 0.0, 0.8, 1.5])
    scales, bounds = curvature.feature_scales(design)
    exact = objpert_hessian(theta, Z, y, 0.0, weights=counts.astype(float))
    grid = curvature.integer_curvature(curvature.integer_rows(Z, scales),
                                       [int(c) * int(w) for c, w in zip(counts, curvature.grid_weights(Z @ theta),
                                                                        strict=True)])
    divisor = np.outer(scales, scales) * 2**curvature.GRID_BITS
    on_grid = np.array(grid / divisor, dtype=float)
    # the grid moves each weight by at most 2^-(K+1): the whole matrix by at most that times sum_r c_r |x_i x_j|
    assert np.all(np.abs(on_grid - exact) <= 2.0 ** -(curvature.GRID_BITS + 1) * (np.abs(Z).T * counts) @ np.abs(Z)
                  + 1e-9)
    cal = curvature.calibrate(bounds, 0.5, 1e-6)
    standardised = []
    for seed in range(150):
        noisy = curvature.noisy_curvature(Z, counts, theta, scales, cal, NoiseSource(seed))
        assert np.array_equal(noisy, noisy.T)
        standardised.append(((noisy - on_grid) / cal.sigma)[np.triu_indices(Z.shape[1])])
    draws = np.ravel(standardised)
    # discrete Gaussian on a fine lattice: standard normal after dividing back (mean, variance, shape)
    assert abs(draws.mean()) < 5 / math.sqrt(draws.size)
    assert abs(draws.var() - 1.0) < 5 * math.sqrt(2 / draws.size)
    assert stats.kstest(draws, "norm").pvalue > 1e-4
    repeat = curvature.noisy_curvature(Z, counts, theta, scales, cal, NoiseSource(7))
    assert np.array_equal(repeat, curvature.noisy_curvature(Z, counts, theta, scales, cal, NoiseSource(7)))


# the delta method against redrawn noise ---------------------------------------------------------------------------
def test_the_closed_form_matches_the_spread_of_refits_with_redrawn_noise() -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    X = np.column_stack([rng.choice([-1.0, 0.0, 1.0], n), rng.choice([-1.0, 1.0], n) * 0.5])
    p = 1.0 / (1.0 + np.exp(-(0.2 + X @ np.array([1.0, -0.8]))))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    epsilon, delta, bound = 0.5, 1e-5, math.sqrt(1 + 1 + 0.25)
    model = ObjPertLogisticRegression(epsilon, delta, bound)
    sigma = objpert_noise_scale(epsilon, delta, bound)
    base = model.fit(X, y, np.zeros(3))
    theta0 = np.concatenate([[base.intercept_], base.coef_])
    Z = model.design_matrix(X)
    H = objpert_hessian(theta0, Z, y, 0.0)
    closed = np.sqrt(np.diag(objpert_covariance(H, base.regularization_, sigma, 0.0)["noise"]))
    thetas = []
    for _ in range(400):
        fitted = model.fit(X, y, rng.normal(0.0, sigma, 3))
        thetas.append(np.concatenate([[fitted.intercept_], fitted.coef_]))
    empirical = np.std(np.stack(thetas), axis=0, ddof=1)
    assert np.allclose(closed, empirical, rtol=0.12), (closed, empirical)  # sd of a 400-draw SD: 3.5 %


# through the service ----------------------------------------------------------------------------------------------
def test_an_objpert_fit_answers_error_bars_from_its_release(engine, titanic) -> None:  # noqa: ANN001
    outcome = fit_regression(engine, "titanic", "logistic", "Sex", FEATURES, method="objpert", epsilon=4,
                             delta=1e-5, seed=4, allow_seeded=True)
    body = outcome.to_json()
    assert outcome.cost == PrivacyCost(epsilon=Fraction(4), delta=Fraction(1, 100_000))
    assert set(body["standard_errors"]) == set(body["coefficients"])
    assert body["error_basis"].startswith(error_bars.OBJPERT_BASIS)
    for name, value in body["coefficients"].items():
        low, high = body["confidence_intervals"][name]
        se = body["standard_errors"][name]
        assert se > 0 and low < value < high and high - low == pytest.approx(2 * 1.959963984540054 * se)
        parts = body["error_components"]
        assert se == pytest.approx(math.hypot(parts["noise"][name], parts["sampling"][name]))
    assert body["details"]["curvature_share"] == pytest.approx(0.1)


def test_no_curvature_no_error_bars_and_dp_iht_says_why(engine, titanic) -> None:  # noqa: ANN001
    off = fit_regression(engine, "titanic", "logistic", "Sex", FEATURES, method="objpert", epsilon=1, delta=1e-5,
                         options={"curvature_share": 0}, seed=4, allow_seeded=True).to_json()
    assert off["standard_errors"] is None and off["confidence_intervals"] is None
    assert off["error_basis"] == error_bars.NO_CURVATURE_BASIS and "curvature_share" in off["error_basis"]
    sparse = fit_regression(engine, "titanic", "logistic", "Sex", FEATURES, method="dp-iht", epsilon=1, delta=1e-5,
                            options={"sparsity": 2, "curvature_share": 0}, seed=4, allow_seeded=True).to_json()
    assert sparse["standard_errors"] is None and sparse["error_basis"] == error_bars.RELEASED_MODEL_BASIS
    assert "curvature_share" in sparse["error_basis"]
