"""Covariances of the sparse and low-dimensional local fits from the stored aggregates (issue 20, section 3; the tools
and their assumptions: :mod:`estimators.local.uncertainty`). Free: post-processing of the aggregates.

**Sparse fits are conditional on the selected support** ``S`` (the coordinates the fit kept): the covariance is that of
the estimate recomputed with ``S`` held fixed, so it measures the noise in the kept coefficients and says nothing of
whether ``S`` itself is right (coordinates off ``S`` get 0, exactly as the fit reports them). Selection makes
unconditional standard errors of a sparse fit ill-defined at the boundary (Leeb & Poetscher 2005, "Model selection
and inference: facts and fiction"); the conditional ones are what a refit on ``S`` would give.

* ``label-ldp`` ``lasso`` (least squares on the Lasso's support) and ``lasso-raw`` (the Lasso: on a fixed support and
  fixed signs its KKT conditions give ``w_S = G_SS^-1 (b_S - alpha sign(w_S))``, the same linear map of ``b``):
  :func:`support_least_squares_covariance`, ``G_SS^+ Cov(b_S) G_SS^+``, closed form.
* ``label-ldp`` ``iht`` (:func:`label_iht_covariance`) and ``ldp-iht`` (:func:`iht_step_covariance`): a parametric
  bootstrap of the same iterations restricted to ``S``.
* ``bernstein`` / ``bernstein-1bit`` (:func:`bernstein_covariance`) and ``dr-erm`` (:func:`dr_erm_covariance`): a
  parametric bootstrap of the whole fit (a polynomial's minimiser over a box; two convex programs), which keeps the
  box or the constraint set: no selection to condition on. DR-ERM's convex programs take tens of milliseconds each,
  so it draws :data:`DR_ERM_DRAWS`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from estimators.local.aggregate import ReportAggregate
from estimators.local.sparse.iht import iht_step, label_iht_from_moments
from estimators.local.uncertainty import bootstrap_covariance, diagonal, mean_variance

#: parametric-bootstrap draws for DR-ERM (two cvxpy solves per draw); the standard errors' relative error is ~11 %
DR_ERM_DRAWS = 40
#: coordinates above this fraction of the largest are the support (the service's rule for a fit's ``support``)
SUPPORT_FLOOR = 1e-6


def support(coef: np.ndarray) -> np.ndarray:
    """The indices of the coordinates above :data:`SUPPORT_FLOOR` times the largest."""
    values = np.abs(np.asarray(coef, dtype=float))
    return np.flatnonzero(values > SUPPORT_FLOOR * float(values.max(initial=0.0)))


def _embed(covariance: np.ndarray, kept: np.ndarray, dimension: int) -> np.ndarray:
    out = np.zeros((dimension, dimension))
    out[np.ix_(kept, kept)] = covariance
    return out


def support_least_squares_covariance(gram: np.ndarray, moment_cov: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``G_SS^+ Cov(b_S) G_SS^+`` on the support of ``coef``, 0 elsewhere."""
    kept = support(coef)
    inverse = np.linalg.pinv(np.asarray(gram, dtype=float)[np.ix_(kept, kept)], hermitian=True)
    return _embed(inverse @ np.asarray(moment_cov)[np.ix_(kept, kept)] @ inverse, kept, len(coef))


def label_iht_covariance(gram: np.ndarray, moment: np.ndarray, moment_cov: np.ndarray, coef: np.ndarray,
                         iterations: int, eta: float, radius: float) -> np.ndarray:
    """Alg. 2's iterations on the support of ``coef`` (sparsity ``|S|``: the threshold keeps all of ``S``), bootstrapped
    over ``b_S``."""
    kept = support(coef)
    if kept.size == 0:
        return np.zeros((len(coef), len(coef)))
    sub = np.asarray(gram, dtype=float)[np.ix_(kept, kept)]

    def estimate(b: np.ndarray) -> np.ndarray:
        return label_iht_from_moments(sub, b, kept.size, iterations, eta, radius).theta

    cov = bootstrap_covariance(estimate, np.asarray(moment)[kept], np.asarray(moment_cov)[np.ix_(kept, kept)])
    return _embed(cov, kept, len(coef))


def iht_step_covariance(theta: np.ndarray, aggregate: ReportAggregate, eta: float, radius: float,
                        coef: np.ndarray) -> np.ndarray:
    """LDP-IHT's last step ``P_R(Trunc(theta_t - eta g))`` on the support of ``coef``, bootstrapped over the mean
    gradient report ``g`` of the last round (the published ``theta_t`` is fixed: the earlier rounds are conditioned
    on)."""
    kept = support(coef)
    if kept.size == 0:
        return np.zeros((len(coef), len(coef)))
    gradient = np.asarray(aggregate.mean("gradient"), dtype=float)
    variance = mean_variance(aggregate, "gradient")
    start = np.asarray(theta, dtype=float)[kept]

    def estimate(g: np.ndarray) -> np.ndarray:
        return iht_step(start, g, eta, kept.size, radius)

    return _embed(bootstrap_covariance(estimate, gradient[kept], diagonal(variance[kept])), kept, len(coef))


def one_bit_grid_variance(aggregate: ReportAggregate) -> np.ndarray:
    """The variance of ``2 sum(b y) / count`` per grid point (Alg. 3), from the sums and squares of ``weighted``."""
    counts = np.asarray(aggregate.sums["count"], dtype=float)
    sums, squares = aggregate.sums["weighted"], aggregate.squares["weighted"]
    safe = np.maximum(counts, 1.0)
    spread = np.clip(squares / safe - (sums / safe) ** 2, 0.0, None) * safe / np.maximum(safe - 1.0, 1.0)
    return 4.0 * spread / safe


def bernstein_covariance(fit_grid: Callable[[np.ndarray], np.ndarray], grid_values: np.ndarray,
                         variance: np.ndarray) -> np.ndarray:
    """The minimiser of the Bernstein surface bootstrapped over the grid values (independent across grid points:
    each point's noise is its own Laplace draw, or its own participants' bits). ``fit_grid(values) -> coef``."""
    return bootstrap_covariance(fit_grid, grid_values, diagonal(variance))


def dr_erm_covariance(fit_statistics: Callable[[np.ndarray], np.ndarray], statistics: np.ndarray,
                      aggregate: ReportAggregate) -> np.ndarray:
    """DR-ERM's recovered ``w`` bootstrapped over the mean projected statistics (``fit_statistics(mean) -> coef``)."""
    variance = mean_variance(aggregate, "statistics")
    return bootstrap_covariance(fit_statistics, statistics, diagonal(variance), DR_ERM_DRAWS)

