"""Synthetic problems of the Stein GLM paper's experiments (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021, Sec. 6).

* Designs (:data:`DESIGNS`): ``gaussian-diagonal`` (``x ~ N(0, Sigma)``, ``Sigma`` diagonal with entries uniform on
  ``[0, 1]``), ``gaussian-rotated`` (``Sigma = Q D Q^T`` with ``D`` as before and ``Q`` a uniformly random orthogonal
  matrix: our reading of "we randomly generate an orthogonal matrix"; the journal text's ``Sigma = U + I`` is garbled),
  ``bernoulli`` (entries ``+-1/p`` with probability 1/2 each, so ``||x||_1 = 1``).
* ``w* = (1, ..., 1) / sqrt(p)`` (:func:`true_coefficients`), ``p = 10`` in the paper.
* Labels (:func:`draw_labels`): the link's own model — Bernoulli(mean) for logistic, probit and boosting, Poisson for
  ``poisson``, ``f(t) + U[-C, C]`` for the regression links with ``C = 0.001`` (ALT 2021; the journal version uses
  0.05); ``labels="mean"`` gives ``y = E[y | x]`` instead, as the journal version does for its GLMs.
* Metrics: squared relative error in l2 (Gaussian designs) or l-infinity (Bernoulli),
  :func:`estimators.local.accuracy.squared_relative_error` (shared with the sparse experiments).

Everything takes a ``numpy.random.Generator`` (or an integer seed), so a problem is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import ortho_group

from estimators.base import EstimatorError
from estimators.local.glm.links import Link, get_link
from estimators.local.glm.stein import gaussian_norm_bound

Generator = np.random.Generator


def _generator(rng: Generator | int | None) -> Generator:
    return rng if isinstance(rng, Generator) else np.random.default_rng(rng)


def true_coefficients(dimension: int) -> np.ndarray:
    """``w* = (1, ..., 1) / sqrt(p)``."""
    return np.full(dimension, 1.0 / np.sqrt(dimension))


def diagonal_covariance(dimension: int, rng: Generator | int | None = None) -> np.ndarray:
    return np.diag(_generator(rng).uniform(0.0, 1.0, dimension))


def rotated_covariance(dimension: int, rng: Generator | int | None = None) -> np.ndarray:
    rng = _generator(rng)
    q = ortho_group.rvs(dimension, random_state=rng)
    return (q * rng.uniform(0.0, 1.0, dimension)) @ q.T


def gaussian_rows(count: int, covariance: np.ndarray, rng: Generator | int | None = None) -> np.ndarray:
    """``count`` rows of ``N(0, covariance)``."""
    values, vectors = np.linalg.eigh(covariance)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    return _generator(rng).standard_normal((count, covariance.shape[0])) @ root.T


def bernoulli_rows(count: int, dimension: int, rng: Generator | int | None = None) -> np.ndarray:
    """Entries ``+-1/p`` with probability 1/2 each."""
    return _generator(rng).choice(np.array([-1.0, 1.0]) / dimension, size=(count, dimension))


_LABELS: dict[str, Callable[[np.ndarray, Generator, float], np.ndarray]] = {
    "bernoulli": lambda mean, rng, _: (rng.random(mean.shape) < mean).astype(float),
    "poisson": lambda mean, rng, _: rng.poisson(mean).astype(float),
    "additive": lambda mean, rng, bound: mean + rng.uniform(-bound, bound, mean.shape),
}


def draw_labels(scores: np.ndarray, link: str | Link, rng: Generator | int | None = None,
                noise_bound: float = 0.001, labels: str = "sample") -> np.ndarray:
    """Labels for linear scores ``t = <x, w*>`` under the link's model (or its mean with ``labels="mean"``)."""
    link = get_link(link)
    mean = link.mean(np.asarray(scores, dtype=float))
    if labels == "mean":
        return mean
    if labels != "sample":
        raise EstimatorError(f"labels must be 'sample' or 'mean', got {labels!r}")
    return _LABELS[link.labels](mean, _generator(rng), noise_bound)


@dataclass(frozen=True)
class SyntheticProblem:
    """Private rows and labels, unlabeled public rows from the same design, the true coefficients."""

    features: np.ndarray
    labels: np.ndarray
    public_rows: np.ndarray
    coef: np.ndarray
    covariance: np.ndarray


def _gaussian(make_covariance: Callable[[int, Generator], np.ndarray]):  # noqa: ANN202
    def sample(count: int, public: int, dimension: int, rng: Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        covariance = make_covariance(dimension, rng)
        return gaussian_rows(count, covariance, rng), gaussian_rows(public, covariance, rng), covariance

    return sample


def _bernoulli(count: int, public: int, dimension: int, rng: Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    covariance = np.eye(dimension) / dimension**2
    return bernoulli_rows(count, dimension, rng), bernoulli_rows(public, dimension, rng), covariance


#: design name -> ``sample(n, m, p, rng) -> (private rows, public rows, covariance)``
DESIGNS = {
    "gaussian-diagonal": _gaussian(diagonal_covariance),
    "gaussian-rotated": _gaussian(rotated_covariance),
    "bernoulli": _bernoulli,
}


#: Short names the command line takes for :data:`DESIGNS`.
DESIGN_ALIASES = {"gaussian": "gaussian-diagonal", "rotated": "gaussian-rotated"}


def design_name(design: str) -> str:
    """The :data:`DESIGNS` key for ``design`` or its alias; an unknown name is an :class:`EstimatorError`."""
    name = DESIGN_ALIASES.get(design, design)
    if name not in DESIGNS:
        raise EstimatorError(f"design must be one of {sorted([*DESIGN_ALIASES, *DESIGNS])}, got {design!r}")
    return name


def paper_metric(design: str) -> str:
    """The error norm of Sec. 6 for ``design``: l-infinity for the Bernoulli design, l2 for the Gaussian ones."""
    return "linf" if design_name(design) == "bernoulli" else "l2"


def paper_report_bounds(design: str, public_rows: np.ndarray, participants: int,
                        failure_probability: float = 0.1) -> dict[str, float | str]:
    """The public report bounds of Sec. 6 for ``design``: Alg. 1's l2 bound ``r = sqrt(5 ||Sigma_m|| p log(n / zeta))``
    from the public rows for the Gaussian designs, Alg. 2's l1 bound 1 for the Bernoulli design (``||x||_1 = 1``);
    labels bounded by 1 (the binary links). Keys as a ``stein-glm`` campaign's options."""
    if design_name(design) == "bernoulli":
        return {"norm": "l1", "norm_bound": 1.0, "label_bound": 1.0}
    return {"norm": "l2", "norm_bound": gaussian_norm_bound(public_rows, participants, failure_probability),
            "label_bound": 1.0}


def make_problem(design: str, link: str | Link, participants: int, public: int, dimension: int = 10,
                 rng: Generator | int | None = None, noise_bound: float = 0.001,
                 labels: str = "sample") -> SyntheticProblem:
    """A problem of Sec. 6: ``participants`` labeled private rows and ``public`` unlabeled rows."""
    if design not in DESIGNS:
        raise EstimatorError(f"unknown design {design!r} (known: {sorted(DESIGNS)})")
    rng = _generator(rng)
    features, public_rows, covariance = DESIGNS[design](participants, public, dimension, rng)
    coef = true_coefficients(dimension)
    y = draw_labels(features @ coef, link, rng, noise_bound, labels)
    return SyntheticProblem(features, y, public_rows, coef, covariance)
