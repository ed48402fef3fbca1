"""ResidualPlanner's measurement step, as a pure function of exact counts, a plan and a Gaussian sampler.

Source: Xiao, He, Zhang & Kifer 2023 (NeurIPS), Sec. 4, the base mechanism of residual ``A``:
``M_A(x) = R_A m_A + N(0, sigma_A^2 R_A R_A^T)`` with ``R_A = ⊗_{i in A} Sub_{n_i}``. As in the paper, the
correlated noise is produced as the residual transform of i.i.d. noise: with ``z ~ N(0, sigma_A^2 I)`` over the cells
of ``m_A``, ``R_A (m_A + z)`` has exactly that law. We return it in projected coordinates,
``b_A = P_A (m_A + z) = R_A^+ R_A (m_A + z)`` -- an invertible function of ``R_A (m_A + z)``
(:func:`estimators.residual.basis.to_subtraction_basis` maps back), hence the same mechanism with the same privacy --
so that the noise covariance is ``sigma_A^2 P_A`` and :class:`~estimators.residual.reconstruct.NoisyResiduals`
reconstructs from it directly.

Privacy: residual ``A`` is ``p_A / (2 sigma_A^2)``-zCDP and the plan sums to ``rho`` exactly (docs/privacy.md, 8.8).

**Why continuous noise.** The cost ``p_A / (2 sigma^2)`` rests on the noise being a Gaussian *on the subspace*
``range(P_A)``: the privacy loss only sees ``P_A e_c``, of squared length ``p_A < 1``. Integer noise cannot be
confined to that subspace: ``P_A z`` for a discrete Gaussian ``z`` on the integer lattice is not a discrete Gaussian
on any lattice (its law carries a theta-function factor that depends on the fractional part of ``1^T z / n``), and no
exact bound of ``p_A / (2 sigma^2)`` is known for it. The exact discrete alternative -- discrete Gaussian noise
on ``m_A`` itself, then projection -- is charged ``1 / (2 sigma^2)``, i.e. ``1 / p_A`` times more (4x for a pair of
binary attributes). So the measurement uses the service's continuous sampler, and the floating-point caveat of
docs/privacy.md (section 7) applies, as for the other real-valued releases.

Everything is deterministic given the sampler: residuals are measured in the plan's order, each with one call
``gaussian(sigma_A, cells_A)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from estimators.residual.basis import Clique, ResidualError, project, sum_to
from estimators.residual.planner import ResidualPlan
from estimators.residual.reconstruct import NoisyResiduals

__all__ = ["measure_residuals"]

Counts = Callable[[tuple[str, ...]], np.ndarray]
Gaussian = Callable[[float, int], np.ndarray]


def measure_residuals(plan: ResidualPlan, counts: Counts, gaussian: Gaussian) -> NoisyResiduals:
    """Noisy residuals of the table whose exact marginals ``counts(attributes)`` returns (asked once for each maximal
    set of the plan's closure, ``attributes`` in domain order, axes in that order), with the plan's noise.

    ``gaussian(sigma, size)`` must return ``size`` independent ``N(0, sigma^2)`` floats (the service passes
    ``NoiseSource.gaussian``; tests a seeded numpy sampler). Every count array is checked before noise is drawn.
    """
    if not isinstance(plan, ResidualPlan):
        raise ResidualError(f"plan must be a ResidualPlan, got {type(plan).__name__}")
    domain = plan.domain
    maximal = plan.maximal()
    exact: dict[Clique, np.ndarray] = {}
    for clique in maximal:
        values = np.asarray(counts(clique), dtype=float)
        if values.shape != domain.shape(clique):
            raise ResidualError(
                f"counts({list(clique)}) returned shape {values.shape}, expected {domain.shape(clique)}"
            )
        if not np.all(np.isfinite(values)):
            raise ResidualError(f"counts({list(clique)}) returned values that are not finite")
        exact[clique] = values
    _check_totals(exact)

    values_by_residual: dict[Clique, np.ndarray] = {}
    scales: dict[Clique, float] = {}
    for residual in plan.residuals:
        home = _home(maximal, residual)
        marginal = sum_to(exact[home], home, residual)
        sigma = plan.sigma(residual)
        noise = np.asarray(gaussian(sigma, marginal.size), dtype=float)
        if noise.size != marginal.size:
            raise ResidualError(f"gaussian({sigma}, {marginal.size}) returned {noise.size} values")
        values_by_residual[residual] = project(marginal + noise.reshape(marginal.shape))
        scales[residual] = sigma * sigma
    return NoisyResiduals(domain, values_by_residual, scales)


def _home(maximal: Sequence[Clique], residual: Clique) -> Clique:
    """The first maximal set (in clique order) that contains ``residual``."""
    for clique in maximal:
        if set(residual) <= set(clique):
            return clique
    raise ResidualError(f"residual {list(residual)} is in no maximal set of the plan")  # unreachable for a valid plan


def _check_totals(exact: dict[Clique, np.ndarray]) -> None:
    """All maximal marginals must come from one table: their totals agree."""
    totals = {c: float(v.sum()) for c, v in exact.items()}
    first = next(iter(totals.values()))
    for clique, total in totals.items():
        if not math.isclose(total, first, rel_tol=1e-9, abs_tol=1e-6):
            raise ResidualError(
                f"counts({list(clique)}) sums to {total}, but another marginal sums to {first}: "
                "the counts must all come from the same table"
            )

