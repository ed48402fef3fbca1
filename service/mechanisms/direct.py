"""Direct measurement of a marginal workload: the Laplace (pure DP) and Gaussian (zCDP) baselines.

Every marginal of the workload is counted exactly (in SQL) and perturbed once:

* ``laplace``: marginal i gets epsilon_i = epsilon * w_i / sum(w) and discrete Laplace noise of
  scale 1/epsilon_i. Under add/remove-one neighbours a row changes exactly one cell of a marginal by
  one, so its L1 sensitivity is 1 and the release is sum_i epsilon_i = epsilon -DP (basic
  composition; CKS 2020 for the discrete Laplace).
* ``gaussian``: marginal i gets rho_i = rho * w_i / sum(w) and discrete Gaussian noise of variance
  parameter sigma_i^2 = 1/(2 rho_i) (L2 sensitivity 1; CKS 2020 Thm. 4), so the release is
  sum_i rho_i = rho -zCDP (Bun & Steinke 2016, Lemma 2.3).

All rho_i and sigma_i^2 are exact rationals, so the cost reported equals the cost charged.

No graphical model is fitted at release time (issue 9): the noisy marginals become the generalised least-squares
residuals of their downward closure with exact noise scales (Xiao, He, Zhang & Kifer 2023, "An optimal and scalable
matrix mechanism for noisy marginals under convex loss functions", the reconstruction of Sec. 5 applied to direct
measurements; :func:`estimators.residual.reconstruct.residuals_from_marginals`), which are the release's payload.
Every marginal of the closure is then answered straight from them with a closed-form standard error
(:mod:`service.releases.measured`); a model is fitted the first time an answer needs one (a marginal outside the
closure, synthetic rows) and stored (:mod:`service.releases.stored_models`), within ``max_model_size`` MB and
stopping on the estimator's tolerance (at most ``iters`` iterations). The per-cell variance of a measurement is the
exact variance of its noise (:func:`service.privacy.calibration.discrete_laplace_variance`,
``discrete_gaussian_variance``). All of it is post-processing of the noisy marginals (docs/privacy.md, section 8.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from estimators.graphical import junction_tree
from estimators.graphical.mirror_descent import Measurement
from estimators.residual.reconstruct import NoisyMarginal, residuals_from_marginals
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.payloads import MarginalsPayload
from service.mechanisms.selection import CachedCounts
from service.privacy.calibration import (
    discrete_gaussian_variance,
    discrete_laplace_variance,
    gaussian_sigma2_exact,
    laplace_scale_exact,
)
from service.privacy.cost import PrivacyCost, exact
from service.privacy.noise import NoiseSource
from workloads.marginals import Query

#: Settings of the model fitted lazily to a direct release (stored in the release's options, read when it is fitted).
DEFAULT_MAX_MODEL_SIZE_MB = 80.0
DEFAULT_ITERS = 1000


#: The largest discrete Laplace scale one marginal may get. Its draws are stored as 64-bit integers: at scale 2^56 a
#: draw exceeds 2^63 in absolute value with probability exp(-2^7) < 1e-55. A larger scale (the ledger's smallest
#: epsilon split over thousands of marginals, or weights 1e6 apart) overflowed after the noise was drawn: a 500
#: with the release's charge standing. It is refused before anything is reserved instead.
MAX_LAPLACE_SCALE = 2**56


def _shares(workload: Sequence[Query], total: Fraction) -> list[Fraction]:
    weights = [exact(q.weight) for q in workload]
    whole = sum(weights)
    return [total * w / whole for w in weights]


def check_laplace_scales(workload: Sequence[Query], epsilon: Fraction) -> None:
    """Refuse, naming the marginal, a workload whose smallest share of ``epsilon`` needs a Laplace scale above
    :data:`MAX_LAPLACE_SCALE` (called when the release is built, before anything is reserved or charged)."""
    for query, eps_i in zip(workload, _shares(workload, epsilon), strict=True):
        scale = laplace_scale_exact(eps_i, 1)
        if scale > MAX_LAPLACE_SCALE:
            raise MechanismError(
                f"marginal {'×'.join(query.attributes)} gets epsilon {float(eps_i):.3g} (its share of "
                f"epsilon={float(epsilon):g} by the workload's weights), so Laplace noise of scale {float(scale):.3g}, "
                f"above the largest the release can store ({MAX_LAPLACE_SCALE:.3g}): raise epsilon, or measure fewer "
                "marginals or with weights less far apart")


#: How one marginal is perturbed at its share of the budget: ``perturb(noise, counts, share) -> (noisy, stddev)``, the
#: noisy counts and the standard deviation of each cell's noise.
Perturb = Callable[[NoiseSource, np.ndarray, Fraction], tuple[np.ndarray, float]]
#: ``run(oracle, workload, budget, noise, *, max_model_size, iters, progress)``: a direct release at ``budget``.
DirectRun = Callable[..., MechanismResult]


def _laplace_noise(noise: NoiseSource, counts: np.ndarray, eps_i: Fraction) -> tuple[np.ndarray, float]:
    scale = laplace_scale_exact(eps_i, 1)
    noisy = counts + noise.discrete_laplace(scale, counts.size).reshape(counts.shape)
    return noisy, math.sqrt(discrete_laplace_variance(scale))


def _gaussian_noise(noise: NoiseSource, counts: np.ndarray, rho_i: Fraction) -> tuple[np.ndarray, float]:
    sigma2 = gaussian_sigma2_exact(rho_i)
    noisy = counts + noise.discrete_gaussian(sigma2, counts.size).reshape(counts.shape)
    return noisy, math.sqrt(discrete_gaussian_variance(sigma2))


def _direct(perturb: Perturb, cost: Callable[[Fraction], PrivacyCost]) -> DirectRun:
    """The direct release whose marginals get ``perturb``'s noise and which costs ``cost(budget)``."""

    def run(oracle: CountOracle, workload: Sequence[Query], budget: Fraction, noise: NoiseSource, *,
            max_model_size: float = DEFAULT_MAX_MODEL_SIZE_MB, iters: int = DEFAULT_ITERS,
            progress: Progress = no_progress) -> MechanismResult:
        """Each marginal of ``workload`` counted and perturbed once at its share of ``budget`` (module docstring),
        then the release of its residuals. ``max_model_size`` and ``iters`` bound the model fitted lazily (they are
        stored in the release's options and read by :mod:`service.releases.stored_models`)."""
        _check_workload(oracle, workload)
        measurements = []
        steps = len(workload) + 1
        counter = _counter(oracle, workload)
        for i, (query, share) in enumerate(zip(workload, _shares(workload, budget), strict=True)):
            progress(i, steps, f"measuring {'×'.join(query.attributes)}")
            noisy, stddev = perturb(noise, counter.counts(query.attributes), share)
            measurements.append(Measurement(query.attributes, noisy.astype(float), stddev))
            progress(i + 1, steps, f"measured {'×'.join(query.attributes)}")
        return _result(oracle, measurements, cost(budget), progress, steps)

    return run


