"""The Local Bernstein Mechanism (Algs. 2 and 3) and DR-ERM-LDP (Alg. 4) of Wang, Gaboardi & Xu (2018) as campaigns:
create, simulate, fit; each aggregate against its known expectation within a tolerance from the noise, each fit
equal to the estimator on the stored reports, and the parameters refused before anything is stored."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.local.sparse.bernstein import LocalBernsteinLinearRegression, iterated_bernstein_matrix
from estimators.local.sparse.dr_erm import DRERMLinearRegression
from service.campaigns import campaigns, estimates, simulate
from service.errors import InvalidInput
from tests.support.campaign_rows import aggregate_sums, ledger_reports
from workloads.local.randomizers.bernstein import bernstein_grid, one_bit_laplace_epsilon, squared_loss_on_grid
from workloads.local.randomizers.random_projection_statistics import projected_statistics, random_projection


def _line(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """p = 1: x uniform in [-1, 1], y = 0.5 x + U[-0.05, 0.05]; the squared risk is smallest at theta = 0.5."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, 1))
    return x, 0.5 * x[:, 0] + rng.uniform(-0.05, 0.05, size=n)


def _true_grid_losses(x: np.ndarray, y: np.ndarray, spec) -> np.ndarray:  # noqa: ANN001
    grid = bernstein_grid(spec.degree, spec.dimension)
    return squared_loss_on_grid(grid, x, y, spec.lower, spec.upper, spec.loss_scale).mean(axis=0)


def _box_fit(spec, grid_values: np.ndarray) -> float:  # noqa: ANN001
    model = LocalBernsteinLinearRegression(spec.degree, spec.dimension, spec.order, spec.lower, spec.upper)
    return float(model.fit(grid_values[np.newaxis, :]).coef_[0])


def test_bernstein_alg2_campaign(engine) -> None:  # noqa: ANN001
    n, eps = 40_000, 4.0
    campaigns.create_campaign(engine, "bern", "bernstein", ["x"], "y", epsilon=eps, options={"participants": n})
    x, y = _line(n, seed=1)
    simulate.simulate(engine, "bern", x, y, seed=2)
    info = campaigns.get_campaign(engine, "bern")
    spec, sums = info.spec, aggregate_sums(engine, "bern")
    assert info.status == "closed" and spec.grid_size == 7 and spec.loss_scale == 4.0  # (1 * 1 * 1 + 1)^2
    estimate = sums["losses"] / n
    # each grid value is a mean of n clipped losses plus Lap(G / eps): standard deviation sqrt(2) (G / eps) / sqrt(n)
    # from the noise (the sampling of the rows is shared with the truth below); 5 of those per point
    np.testing.assert_array_less(np.abs(estimate - _true_grid_losses(x, y, spec)),
                                 5 * math.sqrt(2) * (7 / eps) / math.sqrt(n))
    fit = estimates.fit_campaign(engine, "bern", "linear")
    assert fit.coefficients["x"] == pytest.approx(_box_fit(spec, estimate), abs=1e-12)
    # the minimiser lies in the box [-1, 1]: one report can move it at most across it (issue 18 finding 6)
    assert -1.0 <= fit.coefficients["x"] <= 1.0 and fit.influence.per_report == 2.0
    # the polynomial moves by at most ||A_h||_inf max|noise| (the Bernstein basis sums to 1); the true risk
    # (theta - 0.5)^2 E[x^2] / scale = (theta - 0.5)^2 / 12 can then exceed its value at the noiseless fit by at most
    # twice that: a bound on the estimate's excess risk derived from the noise
    noiseless = _box_fit(spec, _true_grid_losses(x, y, spec))
    shift = np.abs(iterated_bernstein_matrix(spec.degree, spec.order)).sum(axis=1).max() * 5 * math.sqrt(2) * 7 / eps
    shift /= math.sqrt(n)

    def excess(theta: float) -> float:
        return (theta - 0.5) ** 2 / 12.0

    assert excess(fit.coefficients["x"]) <= excess(noiseless) + 2 * shift
    assert fit.to_json()["cost"]["epsilon"] == 0.0
    # the ledger: one report per participant, each (eps, 0)
    rows = ledger_reports(engine, "bern")
    assert len({r[0] for r in rows}) == n and {(r[2], r[3]) for r in rows} == {(int(eps * 1e12), 0)}


