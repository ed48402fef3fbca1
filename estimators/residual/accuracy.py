"""The expected error of a marginal answered from noisy residuals, in closed form, before anything is measured.

A release whose answers come from noisy residuals (:mod:`estimators.residual.reconstruct`) answers every marginal of
its workload without bias, and the error of each cell has a law that depends only on the domain, the workload and the
noise scales, never on the data. So the accuracy of such a release is known before it is made (the dry runs of
docs/privacy.md 6.6). For one marginal ``S`` with ``c`` cells, :class:`CellError` gives:

* **the per-cell standard error** (in counts): ``sqrt(Var_S)``, ``Var_S = sum_{A ⊆ S} s_A p_A / prod_{i in S \\ A}
  n_i^2`` (:func:`~estimators.residual.basis.cell_variance`; Xiao, He, Zhang & Kifer 2023, "An optimal and scalable
  matrix mechanism for noisy marginals under convex loss functions", NeurIPS 2023, the closed form of a marginal's
  variance under ResidualPlanner, Sec. 4). It is exactly the ``standard_errors`` the release's answer carries;
* **the expected L1 error of the marginal** (in counts): ``c E|X|``, every cell's error ``X`` having the same law.
  ``E|X|`` is exact for Gaussian noise, ``sd sqrt(2/pi)``. For any other noise we use the first term of the Edgeworth
  expansion of a symmetric law, ``E|X| ~ sd sqrt(2/pi) (1 - kappa/24)`` with ``kappa`` the excess kurtosis of ``X``
  (our derivation: integrate ``|x|`` against ``phi(x) (1 + kappa He_4(x) / 24)``; ``int_0^inf x He_4(x) phi(x) dx =
  -1/sqrt(2 pi)``). It is exact for Gaussian noise (``kappa = 0``) and 1.3 % low for a lone continuous Laplace draw
  (``kappa = 3``: 0.698 sd against ``b = 0.707 sd``); a cell of a direct Laplace release is a sum of many Laplace draws
  (least squares over the workload), whose ``kappa`` is smaller, so the approximation is better still. It is never
  taken below the Hölder bound ``sd / sqrt(kappa + 3)`` (``E X^2 <= (E|X|)^(2/3) (E X^4)^(1/3)``);
* **the expected L1 error of the normalised marginal**: ``c E|X| / N``, ``N`` the number of rows: the L1 distance
  between the answer and the true marginal, divided by the true total. This is the project's measure of a marginal
  release's error (``benchmarks/measure.workload_error``, docs/mechanisms.md), and being linear in the errors it has
  this closed form. Dividing the answer by its *own noisy total* ``N^`` instead (the only total a caller has) gives
  the per-cell error ``(X_c - p_c (N^ - N)) / N^``, ``p_c`` the cell's true share: a ratio of noisy numbers that
  depends on the data through ``p_c`` and has no finite mean once ``N^`` can come near 0. The two agree to the
  relative order ``sd(N^) / N``, which a forecast states (:attr:`MarginalForecast.total_variance`): at most 0.024
  for the 2-way marginals of adult and ACSincome at epsilon 0.1, but 0.13 to 0.42 for titanic's (1,304 rows), where an
  answer divided by its own total strays from the formula by up to a fifth on average and a single answer by far more
  (docs/mechanisms.md, "Accuracy before a release").

``kappa`` of a direct release's cell (:func:`direct_cell_error`; our derivation): every cell's error is a fixed linear
combination of the measurements' independent per-cell noises, ``X = sum_j c_j e_j``, so ``Var X = sum_j c_j^2
tau_j^2`` and its fourth cumulant is ``sum_j c_j^4 kappa_j tau_j^4``. Tracing ``c_j`` through the least-squares
residuals: the noise of cell ``t`` of a measured marginal ``T`` enters cell ``s`` of ``S`` with the coefficient

    c_T(t) = 1 / (tau_T^2 k_{T,I}) * h_{S,I}(M),   h_{S,I}(M) = sum_{A ⊆ I} s_A / (k_{S,A} k_{I,A}) prod_{i in A}
                                                                 ([i in M] - 1/n_i),

where ``I = S ∩ T``, ``M ⊆ I`` the attributes on which ``t`` agrees with ``s``, ``k_{X,A} = prod_{i in X \\ A} n_i``
and ``s_A`` the residual scales (:func:`~estimators.residual.reconstruct.residual_scales`), from ``b_A = sum_T
(s_A / (k_{T,A} tau_T^2)) P_A sum_{T -> A} y_T`` and ``m_S = sum_{A ⊆ S} expand(b_A) / k_{S,A}``. The cells ``t`` of
one pattern ``M`` number ``k_{T,I} prod_{i in I \\ M} (n_i - 1)``, so both sums run over ``(T, M)`` pairs only; the
variance they give equals ``Var_S`` (a test checks it), and all cells of ``S`` have one law.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from estimators.residual.basis import (
    Clique,
    ResidualError,
    as_domain,
    canonical_clique,
    cell_variance,
    expansion_divisor,
    is_trivial,
)
from estimators.residual.reconstruct import residual_scales
from workloads.domain import Domain

__all__ = ["CellError", "MarginalForecast", "MeasuredNoise", "direct_cell_error", "direct_forecast",
           "gaussian_cell_error"]

#: E|X| / sd for Gaussian noise.
GAUSSIAN_MEAN_ABSOLUTE = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class MeasuredNoise:
    """One marginal measured directly: its attributes and the law of each cell's noise, by its variance and its
    excess kurtosis (0 for Gaussian noise, 3 for a continuous Laplace draw)."""

    attributes: tuple[str, ...]
    variance: float
    excess_kurtosis: float = 0.0


@dataclass(frozen=True)
class CellError:
    """The error of every cell of one marginal's unbiased answer (module docstring): all its cells share one law."""

    attributes: tuple[str, ...]
    cells: int
    variance: float
    excess_kurtosis: float = 0.0

    @property
    def standard_error(self) -> float:
        """Per cell, in counts."""
        return math.sqrt(self.variance)

    @property
    def mean_absolute_error(self) -> float:
        """``E|X|`` of one cell: exact for Gaussian noise, the first Edgeworth term otherwise, never below the
        Hölder bound (module docstring)."""
        sd, kappa = self.standard_error, self.excess_kurtosis
        return max(sd * GAUSSIAN_MEAN_ABSOLUTE * (1.0 - kappa / 24.0), sd / math.sqrt(kappa + 3.0))

    @property
    def expected_l1(self) -> float:
        """The expected L1 error of the marginal, in counts."""
        return self.cells * self.mean_absolute_error

    def expected_l1_normalised(self, rows: int) -> float:
        """The expected L1 error of the marginal normalised to a distribution, for a table of ``rows`` rows."""
        if rows <= 0:
            raise ResidualError(f"rows must be a positive number of rows, got {rows!r}")
        return self.expected_l1 / rows

    def to_json(self, rows: int | None = None) -> dict[str, object]:
        body: dict[str, object] = {"attributes": list(self.attributes), "cells": self.cells,
                                   "standard_error": self.standard_error, "expected_l1": self.expected_l1,
                                   "excess_kurtosis": self.excess_kurtosis}
        if rows is not None:
            body["expected_l1_normalised"] = self.expected_l1_normalised(rows)
        return body


