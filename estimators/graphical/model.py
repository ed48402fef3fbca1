"""The fitted graphical model: log-potentials on the cliques of a junction tree, calibrated to node marginals
scaled to the total count; any marginal read from it, and seeded synthetic rows drawn from it. numpy only.

A :class:`Fit` comes from the estimator (:func:`estimators.graphical.mirror_descent.fit`) or from stored potentials
(:func:`calibrated`). Marginals and samples use the junction-tree factorisation
p(x) = p(x_R) prod_{C != R} p(x_C | x_{S_C}) (Koller & Friedman 2009, "Probabilistic Graphical Models", Sec. 10.2);
estimation and everything read from its result are post-processing of noisy measurements and cost no privacy
(McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference for differential privacy").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from estimators.graphical.belief_propagation import calibrate, node_factors
from estimators.graphical.factors import Clique, canonical_clique, einsum, sum_to
from estimators.graphical.junction_tree import JunctionTree
from workloads.domain import Domain


@dataclass(eq=False)
class Fit:
    """A graphical model fitted by :func:`fit`: log-potentials on the measured maximal cliques, the
    calibrated node marginals (scaled to ``total``) and the optimiser's state for warm starts."""

    domain: Domain
    tree: JunctionTree
    potentials: dict[Clique, np.ndarray]
    zeros: dict[Clique, np.ndarray]
    probabilities: list[np.ndarray]
    total: float
    loss: float
    stepsize: float
    lipschitz: float
    iterations: int

    def __post_init__(self) -> None:
        self._reductions: dict[tuple[int, Clique], np.ndarray] = {}

    # marginals -----------------------------------------------------------------------------------
    def _reduce(self, node: int, keep: Clique) -> np.ndarray:
        """The node's marginal summed down to ``keep`` (canonical, a subset of the node)."""
        if keep == self.tree.nodes[node]:
            return self.probabilities[node]
        key = (node, keep)
        if key not in self._reductions:
            self._reductions[key] = sum_to(self.probabilities[node], self.tree.nodes[node], keep)
        return self._reductions[key]

    def marginal(self, attributes: Sequence[str]) -> np.ndarray:
        """The model's marginal over ``attributes`` (axes in the order asked), computed from the
        calibrated junction tree with numpy.

        Inside one node it is a sum. Otherwise the joint factorises over the tree as
        p(x) = p(x_R) prod_{C != R} p(x_C | x_{S_C}) for a root R, so summing out every variable
        not asked for, leaves first, needs only the subtree joining R to nodes holding the asked
        attributes; branches outside it sum to one. Each node sends its parent
        sum_{C minus kept} p(x_C) / p(x_S) * (children's messages), keeping its separator and the
        asked attributes seen so far.
        """
        clique = canonical_clique(self.domain, attributes)
        values = self._canonical_marginal(clique)
        return np.transpose(values, [clique.index(a) for a in attributes])

    def _canonical_marginal(self, clique: Clique) -> np.ndarray:
        if not clique:
            return np.asarray(self.total, dtype=np.float64)
        home = self.tree.home(clique)
        if home is not None:
            return self._reduce(home, clique)
        tree = self.tree
        groups: dict[int, list[str]] = {}
        for a in clique:
            groups.setdefault(tree.component[tree.containing[a][0]], []).append(a)
        if len(groups) > 1:  # independent components: an outer product
            parts = [(self._canonical_marginal(tuple(g)), tuple(g)) for g in groups.values()]
            joint = einsum(parts, clique)
            return joint / self.total ** (len(parts) - 1)
        root = min(tree.containing[clique[0]], key=lambda i: (tree.cells[i], i))
        depth, parent = {root: 0}, {root: -1}
        queue = [root]
        while queue:
            node = queue.pop(0)
            for other in tree.neighbors[node]:
                if other not in depth:
                    depth[other], parent[other] = depth[node] + 1, node
                    queue.append(other)
        keep_nodes = {root}
        for a in clique:
            if a in tree.nodes[root]:
                continue
            node = min(tree.containing[a], key=lambda i: (depth[i], tree.cells[i], i))
            while node not in keep_nodes:
                keep_nodes.add(node)
                node = parent[node]
        wanted = set(clique)
        messages: dict[int, list[tuple[np.ndarray, Clique]]] = {n: [] for n in keep_nodes}
        for node in sorted(keep_nodes, key=lambda n: (-depth[n], n)):
            attrs = tree.nodes[node]
            incoming = messages.pop(node)
            seen = set().union(*(set(m[1]) for m in incoming)) if incoming else set()
            if node == root:
                local = tuple(a for a in attrs if a in wanted or a in seen)
                return einsum([(self._reduce(node, local), local), *incoming], clique)
            separator = tuple(a for a in attrs if a in tree.nodes[parent[node]])
            local = tuple(a for a in attrs if a in separator or a in wanted or a in seen)
            out = canonical_clique(self.domain, set(separator) | (wanted & (set(local) | seen)))
            marginal_sep = self._reduce(node, separator)
            inverse = np.divide(1.0, marginal_sep, out=np.zeros_like(marginal_sep), where=marginal_sep > 0)
            message = einsum([(self._reduce(node, local), local), (inverse, separator), *incoming], out)
            messages[parent[node]].append((message, out))
        raise AssertionError("unreachable: the root ends the loop")

    def size_mb(self) -> float:
        return self.tree.size_mb()

    def sample(self, rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``rows`` i.i.d. records from the model by forward sampling along the junction tree: the
        root's attributes from its marginal, then each node's new attributes from
        p(x_{C minus S} | x_S) = p(x_C) / p(x_S) given the separator values already drawn."""
        tree, domain = self.tree, self.domain
        out: dict[str, np.ndarray] = {}
        for node in tree.order:
            attrs, separator = tree.nodes[node], tree.separator[node]
            new = tuple(a for a in attrs if a not in separator)
            table = np.transpose(self.probabilities[node], [attrs.index(a) for a in separator + new])
            table = table.reshape(domain.cells(separator), domain.cells(new))
            mass = table.sum(axis=1, keepdims=True)
            cdf = np.cumsum(np.divide(table, mass, out=np.full_like(table, 1.0 / table.shape[1]), where=mass > 0),
                            axis=1)
            rows_of = (np.ravel_multi_index([out[a] for a in separator], domain.shape(separator)) if separator
                       else np.zeros(rows, dtype=np.int64))
            uniform = rng.random(rows)
            cells = np.empty(rows, dtype=np.int64)
            order = np.argsort(rows_of, kind="stable")
            starts = np.flatnonzero(np.r_[True, np.diff(rows_of[order]) != 0])
            for start, stop in zip(starts, np.r_[starts[1:], rows], strict=True):
                members = order[start:stop]
                row_cdf = cdf[rows_of[members[0]]]
                cells[members] = np.minimum(np.searchsorted(row_cdf, uniform[members] * row_cdf[-1], side="right"),
                                            table.shape[1] - 1)
            for a, values in zip(new, np.unravel_index(cells, domain.shape(new)), strict=True):
                out[a] = values.astype(np.int64)
        return {name: out[name] for name in domain.names}


def calibrated(domain: Domain, potentials: Mapping[Sequence[str], np.ndarray], total: float,
               tree: JunctionTree | None = None) -> Fit:
    """A :class:`Fit` (no optimisation) of the model with these log-potentials (axes in each key's
    order) and total, calibrated with numpy, on ``tree`` when given (a stored model's), else on the junction tree of
    the potentials' cliques."""
    logs: dict[Clique, np.ndarray] = {}
    for attributes, values in potentials.items():
        attributes = tuple(attributes)
        clique = canonical_clique(domain, attributes)
        values = np.transpose(np.asarray(values, dtype=np.float64), [attributes.index(a) for a in clique])
        logs[clique] = logs[clique] + values if clique in logs else values
    tree = tree if tree is not None else JunctionTree(domain, list(logs))
    probabilities, _ = calibrate(tree, node_factors(tree, [logs]), float(total))
    return Fit(domain, tree, logs, {}, probabilities, float(total), math.nan, math.nan, math.nan, 0)
