"""The residual basis of marginals: the linear algebra behind ResidualPlanner and its reconstruction.

Source: Xiao, He, Zhang & Kifer 2023, "An optimal and scalable matrix mechanism for noisy marginals under convex
loss functions" (NeurIPS 2023; extended as ResidualPlanner+, arXiv:2305.08175), Sec. 4. Notation: ``m_S`` is the
marginal of the attribute set ``S`` (an array with one axis per attribute of ``S``, in domain order), ``n_i`` the
size of attribute ``i``, ``1`` a vector of ones and ``J = 1 1^T``.

**Subtraction matrices.** ``Sub_k`` is the ``(k-1) x k`` matrix ``[1 | -I]`` (row ``j`` is ``e_0 - e_{j+1}``); its
rows span the vectors orthogonal to ``1``, so ``Sub_k 1 = 0``. Its pseudo-inverse is
``Sub_k^+ = Sub_k^T (Sub_k Sub_k^T)^{-1} = Sub_k^T (I - J/k)`` (because ``Sub_k Sub_k^T = I + J`` on ``k-1``
coordinates, whose inverse is ``I - J/k``), and ``Sub_k^+ Sub_k = I - J/k =: P_k`` is the orthogonal projection onto
``1^⊥`` ("centering"). Any other basis of ``1^⊥`` gives the same mechanism up to an invertible map of its output:
everything below depends on ``Sub_k`` only through ``P_k``.

**Residuals.** For an attribute set ``A`` the residual query is ``R_A = ⊗_{i in A} Sub_{n_i}`` applied to ``m_A``
(``R_() = 1``: the total count). Because ``I_k = Sub_k^+ Sub_k + J/k`` for every attribute, expanding the Kronecker
product ``⊗_{i in S} (Sub^+ Sub + J/n_i)`` gives the decomposition of any marginal into the residuals of its subsets:

    m_S = sum_{A ⊆ S}  (⊗_{i in A} Sub_{n_i}^+ ⊗_{i in S \\ A} 1 / n_i) R_A m_A.

This module works in the *projected coordinates* ``beta_A = (⊗_{i in A} P_{n_i}) m_A = R_A^+ R_A m_A``: an array of
``m_A``'s shape whose sums along every axis are zero (``to_subtraction_basis`` / ``from_subtraction_basis`` convert
to and from ``R_A m_A``). Then ``m_S = sum_{A ⊆ S} expand(beta_A) / prod_{i in S \\ A} n_i``: no matrix is ever
formed; projections subtract means along axes and expansions broadcast.

**Variances.** If ``beta_A`` is known up to noise with covariance ``s_A P_A`` (``P_A = ⊗ P_{n_i}``, independent
across ``A``) -- what ResidualPlanner's base mechanism and the least-squares estimate from noisy marginals both give --
the reconstruction above has covariance ``sum_{A ⊆ S} s_A ⊗_{i in A} P_{n_i} ⊗_{i in S \\ A} J / n_i^2``, so every
cell of ``m_S`` has variance

    Var_S = sum_{A ⊆ S} s_A p_A / prod_{i in S \\ A} n_i^2,      p_A = prod_{i in A} (n_i - 1) / n_i,

(``p_A`` is the diagonal of ``P_A``; our derivation, which is the paper's closed form for marginal variances).
A residual that contains an attribute of size 1 is identically zero (``P_1 = 0``): it is never measured and
contributes nothing (:func:`is_trivial`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from numbers import Real

import numpy as np

from workloads.domain import Domain, DomainError

Clique = tuple[str, ...]

__all__ = [
    "Clique",
    "ResidualError",
    "as_domain",
    "canonical_clique",
    "cell_variance",
    "clique_key",
    "closure_clique",
    "downward_closure",
    "embed",
    "expand_residuals",
    "expansion_divisor",
    "from_subtraction_basis",
    "is_trivial",
    "kron_apply",
    "maximal_cliques",
    "project",
    "query_row_coefficients",
    "query_total_coefficients",
    "residual_sensitivity",
    "subtraction_matrix",
    "subtraction_pinv",
    "sum_to",
    "to_subtraction_basis",
]


class ResidualError(ValueError):
    """Input the residual modules cannot use; the message names the parameter, attribute or marginal."""


# --------------------------------------------------------------------------------------------------
# domains and attribute sets
# --------------------------------------------------------------------------------------------------
def as_domain(domain: Domain | Mapping[str, int]) -> Domain:
    """A :class:`~workloads.domain.Domain`, or one built from a mapping ``{attribute: size}`` (in domain order)."""
    if isinstance(domain, Domain):
        return domain
    if not isinstance(domain, Mapping):
        raise ResidualError(f"domain must be a Domain or a mapping of attribute sizes, got {type(domain).__name__}")
    try:
        return Domain.from_sizes(domain)
    except DomainError as exc:
        raise ResidualError(f"domain: {exc}") from None


def canonical_clique(domain: Domain, attributes: Iterable[str], what: str, *, allow_empty: bool = False) -> Clique:
    """``attributes`` in domain order, checked: ``what`` names the parameter in the error message."""
    if isinstance(attributes, str):
        raise ResidualError(f"{what}: expected a sequence of attribute names, got the string {attributes!r}")
    names = list(attributes)
    if not names and not allow_empty:
        raise ResidualError(f"{what}: a marginal needs at least one attribute")
    for name in names:
        if not isinstance(name, str) or name not in domain:
            raise ResidualError(f"{what}: unknown attribute {name!r}; the domain has {list(domain.names)}")
    if len(set(names)) != len(names):
        raise ResidualError(f"{what}: an attribute is repeated in {names}")
    order = {n: i for i, n in enumerate(domain.names)}
    return tuple(sorted(names, key=order.__getitem__))


def clique_key(domain: Domain, clique: Clique) -> tuple[int, tuple[int, ...]]:
    """Sort key: smaller sets first, then by the attributes' positions in the domain."""
    order = {n: i for i, n in enumerate(domain.names)}
    return len(clique), tuple(order[a] for a in clique)


