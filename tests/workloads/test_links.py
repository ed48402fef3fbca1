"""The numpy-only link means (:mod:`workloads.links`) agree with scipy's references wherever those are finite, in
both tails, and every model the campaigns answer has one."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, ndtr

from workloads.links import LINEAR_MODELS, LINK_MEANS, model_mean, normal_cdf, poisson_mean, sigmoid

SCORES = np.linspace(-40.0, 40.0, 8001)


def test_sigmoid_is_scipys_expit_in_both_tails() -> None:
    np.testing.assert_allclose(sigmoid(SCORES), expit(SCORES), rtol=1e-15, atol=0)
    assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]  # no overflow


def test_normal_cdf_is_scipys_ndtr_in_both_tails() -> None:
    ours, scipys = normal_cdf(SCORES), ndtr(SCORES)
    normal = scipys > 1e-300  # below, both are subnormal or 0 (t < -37)
    np.testing.assert_allclose(ours[normal], scipys[normal], rtol=1e-12, atol=0)
    assert np.all(ours[~normal] < 1e-300)
    assert normal_cdf(np.zeros((2, 3))).shape == (2, 3)


def test_poisson_mean_stays_finite() -> None:
    np.testing.assert_allclose(poisson_mean(SCORES), np.exp(SCORES), rtol=1e-15)
    assert np.isfinite(poisson_mean(np.array([1e6])))[0]


def test_model_mean_names_an_unknown_model() -> None:
    assert set(LINK_MEANS).isdisjoint(LINEAR_MODELS)
    np.testing.assert_array_equal(model_mean("linear")(SCORES), SCORES)
    with pytest.raises(ValueError, match="unknown model 'tobit'"):
        model_mean("tobit")
