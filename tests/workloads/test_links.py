"""The numpy-only link means (:mod:`workloads.links`) agree with scipy's references wherever those are finite, in
both tails, and every model the campaigns answer has one."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, ndtr

from workloads import links
from workloads.links import LINEAR_MODELS, LINK_MEANS, model_mean, normal_cdf, poisson_mean, sigmoid

SCORES = np.linspace(-40.0, 40.0, 8001)


def test_sigmoid_is_scipys_expit_in_both_tails() -> None:
    np.testing.assert_allclose(sigmoid(SCORES), expit(SCORES), rtol=1e-15, atol=0)
    assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]  # no overflow


@pytest.mark.parametrize("implementation", ["installed", "light client"])
def test_normal_cdf_is_scipys_ndtr_in_both_tails(implementation: str) -> None:
    """Both paths: scipy's own ndtr where scipy is installed, math.erfc cell by cell on the light client install."""
    cdf = normal_cdf if implementation == "installed" else links._normal_cdf_by_erfc  # noqa: SLF001
    ours, scipys = cdf(SCORES), ndtr(SCORES)
    normal = scipys > 1e-300  # below, both are subnormal or 0 (t < -37)
    np.testing.assert_allclose(ours[normal], scipys[normal], rtol=1e-12, atol=0)
    assert np.all(ours[~normal] < 1e-300)
    assert cdf(np.zeros((2, 3))).shape == (2, 3)


def test_normal_cdf_works_without_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client-only install has no scipy: the import fails and the erfc path answers."""
    monkeypatch.setitem(__import__("sys").modules, "scipy.special", None)  # makes `from scipy.special import` fail
    links._normal_cdf_implementation.cache_clear()  # noqa: SLF001
    try:
        assert links._normal_cdf_implementation() is links._normal_cdf_by_erfc  # noqa: SLF001
        np.testing.assert_allclose(normal_cdf(np.array([-1.0, 0.0, 2.0])), ndtr(np.array([-1.0, 0.0, 2.0])),
                                   rtol=1e-12)
    finally:
        links._normal_cdf_implementation.cache_clear()  # noqa: SLF001


def test_poisson_mean_stays_finite() -> None:
    np.testing.assert_allclose(poisson_mean(SCORES), np.exp(SCORES), rtol=1e-15)
    assert np.isfinite(poisson_mean(np.array([1e6])))[0]


def test_model_mean_names_an_unknown_model() -> None:
    assert set(LINK_MEANS).isdisjoint(LINEAR_MODELS)
    np.testing.assert_array_equal(model_mean("linear")(SCORES), SCORES)
    with pytest.raises(ValueError, match="unknown model 'tobit'"):
        model_mean("tobit")
