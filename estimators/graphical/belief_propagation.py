"""Calibration of a junction tree by two-pass belief propagation: from log-potentials on the tree's nodes to the
node marginals (Koller & Friedman 2009, "Probabilistic Graphical Models: Principles and Techniques", Sec. 10.2-10.3).
numpy only: nothing is compiled, which is why the estimator and the model's marginals run here rather than in mbi's
JAX code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from estimators.graphical.factors import Clique, reduce_many, reshape_into, sum_of_factors, sum_to
from estimators.graphical.junction_tree import JunctionTree


def node_factors(
    tree: JunctionTree, sources: Sequence[Mapping[Clique, np.ndarray]]
) -> list[list[tuple[np.ndarray, Clique]]]:
    """The log-potentials of each node: every clique goes to the smallest node containing it."""
    factors: list[list[tuple[np.ndarray, Clique]]] = [[] for _ in tree.nodes]
    for source in sources:
        for clique, values in source.items():
            factors[tree.home(clique)].append((values, clique))
    return factors


def calibrate(
    tree: JunctionTree,
    factors: list[list[tuple[np.ndarray, Clique]]],
    total: float,
    wanted: Sequence[Sequence[Clique]] | None = None,
) -> tuple[list[np.ndarray], dict[tuple[int, Clique], np.ndarray]]:
    """Node marginals (each summing to ``total``) of the model with log-potentials ``factors[i]`` on
    node i, by two-pass belief propagation (Koller & Friedman 2009, Sec. 10.2-10.3); also node i's
    marginal summed down to each clique of ``wanted[i]``, keyed ``(i, clique)``. A node's belief is
    its potentials plus its children's messages, summed by :func:`sum_of_factors` (one pass over
    the node instead of one per message).

    Upward, in log space: node j exponentiates its belief shifted by its maximum,
    E_j = exp(b_j - max b_j), and sends its parent log sum_{C_j minus S_j} E_j + max b_j. Downward, in
    probabilities: E_j is proportional to p(x_{C_j minus S_j} | x_{S_j}) on every separator row, so
    p_j = E_j * p_parent(x_S) / sum_{C_j minus S_j} E_j. A row whose mass underflows (below
    e^-745 of the node's largest cell, e.g. a structural zero) is zero on both sides and gets 0.
    """
    domain = tree.domain
    scaled: list[np.ndarray] = [np.empty(0)] * len(tree.nodes)
    upward: dict[int, np.ndarray] = {}
    messages: list[list[tuple[np.ndarray, Clique]]] = [[] for _ in tree.nodes]
    for node in reversed(tree.order):
        values = sum_of_factors(factors[node] + messages[node], tree.nodes[node], domain)
        top = float(values.max())
        if not math.isfinite(top):
            raise FloatingPointError(f"the model gives clique {tree.nodes[node]} no probability at all")
        np.subtract(values, top, out=values)
        np.exp(values, out=values)
        scaled[node] = values
        parent = tree.parent[node]
        if parent >= 0:
            message = sum_to(values, tree.nodes[node], tree.separator[node])
            upward[node] = message
            with np.errstate(divide="ignore"):
                log_message = np.log(message) + top
            messages[parent].append((log_message, tree.separator[node]))
    probabilities: list[np.ndarray] = [np.empty(0)] * len(tree.nodes)
    reductions: dict[tuple[int, Clique], np.ndarray] = {}
    for node in tree.order:
        values = scaled[node]
        parent = tree.parent[node]
        if parent < 0:
            values *= total / values.sum()
        else:
            separator = tree.separator[node]
            target = reductions[(parent, separator)]
            mass = upward[node]
            ratio = np.divide(target, mass, out=np.zeros_like(target), where=mass > 0)
            values *= reshape_into(ratio, separator, tree.nodes[node], domain)
        probabilities[node] = values
        targets = [tree.separator[child] for child in tree.children[node]]
        targets += list(wanted[node]) if wanted is not None else []
        if targets:
            for clique, table in reduce_many(values, tree.nodes[node], targets, domain).items():
                reductions[(node, clique)] = table
    return probabilities, reductions
