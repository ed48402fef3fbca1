"""The means ``E[y | x] = mean(<x, w>)`` of the single-index models, numpy only: the one implementation the
estimators' links (:mod:`estimators.local.glm.links`, which add the slopes Stein's lemma needs) and the client's
fitted models (:class:`service.client.collections.CampaignModel`, light install: no scipy) both use.

Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021): the ``logistic`` and ``poisson`` GLMs (Sec. 6; ``mean = Phi'`` of the
cumulant, eq. (1)), the ``boosting`` loss ``Phi(z) = z/2 + sqrt(1 + z^2/4)`` (Thm. 20), the ``cubic`` link
``x^3 / 3`` and the ``logistic-loss`` link ``log(1 + e^-x)`` (Sec. 6), the ``sigmoid`` link (Thm. 26); plus
``probit``, ``Phi_N(t)``. The models that are linear in the score (:data:`LINEAR_MODELS`) have the identity
(:data:`IDENTITY`, the ``linear`` link of the public-moment GLM).

Each link is one :class:`Link` value: its name, its mean, the closed range of the mean and whether its models are
classifiers (``binary``). It is the one home of these facts: the estimators' links extend it by reference (the
Stein-lemma links of :mod:`estimators.local.glm.links` add their slopes, the public-moment links of
:mod:`estimators.local.glm.moment` their cumulants), and the client answers ``E[y | x]`` with the same mean.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from workloads.registry import Registry

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


def _normal_cdf_by_erfc(t: np.ndarray) -> np.ndarray:
    """``erfc(-t / sqrt 2) / 2`` cell by cell with :func:`math.erfc` (numpy has no ``erfc``): the light client's
    path, about 50x slower than scipy's vectorised ``ndtr`` and equal to it to 1e-12 wherever it is normal."""
    return 0.5 * np.asarray(_erfc(-t / math.sqrt(2.0)), dtype=float).reshape(t.shape)


@functools.cache
def _normal_cdf_implementation() -> Callable[[np.ndarray], np.ndarray]:
    """scipy's ``ndtr`` where scipy is installed (the server, whose fits call this thousands of times per campaign),
    else :func:`_normal_cdf_by_erfc` (the ``marginalia[client]`` install has no scipy). Imported on first use, so
    that importing this module (the CLI does) stays free of scipy."""
    try:
        from scipy.special import ndtr
    except ImportError:
        return _normal_cdf_by_erfc
    return ndtr


def normal_cdf(t: np.ndarray) -> np.ndarray:
    """``Phi_N(t) = erfc(-t / sqrt 2) / 2``: accurate in both tails (``1 + erf`` would cancel to 0 below t = -8)."""
    return _normal_cdf_implementation()(np.asarray(t, dtype=float))


_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)


def normal_density(t: np.ndarray) -> np.ndarray:
    """``phi_N(t) = e^(-t^2 / 2) / sqrt(2 pi)``, the probit's slope (the Stein and public-moment links share it)."""
    return _INV_SQRT_2PI * np.exp(-0.5 * np.square(t))


def poisson_mean(t: np.ndarray) -> np.ndarray:
    """``e^t``, the score clipped to ``[-700, 700]`` so that it stays finite (e^709 is float64's largest)."""
    return np.exp(np.clip(np.asarray(t, dtype=float), -700.0, 700.0))


def boosting_mean(t: np.ndarray) -> np.ndarray:
    """``Phi'`` of the boosting loss ``Phi(z) = z/2 + sqrt(1 + z^2/4)`` (Thm. 20)."""
    return 0.5 + t / (4.0 * np.sqrt(1.0 + np.square(t) / 4.0))


@dataclass(frozen=True)
class Link:
    """A single-index model's link ``E[y | x] = mean(<x, w>)``: the closed range ``[low, high]`` of ``mean``
    (``None``: unbounded on that side) and ``binary``: whether its models are classifiers of 0/1 labels (with
    ``predict_proba``)."""

    name: str
    mean: ArrayFunction
    low: float | None
    high: float | None
    binary: bool

    def base_fields(self) -> dict[str, object]:
        """This link's own fields, for an estimator's link that extends it: ``Extended(**base.base_fields(), ...)``
        (the mean, range and binary flag by reference, never restated)."""
        return {field.name: getattr(self, field.name) for field in fields(Link)}


def _identity(t: np.ndarray) -> np.ndarray:
    return np.asarray(t, dtype=float)


#: the mean of every model linear in the score (:data:`LINEAR_MODELS`), and the public-moment GLM's ``linear`` link
IDENTITY = Link("linear", _identity, None, None, False)


def _missing_link(name: object, choices: list[str]) -> Exception:
    return ValueError(f"unknown link {name!r} (links: {sorted(choices)})")


#: the links by name, in the paper's order
LINKS: Registry[Link] = Registry("link", _missing_link)
for _link in (
    Link("logistic", sigmoid, 0.0, 1.0, True),
    Link("poisson", poisson_mean, 0.0, None, False),
    Link("probit", normal_cdf, 0.0, 1.0, True),
    Link("boosting", boosting_mean, 0.0, 1.0, False),
    Link("cubic", lambda t: t**3 / 3.0, None, None, False),
    Link("sigmoid", sigmoid, 0.0, 1.0, False),
    Link("logistic-loss", lambda t: np.logaddexp(0.0, -t), 0.0, None, False),
):
    LINKS.register(_link.name, _link)

#: link name -> its mean ``E[y | x]`` as a function of the score (a view of :data:`LINKS`)
LINK_MEANS: dict[str, ArrayFunction] = {name: link.mean for name, link in LINKS.items()}


def model_mean(model: str) -> ArrayFunction:
    """The mean of ``model``: its link's, or the identity for a model linear in the score."""
    if model in LINKS:
        return LINKS.get(model).mean
    if model in LINEAR_MODELS:
        return IDENTITY.mean
    raise ValueError(f"unknown model {model!r} (links: {sorted(LINK_MEANS)}; linear: {list(LINEAR_MODELS)})")
