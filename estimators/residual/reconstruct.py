"""Unbiased marginals from noisy residuals, and noisy residuals from noisy marginals: no graphical model.

A release is summarised by :class:`NoisyResiduals`: for every residual ``A`` of a downward-closed family, an unbiased
estimate ``b_A`` of ``beta_A = P_A m_A`` (projected coordinates, :mod:`estimators.residual.basis`) whose noise has
covariance ``s_A P_A``, independent across residuals. Two mechanisms produce exactly that:

* ResidualPlanner (:func:`estimators.residual.measure.measure_residuals`): ``s_A = sigma_A^2``.
* A direct release -- every workload marginal ``S`` measured once as ``y_S = m_S + e_S`` with i.i.d. noise of
  variance ``tau_S^2`` per cell (Laplace or Gaussian) -- through :func:`residuals_from_marginals`.

**Reconstruction** (Xiao et al. 2023, Sec. 4; Mullins, Fuentes, Xiao, Kifer, Musco & Sheldon 2024, "Efficient and
private marginal reconstruction with local non-negativity", NeurIPS 2024, the "ReM" step): any marginal ``S`` of the
closure is ``m_S-hat = sum_{A ⊆ S} expand(b_A) / prod_{i in S \\ A} n_i``, unbiased, with per-cell variance
``sum_{A ⊆ S} s_A p_A / prod_{i in S \\ A} n_i^2`` (:meth:`NoisyResiduals.marginal`,
:meth:`NoisyResiduals.cell_variance`). Answers of different marginals are consistent with each other by
construction (they share the residuals); they can be negative -- :mod:`estimators.residual.nonnegative` fixes that.

**Least squares from noisy marginals** (our derivation). Summing ``y_S`` down to ``A ⊆ S`` and projecting gives
``b_A^(S) = P_A sum_{S \\ A} y_S``, unbiased for ``beta_A`` with covariance ``k_{S,A} tau_S^2 P_A``
(``k_{S,A} = prod_{i in S \\ A} n_i``: each cell of the sum adds ``k`` independent noises). Estimates of two
different residuals from the same ``y_S`` are uncorrelated: their cross-covariance contains ``P_{n_i} 1 = 0`` for an
attribute in one set and not the other. Moreover ``y_S -> (b_A^(S))_{A ⊆ S}`` is invertible (the decomposition of
``m_S`` above), so the generalised least-squares problem over all measurements splits into one problem per residual,
whose solution is the precision-weighted mean

    b_A = sum_S b_A^(S) / (k_{S,A} tau_S^2)  /  sum_S 1 / (k_{S,A} tau_S^2),     s_A = 1 / sum_S 1 / (k_{S,A} tau_S^2),

over the measured ``S ⊇ A``. It is the best linear unbiased estimate (Gauss-Markov) for any noise with those
variances, Laplace included (Mullins et al. 2024 call this pseudo-inversion of marginals "EMP").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from estimators.residual.basis import (
    Clique,
    ResidualError,
    as_domain,
    canonical_clique,
    cell_variance,
    clique_key,
    closure_clique,
    expand_residuals,
    expansion_divisor,
    is_trivial,
    project,
    sum_to,
)
from workloads.domain import Domain

__all__ = ["NoisyMarginal", "NoisyResiduals", "drop_insignificant", "residual_scales", "residuals_from_marginals"]


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, dtype=float)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class NoisyResiduals:
    """Unbiased noisy residuals ``b_A`` (projected coordinates, arrays over ``A``'s attributes in domain order) with
    noise covariance ``scales[A] * P_A``; independent across residuals. Arrays are read-only copies."""

    domain: Domain
    values: Mapping[Clique, np.ndarray]
    scales: Mapping[Clique, float]

    def __post_init__(self) -> None:
        if set(self.values) != set(self.scales):
            raise ResidualError("values and scales must name the same residuals")
        ordered = sorted(self.values, key=lambda c: clique_key(self.domain, c))
        values, scales = {}, {}
        for clique in ordered:
            array = np.asarray(self.values[clique], dtype=float)
            if array.shape != self.domain.shape(clique):
                raise ResidualError(
                    f"residual {list(clique)}: shape {array.shape}, expected {self.domain.shape(clique)}"
                )
            scale = float(self.scales[clique])
            if not (math.isfinite(scale) and scale >= 0):
                raise ResidualError(f"residual {list(clique)}: noise scale must be finite and >= 0, got {scale!r}")
            values[clique], scales[clique] = _frozen(array), scale
        object.__setattr__(self, "values", MappingProxyType(values))
        object.__setattr__(self, "scales", MappingProxyType(scales))

    @property
    def residuals(self) -> tuple[Clique, ...]:
        return tuple(self.values)

    def marginal(self, attributes: Sequence[str]) -> np.ndarray:
        """The unbiased estimate of the marginal on ``attributes`` (axes in domain order; ``()`` is the total)."""
        clique = closure_clique(self.domain, self.values, attributes)
        return expand_residuals(self.domain, self.values, clique)

    def cell_variance(self, attributes: Sequence[str]) -> float:
        """The variance of every cell of :meth:`marginal` (the same for all cells)."""
        clique = closure_clique(self.domain, self.values, attributes)
        return float(cell_variance(self.domain, clique, self.scales))


@dataclass(frozen=True, eq=False)
class NoisyMarginal:
    """One noisy marginal measurement: ``values`` (axes in the order of ``attributes``) with independent noise of
    variance ``variance`` on every cell (e.g. ``2 b^2`` for a Laplace scale ``b``, ``sigma^2`` for a Gaussian)."""

    attributes: tuple[str, ...]
    values: np.ndarray
    variance: float


def residuals_from_marginals(
    domain: Domain | Mapping[str, int], measurements: Iterable[NoisyMarginal]
) -> NoisyResiduals:
    """The generalised least-squares residuals of a direct release (module docstring): every residual of the
    measured marginals' downward closure, with its exact noise scale."""
    dom = as_domain(domain)
    precision: dict[Clique, float] = {}
    weighted: dict[Clique, np.ndarray] = {}
    count = 0
    for position, m in enumerate(measurements):
        count += 1
        what = f"measurements[{position}]"
        attrs = list(m.attributes)
        clique, variance = _measured(dom, attrs, m.variance, what)
        values = np.asarray(m.values, dtype=float)
        if values.shape != dom.shape(attrs):
            raise ResidualError(f"{what}: values have shape {values.shape}, expected {dom.shape(attrs)} for {attrs}")
        if not np.all(np.isfinite(values)):
            raise ResidualError(f"{what}: values must be finite")
        order = [attrs.index(a) for a in clique]
        values = np.transpose(values, order)  # axes in domain order
        for sub, weight in _precisions(dom, clique, variance):
            estimate = project(sum_to(values, clique, sub))
            precision[sub] = precision.get(sub, 0.0) + weight
            weighted[sub] = weighted.get(sub, 0.0) + weight * estimate
    if count == 0:
        raise ResidualError("measurements is empty: give at least one noisy marginal")
    return NoisyResiduals(
        dom, {a: weighted[a] / precision[a] for a in precision}, {a: 1.0 / precision[a] for a in precision}
    )


def residual_scales(domain: Domain | Mapping[str, int],
                    measurements: Iterable[tuple[Sequence[str], float]]) -> dict[Clique, float]:
    """The noise scales ``s_A`` that :func:`residuals_from_marginals` gives the residuals of noisy marginals measured
    with these per-cell variances (``(attributes, variance)`` pairs), without any values: they depend on the domain,
    the marginals and the variances only, so an answer's standard error is known before anything is measured
    (:mod:`estimators.residual.accuracy`)."""
    dom = as_domain(domain)
    precision: dict[Clique, float] = {}
    for position, (attributes, variance) in enumerate(measurements):
        clique, checked = _measured(dom, list(attributes), variance, f"measurements[{position}]")
        for sub, weight in _precisions(dom, clique, checked):
            precision[sub] = precision.get(sub, 0.0) + weight
    if not precision:
        raise ResidualError("measurements is empty: give at least one noisy marginal")
    return {a: 1.0 / p for a, p in precision.items()}


def _measured(dom: Domain, attributes: list[str], variance: object, what: str) -> tuple[Clique, float]:
    """One measurement's attributes in domain order and its per-cell variance, checked."""
    clique = canonical_clique(dom, attributes, what, allow_empty=True)
    value = float(variance)  # type: ignore[arg-type]
    if not (math.isfinite(value) and value > 0):
        raise ResidualError(f"{what}: variance must be a positive finite number, got {variance!r}")
    return clique, value


def _precisions(dom: Domain, clique: Clique, variance: float) -> Iterable[tuple[Clique, float]]:
    """``(A, 1 / (k_{S,A} tau_S^2))`` for every non-trivial ``A ⊆ S``: the precision that the measurement of ``S``
    with per-cell variance ``tau_S^2`` adds to residual ``A`` (module docstring)."""
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if not is_trivial(dom, sub):
                yield sub, 1.0 / (expansion_divisor(dom, sub, clique) * variance)


def drop_insignificant(residuals: NoisyResiduals, threshold: float) -> NoisyResiduals:
    """The residuals with every interaction (``|A| >= 2``) that is indistinguishable from its noise set to zero.

    Under ``beta_A = 0`` the noise ``b_A`` has ``E ||b_A||^2 = s_A d_A`` with ``d_A = prod_{i in A} (n_i - 1)`` (the
    trace of ``s_A P_A``); a residual with ``||b_A||^2 <= threshold * s_A d_A`` is replaced by zero, i.e. the marginals
    fall back to independence on that interaction. A hard-thresholding estimator (our choice, measured in
    ``benchmarks/residual_quick.py --threshold``): biased, lower error where most interactions are weak and the noise
    is large. Post-processing of the released residuals; the scales are kept (they describe the unbiased release,
    not this estimate). ``threshold = 0`` changes nothing."""
    if not isinstance(residuals, NoisyResiduals):
        raise ResidualError(f"residuals must be NoisyResiduals, got {type(residuals).__name__}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
        math.isfinite(threshold) and threshold >= 0
    ):
        raise ResidualError(f"threshold must be a finite number >= 0, got {threshold!r}")
    domain = residuals.domain
    values = {}
    for a, b in residuals.values.items():
        dimension = math.prod(domain.size(x) - 1 for x in a)
        weak = len(a) >= 2 and float(np.multiply(b, b).sum()) <= threshold * residuals.scales[a] * dimension
        values[a] = np.zeros_like(b) if weak else b
    return NoisyResiduals(domain, values, dict(residuals.scales))
