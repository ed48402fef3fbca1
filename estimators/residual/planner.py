"""ResidualPlanner: the Gaussian noise plan for a marginal workload, with an exact zCDP cost.

Source: Xiao, He, Zhang & Kifer 2023, "An optimal and scalable matrix mechanism for noisy marginals under convex
loss functions" (NeurIPS 2023; ResidualPlanner+, arXiv:2305.08175). The mechanism measures, for every attribute set
``A`` in the downward closure of the workload (the empty set, i.e. the total, included), the residual
``R_A m_A`` with Gaussian noise of covariance ``sigma_A^2 R_A R_A^T`` (:mod:`estimators.residual.measure`). Among all
Gaussian matrix mechanisms that answer the workload's marginals without bias, an optimal one has this form (the
paper's main result); what is left to choose is one variance per residual.

**Cost.** Residual ``A`` is ``p_A / (2 sigma_A^2)``-zCDP with ``p_A = prod_{i in A} (n_i - 1)/n_i`` (its squared
sensitivity in the Mahalanobis norm of its own noise; :func:`~estimators.residual.basis.residual_sensitivity`), and
the plan costs ``rho = sum_A p_A / (2 sigma_A^2)`` (docs/privacy.md, section 8.8).

**Loss.** With ``u_A = sigma_A^2`` every cell of a reconstructed marginal ``S`` has variance
``Var_S = sum_{A ⊆ S} u_A p_A / prod_{i in S \\ A} n_i^2`` (:func:`~estimators.residual.basis.cell_variance`), linear
in ``u``. Two losses over the workload ``{(S, w_S)}``, optionally plus weighted Kronecker-structured linear queries
on workload marginals (:class:`KroneckerQuery`; e.g. the entries of ``X^T X`` that DD-SSP builds from 1- and 2-way
marginals, Ferrando & Sheldon, Prop. 3.2):

* ``"sum_var"``: ``sum_S w_S * (sum of the cell variances of S)`` (+ each query's weighted total variance) =
  ``sum_A v_A u_A``. Minimising ``sum_A v_A u_A`` subject to ``sum_A p_A / (2 u_A) = rho`` has the closed form
  (Lagrange; equivalently Cauchy-Schwarz: ``(sum_A v_A u_A)(sum_A p_A / (2 u_A)) >= (sum_A sqrt(p_A v_A / 2))^2``
  with equality iff ``u_A`` is proportional to ``sqrt(p_A / v_A)``)::

      u_A = sqrt(p_A / v_A) * T / (2 rho),   T = sum_B sqrt(p_B v_B),   optimal loss T^2 / (2 rho).

  The paper solves this case in closed form too; we rederived it (and a test checks it against cvxpy).
* ``"max_var"``: ``max_S w_S Var_S`` (and, for queries, the weighted variance of their worst row): a small convex
  program (minimise ``t`` subject to ``w_S Var_S(u) <= t`` and ``sum_A p_A / (2 u_A) <= 1``, then scale by
  ``1/rho``), solved with cvxpy; anything but an optimal status is an error that reports the status.
* ``"max_var_floor"``: ``max_var`` with the total and every 1-way residual constrained to be at least as precise as
  in the direct Gaussian release of the same workload at the same rho (issue 30, point 2; our design). Why: after
  the non-negative, consistent step (:mod:`estimators.residual.nonnegative`), which trusts the low orders, the error
  a user reads is driven by the total and the 1-way margins, which the variance-optimal plans measure 3-18x worse
  than direct measurement does (every pair measures them again). The floors are public: the direct release
  measures marginal ``S`` with variance ``sigma_S^2 = sum_w / (2 rho w_S)`` (``service/mechanisms/direct.py``), and
  its least-squares residual ``A`` then has ``1/u_A = sum_{S ⊇ A} 1 / (sigma_S^2 prod_{i in S \\ A} n_i)``; since
  ``sum_{A ⊆ S} p_A / prod_{i in S \\ A} n_i = prod_{i in S} 1 = 1`` those ``u_A`` cost exactly ``rho``
  (:func:`direct_residual_variances`), so the direct plan is feasible and the program always has a solution at
  exactly ``rho``. It is no worse than direct in the program's own terms (the worst weighted cell variance), which
  is not the same as the error after post-processing: docs/mechanisms.md has the measurement.

**Exact cost.** The float optimum is turned into exact rationals: each residual's share of the budget
``c_A = p_A / (2 u_A)`` is taken as the exact binary value of its float, except for the residual with the largest share,
which gets the exact remainder ``rho - sum_{B != A} c_B`` (as AIM's last round does); then
``sigma_A^2 = p_A / (2 c_A)`` exactly, so ``sum_A p_A / (2 sigma_A^2) == rho`` holds in Fractions
(:meth:`ResidualPlan.cost`). :meth:`ResidualPlan.sigma` is the float standard deviation to sample with, rounded up
so that its exact square is never below ``sigma_A^2`` (more noise than charged for, never less).

Residuals containing an attribute of size 1 are identically zero: they are neither planned nor measured.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cached_property

import numpy as np

from estimators.residual.basis import (
    Clique,
    ResidualError,
    as_domain,
    canonical_clique,
    cell_variance,
    downward_closure,
    is_trivial,
    maximal_cliques,
    query_row_coefficients,
    query_total_coefficients,
    residual_sensitivity,
)
from estimators.residual.reconstruct import residual_scales
from workloads.domain import Domain

LOSSES = ("sum_var", "max_var", "max_var_floor")

__all__ = ["LOSSES", "KroneckerQuery", "ResidualPlan", "direct_residual_variances", "plan_residuals",
           "sigma_rounded_up"]


@dataclass(frozen=True, eq=False)
class KroneckerQuery:
    """The linear queries ``(⊗_i F_i) m_S`` on the marginal of ``attributes`` (one factor per attribute, in the
    order given; rows of ``F_i`` are features, its columns the attribute's values), weighted in the loss.

    Example (DD-SSP, Ferrando & Sheldon, Prop. 3.2): the block ``A_j mu_jk A_k^T`` of ``X^T X`` is
    ``KroneckerQuery((j, k), (A_j, A_k))``; a diagonal block ``A_j diag(mu_j) A_j^T`` is the single factor whose
    row ``(p, q)`` is ``A_j[p] * A_j[q]``."""

    attributes: tuple[str, ...]
    factors: tuple[np.ndarray, ...]
    weight: float = 1.0


@dataclass(frozen=True, eq=False)
class _Term:
    clique: Clique
    weight: float
    factors: tuple[np.ndarray, ...] | None  # None: the identity (the marginal's cells)


@dataclass(frozen=True, eq=False)
class ResidualPlan:
    """The noise plan: ``sigma_A^2`` for every non-trivial residual of the workload's downward closure.

    Frozen; ``variances[i]`` belongs to ``residuals[i]``. :meth:`cost` is exactly ``rho``."""

    domain: Domain
    workload: tuple[tuple[Clique, float], ...]
    loss: str
    rho: Fraction
    residuals: tuple[Clique, ...]
    variances: tuple[Fraction, ...]
    solver: str
    queries: tuple[KroneckerQuery, ...] = field(default=())

    @cached_property
    def _index(self) -> dict[Clique, int]:
        return {r: i for i, r in enumerate(self.residuals)}

    def _position(self, residual: Sequence[str]) -> int:
        clique = canonical_clique(self.domain, residual, "residual", allow_empty=True)
        if clique not in self._index:
            raise ResidualError(f"residual {list(clique)} is not part of this plan")
        return self._index[clique]

    def variance(self, residual: Sequence[str]) -> Fraction:
        """``sigma_A^2`` of residual ``A`` (exact)."""
        return self.variances[self._position(residual)]

    def sigma(self, residual: Sequence[str]) -> float:
        """The float noise scale to sample with: ``sqrt(sigma_A^2)`` rounded up so that its exact square is at least
        ``sigma_A^2``."""
        return sigma_rounded_up(self.variance(residual))

    def sensitivity(self, residual: Sequence[str]) -> Fraction:
        """``p_A``, the residual's squared sensitivity in the Mahalanobis norm of its noise."""
        return residual_sensitivity(self.domain, self.residuals[self._position(residual)])

    def residual_cost(self, residual: Sequence[str]) -> Fraction:
        """``p_A / (2 sigma_A^2)``: residual ``A``'s zCDP cost (exact)."""
        return self.sensitivity(residual) / (2 * self.variance(residual))

    def cost(self) -> Fraction:
        """``sum_A p_A / (2 sigma_A^2)``, exactly; equals :attr:`rho` (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3;
        docs/privacy.md, 8.8)."""
        return sum((self.residual_cost(r) for r in self.residuals), Fraction(0))

    def maximal(self) -> tuple[Clique, ...]:
        """The maximal sets of the closure: the marginals whose exact counts the measurement needs."""
        return maximal_cliques(self.domain, [c for c, _ in self.workload])

    def cell_variance(self, attributes: Sequence[str]) -> float:
        """Variance of every cell of the unbiased reconstruction of the marginal on ``attributes`` (any marginal in
        the closure), from the planned ``sigma_A^2``."""
        clique = canonical_clique(self.domain, attributes, "attributes", allow_empty=True)
        return float(cell_variance(self.domain, clique, dict(zip(self.residuals, self.variances, strict=True))))

    def query_variances(self, query: KroneckerQuery) -> np.ndarray:
        """Variance of every row of ``query`` answered from the unbiased reconstruction, under this plan."""
        term = _query_term(self.domain, query, "query")
        scales = dict(zip(self.residuals, self.variances, strict=True))
        rows = query_row_coefficients(self.domain, term.clique, term.factors)
        _require_closure(rows, scales, term.clique)
        return sum(float(scales[a]) * c for a, c in rows.items())

    def loss_value(self) -> float:
        """The loss of this plan (``sum_var`` or ``max_var``), at its exact variances."""
        u = np.array([float(v) for v in self.variances])
        terms = _terms(self.domain, self.workload, self.queries)
        if self.loss == "sum_var":
            return float(_sum_coefficients(self.domain, self.residuals, terms) @ u)
        return float((_max_rows(self.domain, self.residuals, terms) @ u).max())  # max_var, with or without floors


def sigma_rounded_up(variance: Fraction) -> float:
    """The smallest float ``s`` found from ``sqrt(float(variance))`` upwards with ``Fraction(s)**2 >= variance``."""
    sigma = math.sqrt(float(variance))
    while Fraction(sigma) ** 2 < variance:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


# --------------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------------
def plan_residuals(
    domain: Domain | Mapping[str, int],
    workload: Iterable[object],
    rho: object,
    *,
    loss: str = "sum_var",
    queries: Iterable[KroneckerQuery] = (),
) -> ResidualPlan:
    """The optimal residual variances for ``workload`` at zCDP budget ``rho``.

    ``workload``: marginals with weights, as ``workloads.marginals.Query`` objects (``attributes``, ``weight``),
    ``(attributes, weight)`` pairs, or bare attribute sequences (weight 1); a marginal listed twice adds its
    weights. ``loss``: ``"sum_var"`` (closed form), ``"max_var"`` or ``"max_var_floor"`` (cvxpy; the module
    docstring). ``queries``: extra weighted linear
    queries on marginals of the closure that the loss also counts (see :class:`KroneckerQuery`).
    """
    dom = as_domain(domain)
    if loss not in LOSSES:
        raise ResidualError(f"loss must be one of {LOSSES}, got {loss!r}")
    budget = _positive_rational(rho, "rho")
    entries = _workload_entries(dom, workload)
    extra = tuple(queries)
    terms = _terms(dom, entries, extra)
    residuals = tuple(r for r in downward_closure(dom, (c for c, _ in entries)) if not is_trivial(dom, r))
    closure = set(residuals)
    for position, term in enumerate(terms[len(entries):]):
        needed = {r for r in downward_closure(dom, [term.clique]) if not is_trivial(dom, r)}
        if not needed <= closure:
            raise ResidualError(
                f"queries[{position}]: marginal {list(term.clique)} is not inside the workload's downward closure"
            )
    p = np.array([float(residual_sensitivity(dom, r)) for r in residuals])
    if loss == "sum_var":
        u, solver = _solve_sum_var(p, _sum_coefficients(dom, residuals, terms)), "closed form (Cauchy-Schwarz)"
    else:
        ceilings = None
        if loss == "max_var_floor":  # at rho = 1, like the program: the total and the 1-way residuals
            direct = direct_residual_variances(dom, entries, 1)
            ceilings = np.array([float(direct[r]) if len(r) <= 1 else np.inf for r in residuals])
        u, solver = _solve_max_var(p, _max_rows(dom, residuals, terms), ceilings)
    variances = _exact_variances(dom, residuals, u / float(budget), budget)
    return ResidualPlan(dom, entries, loss, budget, residuals, variances, solver, extra)


def _positive_rational(value: object, name: str) -> Fraction:
    if isinstance(value, bool):
        raise ResidualError(f"{name} must be a number, got the boolean {value!r}")
    try:
        if isinstance(value, numbers.Rational):
            exact = Fraction(value.numerator, value.denominator)
        elif isinstance(value, (float, np.floating, Decimal)):
            if not math.isfinite(float(value)):
                raise ResidualError(f"{name} must be finite, got {value!r}")
            exact = Fraction(value) if isinstance(value, Decimal) else Fraction(float(value))
        elif isinstance(value, str):
            exact = Fraction(value.strip())
        else:
            raise ResidualError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    except (ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, ResidualError):
            raise
        raise ResidualError(f"{name} must be a finite number, got {value!r}") from None
    if exact <= 0:
        raise ResidualError(f"{name} must be > 0, got {value!r}")
    return exact


def _workload_entries(domain: Domain, workload: Iterable[object]) -> tuple[tuple[Clique, float], ...]:
    if isinstance(workload, (str, bytes)):
        raise ResidualError("workload must be a sequence of marginals, got a string")
    weights: dict[Clique, float] = {}
    for position, entry in enumerate(workload):
        what = f"workload[{position}]"
        if hasattr(entry, "attributes"):
            attrs, weight = entry.attributes, getattr(entry, "weight", 1.0)
        elif isinstance(entry, tuple) and len(entry) == 2 and not isinstance(entry[1], str):
            attrs, weight = entry
        else:
            attrs, weight = entry, 1.0
        clique = canonical_clique(domain, attrs, what)
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not (
            math.isfinite(float(weight)) and float(weight) > 0
        ):
            raise ResidualError(f"{what}: weight must be a positive finite number, got {weight!r}")
        weights[clique] = weights.get(clique, 0.0) + float(weight)
    if not weights:
        raise ResidualError("workload is empty: give at least one marginal")
    return tuple(weights.items())


def _query_term(domain: Domain, query: KroneckerQuery, what: str) -> _Term:
    if not isinstance(query, KroneckerQuery):
        raise ResidualError(f"{what} must be a KroneckerQuery, got {type(query).__name__}")
    attrs = list(query.attributes)
    canonical_clique(domain, attrs, what)
    if len(query.factors) != len(attrs):
        raise ResidualError(f"{what}: {len(query.factors)} factors for {len(attrs)} attributes")
    factors = {}
    for a, f in zip(attrs, query.factors, strict=True):
        f = np.asarray(f, dtype=float)
        if f.ndim != 2 or f.shape[1] != domain.size(a) or f.shape[0] < 1 or not np.all(np.isfinite(f)):
            raise ResidualError(
                f"{what}: the factor of {a!r} must be a finite matrix with {domain.size(a)} columns, "
                f"got shape {f.shape}"
            )
        factors[a] = f
    weight = query.weight
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not (
        math.isfinite(float(weight)) and float(weight) > 0
    ):
        raise ResidualError(f"{what}: weight must be a positive finite number, got {weight!r}")
    clique = canonical_clique(domain, attrs, what)
    return _Term(clique, float(weight), tuple(factors[a] for a in clique))


def _terms(domain: Domain, entries: Sequence[tuple[Clique, float]], queries: Sequence[KroneckerQuery]) -> list[_Term]:
    terms = [_Term(c, w, None) for c, w in entries]
    terms += [_query_term(domain, q, f"queries[{i}]") for i, q in enumerate(queries)]
    return terms


def _require_closure(coefficients: Mapping[Clique, object], available: Mapping[Clique, object], clique: Clique) -> None:
    missing = [a for a in coefficients if a not in available]
    if missing:
        raise ResidualError(f"marginal {list(clique)} needs residual {list(missing[0])}, which is not in the plan")


def _sum_coefficients(domain: Domain, residuals: Sequence[Clique], terms: Sequence[_Term]) -> np.ndarray:
    """``v`` with ``sum_var loss = v @ u``."""
    index = {r: i for i, r in enumerate(residuals)}
    v = np.zeros(len(residuals))
    for term in terms:
        for a, c in query_total_coefficients(domain, term.clique, term.factors).items():
            v[index[a]] += term.weight * c
    return v


def _max_rows(domain: Domain, residuals: Sequence[Clique], terms: Sequence[_Term]) -> np.ndarray:
    """Matrix ``G`` with ``max_var loss = max(G @ u)``: one row per distinct weighted variance constraint."""
    index = {r: i for i, r in enumerate(residuals)}
    blocks = []
    for term in terms:
        coefficients = query_row_coefficients(domain, term.clique, term.factors)
        subsets = list(coefficients)
        distinct = np.unique(np.column_stack([coefficients[a] for a in subsets]), axis=0)  # identity: one row
        block = np.zeros((distinct.shape[0], len(residuals)))
        block[:, [index[a] for a in subsets]] = term.weight * distinct
        blocks.append(block)
    return np.unique(np.vstack(blocks), axis=0)


def _solve_sum_var(p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Variances at rho = 1 minimising ``v @ u`` subject to ``sum p / (2 u) = 1`` (closed form, see module doc)."""
    total = float(np.sqrt(p * v).sum())
    return np.sqrt(p / v) * total / 2.0


def direct_residual_variances(
    domain: Domain, workload: Sequence[tuple[Clique, float]], rho: object
) -> dict[Clique, float]:
    """The residual variances ``u_A`` of the direct Gaussian release of ``workload`` (``(clique, weight)`` pairs) at
    ``rho``, read as a residual plan: each marginal ``S`` measured with ``sigma_S^2 = sum_w / (2 rho w_S)`` (rho
    split by weight, ``service/mechanisms/direct.py``), every residual of the closure estimated by least squares from
    all of them (:func:`estimators.residual.reconstruct.residual_scales`). Module docstring, ``max_var_floor``: they
    cost exactly ``rho`` (a test checks it)."""
    budget = float(_positive_rational(rho, "rho"))
    total = sum(weight for _, weight in workload)
    return residual_scales(domain, [(clique, total / (2.0 * budget * weight)) for clique, weight in workload])


def _solve_max_var(p: np.ndarray, rows: np.ndarray, ceilings: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    """Variances at rho = 1 minimising ``max(rows @ u)`` subject to ``sum p / (2 u) <= 1`` and, with ``ceilings``,
    ``u <= ceilings`` (``inf``: no ceiling; ``max_var_floor``'s precision floors) (cvxpy, Clarabel)."""
    import cvxpy as cp

    scale = rows.max()
    u = cp.Variable(len(p), pos=True)
    t = cp.Variable()
    constraints = [(rows / scale) @ u <= t, (p / 2.0) @ cp.inv_pos(u) <= 1.0]
    if ceilings is not None and np.any(np.isfinite(ceilings)):
        bounded = np.flatnonzero(np.isfinite(ceilings))
        constraints.append(u[bounded] <= ceilings[bounded])
    problem = cp.Problem(cp.Minimize(t), constraints)
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError as exc:
        raise ResidualError(f"the max_var program failed ({exc})") from None
    if problem.status != cp.OPTIMAL or u.value is None or not np.all(np.isfinite(u.value)) or np.any(u.value <= 0):
        raise ResidualError(f"the max_var program ended with status {problem.status!r}, not optimal")
    values = np.asarray(u.value, dtype=float)
    return values * float((p / (2.0 * values)).sum()), f"cvxpy {problem.solver_stats.solver_name} ({problem.status})"


def _exact_variances(
    domain: Domain, residuals: Sequence[Clique], u: np.ndarray, rho: Fraction
) -> tuple[Fraction, ...]:
    """Exact ``sigma_A^2`` from float variances ``u`` (for budget ``rho``), with ``sum p_A / (2 sigma_A^2) == rho``:
    float shares ``p_A / (2 u_A)``, normalised to ``rho``; the largest share takes the exact remainder."""
    p_exact = [residual_sensitivity(domain, r) for r in residuals]
    shares = np.array([float(pa) for pa in p_exact]) / (2.0 * u)
    shares *= float(rho) / shares.sum()
    largest = int(np.argmax(shares))
    exact_shares = [Fraction(float(s)) for s in shares]
    exact_shares[largest] = rho - sum((s for i, s in enumerate(exact_shares) if i != largest), Fraction(0))
    if any(s <= 0 for s in exact_shares):
        raise ResidualError("the plan's budget shares are not all positive; rho is too small to represent")
    return tuple(pa / (2 * s) for pa, s in zip(p_exact, exact_shares, strict=True))