def downward_closure(domain: Domain, cliques: Iterable[Clique]) -> tuple[Clique, ...]:
    """Every subset (the empty set included) of every clique, each once, sorted by :func:`clique_key`."""
    closure: set[Clique] = set()
    for clique in cliques:
        for k in range(len(clique) + 1):
            closure.update(itertools.combinations(clique, k))
    return tuple(sorted(closure, key=lambda c: clique_key(domain, c)))


def maximal_cliques(domain: Domain, cliques: Iterable[Clique]) -> tuple[Clique, ...]:
    """The cliques not contained in another one (duplicates removed), sorted by :func:`clique_key`."""
    unique = set(cliques)
    maximal = [c for c in unique if not any(set(c) < set(d) for d in unique)]
    return tuple(sorted(maximal, key=lambda c: clique_key(domain, c)))


def is_trivial(domain: Domain, clique: Clique) -> bool:
    """True when the residual of ``clique`` is identically zero (an attribute of size 1: ``Sub_1`` has no rows)."""
    return any(domain.size(a) == 1 for a in clique)


def residual_sensitivity(domain: Domain, clique: Clique) -> Fraction:
    """``p_A = prod_{i in A} (n_i - 1) / n_i``: the squared L2 sensitivity of ``R_A m_A`` in the Mahalanobis norm
    of ``R_A R_A^T`` (equivalently of ``P_A m_A`` in the Euclidean norm), exactly. Adding one row adds ``e_c`` to
    ``m_A``; ``||P_A e_c||^2 = (P_A)_cc = p_A`` for every cell ``c`` (docs/privacy.md, 8.8)."""
    value = Fraction(1)
    for a in clique:
        n = domain.size(a)
        value *= Fraction(n - 1, n)
    return value


# --------------------------------------------------------------------------------------------------
# per-attribute matrices and their Kronecker application
# --------------------------------------------------------------------------------------------------
def subtraction_matrix(size: int) -> np.ndarray:
    """``Sub_k = [1 | -I]`` (``(k-1) x k``): row ``j`` is ``e_0 - e_{j+1}``."""
    if size < 1:
        raise ResidualError(f"an attribute size must be >= 1, got {size}")
    mat = np.zeros((size - 1, size))
    mat[:, 0] = 1.0
    mat[:, 1:] -= np.eye(size - 1)
    return mat


def subtraction_pinv(size: int) -> np.ndarray:
    """``Sub_k^+ = Sub_k^T (I - J/k)`` (``k x (k-1)``), the Moore-Penrose pseudo-inverse of ``Sub_k``."""
    sub = subtraction_matrix(size)
    return sub.T @ (np.eye(size - 1) - np.full((size - 1, size - 1), 1.0 / size))


