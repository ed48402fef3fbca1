"""The means ``E[y | x] = mean(<x, w>)`` of the single-index models, numpy only: the one implementation the
estimators' links (:mod:`estimators.local.glm.links`, which add the slopes Stein's lemma needs) and the client's
fitted models (:class:`service.client.collections.CampaignModel`, light install: no scipy) both use.

Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021): the ``logistic`` and ``poisson`` GLMs (Sec. 6; ``mean = Phi'`` of the
cumulant, eq. (1)), the ``boosting`` loss ``Phi(z) = z/2 + sqrt(1 + z^2/4)`` (Thm. 20), the ``cubic`` link
``x^3 / 3`` and the ``logistic-loss`` link ``log(1 + e^-x)`` (Sec. 6), the ``sigmoid`` link (Thm. 26); plus
``probit``, ``Phi_N(t)``. The models that are linear in the score (:data:`LINEAR_MODELS`) have the identity.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

ArrayFunction = Callable[[np.ndarray], np.ndarray]

#: the models whose mean is the score itself: the private OLS (``linear``), LDP-AVG's ``mean``, the sparse linear
#: models of Wang & Xu (2019) (``iht``, ``lasso``)
LINEAR_MODELS = ("linear", "mean", "iht", "lasso", "lasso-raw")


def sigmoid(t: np.ndarray) -> np.ndarray:
    """``1 / (1 + e^-t)``, as ``1 / (1 + e^-|t|)`` for ``t >= 0`` and ``e^-|t| / (1 + e^-|t|)`` below: it never
    overflows and keeps its relative accuracy in both tails (as scipy's ``expit``)."""
    t = np.asarray(t, dtype=float)
    small = np.exp(-np.abs(t))
    return np.where(t >= 0, 1.0 / (1.0 + small), small / (1.0 + small))


_erfc = np.frompyfunc(math.erfc, 1, 1)


def normal_cdf(t: np.ndarray) -> np.ndarray:
    """``Phi_N(t) = erfc(-t / sqrt 2) / 2``: accurate in both tails (``1 + erf`` would cancel to 0 below t = -8)."""
    t = np.asarray(t, dtype=float)
    return 0.5 * np.asarray(_erfc(-t / math.sqrt(2.0)), dtype=float).reshape(t.shape)


def poisson_mean(t: np.ndarray) -> np.ndarray:
    """``e^t``, the score clipped to ``[-700, 700]`` so that it stays finite (e^709 is float64's largest)."""
    return np.exp(np.clip(np.asarray(t, dtype=float), -700.0, 700.0))


def boosting_mean(t: np.ndarray) -> np.ndarray:
    """``Phi'`` of the boosting loss ``Phi(z) = z/2 + sqrt(1 + z^2/4)`` (Thm. 20)."""
    return 0.5 + t / (4.0 * np.sqrt(1.0 + np.square(t) / 4.0))


#: link name -> its mean ``E[y | x]`` as a function of the score
LINK_MEANS: dict[str, ArrayFunction] = {
    "logistic": sigmoid,
    "poisson": poisson_mean,
    "probit": normal_cdf,
    "boosting": boosting_mean,
    "cubic": lambda t: t**3 / 3.0,
    "sigmoid": sigmoid,
    "logistic-loss": lambda t: np.logaddexp(0.0, -t),
}


def model_mean(model: str) -> ArrayFunction:
    """The mean of ``model``: its link's, or the identity for a model linear in the score."""
    if model in LINK_MEANS:
        return LINK_MEANS[model]
    if model in LINEAR_MODELS:
        return lambda t: np.asarray(t, dtype=float)
    raise ValueError(f"unknown model {model!r} (links: {sorted(LINK_MEANS)}; linear: {list(LINEAR_MODELS)})")