@dataclass(frozen=True)
class MarginalForecast:
    """The expected errors of a release's workload marginals, one :class:`CellError` each, its basis (one sentence
    saying which formulas and approximations give them), and the variance of the answers' common total (how far a
    marginal divided by its own total may stray from one divided by the true total: module docstring)."""

    basis: str
    errors: tuple[CellError, ...]
    total_variance: float


def gaussian_cell_error(domain: Domain | Mapping[str, int], attributes: Sequence[str], variance: float) -> CellError:
    """The error of the cells of a marginal whose per-cell error is Gaussian with this variance (a ResidualPlanner
    answer: continuous Gaussian noise on every residual, so every cell is exactly Gaussian)."""
    dom = as_domain(domain)
    clique = canonical_clique(dom, attributes, "attributes", allow_empty=True)
    return CellError(clique, dom.cells(clique), float(variance))


def direct_forecast(domain: Domain | Mapping[str, int], measured: Sequence[MeasuredNoise],
                    workload: Iterable[Sequence[str]], basis: str) -> MarginalForecast:
    """The forecast of a direct release that measured ``measured`` and is asked ``workload`` (the residual scales
    computed once for all of them)."""
    dom = as_domain(domain)
    scales = residual_scales(dom, [(m.attributes, m.variance) for m in measured])
    # the kurtosis is computed in units of the largest variance (it is scale-free; fourth powers of tiny variances
    # would underflow): the same laws, every variance divided by it
    unit = max(m.variance for m in measured)
    laws = [(canonical_clique(dom, m.attributes, "measured", allow_empty=True),
             MeasuredNoise(m.attributes, m.variance / unit, m.excess_kurtosis)) for m in measured]
    unit_scales = residual_scales(dom, [(m.attributes, m.variance) for _, m in laws])
    errors = tuple(_direct_cell_error(dom, laws, scales, unit_scales, attributes) for attributes in workload)
    return MarginalForecast(basis, errors, float(cell_variance(dom, (), scales)))


