"""Standard errors of local estimates from the stored aggregates (issue 20, section 3): post-processing, free.

Every local estimate is a function of each round's *mean report* ``m = (sum of the reports) / n``, which the round's
:class:`~estimators.local.aggregate.ReportAggregate` keeps with the per-entry sums of squares. The reports of
different participants are independent, so ``Cov(m) = Cov(r) / n`` with ``r`` one report. This module estimates it
and carries it through the estimator:

* :func:`mean_variance`: the per-entry variance of ``m``, ``s_j^2 / n`` with ``s_j^2`` the unbiased sample variance of
  entry ``j`` of the reports (from the stored sums and sums of squares), floored at the randomizer's *known* noise
  variance per entry when the protocol states one: for noise added independently of the data, ``Var(r_j) =
  Var(statistic_j) + noise variance >= noise variance``, so the floor only removes sampling error below a bound that
  holds exactly. The aggregates keep no cross products, so off-diagonal entries of ``Cov(r)`` are taken as 0
  (:func:`diagonal`): exact for the noise of the Gaussian and Laplace grid randomizers (independent per entry), close
  for the l2-ball randomizer's (its output is nearly isotropic), an approximation for the statistic's own spread,
  which is small beside the noise at the sizes local DP needs. A protocol that knows the cross structure states it
  (``label-ldp``: reports ``x_row tilde y`` with public ``x_row``, :func:`label_moment_covariance`).
* three ways through the estimator: :func:`linear_covariance` (``A m``: ``A Cov A^T``, exact for a linear estimate);
  the delta method (``J Cov J^T`` with the estimate's Jacobian ``J``, the same function: a first-order
  approximation, Casella & Berger 2002, Thm. 5.5.24); and :func:`bootstrap_covariance`, a *parametric bootstrap*
  (Efron & Tibshirani 1993, Sec. 6.5) for estimates with no closed form (iterative and constrained fits): draws
  ``m* ~ N(m, Cov(m))``, the law of a mean of ``n`` independent reports (central limit theorem) whose noise is the
  randomizer's, the estimator rerun on each, and the covariance of the results. The draws come from a fixed internal
  stream (:data:`BOOTSTRAP_SEED`), never a caller's seed: the same aggregates give the same standard errors, and the
  draws are noise on already-released aggregates, so they cost nothing and reveal nothing more.

:func:`standard_errors` takes the square roots of a covariance's diagonal. Which way each protocol uses, and what its
standard errors mean (for sparse fits: conditional on the selected support), is in docs/campaigns.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate

#: the fixed stream of every parametric bootstrap (no caller chooses it; see the module docstring)
BOOTSTRAP_SEED = 20_261_125
#: draws per bootstrap: the relative standard error of a standard error from ``B`` Gaussian draws is about
#: ``1 / sqrt(2 (B - 1))``, 5 % at 200
BOOTSTRAP_DRAWS = 200


def mean_variance(aggregate: ReportAggregate, name: str, noise_variance: float | np.ndarray = 0.0) -> np.ndarray:
    """The per-entry variance of the mean report of field ``name`` (flattened), floored at ``noise_variance / n``
    (the randomizer's known noise variance of one report's entry; see the module docstring)."""
    n = aggregate.count
    if n == 0:
        raise EstimatorError(f"the aggregate of {aggregate.protocol!r} round {aggregate.round_index} holds no reports")
    mean = np.asarray(aggregate.mean(name), dtype=float).reshape(-1)
    second = np.asarray(aggregate.second_moment(name), dtype=float).reshape(-1)
    sample = np.clip(second - mean**2, 0.0, None) * (n / max(n - 1, 1))
    return np.maximum(sample, np.broadcast_to(np.asarray(noise_variance, dtype=float), sample.shape)) / n


def diagonal(variance: np.ndarray) -> np.ndarray:
    """The covariance matrix with these variances and no cross terms."""
    return np.diag(np.asarray(variance, dtype=float).reshape(-1))


def label_moment_covariance(aggregate: ReportAggregate, name: str, gram: np.ndarray) -> np.ndarray:
    """``Cov(b)`` for ``b`` the mean of reports ``x_i tilde y_i`` with public rows ``x_i`` (second moment ``G``).

    ``tilde y`` is the label randomizer's output, whose square is (nearly) independent of the row: ``+-C`` exactly
    for Duchi et al.'s randomizer, ``y + N(0, sigma^2)`` with ``sigma^2`` far above ``y^2`` for the Gaussian one. Then
    ``E[x x^T tilde y^2] = kappa G`` with ``kappa = E[tilde y^2]``, estimated by ``sum_j E[x_j^2 tilde y^2] / tr G``
    from the stored squares, and ``Cov(b) = (kappa G - b b^T) / n``."""
    n = aggregate.count
    b = np.asarray(aggregate.mean(name), dtype=float).reshape(-1)
    trace = float(np.trace(gram))
    if trace <= 0.0:
        raise EstimatorError("the public rows' second moment is 0: no label moment has a spread to estimate")
    kappa = float(np.sum(aggregate.second_moment(name))) / trace
    return (kappa * np.asarray(gram, dtype=float) - np.outer(b, b)) / n


def linear_covariance(matrix: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``A Cov A^T``: the covariance of ``A m`` (exact), or the delta method's with ``A`` the Jacobian."""
    a = np.asarray(matrix, dtype=float)
    return a @ np.asarray(covariance, dtype=float) @ a.T


def gaussian_draws(center: np.ndarray, covariance: np.ndarray, draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """``draws`` rows from ``N(center, covariance)`` (a PSD covariance; negative rounding is clipped) from the fixed
    stream :data:`BOOTSTRAP_SEED`."""
    point = np.asarray(center, dtype=float).reshape(-1)
    values, vectors = np.linalg.eigh(np.asarray(covariance, dtype=float))
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return point + rng.standard_normal((draws, point.size)) @ root.T


def bootstrap_covariance(estimate: Callable[[np.ndarray], np.ndarray], center: np.ndarray, covariance: np.ndarray,
                         draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """The parametric bootstrap's covariance of ``estimate(m*)`` over ``m* ~ N(center, covariance)``."""
    results = np.array([np.asarray(estimate(m), dtype=float).reshape(-1)
                        for m in gaussian_draws(center, covariance, draws)])
    return np.atleast_2d(np.cov(results, rowvar=False))


def standard_errors(covariance: np.ndarray) -> np.ndarray:
    """The square roots of the diagonal."""
    return np.sqrt(np.clip(np.diag(np.atleast_2d(np.asarray(covariance, dtype=float))), 0.0, None))
