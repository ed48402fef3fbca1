"""The junction tree of a set of cliques: its maximal cliques (those of mbi's triangulation), their arrangement as
a rooted forest, and the model size a set of cliques would need.

:class:`JunctionTree` takes the triangulation of private-pgm (``mbi.junction_tree.make_junction_tree``; McKenna,
Sheldon & Miklau 2019, "Graphical-model based estimation and inference for differential privacy"), so a model built
here has the very cliques of mbi's. :func:`model_size_mb` computes the same number as mbi's
``hypothetical_model_size`` with bit masks instead of networkx, because AIM asks it for every candidate every round.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from estimators.graphical.factors import Clique, canonical_clique
from workloads.domain import Domain


def model_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Size in MB of the junction-tree model these cliques would need: 8 bytes per cell of the
    maximal cliques of the triangulated graph, the same number as mbi's ``junction_tree.hypothetical_model_size``
    (tests/estimators/graphical/test_junction_tree.py checks this), computed with bit masks instead of networkx
    because AIM asks it for every candidate every round."""
    unique = tuple(sorted({canonical_clique(domain, c) for c in cliques}))
    return _junction_tree_cells(domain, unique) * 8 / 2**20


@functools.lru_cache(maxsize=8192)
def _junction_tree_cells(domain: Domain, cliques: tuple[tuple[str, ...], ...]) -> int:
    """Cells of the maximal cliques of mbi's triangulation (``make_junction_tree``): when the
    cliques form a spanning tree of the attributes it eliminates leaves first (no fill, the maximal
    cliques are the edges); otherwise it eliminates greedily the attribute whose neighbourhood has
    the fewest cells (ties: domain order). The maximal cliques of the filled graph are the maximal
    elimination cliques (an attribute with its neighbours when eliminated)."""
    names = domain.names
    index = {n: i for i, n in enumerate(names)}
    sizes = [domain.size(n) for n in names]

    def cells(mask: int) -> int:
        out, i = 1, 0
        while mask:
            if mask & 1:
                out *= sizes[i]
            mask >>= 1
            i += 1
        return out

    masks = {sum(1 << index[a] for a in c) for c in cliques if c}
    edges = {(i, j) for m in masks for i in range(len(names)) for j in range(i + 1, len(names))
             if m >> i & 1 and m >> j & 1}
    if edges and len(edges) == len(names) - 1 and _connected(len(names), edges):
        return sum(sizes[i] * sizes[j] for i, j in edges)
    hyperedges = set(masks)
    unmarked = list(range(len(names)))
    eliminated: list[int] = []
    while unmarked:
        best, best_cost, best_union = -1, 0, 0
        for a in unmarked:
            union = 0
            for m in hyperedges:
                if m >> a & 1:
                    union |= m
            cost = cells(union)
            if best < 0 or cost < best_cost:
                best, best_cost, best_union = a, cost, union
        unmarked.remove(best)
        eliminated.append(best_union | 1 << best)
        hyperedges = {m for m in hyperedges if not m >> best & 1}
        hyperedges.add(best_union & ~(1 << best))
    maximal = {m for m in eliminated if not any(m != o and m & o == m for o in eliminated)}
    return sum(cells(m) for m in maximal)


def _connected(nodes: int, edges: set[tuple[int, int]]) -> bool:
    reach, frontier = {0}, [0]
    while frontier:
        node = frontier.pop()
        for i, j in edges:
            for a, b in ((i, j), (j, i)):
                if a == node and b not in reach:
                    reach.add(b)
                    frontier.append(b)
    return len(reach) == nodes


class JunctionTree:
    """The maximal cliques of the triangulated model graph (mbi's ``make_junction_tree``), arranged
    as a rooted forest: ``order`` lists nodes parents-first, ``parent[i]`` is -1 at a root and
    ``separator[i]`` is ``nodes[i]`` intersected with its parent. Every attribute of the domain is
    in some node (an attribute in no clique is a node of its own)."""

    def __init__(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        self.domain = domain
        position = {n: i for i, n in enumerate(domain.names)}

        def key(clique: Clique) -> tuple[int, ...]:
            return tuple(position[a] for a in clique)

        # mbi (and JAX) only here: model_size_mb, which every release checks its workload with, needs neither, so a
        # release that fits no model (laplace, gaussian, residual) never loads them (seconds per command)
        from estimators.graphical._mbi import mbi, mbi_domain

        unique = sorted({canonical_clique(domain, c) for c in cliques}, key=key)
        graph, _ = mbi.junction_tree.make_junction_tree(mbi_domain(domain), unique)
        self.nodes: list[Clique] = sorted((canonical_clique(domain, n) for n in graph.nodes), key=key)
        index = {n: i for i, n in enumerate(self.nodes)}
        self.neighbors: list[list[int]] = [[] for _ in self.nodes]
        for a, b in graph.edges:
            i, j = index[canonical_clique(domain, a)], index[canonical_clique(domain, b)]
            self.neighbors[i].append(j)
            self.neighbors[j].append(i)
        for nbrs in self.neighbors:
            nbrs.sort()
        self.parent = [-1] * len(self.nodes)
        self.component = [-1] * len(self.nodes)
        self.order: list[int] = []
        for root in range(len(self.nodes)):
            if self.component[root] >= 0:
                continue
            self.component[root] = root
            queue = [root]
            while queue:
                node = queue.pop(0)
                self.order.append(node)
                for other in self.neighbors[node]:
                    if self.component[other] < 0:
                        self.component[other] = root
                        self.parent[other] = node
                        queue.append(other)
        self.children: list[list[int]] = [[] for _ in self.nodes]
        for node in self.order:
            if self.parent[node] >= 0:
                self.children[self.parent[node]].append(node)
        self.separator: list[Clique] = [
            tuple(a for a in self.nodes[i] if p >= 0 and a in self.nodes[p]) for i, p in enumerate(self.parent)
        ]
        self.cells = [domain.cells(n) for n in self.nodes]
        self.containing: dict[str, list[int]] = {n: [] for n in domain.names}
        for i, node in enumerate(self.nodes):
            for a in node:
                self.containing[a].append(i)
        self._homes: dict[Clique, int | None] = {}

    def home(self, clique: Clique) -> int | None:
        """Index of the smallest node containing ``clique`` (canonical), or None."""
        if clique not in self._homes:
            wanted = set(clique)
            fits = [i for i, n in enumerate(self.nodes) if wanted <= set(n)]
            self._homes[clique] = min(fits, key=lambda i: (self.cells[i], i)) if fits else None
        return self._homes[clique]

    def size_mb(self) -> float:
        """Model size as mbi's ``hypothetical_model_size`` counts it: 8 bytes per node cell."""
        return sum(self.cells) * 8 / 2**20
