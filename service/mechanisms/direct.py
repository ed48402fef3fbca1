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
A graphical model is then fitted to the noisy marginals (free post-processing). When the workload's
cliques would make the junction tree larger than ``max_model_size`` MB (all 2-way marginals of a
wide table form one huge clique), the model uses the largest subset that fits, taken greedily in
order of the measured dependence (a function of the noisy marginals only, so still free); every
measurement stays in the release.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from estimators.graphical import junction_tree, mbi_adapter
from estimators.graphical.mbi_adapter import Model
from estimators.graphical.mirror_descent import Measurement
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, fit_progress, no_progress
from service.privacy.calibration import gaussian_sigma2_exact, laplace_scale_exact
from service.privacy.cost import PrivacyCost, exact
from service.privacy.noise import NoiseSource
from workloads.marginals import Query

DEFAULT_MAX_MODEL_SIZE_MB = 80.0
DEFAULT_ITERS = 1000


def _shares(workload: Sequence[Query], total: Fraction) -> list[Fraction]:
    weights = [exact(q.weight) for q in workload]
    whole = sum(weights)
    return [total * w / whole for w in weights]


def run_laplace(
    oracle: CountOracle,
    workload: Sequence[Query],
    epsilon: Fraction,
    noise: NoiseSource,
    *,
    max_model_size: float = DEFAULT_MAX_MODEL_SIZE_MB,
    iters: int = DEFAULT_ITERS,
    progress: Progress = no_progress,
) -> MechanismResult:
    _check_workload(oracle, workload)
    measurements = []
    steps = len(workload) + 1
    for i, (query, eps_i) in enumerate(zip(workload, _shares(workload, epsilon), strict=True)):
        progress(i, steps, f"measuring {'×'.join(query.attributes)}")
        counts = oracle.counts(query.attributes)
        scale = laplace_scale_exact(eps_i, 1)
        noisy = counts + noise.discrete_laplace(scale, counts.size).reshape(counts.shape)
        # Var of the discrete Laplace is below 2 scale^2; the continuous value is a safe stand-in.
        measurements.append(Measurement(query.attributes, noisy.astype(float), math.sqrt(2) * float(scale)))
        progress(i + 1, steps, f"measured {'×'.join(query.attributes)}")
    model, used = _fit(oracle, measurements, max_model_size, iters, progress)
    progress(steps, steps, "fitted model")
    return MechanismResult(measurements, model, PrivacyCost(epsilon=epsilon), {"model_cliques": used})


def run_gaussian(
    oracle: CountOracle,
    workload: Sequence[Query],
    rho: Fraction,
    noise: NoiseSource,
    *,
    max_model_size: float = DEFAULT_MAX_MODEL_SIZE_MB,
    iters: int = DEFAULT_ITERS,
    progress: Progress = no_progress,
) -> MechanismResult:
    _check_workload(oracle, workload)
    measurements = []
    steps = len(workload) + 1
    for i, (query, rho_i) in enumerate(zip(workload, _shares(workload, rho), strict=True)):
        progress(i, steps, f"measuring {'×'.join(query.attributes)}")
        counts = oracle.counts(query.attributes)
        sigma2 = gaussian_sigma2_exact(rho_i)
        noisy = counts + noise.discrete_gaussian(sigma2, counts.size).reshape(counts.shape)
        measurements.append(Measurement(query.attributes, noisy.astype(float), math.sqrt(float(sigma2))))
        progress(i + 1, steps, f"measured {'×'.join(query.attributes)}")
    model, used = _fit(oracle, measurements, max_model_size, iters, progress)
    progress(steps, steps, "fitted model")
    return MechanismResult(measurements, model, PrivacyCost(rho=rho), {"model_cliques": used})


def _check_workload(oracle: CountOracle, workload: Sequence[Query]) -> None:
    if not workload:
        raise MechanismError("the workload is empty")
    for query in workload:
        if junction_tree.model_size_mb(oracle.domain, [query.attributes]) > 4096:
            raise MechanismError(
                f"marginal {list(query.attributes)} has {oracle.domain.cells(query.attributes):,} cells; "
                "that is too large to measure"
            )


def dependence_score(values: np.ndarray) -> float:
    """Total-variation distance between a (noisy) marginal and the product of its own 1-way
    margins: how much a model gains by including this clique. Uses released values only."""
    if values.ndim < 2:
        return math.inf  # 1-way marginals always go in first
    clipped = np.clip(values, 0, None)
    total = clipped.sum()
    if total <= 0:
        return 0.0
    joint = clipped / total
    product = np.ones_like(joint)
    for axis in range(joint.ndim):
        others = tuple(a for a in range(joint.ndim) if a != axis)
        shape = [1] * joint.ndim
        shape[axis] = joint.shape[axis]
        product = product * joint.sum(axis=others).reshape(shape)
    return float(0.5 * np.abs(joint - product).sum())


def tractable_cliques(
    oracle: CountOracle, measurements: Sequence[Measurement], max_model_size: float
) -> list[tuple[str, ...]]:
    """Measured cliques, strongest dependence first, kept while the junction tree fits."""
    ranked = sorted(measurements, key=lambda m: (-dependence_score(m.values), m.attributes))
    chosen: list[tuple[str, ...]] = []
    for m in ranked:
        if junction_tree.model_size_mb(oracle.domain, [*chosen, m.attributes]) <= max_model_size:
            chosen.append(m.attributes)
    if not chosen:
        raise MechanismError(
            f"no measured marginal fits a model of at most {max_model_size} MB; raise --max-model-size"
        )
    return chosen


def _fit(
    oracle: CountOracle, measurements: list[Measurement], max_model_size: float, iters: int, progress: Progress
) -> tuple[Model, list[list[str]]]:
    cliques = set(tractable_cliques(oracle, measurements, max_model_size))
    used = [m for m in measurements if m.attributes in cliques]
    model = mbi_adapter.estimate(oracle.domain, used, iters=iters, progress=fit_progress(progress))
    return model, [list(m.attributes) for m in used]
