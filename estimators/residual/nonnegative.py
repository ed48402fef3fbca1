"""Non-negative, mutually consistent marginals from noisy residuals (local non-negativity, after GReM-LNN).

Source: Mullins, Fuentes, Xiao, Kifer, Musco & Sheldon 2024, "Efficient and private marginal reconstruction with
local non-negativity" (NeurIPS 2024), GReM-LNN, the reconstruction that Fuentes, Mullins, Xiao, Kifer, Musco &
Sheldon 2026, "Fast private adaptive query answering for large data domains" (arXiv:2602.05674, AIM+GReM) build
on. We could read the problem's statement, not every detail of their solver or weights; the problem below is
theirs, the weights ``metric``/``order_factor``, the solver and the final repair step are ours (and measured).

**Problem.** Given unbiased residuals ``b_A`` (:class:`NoisyResiduals`), find residuals ``beta`` close to them whose
reconstructed marginals are non-negative on every *target* (the maximal sets of the closure)::

    minimise   sum_A ||beta_A - b_A||^2 / (2 s'_A)       over beta_A in range(P_A)
    subject to mu_T(beta) = sum_{A ⊆ T} expand(beta_A) / prod_{i in T \\ A} n_i >= 0   for every target T.

Every marginal of the closure is then a sum of cells of a target, hence non-negative too, and all marginals are
consistent with each other (equal totals, equal shared sub-marginals) because they come from one set of residuals.

**Weights** ``s'_A = base_A * order_factor^|A|``:

* ``metric="likelihood"``: ``base_A = s_A``, the noise scale, so with ``order_factor=1`` the objective is the
  Gaussian likelihood (GReM-LNN as published: the constrained maximum-likelihood estimate).
* ``metric="workload"``: ``base_A = 1 / sum_{T ⊇ A} 1 / (v_T k_{T,A})`` (``v_T`` the cell variance of target ``T``,
  ``k_{T,A} = prod_{i in T \\ A} n_i``). With ``order_factor=1`` this is exactly the distance between the workload's
  marginals, each cell weighted by ``1/v_T``: ``sum_T ||mu_T(beta) - mu_T(b)||^2 / v_T`` -- because the expansions of
  two different residuals into one target are orthogonal on ``range(P)`` (a centred axis sums to zero), the cross
  terms vanish and ``E_{T,A}^T E_{T,A} = I / k_{T,A}``. For a direct release (one measurement per marginal) it is
  the likelihood again, up to using ``v_T`` for the measurement variance.
* ``order_factor > 1`` makes lower-order residuals (the total, the 1-way margins) costlier to move than higher-order
  ones: the non-negativity is then bought mostly with the weak, noisy interaction terms. (The authors' public code
  appears to weigh residuals by fixed standard deviations ``2^|A|``, i.e. ``order_factor = 4`` with equal bases.)

Measured on Adult, all 2-way marginals, zCDP rho for epsilon = 1 (delta 1e-5), one seed, mean L1 error / N of the
105 marginals (unbiased answers: 0.170 with ResidualPlanner's sum-of-variances plan): ``likelihood`` 0.179 (worse
than unbiased: it moves the noisy total), ``workload`` 0.084, ``workload`` with ``order_factor=100`` 0.056 (the
default); at epsilon = 0.1 the same: 1.54, 0.58, 0.26 (unbiased 1.42). ``benchmarks/residual_quick.py`` reproduces
the default's numbers.

**Solver (ours).** The Lagrangian ``sum_A ||beta_A - b_A||^2 / (2 s'_A) - sum_T lambda_T . mu_T(beta)`` is minimised
in closed form by ``beta_A(lambda) = b_A + s'_A P_A sum_{T ⊇ A} sum_{T \\ A}(lambda_T) / prod_{T \\ A} n_i``; the
dual ``D(lambda)`` is concave with gradient ``-mu(beta(lambda))``. We maximise it over ``lambda >= 0`` by accelerated
projected gradient (Beck & Teboulle 2009, FISTA) with the gradient restart of O'Donoghue & Candès 2015 ("Adaptive
restart for accelerated gradient schemes"), step ``1/L`` with ``L`` a bound on the dual's curvature
(:meth:`_Dual.curvature_bound`). It stops when the most negative target cell is above ``-tolerance`` (counts) and
the complementary-slackness gap ``sum_T lambda_T . mu_T`` is at most ``gap_tolerance`` times the objective. A test
checks the solution against cvxpy on a small problem.

**Exact feasibility (ours).** The dual method ends a hair away from feasibility. The last step mixes the residuals
with the uniform table of the same total: ``beta_A <- (1 - t) beta_A`` for ``A != ()``, ``beta_()`` unchanged, with
the smallest ``t`` in ``[0, 1]`` that makes every target cell ``>= 0`` (the uniform table ``total / cells`` is
positive and has only the residual ``()``; mixing keeps consistency because it acts on the shared residuals). ``t`` is
of the order of ``tolerance`` divided by the smallest uniform cell. A negative total (only possible at absurd noise)
gives the all-zero table. Cells are finally clipped at 0 to remove float rounding (about 1e-12 of the total).

Deterministic: no randomness, a fixed order of operations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from scipy import sparse

from estimators.residual.basis import (
    Clique,
    ResidualError,
    closure_clique,
    embed,
    expand_residuals,
    expansion_divisor,
    maximal_cliques,
)
from estimators.residual.reconstruct import NoisyResiduals
from workloads.domain import Domain

__all__ = ["ConsistentMarginals", "nonnegative_marginals"]


@dataclass(frozen=True, eq=False)
class ConsistentMarginals:
    """Adjusted residuals whose marginals (on any set of the closure) are non-negative and consistent.

    ``iterations``/``converged``: the dual solver's run; ``violation``: its most negative target cell before the
    final mix; ``mixing``: the weight ``t`` of the uniform table in that mix."""

    domain: Domain
    values: Mapping[Clique, np.ndarray]
    targets: tuple[Clique, ...]
    iterations: int
    converged: bool
    violation: float
    mixing: float

    def marginal(self, attributes: Sequence[str]) -> np.ndarray:
        """The non-negative, consistent estimate of the marginal on ``attributes`` (axes in domain order)."""
        clique = closure_clique(self.domain, self.values, attributes)
        return np.maximum(expand_residuals(self.domain, self.values, clique), 0.0)


class _Dual:
    """The problem's linear maps on flat vectors: ``E`` stacks the expansions of every residual into every target
    containing it (a sparse matrix with entries ``1 / prod_{T \\ A} n_i``), ``E^T`` is its adjoint, and the
    projection ``P`` acts residual by residual (subtracting means along axes)."""

    def __init__(self, domain: Domain, b: Mapping[Clique, np.ndarray], s: Mapping[Clique, float],
                 targets: Sequence[Clique]) -> None:
        self.targets = tuple(targets)
        self.names = tuple(b)
        self.shapes = [domain.shape(a) for a in self.names]
        sizes = [math.prod(shape) for shape in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        target_sizes = [domain.cells(t) for t in self.targets]
        self.target_offsets = np.concatenate([[0], np.cumsum(target_sizes)]).astype(int)
        self.b = np.concatenate([np.asarray(b[a], dtype=float).ravel() for a in self.names])
        self.residual_scales = [float(s[a]) for a in self.names]
        self.s = np.concatenate([np.full(n, v) for v, n in zip(self.residual_scales, sizes, strict=True)])
        rows, cols, vals = [], [], []
        self.coverage = np.zeros(len(self.names))  # c_A = sum_{T ⊇ A} 1 / k_{T,A}
        self.links: list[tuple[int, int]] = []  # (target, residual) pairs with residual ⊆ target
        for t, target in enumerate(self.targets):
            cells = domain.cells(target)
            for i, residual in enumerate(self.names):
                if not set(residual) <= set(target):
                    continue
                inverse = 1.0 / expansion_divisor(domain, residual, target)
                local = np.arange(sizes[i]).reshape(self.shapes[i])
                index = np.broadcast_to(embed(local, residual, target), domain.shape(target)).ravel()
                rows.append(self.target_offsets[t] + np.arange(cells))
                cols.append(self.offsets[i] + index)
                vals.append(np.full(cells, inverse))
                self.coverage[i] += inverse
                self.links.append((t, i))
        self.centering = self._centering_maps(sizes)
        shape = (int(self.target_offsets[-1]), int(self.offsets[-1]))
        self.expand = sparse.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape
        )
        self.pull = self.expand.T.tocsr()

    def project(self, flat: np.ndarray) -> np.ndarray:
        """``P`` on every residual block: for each axis in turn, subtract the mean along it (sparse ``B_k M_k``)."""
        out = flat
        for means, broadcast in self.centering:
            out = out - broadcast @ (means @ out)
        return out

    def _centering_maps(self, sizes: Sequence[int]) -> list[tuple[sparse.csr_matrix, sparse.csr_matrix]]:
        """For axis ``k``: ``M_k`` maps every block with more than ``k`` axes to its means along axis ``k`` (one row
        per line along that axis), ``B_k`` broadcasts them back; blocks with fewer axes are left alone."""
        maps = []
        total = int(self.offsets[-1])
        for axis in range(max((len(shape) for shape in self.shapes), default=0)):
            rows, cols, vals = [], [], []
            groups = 0
            for i, shape in enumerate(self.shapes):
                if len(shape) <= axis:
                    continue
                local = np.arange(sizes[i]).reshape(shape)
                line = np.moveaxis(local, axis, -1).reshape(-1, shape[axis])  # one row per line along the axis
                rows.append(np.repeat(groups + np.arange(line.shape[0]), shape[axis]))
                cols.append(self.offsets[i] + line.ravel())
                vals.append(np.full(line.size, 1.0 / shape[axis]))
                groups += line.shape[0]
            if not rows:
                continue
            r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
            means = sparse.csr_matrix((v, (r, c)), shape=(groups, total))
            broadcast = sparse.csr_matrix((np.ones_like(v), (c, r)), shape=(total, groups))
            maps.append((means, broadcast))
        return maps

    def primal(self, lam: np.ndarray) -> np.ndarray:
        """``beta(lambda) = b + s P E^T lambda``."""
        return self.b + self.s * self.project(self.pull @ lam)

    def forward(self, beta: np.ndarray) -> np.ndarray:
        return self.expand @ beta

    def objective(self, beta: np.ndarray) -> float:
        weight = np.divide(1.0, self.s, out=np.zeros_like(self.s), where=self.s > 0)
        diff = beta - self.b
        return float((weight * diff * diff).sum()) / 2.0

    def curvature_bound(self) -> float:
        """``L >= ||H||`` for the dual Hessian ``H = E S P E^T``. For one target, ``||E_{T,A}^T lambda_T||^2 <=
        ||lambda_T||^2 / k_{T,A}`` (each entry is a mean of ``k`` entries); by Cauchy-Schwarz
        ``||sum_T E_{T,A}^T lambda_T||^2 <= c_A sum_{T ⊇ A} ||lambda_T||^2`` with ``c_A = sum_{T ⊇ A} 1/k_{T,A}``;
        with ``||P_A|| <= 1``, ``lambda^T H lambda <= sum_T ||lambda_T||^2 sum_{A ⊆ T} s_A c_A``."""
        per_target = np.zeros(len(self.targets))
        for t, i in self.links:
            per_target[t] += self.residual_scales[i] * self.coverage[i]
        return float(per_target.max())

    def unflatten(self, flat: np.ndarray) -> dict[Clique, np.ndarray]:
        return {a: flat[self.offsets[i]:self.offsets[i + 1]].reshape(self.shapes[i]) for i, a in enumerate(self.names)}


METRICS = ("workload", "likelihood")


def nonnegative_marginals(
    residuals: NoisyResiduals,
    *,
    metric: str = "workload",
    order_factor: float = 100.0,
    tolerance: float = 1e-3,
    gap_tolerance: float = 1e-6,
    max_iterations: int = 5000,
    check_every: int = 10,
) -> ConsistentMarginals:
    """Adjusted residuals whose marginals are non-negative and consistent (module docstring).

    ``metric``: ``"workload"`` (default) or ``"likelihood"`` (GReM-LNN as published); ``order_factor`` (>= 1):
    how much costlier moving a residual gets per attribute less (module docstring).
    ``tolerance``: largest negative target cell (in counts) at which the dual solver may stop; ``gap_tolerance``:
    complementary-slackness gap relative to the objective; ``max_iterations``: cap on dual steps (the result is
    feasible either way, ``converged`` says whether the criteria were met).
    """
    if not isinstance(residuals, NoisyResiduals):
        raise ResidualError(f"residuals must be NoisyResiduals, got {type(residuals).__name__}")
    if metric not in METRICS:
        raise ResidualError(f"metric must be one of {METRICS}, got {metric!r}")
    if isinstance(order_factor, bool) or not isinstance(order_factor, (int, float)) or not (
        math.isfinite(order_factor) and order_factor >= 1
    ):
        raise ResidualError(f"order_factor must be a finite number >= 1, got {order_factor!r}")
    for name, value in (("tolerance", tolerance), ("gap_tolerance", gap_tolerance)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
            raise ResidualError(f"{name} must be a positive finite number, got {value!r}")
    for name, value in (("max_iterations", max_iterations), ("check_every", check_every)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ResidualError(f"{name} must be a positive integer, got {value!r}")
    if () not in residuals.values:
        raise ResidualError("residuals must include the total (the empty residual)")
    domain = residuals.domain
    targets = maximal_cliques(domain, residuals.residuals)
    base = residuals.scales if metric == "likelihood" else _workload_scales(residuals, targets)
    scales = {a: base[a] * float(order_factor) ** len(a) for a in base}
    dual = _Dual(domain, residuals.values, scales, targets)
    step = 1.0 / max(dual.curvature_bound(), 1e-300)

    lam = np.zeros(dual.expand.shape[0])
    ahead = lam.copy()
    theta = 1.0
    beta = dual.b
    violation = _violation(dual.forward(beta))
    converged = violation <= tolerance
    iterations = 0
    while not converged and iterations < max_iterations:
        iterations += 1
        new = np.maximum(ahead - step * dual.forward(dual.primal(ahead)), 0.0)
        if _dot(ahead - new, new - lam) > 0:
            theta, ahead = 1.0, new  # gradient restart (O'Donoghue & Candes 2015): momentum points uphill
        else:
            theta_next = (1.0 + math.sqrt(1.0 + 4.0 * theta * theta)) / 2.0
            ahead = new + ((theta - 1.0) / theta_next) * (new - lam)
            theta = theta_next
        lam = new
        if iterations % check_every == 0 or iterations == max_iterations:
            beta = dual.primal(lam)
            mu = dual.forward(beta)
            violation = _violation(mu)
            gap = _dot(lam, mu)
            converged = violation <= tolerance and abs(gap) <= gap_tolerance * max(dual.objective(beta), 1.0)
    mixed, mixing = _mix_with_uniform(domain, dual.unflatten(beta), dual)
    return ConsistentMarginals(domain, MappingProxyType(mixed), targets, iterations, converged, violation, mixing)


def _workload_scales(residuals: NoisyResiduals, targets: Sequence[Clique]) -> dict[Clique, float]:
    """Residual scales ``1 / omega_A`` that turn ``sum_A ||beta_A - b_A||^2 omega_A`` into the workload metric
    ``sum_T ||mu_T(beta) - mu_T(b)||^2 / v_T`` (``v_T``: cell variance of target ``T``): exact because the
    expansions of different residuals into one target are orthogonal on ``range(P)`` (module docstring)."""
    domain = residuals.domain
    variance = {t: residuals.cell_variance(t) for t in targets}
    out: dict[Clique, float] = {}
    for a, s in residuals.scales.items():
        if s == 0:
            out[a] = 0.0  # known exactly: stays put
            continue
        omega = sum(
            1.0 / (max(variance[t], 1e-300) * expansion_divisor(domain, a, t)) for t in targets if set(a) <= set(t)
        )
        out[a] = 1.0 / omega
    return out


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """``x . y`` without BLAS (whose threads cost milliseconds per call on a busy machine), deterministic."""
    return float(np.multiply(x, y).sum())


def _violation(mu: np.ndarray) -> float:
    return max(0.0, -float(mu.min()))


def _mix_with_uniform(
    domain: Domain, beta: Mapping[Clique, np.ndarray], dual: _Dual
) -> tuple[dict[Clique, np.ndarray], float]:
    """The smallest mix with the uniform table of the same total that makes every target cell ``>= 0``."""
    total = float(beta[()])
    if total <= 0:
        return {a: np.zeros(v.shape) for a, v in beta.items()}, 1.0
    mu = dual.forward(np.concatenate([beta[a].ravel() for a in dual.names]))
    mixing = 0.0
    for t, target in enumerate(dual.targets):
        lowest = float(mu[dual.target_offsets[t]:dual.target_offsets[t + 1]].min())
        if lowest < 0:
            uniform = total / domain.cells(target)
            mixing = max(mixing, -lowest / (uniform - lowest))
    out = {a: np.array(v if a == () else (1.0 - mixing) * v, dtype=float) for a, v in beta.items()}
    for value in out.values():
        value.setflags(write=False)
    return out, mixing