#: ``laplace``: epsilon-DP, discrete Laplace noise on every marginal (module docstring).
run_laplace = _direct(_laplace_noise, lambda epsilon: PrivacyCost(epsilon=epsilon))
#: ``gaussian``: rho-zCDP, discrete Gaussian noise on every marginal (module docstring).
run_gaussian = _direct(_gaussian_noise, lambda rho: PrivacyCost(rho=rho))


def _counter(oracle: CountOracle, workload: Sequence[Query]) -> CachedCounts:
    """The workload's counts, asked of the oracle in one batch when it can (SQL: a few grouped scans)."""
    counter = CachedCounts(oracle)
    counter.prefetch([q.attributes for q in workload])
    return counter


def _check_workload(oracle: CountOracle, workload: Sequence[Query]) -> None:
    if not workload:
        raise MechanismError("the workload is empty")
    for query in workload:
        if junction_tree.model_size_mb(oracle.domain, [query.attributes]) > 4096:
            raise MechanismError(
                f"marginal {list(query.attributes)} has {oracle.domain.cells(query.attributes):,} cells; "
                "that is too large to measure"
            )


def _result(oracle: CountOracle, measurements: list[Measurement], cost: PrivacyCost, progress: Progress,
            steps: int) -> MechanismResult:
    """The release: its noisy marginals as least-squares residuals (module docstring), no model."""
    residuals = residuals_from_marginals(oracle.domain, [NoisyMarginal(m.attributes, m.values, m.stddev ** 2)
                                                         for m in measurements])
    progress(steps, steps, "reconstructed the residuals")
    details = {"measured": [list(m.attributes) for m in measurements], "residuals": len(residuals.residuals)}
    return MechanismResult(cost, MarginalsPayload(measurements, residuals=residuals), details)