def kron_apply(matrices: Sequence[np.ndarray], array: np.ndarray) -> np.ndarray:
    """``(⊗_i M_i) vec(array)`` as an array: matrix ``i`` acts on axis ``i``, one axis at a time (never the product)."""
    out = np.asarray(array, dtype=float)
    if len(matrices) != out.ndim:
        raise ResidualError(f"kron_apply: {len(matrices)} matrices for an array with {out.ndim} axes")
    for axis, matrix in enumerate(matrices):
        out = np.moveaxis(np.tensordot(matrix, out, axes=(1, axis)), 0, axis)
    return out


def project(values: np.ndarray) -> np.ndarray:
    """``(⊗_i P_{n_i}) values``: subtract the mean along every axis (the projections commute). A new array."""
    out = np.array(values, dtype=float)
    for axis in range(out.ndim):
        out -= out.mean(axis=axis, keepdims=True)
    return out


def to_subtraction_basis(beta: np.ndarray) -> np.ndarray:
    """``(⊗ Sub_{n_i}) beta``: projected coordinates to the residual as ResidualPlanner writes it (``R_A m_A``)."""
    out = np.asarray(beta, dtype=float)
    for axis in range(out.ndim):
        first = np.take(out, [0], axis=axis)
        rest = np.take(out, np.arange(1, out.shape[axis]), axis=axis)
        out = first - rest
    return out


def from_subtraction_basis(omega: np.ndarray) -> np.ndarray:
    """``(⊗ Sub_{n_i}^+) omega``: ResidualPlanner's ``R_A m_A`` back to projected coordinates (shape grows by one
    along every axis)."""
    out = np.asarray(omega, dtype=float)
    return kron_apply([subtraction_pinv(n + 1) for n in out.shape], out)


# --------------------------------------------------------------------------------------------------
# moving arrays between attribute sets
# --------------------------------------------------------------------------------------------------
def sum_to(values: np.ndarray, attrs: Clique, keep: Clique) -> np.ndarray:
    """Sum out the axes of ``attrs`` that are not in ``keep`` (``keep ⊆ attrs``, both in domain order)."""
    axes = tuple(i for i, a in enumerate(attrs) if a not in keep)
    return values.sum(axis=axes) if axes else values


def embed(values: np.ndarray, attrs: Clique, target: Clique) -> np.ndarray:
    """``values`` over ``attrs`` reshaped to broadcast over ``target`` (``attrs ⊆ target``, domain order): a view
    with a length-1 axis for every attribute of ``target`` not in ``attrs``."""
    position = {a: i for i, a in enumerate(attrs)}
    shape = [values.shape[position[a]] if a in position else 1 for a in target]
    return values.reshape(shape)


def expansion_divisor(domain: Domain, attrs: Clique, target: Clique) -> int:
    """``prod_{i in target \\ attrs} n_i``: what an expanded residual is divided by."""
    return math.prod(domain.size(a) for a in target if a not in attrs)


def closure_clique(domain: Domain, available: Mapping[Clique, object], attributes: Iterable[str]) -> Clique:
    """``attributes`` in domain order, checked to be answerable from the residuals in ``available``: every
    non-trivial subset must be there (else the marginal is outside the measured closure)."""
    clique = canonical_clique(domain, attributes, "attributes", allow_empty=True)
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if sub not in available and not is_trivial(domain, sub):
                raise ResidualError(
                    f"marginal {list(clique)} is outside the measured closure (residual {list(sub)} was not "
                    "measured); only a model of the whole table can estimate it"
                )
    return clique


def expand_residuals(domain: Domain, values: Mapping[Clique, np.ndarray], clique: Clique) -> np.ndarray:
    """``m_S = sum_{A ⊆ S} expand(beta_A) / prod_{i in S \\ A} n_i`` for ``S = clique`` (module docstring); the
    residuals of ``S``'s subsets are taken from ``values`` (missing ones must be trivial: zero)."""
    out = np.zeros(domain.shape(clique))
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if sub in values:
                out += embed(values[sub], sub, clique) / expansion_divisor(domain, sub, clique)
    return out


