"""Fitted link models (scikit-learn surface) and the synthetic problems of Sec. 6."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, ndtr

from estimators.base import NotFittedError
from estimators.local.glm.link_models import LinkClassifier, LinkRegressor, link_model
from estimators.local.glm.links import LINKS, get_link
from estimators.local.glm.synthetic import (
    DESIGNS,
    bernoulli_rows,
    draw_labels,
    make_problem,
    rotated_covariance,
    true_coefficients,
)


def test_link_models_predict_with_their_link() -> None:
    X = np.array([[1.0, 0.0], [0.0, -2.0], [0.5, 0.5]])
    coef = np.array([0.4, 0.3])
    score = X @ coef
    logistic = link_model("logistic", coef, 2.0, ("a", "b"))
    assert isinstance(logistic, LinkClassifier) and logistic.classes_.tolist() == [0, 1]
    np.testing.assert_allclose(logistic.predict_proba(X)[:, 1], expit(score))
    assert logistic.predict(X).tolist() == [1, 0, 1] and logistic.intercept_ == 0.0
    assert logistic.coefficients() == {"(intercept)": 0.0, "a": 0.4, "b": 0.3}
    probit = link_model("probit", coef, 1.0, ("a", "b"))
    np.testing.assert_allclose(probit.predict_proba(X)[:, 1], ndtr(score))
    poisson = link_model("poisson", coef, 0.7, ("a", "b"))
    assert isinstance(poisson, LinkRegressor) and poisson.scale_ == 0.7
    np.testing.assert_allclose(poisson.predict(X), np.exp(score))
    np.testing.assert_allclose(link_model("cubic", coef, 1.0, ("a", "b")).predict(X), score**3 / 3)
    with pytest.raises(NotFittedError):
        LinkRegressor().predict(X)


def test_link_derivatives_match_finite_differences() -> None:
    t = np.linspace(-4, 4, 81)
    h = 1e-6
    for link in LINKS.values():
        np.testing.assert_allclose((link.mean(t + h) - link.mean(t - h)) / (2 * h), link.slope(t), atol=1e-7)
        np.testing.assert_allclose((link.slope(t + h) - link.slope(t - h)) / (2 * h), link.slope_derivative(t),
                                   atol=1e-7)
    assert get_link(LINKS["cubic"]) is LINKS["cubic"]


def test_synthetic_problems_follow_the_papers_designs() -> None:
    first = make_problem("bernoulli", "logistic", 1000, 500, 10, rng=7)
    again = make_problem("bernoulli", "logistic", 1000, 500, 10, rng=7)
    assert np.array_equal(first.features, again.features) and np.array_equal(first.labels, again.labels)
    assert set(np.unique(first.features)) == {-0.1, 0.1} and first.public_rows.shape == (500, 10)
    assert set(np.unique(first.labels)) <= {0.0, 1.0}
    np.testing.assert_allclose(true_coefficients(10), np.full(10, 10**-0.5))
    diagonal = make_problem("gaussian-diagonal", "poisson", 200_000, 10, 3, rng=8)
    assert np.all((np.diag(diagonal.covariance) >= 0) & (np.diag(diagonal.covariance) <= 1))
    np.testing.assert_allclose(np.cov(diagonal.features.T), diagonal.covariance, atol=0.01)
    assert np.all(diagonal.labels == np.round(diagonal.labels))  # Poisson counts
    rotated = rotated_covariance(5, np.random.default_rng(9))
    assert np.allclose(rotated, rotated.T) and np.linalg.eigvalsh(rotated).min() >= -1e-12
    assert not np.allclose(rotated, np.diag(np.diag(rotated)))
    noise = draw_labels(np.zeros(100_000), "cubic", np.random.default_rng(10), noise_bound=0.05)
    assert np.abs(noise).max() <= 0.05 and abs(noise.mean()) < 0.001
    assert draw_labels(np.array([0.0]), "logistic", labels="mean").tolist() == [0.5]
    assert set(DESIGNS) == {"gaussian-diagonal", "gaussian-rotated", "bernoulli"}
    assert np.abs(bernoulli_rows(10, 4, 1)).sum(axis=1).tolist() == [1.0] * 10
