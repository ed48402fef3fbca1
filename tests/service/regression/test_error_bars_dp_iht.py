"""DP-IHT's error bars (issue 29, section 3): the curvature its release adds over the kept coefficients (the loss's
Hessian at the released model, rows whose gradient is clipped left out, exact integer noise), its share of the
charge, its sensitivity, and the linearised iterations that turn it into standard errors, checked against refits
with redrawn noise. The engines' curvature sums equal numpy's exactly: tests/support/gradient_sums.py, run on every
engine by tests/service/data/test_gradient_sums.py and test_engine_contract.py."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.central.dp_iht import (
    DPIHTLinearRegression,
    DPIHTLogisticRegression,
    dp_iht_covariance,
    loss_slopes,
)
from service.errors import InvalidInput
from service.mechanisms import curvature, registry
from service.mechanisms.dp_iht import DPIHTRelease, rows_curvature
from service.privacy.noise import NoiseSource
from service.regression import error_bars
from service.regression.fit import fit as fit_regression
from tests.support.datasets import titanic_with_budget
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

pytestmark = pytest.mark.usefixtures("fresh_answer_caches")

FEATURES = ["Pclass", "Fare", "Age"]


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "100", "1e-3")


def _design(task: str) -> DesignEncoding:
    domain = Domain.from_sizes({"a": 4, "b": 3, "c": 2, "y": 3})
    return DesignEncoding(domain, ["a", "b", "c"], "y", task, overrides={"b": "one_hot"},
                          **({"positive_level": 2} if task == "logistic" else {}))


# the charge -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("share", [Fraction(1, 10), Fraction(0), Fraction(1, 2)])
def test_the_fit_and_the_curvature_compose_to_the_charge(share: Fraction) -> None:
    design = _design("linear")
    settings = registry.get("dp-iht").settings(design, {"sparsity": 3, "curvature_share": float(share)})
    release = DPIHTRelease(design, Fraction(3, 7), settings)
    assert release.rho_curvature == Fraction(3, 7) * share
    assert release.calibration.rho_total == Fraction(3, 7) * (1 - share)  # count and iterations, exactly
    assert release.calibration.rho_total + release.rho_curvature == release.cost.rho == Fraction(3, 7)


def test_a_share_outside_its_bounds_is_refused_naming_it() -> None:
    design = _design("linear")
    with pytest.raises(InvalidInput, match="curvature_share"):
        registry.get("dp-iht").settings(design, {"sparsity": 3, "curvature_share": 0.6})


# the sensitivity ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["linear", "logistic"])
def test_the_sensitivity_over_the_kept_columns_holds_on_every_row_and_is_attained(task: str) -> None:
    """For every code combination (every possible row) and every support, the upper triangle of the row's largest
    possible contribution ``t x_S x_S^T`` has squared norm at most the calibrated bound, and some row attains it."""
    design = _design(task)
    t = float(curvature.WEIGHT_BOUNDS[task])
    grids = np.stack(np.meshgrid(*(np.arange(design.domain.size(a)) for a in design.features),
                                 indexing="ij"), axis=-1).reshape(-1, len(design.features))
    codes = {a: grids[:, i] for i, a in enumerate(design.features)}
    codes[design.target] = np.zeros(len(grids), dtype=int)
    X, _ = design.encode(codes)
    Z = np.column_stack([np.ones(len(X)), X])
    for support in ([0, 1, 4], [2, 3, 5], list(range(Z.shape[1]))):
        _, bounds = curvature.support_scales(design, support)
        bound = float(curvature.sensitivity_squared(bounds, task))
        rows = Z[:, support]
        upper = np.triu_indices(len(support))
        norms = [float(np.sum(np.outer(r, r)[upper] ** 2)) * t * t for r in rows]
        assert max(norms) <= bound * (1 + 1e-12)
        assert max(norms) == pytest.approx(bound)  # every block's largest row together (built-in encodings)


# the noise and the exact sums ---------------------------------------------------------------------------------------
def test_the_released_curvature_is_the_kept_hessian_plus_noise_of_its_calibration() -> None:
    """The rows' path: clipped rows weigh 0, the others ``l''(u)`` on the grid; the released matrix minus the exact
    one divided by the calibrated sigma is standard normal (discrete Gaussian on a fine lattice)."""
    design = _design("logistic")
    rng = np.random.default_rng(5)
    codes = {"a": rng.integers(0, 4, 500), "b": rng.integers(0, 3, 500), "c": rng.integers(0, 2, 500),
             "y": rng.integers(0, 3, 500)}
    X, y = design.encode(codes)
    Z = np.column_stack([np.ones(len(X)), X])
    counts = rng.integers(1, 30, len(Z))
    theta = np.array([0.4, 0.0, -1.1, 0.0, 0.7, 0.9])
    support = [int(i) for i in np.flatnonzero(theta)]
    G = 1.4
    scales, bounds = curvature.support_scales(design, support)
    W = rows_curvature(Z, y, counts, theta, "logistic", G, support, scales)
    margins = Z @ theta
    kept = np.abs(loss_slopes("logistic", margins, y)) * np.linalg.norm(Z, axis=1) <= G
    assert 0 < kept.sum() < len(Z)  # some rows clipped, some not: the rule is exercised
    p = 1.0 / (1.0 + np.exp(-margins))
    exact = (Z[:, support] * (counts * p * (1 - p) * kept)[:, None]).T @ Z[:, support]
    on_grid = np.array(W / (np.outer(scales, scales) * 2**curvature.GRID_BITS), dtype=float)
    grid_error = 2.0 ** -(curvature.GRID_BITS + 1) * (np.abs(Z[:, support]).T * counts) @ np.abs(Z[:, support])
    assert np.all(np.abs(on_grid - exact) <= grid_error + 1e-9)
    cal = curvature.calibrate_rho(bounds, Fraction(1, 20), "logistic")
    assert cal.sigma2 == curvature.sensitivity_squared(bounds, "logistic") * 10  # Delta^2 / (2 rho), exactly
    draws = np.ravel([((curvature.perturb(W, scales, cal, NoiseSource(seed)) - on_grid) / cal.sigma)
                      [np.triu_indices(len(support))] for seed in range(150)])
    assert abs(draws.mean()) < 5 / math.sqrt(draws.size)
    assert abs(draws.var() - 1.0) < 5 * math.sqrt(2 / draws.size)


# the linearised iterations against redrawn noise -----------------------------------------------------------------
@pytest.mark.parametrize("task", ["linear", "logistic"])
def test_the_closed_form_noise_matches_the_spread_of_refits_with_redrawn_noise(task: str) -> None:
    """A table whose support is clear (two strong coefficients of five, k = 3 with the intercept): 300 fits with
    redrawn noise; each kept coefficient's spread is within 20 % of the closed form's noise SE (computed from the
    exact curvature at the noise-free fit). The sampling SE of the logistic loss is checked against the inverse
    information shrunk by the iterations (all-rows curvature, no clipping)."""
    rng = np.random.default_rng(1)
    n = 4_000
    X = np.column_stack([np.ones(n), rng.choice([-1.0, 1.0], (n, 2)), rng.uniform(-1, 1, (n, 2)) * 0.5])
    truth = np.array([0.2, 0.9, -0.7, 0.0, 0.0])
    if task == "linear":
        y = np.clip(X @ truth + rng.normal(0, 0.2, n), -1, 1)
        kind, G = DPIHTLinearRegression, 2 * math.sqrt(3.5)
    else:
        y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ (2 * truth))), 1.0, -1.0)
        kind, G = DPIHTLogisticRegression, math.sqrt(3.5)
    settings = {"sparsity": 3, "iterations": 40, "eta": 0.5, "rho": 0.02, "clip_norm": G, "l2": 1e-3,
                "normalizer": float(n)}
    base = kind(**settings).fit(X, y, lambda sigma, size: np.zeros(size))
    support = [int(i) for i in np.flatnonzero(base.coef_)]
    assert support == [0, 1, 2]
    sigma = base.calibration_.sigma_gradient
    theta = base.coef_
    margins = X @ theta
    kept = np.abs(loss_slopes(task, margins, y)) * np.linalg.norm(X, axis=1) <= G
    second = np.ones(n) if task == "linear" else 1 / (1 + np.exp(-margins)) / (1 + np.exp(margins))
    H = (X[:, support] * (second * kept)[:, None]).T @ X[:, support]
    parts = dp_iht_covariance(H, n, 0.5, 1e-3, sigma, 40, task)
    assert set(parts) == ({"noise"} if task == "linear" else {"noise", "sampling"})
    fits = []
    for seed in range(300):
        draw = np.random.default_rng(seed)
        fitted = kind(**settings).fit(X, y, lambda s, size, d=draw: d.normal(0.0, s, size)).coef_
        if [int(i) for i in np.flatnonzero(fitted)] == support:
            fits.append(fitted[support])
    assert len(fits) >= 280  # the support is stable: the linearisation's premise
    spread = np.std(np.stack(fits), axis=0, ddof=1)
    closed = np.sqrt(np.diag(parts["noise"]))
    np.testing.assert_allclose(spread / closed, 1.0, atol=0.2)
    if task == "logistic":  # the sampling part: (I - A^T) J^-1 H J^-1 (I - A^T), J = H + n l2 I
        A = np.eye(3) - 0.5 * (H / n + 1e-3 * np.eye(3))
        M = (np.eye(3) - np.linalg.matrix_power(A, 40)) @ np.linalg.inv(H + n * 1e-3 * np.eye(3))
        np.testing.assert_allclose(parts["sampling"], M @ H @ M.T, rtol=1e-8)


def test_the_closed_form_refuses_bad_inputs_naming_them() -> None:
    with pytest.raises(EstimatorError, match="n_hat"):
        dp_iht_covariance(np.eye(2), 0.0, 0.5, 0.0, 1.0, 10, "linear")
    with pytest.raises(EstimatorError, match="loss"):
        dp_iht_covariance(np.eye(2), 10.0, 0.5, 0.0, 1.0, 10, "poisson")


# the answer -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["linear", "logistic"])
def test_a_fit_answers_error_bars_for_the_kept_coefficients_only(engine, titanic, task: str) -> None:  # noqa: ANN001, ARG001
    target = "Sex" if task == "logistic" else "Survived"
    body = fit_regression(engine, "titanic", task, target, FEATURES, method="dp-iht", epsilon=2, delta=1e-5,
                          options={"sparsity": 3}, seed=4, allow_seeded=True).to_json()
    kept = {name for name, value in body["coefficients"].items() if value != 0.0}
    assert kept and set(body["standard_errors"]) == kept
    assert all(se > 0 and math.isfinite(se) for se in body["standard_errors"].values())
    for name in kept:
        low, high = body["confidence_intervals"][name]
        assert low < body["coefficients"][name] < high
    assert body["error_basis"].startswith(error_bars.DP_IHT_BASIS) and "selective inference" in body["error_basis"]
    assert set(body["error_components"]) == ({"noise"} if task == "linear" else {"noise", "sampling"})
    assert body["details"]["rho_curvature"] > 0 and body["details"]["curvature_noise_std"] > 0