# --------------------------------------------------------------------------------------------------
# variances of reconstructed marginals and of linear queries on them
# --------------------------------------------------------------------------------------------------
def cell_variance(domain: Domain, clique: Clique, scales: Mapping[Clique, Real]) -> Real:
    """``sum_{A ⊆ S} s_A p_A / prod_{i in S \\ A} n_i^2``: the variance of every cell of the reconstructed marginal
    of ``clique`` when residual ``A`` has noise covariance ``s_A P_A`` (``scales``; exact for Fractions). Trivial
    residuals contribute nothing; any other subset missing from ``scales`` is an error."""
    total: Real = 0
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if is_trivial(domain, sub):
                continue
            if sub not in scales:
                raise ResidualError(f"marginal {list(clique)} needs residual {list(sub)}, which was not measured")
            divisor = expansion_divisor(domain, sub, clique)
            total += scales[sub] * residual_sensitivity(domain, sub) / (divisor * divisor)
    return total


def _factor_terms(domain: Domain, clique: Clique, factors: Sequence[np.ndarray] | None) -> list[tuple[np.ndarray, ...]]:
    """Per attribute of ``clique``: (F P F^T diagonal, (F 1)^2 / n^2) -- the two ways an attribute enters a
    residual's contribution to the covariance of ``(⊗ F_i) m_S`` (inside ``A`` or summed out)."""
    out = []
    for i, a in enumerate(clique):
        n = domain.size(a)
        if factors is None:
            inside = np.full(n, (n - 1) / n)
            outside = np.full(n, 1.0 / (n * n))
        else:
            f = np.asarray(factors[i], dtype=float)
            centred = f - f.mean(axis=1, keepdims=True)  # F P (P is symmetric and idempotent)
            inside = (centred * centred).sum(axis=1)  # diag(F P F^T) = diag(F P P F^T)
            outside = f.sum(axis=1) ** 2 / (n * n)  # diag(F J F^T) / n^2
        out.append((inside, outside))
    return out


def query_row_coefficients(
    domain: Domain, clique: Clique, factors: Sequence[np.ndarray] | None = None
) -> dict[Clique, np.ndarray]:
    """For every non-trivial ``A ⊆ S``: the vector ``c_A`` with ``Var[row r of (⊗ F_i) m_S-hat] = sum_A s_A c_A[r]``
    (rows in C order over the factors' rows). ``factors=None`` means the identity (the cells): then every entry of
    ``c_A`` is ``p_A / prod_{S \\ A} n_i^2``.

    Derivation: the covariance of the reconstruction is ``sum_A s_A ⊗_{i in A} P_i ⊗_{i in S \\ A} J / n_i^2``; a
    Kronecker query maps it to ``sum_A s_A ⊗_{i in A} F_i P_i F_i^T ⊗_{i in S \\ A} F_i J F_i^T / n_i^2``, whose
    diagonal is the Kronecker product of the factors' diagonals."""
    terms = _factor_terms(domain, clique, factors)
    out: dict[Clique, np.ndarray] = {}
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if is_trivial(domain, sub):
                continue
            row = np.ones(1)
            for a, (inside, outside) in zip(clique, terms, strict=True):
                row = np.multiply.outer(row, inside if a in sub else outside).ravel()
            out[sub] = row
    return out


def query_total_coefficients(
    domain: Domain, clique: Clique, factors: Sequence[np.ndarray] | None = None
) -> dict[Clique, float]:
    """For every non-trivial ``A ⊆ S``: ``c_A`` with ``sum_r Var[row r of (⊗ F_i) m_S-hat] = sum_A s_A c_A``, i.e.
    ``prod_{i in A} tr(F_i P_i F_i^T) prod_{i in S \\ A} ||F_i 1||^2 / n_i^2`` (the trace of a Kronecker product is
    the product of the traces). Identity factors give ``prod_{A} (n_i - 1) / prod_{S \\ A} n_i``."""
    terms = _factor_terms(domain, clique, factors)
    sums = [(float(inside.sum()), float(outside.sum())) for inside, outside in terms]
    out: dict[Clique, float] = {}
    for k in range(len(clique) + 1):
        for sub in itertools.combinations(clique, k):
            if is_trivial(domain, sub):
                continue
            out[sub] = math.prod(ins if a in sub else outs for a, (ins, outs) in zip(clique, sums, strict=True))
    return out