def direct_cell_error(domain: Domain | Mapping[str, int], measured: Sequence[MeasuredNoise],
                      attributes: Sequence[str]) -> CellError:
    """The error of every cell of marginal ``attributes`` answered from the least-squares residuals of the direct
    measurements ``measured`` (:func:`~estimators.residual.reconstruct.residuals_from_marginals`): its variance, the
    release's own ``Var_S``, and its excess kurtosis by the coefficients of the module docstring."""
    return direct_forecast(domain, measured, [attributes], "").errors[0]


def _direct_cell_error(dom: Domain, measured: Sequence[tuple[Clique, MeasuredNoise]], scales: Mapping[Clique, float],
                       unit_scales: Mapping[Clique, float], attributes: Sequence[str]) -> CellError:
    """The cell law of ``attributes``: its variance from the release's own ``scales``, its kurtosis from
    ``measured`` and ``unit_scales``, the same laws in units of the largest variance."""
    target = canonical_clique(dom, attributes, "attributes", allow_empty=True)
    variance = float(cell_variance(dom, target, unit_scales))
    by_overlap: dict[Clique, list[float]] = {}  # I = S ∩ T -> [sum 1/(tau^2 k_TI), sum kappa/(tau^4 k_TI^3)]
    for clique, m in measured:
        overlap = tuple(a for a in target if a in clique)
        k = expansion_divisor(dom, overlap, clique)
        sums = by_overlap.setdefault(overlap, [0.0, 0.0])
        sums[0] += 1.0 / (m.variance * k)
        sums[1] += m.excess_kurtosis / (m.variance ** 2 * k ** 3)
    second, fourth = 0.0, 0.0
    for overlap, (precision, kurtosis) in by_overlap.items():
        for count, h in _patterns(dom, target, overlap, unit_scales):
            second += precision * count * h * h
            fourth += kurtosis * count * h ** 4
    if not math.isclose(second, variance, rel_tol=1e-9):
        raise AssertionError(f"marginal {list(target)}: coefficients give variance {second}, the residuals {variance}")
    return CellError(target, dom.cells(target), float(cell_variance(dom, target, scales)), fourth / (second * second))


def _patterns(dom: Domain, target: Clique, overlap: Clique,
              scales: Mapping[Clique, float]) -> Iterable[tuple[int, float]]:
    """``(number of cells t per unit of k_{T,I}, h_{S,I}(M))`` for every pattern ``M ⊆ I`` of agreement with a cell
    of the target (module docstring)."""
    sizes = {a: dom.size(a) for a in overlap}
    for r in range(len(overlap) + 1):
        for matched in itertools.combinations(overlap, r):
            count = math.prod(sizes[a] - 1 for a in overlap if a not in matched)
            if count == 0:
                continue
            h = 0.0
            for k in range(len(overlap) + 1):
                for sub in itertools.combinations(overlap, k):
                    if is_trivial(dom, sub):
                        continue
                    factor = math.prod((1.0 if a in matched else 0.0) - 1.0 / sizes[a] for a in sub)
                    h += scales[sub] * factor / (expansion_divisor(dom, sub, target) * expansion_divisor(dom, sub,
                                                                                                          overlap))
            yield count, h