def test_bernstein_one_bit_campaign(engine) -> None:  # noqa: ANN001
    n, eps = 60_000, 2.0
    # three grid points, and a loss scale that makes the losses large (up to 1 after clipping): a factor-2 error
    # in the estimator moves them by far more than the tolerance below
    campaigns.create_campaign(engine, "bit", "bernstein-1bit", ["x"], "y", epsilon=eps,
                              options={"participants": n, "degree": 2, "loss_scale": 0.5})
    x, y = _line(n, seed=3)
    simulate.simulate(engine, "bit", x, y, seed=4)
    spec, sums = campaigns.get_campaign(engine, "bit").spec, aggregate_sums(engine, "bit")
    counts = sums["count"]
    assert counts.sum() == n and counts.min() > 0.9 * n / 3  # each participant drew one of the 3 points
    estimate = 2.0 * sums["weighted"] / counts
    # 2 b y has second moment at most 4 E[y^2] = 8 / a^2 (y ~ Lap(1/a)); 5 standard errors per grid point
    assert _true_grid_losses(x, y, spec).max() > 0.5
    a = one_bit_laplace_epsilon(eps)
    np.testing.assert_array_less(np.abs(estimate - _true_grid_losses(x, y, spec)),
                                 5 * math.sqrt(8.0) / a / np.sqrt(counts))
    fit = estimates.fit_campaign(engine, "bit", "linear")
    assert fit.coefficients["x"] == pytest.approx(_box_fit(spec, estimate), abs=1e-12)
    assert -1.0 <= fit.coefficients["x"] <= 1.0
    assert {(r[2], r[3]) for r in ledger_reports(engine, "bit")} == {(int(eps * 1e12), 0)}


def test_dr_erm_campaign(engine) -> None:  # noqa: ANN001
    n, p, eps = 30_000, 200, 4.0
    campaigns.create_campaign(engine, "dr", "dr-erm", [f"x{j}" for j in range(p)], "y", epsilon=eps,
                              options={"participants": n, "rows": 6})
    rng = np.random.default_rng(5)
    x = np.zeros((n, p))
    x[np.arange(n), rng.integers(0, 10, size=n)] = rng.choice([-1.0, 1.0], size=n)  # spiky rows x = +-e_j
    truth = np.zeros(p)
    truth[[0, 3]] = [0.7, -0.3]
    y = x @ truth
    simulate.simulate(engine, "dr", x, y, seed=6)
    info = campaigns.get_campaign(engine, "dr")
    spec = info.spec
    assert info.round_state(0).number("projection_seed") == spec.projection_seed
    phi = random_projection(6, p, spec.projection_seed)
    mean = aggregate_sums(engine, "dr")["statistics"] / n
    # each coordinate of a report has standard deviation at most B / sqrt(width) (every report has norm B)
    bound = 5 * spec.report_norm / math.sqrt(spec.width) / math.sqrt(n)
    np.testing.assert_array_less(np.abs(mean - projected_statistics(x, y, phi, 1.0, 1.0).mean(axis=0)), bound)
    fit = estimates.fit_campaign(engine, "dr", "linear")
    expected = DRERMLinearRegression("l1", 1.0).fit(mean, phi).coef_
    np.testing.assert_allclose([fit.coefficients[f"x{j}"] for j in range(p)], expected, atol=1e-6)
    assert np.abs(expected).sum() <= 1.0 + 1e-6  # w lies in C, the unit l1 ball
    assert fit.influence.per_report == 2.0  # its diameter: the most one report can move w (issue 18 finding 6)
    assert {(r[2], r[3]) for r in ledger_reports(engine, "dr")} == {(int(eps * 1e12), 0)}


@pytest.mark.parametrize(
    ("protocol", "features", "options", "kwargs", "pattern"),
    [
        ("bernstein", ["a", "b", "c", "d"], {}, {}, "bernstein is for p <= 3"),
        ("bernstein-1bit", ["a"], {"lower": 1, "upper": 0}, {}, "option lower must be below upper"),
        ("bernstein", ["a"], {}, {"delta": 1e-6}, "delta must be 0 for bernstein"),
        ("bernstein", ["a"], {"degree": 0}, {}, "option degree must be a positive integer"),
        ("dr-erm", ["a", "b"], {"constraint": "l2"}, {}, "option constraint must be one of"),
        ("dr-erm", ["a", "b"], {"rows": 0}, {}, "option rows must be a positive integer"),
        ("dr-erm", ["a", "b"], {"standardize": True}, {}, "takes values in their own units"),
    ],
)
def test_bad_parameters_are_refused(engine, protocol, features, options, kwargs, pattern) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match=pattern):
        campaigns.create_campaign(engine, "bad", protocol, features, "y", epsilon=1.0, options=options, **kwargs)
    assert campaigns.list_campaigns(engine) == []
