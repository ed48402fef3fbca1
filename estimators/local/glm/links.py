"""The link functions the Stein-lemma estimators answer with (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021, Secs. 4-6).

Every model here is a single-index model ``E[y | x] = mean(<x, w*>)``:

* a **GLM** (Sec. 4, eq. (1)) with cumulant function ``Phi``: ``mean = Phi'`` and the scale equation uses
  ``slope = Phi''`` and, for Newton's step, ``slope_derivative = Phi'''`` (Alg. 1, last step);
* a **non-linear regression** (Sec. 5, eq. (10)) ``y = f(<x, w*>) + noise``: ``mean = f``, ``slope = f'``,
  ``slope_derivative = f''`` (Algs. 3, 4).

For Gaussian ``x`` Stein's lemma gives ``w* = c w_ols`` with ``c`` the root of ``c E[slope(c <x, w_ols>)] = 1``
(Lemma 5, Thm. 21); only this equation depends on the link, so one private OLS answers every link (Remark 16).
``sign`` is the sign of ``c``: +1 for increasing ``mean``, -1 for decreasing (``logistic-loss``).

The links of the paper: ``logistic`` and ``poisson`` GLMs (Sec. 6), the ``boosting`` loss (Thm. 20), the ``cubic``
link ``x^3 / 3`` and the ``logistic-loss`` link ``log(1 + e^-x)`` (Sec. 6), the ``sigmoid`` link (Thm. 26); plus
``probit`` (``E[y | x] = Phi_N(<x, w>)``, binary labels: Stein's lemma only needs ``E[y - mean | x] = 0``).
Each link here extends the project's one :class:`workloads.links.Link` of its name (:meth:`Link.extending`): its
name, mean and ``binary`` (links that give classifiers with ``predict_proba``) are that value's, by reference (numpy
only, shared with the client); the slopes are here. ``labels`` names how synthetic labels are drawn
(:mod:`estimators.local.glm.synthetic`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from estimators.base import EstimatorError
from workloads import links
from workloads.links import ArrayFunction, normal_density


@dataclass(frozen=True)
class Link:
    name: str
    kind: str  # "glm" (cumulant Phi, Sec. 4) or "regression" (link f, Sec. 5)
    mean: ArrayFunction  # Phi' or f
    slope: ArrayFunction  # Phi'' or f'
    slope_derivative: ArrayFunction  # Phi''' or f''
    labels: str  # "bernoulli", "poisson" or "additive" (f(t) + bounded noise)
    binary: bool
    sign: int = 1

    @classmethod
    def extending(cls, base: links.Link, kind: str, slope: ArrayFunction, slope_derivative: ArrayFunction,
                  labels: str, sign: int = 1) -> Link:
        """The Stein link of ``base``: its name, mean and ``binary`` are ``base``'s, the rest is given."""
        return cls(base.name, kind, base.mean, slope, slope_derivative, labels, base.binary, sign)


def _sigmoid_slope(t: np.ndarray) -> np.ndarray:
    s = expit(t)
    return s * (1.0 - s)


def _sigmoid_curvature(t: np.ndarray) -> np.ndarray:
    s = expit(t)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _boosting_slope(t: np.ndarray) -> np.ndarray:
    return 0.25 * (1.0 + np.square(t) / 4.0) ** -1.5


def _boosting_curvature(t: np.ndarray) -> np.ndarray:
    return -0.1875 * t * (1.0 + np.square(t) / 4.0) ** -2.5


def _stein(name: str, kind: str, slope: ArrayFunction, slope_derivative: ArrayFunction, labels: str,
           sign: int = 1) -> Link:
    return Link.extending(links.LINKS.get(name), kind, slope, slope_derivative, labels, sign)


LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        _stein("logistic", "glm", _sigmoid_slope, _sigmoid_curvature, "bernoulli"),
        _stein("poisson", "glm", np.exp, np.exp, "poisson"),
        _stein("probit", "regression", normal_density, lambda t: -t * normal_density(t), "bernoulli"),
        _stein("boosting", "glm", _boosting_slope, _boosting_curvature, "bernoulli"),
        _stein("cubic", "regression", np.square, lambda t: 2.0 * t, "additive"),
        _stein("sigmoid", "regression", _sigmoid_slope, _sigmoid_curvature, "additive"),
        _stein("logistic-loss", "regression", lambda t: -expit(-t), _sigmoid_slope, "additive", sign=-1),
    )
}


def get_link(link: str | Link) -> Link:
    """A :class:`Link` by name (or the link itself)."""
    if isinstance(link, Link):
        return link
    if link not in LINKS:
        raise EstimatorError(f"unknown link {link!r} (known: {sorted(LINKS)})")
    return LINKS[link]
