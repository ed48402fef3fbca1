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
The means are :data:`workloads.links.LINK_MEANS` (numpy only, shared with the client); the slopes are here.
``labels`` names how synthetic labels are drawn (:mod:`estimators.local.glm.synthetic`); ``binary`` links give
classifiers with ``predict_proba``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from estimators.base import EstimatorError
from workloads.links import LINK_MEANS as MEANS
from workloads.links import ArrayFunction

_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


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


def _sigmoid_slope(t: np.ndarray) -> np.ndarray:
    s = expit(t)
    return s * (1.0 - s)


def _sigmoid_curvature(t: np.ndarray) -> np.ndarray:
    s = expit(t)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _normal_density(t: np.ndarray) -> np.ndarray:
    return _INV_SQRT_2PI * np.exp(-0.5 * np.square(t))


def _boosting_slope(t: np.ndarray) -> np.ndarray:
    return 0.25 * (1.0 + np.square(t) / 4.0) ** -1.5


def _boosting_curvature(t: np.ndarray) -> np.ndarray:
    return -0.1875 * t * (1.0 + np.square(t) / 4.0) ** -2.5


LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        Link("logistic", "glm", MEANS["logistic"], _sigmoid_slope, _sigmoid_curvature, "bernoulli", True),
        Link("poisson", "glm", MEANS["poisson"], np.exp, np.exp, "poisson", False),
        Link("probit", "regression", MEANS["probit"], _normal_density, lambda t: -t * _normal_density(t), "bernoulli",
             True),
        Link("boosting", "glm", MEANS["boosting"], _boosting_slope, _boosting_curvature, "bernoulli", False),
        Link("cubic", "regression", MEANS["cubic"], np.square, lambda t: 2.0 * t, "additive", False),
        Link("sigmoid", "regression", MEANS["sigmoid"], _sigmoid_slope, _sigmoid_curvature, "additive", False),
        Link("logistic-loss", "regression", MEANS["logistic-loss"], lambda t: -expit(-t), _sigmoid_slope, "additive",
             False, sign=-1),
    )
}


def get_link(link: str | Link) -> Link:
    """A :class:`Link` by name (or the link itself)."""
    if isinstance(link, Link):
        return link
    if link not in LINKS:
        raise EstimatorError(f"unknown link {link!r} (known: {sorted(LINKS)})")
    return LINKS[link]
