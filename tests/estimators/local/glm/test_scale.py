"""The link constant c: checked against closed forms and independent quadrature, the root nearest 0 is the one
returned, Newton's failure falls back to bracketing, and a missing root is a clear error naming the link."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import estimators.local.glm.scale as scale_module
from estimators.local.glm.links import LINKS, Link
from estimators.local.glm.scale import IndexSample, NoRootError, solve_link_scale


def quadrature_root(link: Link, std: float) -> float:
    """The root of c E[slope(c s Z)] = 1 by scipy's adaptive quadrature and Brent's method (independent of the
    Gauss-Hermite rule and of the bracketing in the estimator)."""

    def h(c: float) -> float:
        mean, _ = integrate.quad(lambda z: float(link.slope(np.array([c * std * z]))[0]) * stats.norm.pdf(z), -12, 12,
                                 limit=200)
        return c * mean - 1.0

    side = link.sign
    upper = 0.5
    while h(side * upper) < 0:
        upper *= 2
    return optimize.brentq(lambda u: h(side * u), upper / 2 if h(side * upper / 2) < 0 else 0.0, upper,
                           xtol=1e-13) * side


@pytest.mark.parametrize("name", sorted(LINKS))
@pytest.mark.parametrize("std", [0.05, 0.3, 0.8])
def test_gaussian_index_matches_quadrature(name: str, std: float) -> None:
    link = LINKS[name]
    if name in {"logistic", "sigmoid", "probit", "boosting"} and std == 0.8:
        # bounded slope with integral 1: v E[slope(v Z)] < phi(0) = 0.399 < std, no root (see test_no_root...)
        with pytest.raises(NoRootError, match=name):
            solve_link_scale(link, IndexSample.gaussian(std))
        return
    c = solve_link_scale(link, IndexSample.gaussian(std))
    assert c == pytest.approx(quadrature_root(link, std), rel=1e-8)
    assert np.sign(c) == link.sign


def test_closed_forms() -> None:
    for std in (0.1, 0.5, 2.0):
        assert solve_link_scale("cubic", IndexSample.gaussian(std)) == pytest.approx(std ** (-2 / 3), rel=1e-10)
        c = solve_link_scale("poisson", IndexSample.gaussian(std))
        assert c * math.exp(c * c * std * std / 2) == pytest.approx(1.0, rel=1e-10)
    # every t = 0: c = 1 / slope(0)
    assert solve_link_scale("logistic", IndexSample(np.zeros(4), np.full(4, 0.25))) == pytest.approx(4.0)
    assert solve_link_scale("logistic-loss", IndexSample(np.zeros(2), np.full(2, 0.5))) == pytest.approx(-2.0)


def test_empirical_index_equals_the_mean_over_rows() -> None:
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(5000, 3))
    coef = np.array([0.2, -0.1, 0.05])
    index = IndexSample.from_rows(rows, coef)
    c = solve_link_scale("logistic", index)
    t = rows @ coef
    assert c * np.mean(LINKS["logistic"].slope(c * t)) == pytest.approx(1.0, abs=1e-12)


THREE_ROOTS = Link("three-roots", "glm", lambda t: t, lambda t: (t * t - 7 * t + 14) / 8, lambda t: (2 * t - 7) / 8,
                   "additive", False)


def test_the_root_nearest_zero_is_returned() -> None:
    """h(c) = c (c^2 - 7c + 14) / 8 - 1 at t = 1 has up, down and up crossings at c = 1, 2 and 4."""
    index = IndexSample(np.array([1.0]), np.array([1.0]))
    assert solve_link_scale(THREE_ROOTS, index) == pytest.approx(1.0, abs=1e-12)


def test_a_start_beyond_the_root_scans_down() -> None:
    link = Link("small-slope", "glm", lambda t: t, lambda t: 0.01 + t * t, lambda t: 2 * t, "additive", False)
    index = IndexSample(np.array([1.0]), np.array([1.0]))
    expected = optimize.brentq(lambda c: c * (0.01 + c * c) - 1, 0.0, 2.0, xtol=1e-14)
    assert solve_link_scale(link, index) == pytest.approx(expected, rel=1e-12)


def test_brent_takes_over_when_newton_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no convergence")

    index = IndexSample.gaussian(0.3)
    expected = solve_link_scale("probit", index)
    monkeypatch.setattr(scale_module, "root_scalar", failing)
    assert solve_link_scale("probit", index) == pytest.approx(expected, rel=1e-12)


def test_no_root_is_a_clear_error() -> None:
    """With a wide spread of <x, w_ols> (a noise-dominated OLS), c E[sigmoid'(c t)] never reaches 1."""
    with pytest.raises(NoRootError, match="link 'logistic'.*assumptions"):
        solve_link_scale("logistic", IndexSample.gaussian(5.0))
    with pytest.raises(NoRootError, match="link 'cubic'"):
        solve_link_scale("cubic", IndexSample(np.zeros(3), np.full(3, 1 / 3)))
    nan_link = dataclasses.replace(LINKS["logistic"], name="broken", slope=lambda t: t * np.nan)
    with pytest.raises(NoRootError, match="'broken'.*not a number"):
        solve_link_scale(nan_link, IndexSample.gaussian(1.0))


def test_index_samples() -> None:
    gaussian = IndexSample.gaussian(0.7)
    assert gaussian.weights.sum() == pytest.approx(1.0) and gaussian.scale == pytest.approx(0.7, rel=1e-12)
    with pytest.raises(ValueError, match="public_rows"):
        IndexSample.from_rows(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="std"):
        IndexSample.gaussian(-1.0)


def test_a_root_made_by_one_public_row_is_refused() -> None:
    """t ~ N(0, 0.5^2) over 100,000 public rows: the population equation of the logistic link has no root
    (0.5 > phi(0) = 0.399), but the row with t nearest 0 makes c mean(sigmoid'(c t)) cross 1 near c = 5e5. That
    crossing rests on about one row and is refused; with the same rows at a spread of 0.3 a root exists."""
    rows = np.random.default_rng(2).normal(size=(100_000, 3))
    with pytest.raises(NoRootError, match="'logistic' that the public rows resolve.*about 1.[0-9] of 100000 rows"):
        solve_link_scale("logistic", IndexSample.from_rows(rows, np.array([0.5, 0.0, 0.0])))
    assert 6 < solve_link_scale("logistic", IndexSample.from_rows(rows, np.array([0.3, 0.0, 0.0]))) < 7
