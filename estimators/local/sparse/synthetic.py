"""The synthetic sparse linear model of Sec. 7.1 of Wang & Xu (ICML 2019), after Jain, Tewari & Kar (2014).

``theta*`` has ``s*`` non-zero coordinates at random positions, each uniform in ``[0, 1]``; ``x_i`` is uniform in
``{-1, +1}^p``; ``y_i = <x_i, theta*> + sigma_i`` with ``sigma_i`` uniform in ``[-C, C]``, ``C = 0.05``.

One departure, on by default (``normalize=True``): ``theta*`` is rescaled to unit l2 norm. The model classes the
algorithms are analysed on (eq. 1 and eq. 7 of the paper) require ``||theta*||_2 <= 1``, and both algorithms project
onto the unit ball; Sec. 7.1 does not say whether its draws were rescaled, and unscaled draws have norm about
``sqrt(s*/3)`` (1.8 for ``s* = 10``), outside the ball. The relative error ``||theta - theta*|| / ||theta*||`` is
scale-free, but the label bound and hence the noise are not. ``normalize=False`` gives the literal draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimators.base import EstimatorError, check_count, check_generator, check_non_negative, check_sparsity


@dataclass(frozen=True)
class SparseLinearData:
    """Rows ``X`` (``n x p``, entries +-1), labels ``y`` and the true ``theta*``."""

    X: np.ndarray
    y: np.ndarray
    theta_star: np.ndarray
    noise_bound: float

    @property
    def label_bound(self) -> float:
        """``||theta*||_1 + C``: no label exceeds it in absolute value (``|<x, theta*>| <= ||theta*||_1``)."""
        return float(np.abs(self.theta_star).sum()) + self.noise_bound


def sparse_theta(p: int, sparsity: int, rng: np.random.Generator, normalize: bool = True) -> np.ndarray:
    """``theta*``: ``sparsity`` coordinates uniform in ``[0, 1]`` at uniformly random positions, the rest 0."""
    dimension = check_count("p", p)
    s = check_sparsity(sparsity, dimension)
    rng = check_generator(rng)
    theta = np.zeros(dimension)
    support = rng.choice(dimension, size=s, replace=False)
    theta[support] = rng.uniform(0.0, 1.0, size=s)
    if normalize:
        norm = float(np.linalg.norm(theta))
        if norm == 0.0:
            raise EstimatorError("theta* drew all zeros; cannot normalize")
        theta /= norm
    return theta


def sparse_linear_data(
    n: int,
    p: int,
    sparsity: int,
    rng: np.random.Generator,
    noise_bound: float = 0.05,
    normalize: bool = True,
    theta_star: object = None,
) -> SparseLinearData:
    """``n`` rows of the Sec. 7.1 model (a given ``theta_star`` is used as is, e.g. to share it between draws)."""
    rows = check_count("n", n)
    dimension = check_count("p", p)
    bound = check_non_negative("noise_bound", noise_bound)
    rng = check_generator(rng)
    if theta_star is None:
        theta = sparse_theta(dimension, sparsity, rng, normalize)
    else:
        theta = np.asarray(theta_star, dtype=float)
        if theta.shape != (dimension,) or not np.all(np.isfinite(theta)):
            raise EstimatorError(f"theta_star must be a finite vector of {dimension} entries")
    X = 2.0 * rng.integers(0, 2, size=(rows, dimension)).astype(float) - 1.0
    y = X @ theta + rng.uniform(-bound, bound, size=rows)
    return SparseLinearData(X=X, y=y, theta_star=theta, noise_bound=bound)
