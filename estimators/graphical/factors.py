"""Tables over cliques: the array arithmetic every graphical-model computation here is made of.

A clique is a tuple of attribute names in domain order (:func:`canonical_clique`); a table over it is a numpy
array with one axis per attribute, in that order. This module reshapes a table to broadcast against a larger clique,
sums a table down to a sub-clique, multiplies tables by ``einsum``, and plans sums of many factors and many
reductions of one table so that a big table is read a few times rather than once per operand. numpy only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from workloads.domain import Domain

Clique = tuple[str, ...]


def canonical_clique(domain: Domain, attributes: Sequence[str]) -> Clique:
    """``attributes`` in domain order; raises ``ValueError`` for unknown or repeated names."""
    attributes = list(attributes)
    unknown = [a for a in attributes if a not in domain]
    if unknown:
        raise ValueError(f"unknown attribute(s) {unknown}; the domain has {list(domain.names)}")
    if len(set(attributes)) != len(attributes):
        raise ValueError(f"attributes {attributes} contain a repeated name")
    wanted = set(attributes)
    return tuple(n for n in domain.names if n in wanted)


def reshape_into(values: np.ndarray, attrs: Clique, target: Clique, domain: Domain) -> np.ndarray:
    """View ``values`` (axes ``attrs``) so that it broadcasts against an array with axes ``target``;
    both tuples are in domain order and ``attrs`` is a subset of ``target``."""
    return values.reshape([domain.size(a) if a in attrs else 1 for a in target])


def sum_to(values: np.ndarray, attrs: Clique, keep: Clique) -> np.ndarray:
    """Sum ``values`` (axes ``attrs``) down to the axes ``keep`` (a canonical subset). einsum is used
    because numpy's ``sum`` over an axis tuple is several times slower on strided axes."""
    if keep == attrs:
        return values
    return einsum([(values, attrs)], keep)


def einsum(operands: Sequence[tuple[np.ndarray, Clique]], output: Clique) -> np.ndarray:
    labels: dict[str, int] = {}
    arguments: list[object] = []
    for values, attrs in operands:
        arguments += [values, [labels.setdefault(a, len(labels)) for a in attrs]]
    arguments.append([labels[a] for a in output])
    return np.einsum(*arguments, optimize=len(operands) > 2)


def sum_of_factors(factors: list[tuple[np.ndarray, Clique]], target: Clique, domain: Domain) -> np.ndarray:
    """sum_i factor_i broadcast to ``target`` (canonical; every factor's clique is a subset), as a
    new array. Adding k factors into a big table one by one costs k passes over it; instead the
    factors are merged pairwise on their unions (:func:`_merge_plan`) and only the last sum is as
    large as ``target``."""
    if not factors:
        return np.zeros(domain.shape(target))
    parts = [np.asarray(v, dtype=np.float64) for v, _ in factors]
    cliques = [c for _, c in factors]
    for i, j, union in _merge_plan(tuple(cliques), domain):
        merged = reshape_into(parts[i], cliques[i], union, domain) + reshape_into(parts[j], cliques[j], union, domain)
        parts.append(merged)
        cliques.append(union)
    values, clique = parts[-1], cliques[-1]
    if clique != target:
        return np.broadcast_to(reshape_into(values, clique, target, domain), domain.shape(target)).copy()
    return values if len(parts) > len(factors) else values.copy()


@functools.lru_cache(maxsize=4096)
def _merge_plan(cliques: tuple[Clique, ...], domain: Domain) -> tuple[tuple[int, int, Clique], ...]:
    """Greedy order for summing factors on ``cliques``: repeatedly merge the two pending factors
    whose union has the fewest cells; steps are (i, j, union) with the result appended as a new
    index."""
    pending = list(range(len(cliques)))
    scopes = list(cliques)
    plan = []
    while len(pending) > 1:
        best = None
        for x in range(len(pending)):
            for y in range(x + 1, len(pending)):
                i, j = pending[x], pending[y]
                union = canonical_clique(domain, set(scopes[i]) | set(scopes[j]))
                if best is None or domain.cells(union) < best[0]:
                    best = (domain.cells(union), i, j, union)
        _, i, j, union = best
        plan.append((i, j, union))
        scopes.append(union)
        pending = [k for k in pending if k not in (i, j)] + [len(scopes) - 1]
    return tuple(plan)


def reduce_many(
    values: np.ndarray, attrs: Clique, targets: Sequence[Clique], domain: Domain
) -> dict[Clique, np.ndarray]:
    """``values`` (axes ``attrs``) summed down to each of ``targets`` (canonical subsets), following
    :func:`_reduction_plan` so that a big table is read a few times rather than once per target."""
    steps, index = _reduction_plan(attrs, tuple(targets), domain)
    tables, scopes = [values], [attrs]
    for source, clique in steps:
        tables.append(sum_to(tables[source], scopes[source], clique))
        scopes.append(clique)
    return {t: tables[i] for t, i in zip(targets, index, strict=True)}


@functools.lru_cache(maxsize=4096)
def _reduction_plan(
    attrs: Clique, targets: tuple[Clique, ...], domain: Domain
) -> tuple[tuple[tuple[int, Clique], ...], tuple[int, ...]]:
    """How to compute many marginals of one table (table 0, over ``attrs``): steps (source table,
    clique) each create a new table, and ``index[i]`` is the table holding ``targets[i]``.

    Greedy: while two or more targets lack some attribute x, sum the table once down to the union of
    the targets lacking the x that serves the most of them (weighted by log |x|) and continue on that
    smaller table for them; every target left is then summed from the smallest table holding it."""
    scopes: list[Clique] = [attrs]
    steps: list[tuple[int, Clique]] = []
    where: dict[Clique, int] = {attrs: 0}

    def add(source: int, clique: Clique) -> int:
        if clique not in where:
            steps.append((source, clique))
            scopes.append(clique)
            where[clique] = len(scopes) - 1
        return where[clique]

    def solve(source: int, pending: list[Clique]) -> None:
        pending = [t for t in dict.fromkeys(pending) if t != scopes[source]]
        while len(pending) > 1:
            best: tuple[float, str, list[Clique]] | None = None
            for x in scopes[source]:
                lacking = [t for t in pending if x not in t]
                weight = len(lacking) * math.log(domain.size(x))
                if len(lacking) >= 2 and weight > 0 and (best is None or weight > best[0]):
                    best = (weight, x, lacking)
            if best is None:
                return
            _, x, lacking = best
            solve(add(source, canonical_clique(domain, set().union(*lacking))), lacking)
            pending = [t for t in pending if x in t]

    solve(0, list(targets))
    for target in sorted(set(targets) - set(where), key=lambda c: (-domain.cells(c), c)):
        holders = [k for k, scope in enumerate(scopes) if set(target) <= set(scope)]
        add(min(holders, key=lambda k: (domain.cells(scopes[k]), k)), target)
    return tuple(steps), tuple(where[t] for t in targets)
