"""The one adapter between Marginalia and private-pgm (``mbi`` 2.x).

Everything graphical-model related goes through here: turning noisy marginal measurements into a
consistent model (``fit``, numpy; ``estimate``, mbi's JAX estimator), reading any marginal from a
model (``marginal``), drawing seeded synthetic rows (``synthetic_rows``), the junction-tree size of a
set of cliques (``model_size_mb``), and storing a model as plain arrays (``model_to_bytes`` /
``model_from_bytes``) without pickling library internals.

Models are mbi ``MarkovRandomField`` objects (stored and passed around as such), but the numerical
work after a fit -- calibration, marginals, sampling -- runs in numpy on a cached calibrated copy
(``numpy_view``), because mbi 2.0.0 compiles a JAX program for every new clique structure, attribute
set and sample size (seconds each; see docs/mechanisms.md, "Estimation, and where the time goes").

Estimation is post-processing of already-noisy measurements: it never touches sensitive rows and
costs no privacy (McKenna, Sheldon, Miklau 2019, "Graphical-model based estimation and inference
for differential privacy").
"""

from __future__ import annotations

import collections
import functools
import io
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mbi  # noqa: E402
    from mbi import estimation as mbi_estimation  # noqa: E402
    from mbi.extensions import synthetic_data as mbi_synthetic_data  # noqa: E402

from workloads.domain import Domain  # noqa: E402

Model = mbi.MarkovRandomField


@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of one marginal: ``values`` has the marginal's shape (axes in the order
    of ``attributes``) and i.i.d. noise of standard deviation ``stddev`` on every cell."""

    attributes: tuple[str, ...]
    values: np.ndarray
    stddev: float

    def to_mbi(self) -> mbi.LinearMeasurement:
        return mbi.LinearMeasurement(np.asarray(self.values, dtype=float).ravel(), self.attributes, self.stddev)


def mbi_domain(domain: Domain) -> mbi.Domain:
    return mbi.Domain(list(domain.names), [a.size for a in domain.attributes])


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iters: int = 1000,
    total: float | None = None,
    warm_start: Model | None = None,
    callback: Callable[[object], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Model:
    """Fit a Markov random field to noisy marginals by mirror descent (McKenna et al. 2019).

    With ``total`` None, the total count is the minimum-variance unbiased combination of the
    measurements' sums (each noisy marginal sums to a noisy estimate of N).

    Without ``warm_start`` and ``callback`` this is :func:`fit` (numpy, nothing compiled) converted
    to an mbi model; with either, mbi's ``MirrorDescent`` runs (compiled for each clique set), since
    both hooks are defined in mbi's terms. ``progress(iteration, iters)`` is :func:`fit`'s.
    """
    if not measurements:
        raise ValueError("estimate needs at least one measurement")
    if warm_start is None and callback is None:
        return fit(domain, measurements, iters=iters, total=total, progress=progress).to_mbi()
    return mbi_estimation.MirrorDescent().estimate(
        mbi_domain(domain),
        [m.to_mbi() for m in measurements],
        known_total=total,
        iters=iters,
        warm_start=warm_start,
        callback_fn=callback,
    )


def marginal(model: Model, attributes: Sequence[str]) -> np.ndarray:
    """The model's marginal over ``attributes`` as a float array with axes in the order asked.

    Computed with numpy from the calibrated junction tree (:meth:`Fit.marginal`): mbi's own
    ``project`` compiles a JAX variable-elimination program for every new set of attributes."""
    if model.constraints:  # not produced by this module; let mbi honour them
        return np.asarray(model.project(tuple(attributes)).datavector(flatten=False), dtype=float)
    return numpy_view(model).marginal(tuple(attributes))


def synthetic_rows(model: Model, rows: int, seed: int) -> dict[str, np.ndarray]:
    """Draw ``rows`` i.i.d. records from the model with an explicit seed (:meth:`Fit.sample`, numpy:
    mbi's own sampler compiles JAX programs for every model, about 27 s on an Adult AIM model)."""
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows}")
    if model.constraints:  # not produced by this module; let mbi honour them
        dataset = mbi_synthetic_data(model, int(rows), seed=int(seed) % (2**32))
        columns = dataset.to_dict()
        return {name: np.asarray(columns[name], dtype=np.int64) for name in model.domain.attributes}
    return numpy_view(model).sample(int(rows), np.random.default_rng(int(seed)))


def model_to_bytes(model: Model) -> bytes:
    """Serialise a model as an ``.npz`` of its clique potentials plus a JSON header."""
    arrays: dict[str, np.ndarray] = {}
    cliques = [list(c) for c in model.potentials.cliques]
    for i, clique in enumerate(model.potentials.cliques):
        arrays[f"potential_{i}"] = np.asarray(model.potentials[clique].values, dtype=np.float64)
    header = {"cliques": cliques, "total": float(model.total), "format": 1}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def model_from_bytes(payload: bytes, domain: Domain) -> Model:
    """Rebuild a model written by :func:`model_to_bytes` (marginals recomputed by belief propagation)."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        header = json.loads(npz["header"].tobytes().decode())
        logs = {tuple(c): np.asarray(npz[f"potential_{i}"]) for i, c in enumerate(header["cliques"])}
    return _as_mbi(calibrated(domain, logs, header["total"]))


_VIEWS: collections.OrderedDict[int, tuple[Model, Fit]] = collections.OrderedDict()
_VIEWS_LOCK = threading.Lock()
_VIEWS_KEPT = 4  # calibrated models kept for marginal queries (each as large as its junction tree)


def numpy_view(model: Model) -> Fit:
    """The model calibrated with numpy (cached for the last few models asked about)."""
    with _VIEWS_LOCK:
        hit = _VIEWS.get(id(model))
        if hit is not None and hit[0] is model:
            _VIEWS.move_to_end(id(model))
            return hit[1]
    domain = Domain.from_sizes(dict(zip(model.domain.attributes, model.domain.shape, strict=True)))
    logs = {tuple(c): np.asarray(model.potentials[c].values, dtype=np.float64) for c in model.potentials.cliques}
    view = calibrated(domain, logs, float(model.total))
    with _VIEWS_LOCK:
        _VIEWS[id(model)] = (model, view)
        while len(_VIEWS) > _VIEWS_KEPT:
            _VIEWS.popitem(last=False)
    return view


def model_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Size in MB of the junction-tree model these cliques would need: 8 bytes per cell of the
    maximal cliques of the triangulated graph, the same number as mbi's
    ``junction_tree.hypothetical_model_size`` (tests/test_mst_aim.py checks this), computed with
    bit masks instead of networkx because AIM asks it for every candidate every round."""
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


# ------------------------------------------------------------------------------------------------
# A compilation-free estimator: the same mirror descent, on numpy arrays
# ------------------------------------------------------------------------------------------------
#
# ``estimate`` hands the problem to mbi, whose JAX code is compiled anew for every set of
# cliques (seconds each). Data-dependent mechanisms such as AIM change the clique set every round,
# so there compilation dominated the run time. ``fit`` solves the same problem -- minimise
# L(mu) = sum_m ||M_m mu - y_m||^2 / (2 sigma_m^2) over the marginals mu of a graphical model on the
# junction tree of the measured cliques (McKenna, Sheldon, Miklau 2019, Alg. 1: entropic mirror
# descent, i.e. gradient steps on the log-potentials with marginals from belief propagation) -- with
# numpy, so nothing is compiled. Its result converts to an mbi model (``Fit.to_mbi``) for storage.

Clique = tuple[str, ...]

#: Log-potential given to structurally impossible cells in an exported mbi model. Finite (unlike
#: -inf) so mbi's HUGIN message passing, which subtracts messages, never forms -inf - (-inf);
#: exp(-1e9) is exactly 0.0 in floating point, so the cells still get probability zero.
STRUCTURAL_ZERO_LOG = -1e9


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


def _reshape_into(values: np.ndarray, attrs: Clique, target: Clique, domain: Domain) -> np.ndarray:
    """View ``values`` (axes ``attrs``) so that it broadcasts against an array with axes ``target``;
    both tuples are in domain order and ``attrs`` is a subset of ``target``."""
    return values.reshape([domain.size(a) if a in attrs else 1 for a in target])


def _sum_to(values: np.ndarray, attrs: Clique, keep: Clique) -> np.ndarray:
    """Sum ``values`` (axes ``attrs``) down to the axes ``keep`` (a canonical subset). einsum is used
    because numpy's ``sum`` over an axis tuple is several times slower on strided axes."""
    if keep == attrs:
        return values
    return _einsum([(values, attrs)], keep)


def _einsum(operands: Sequence[tuple[np.ndarray, Clique]], output: Clique) -> np.ndarray:
    labels: dict[str, int] = {}
    arguments: list[object] = []
    for values, attrs in operands:
        arguments += [values, [labels.setdefault(a, len(labels)) for a in attrs]]
    arguments.append([labels[a] for a in output])
    return np.einsum(*arguments, optimize=len(operands) > 2)


def _sum_of_factors(factors: list[tuple[np.ndarray, Clique]], target: Clique, domain: Domain) -> np.ndarray:
    """sum_i factor_i broadcast to ``target`` (canonical; every factor's clique is a subset), as a
    new array. Adding k factors into a big table one by one costs k passes over it; instead the
    factors are merged pairwise on their unions (:func:`_merge_plan`) and only the last sum is as
    large as ``target``."""
    if not factors:
        return np.zeros(domain.shape(target))
    parts = [np.asarray(v, dtype=np.float64) for v, _ in factors]
    cliques = [c for _, c in factors]
    for i, j, union in _merge_plan(tuple(cliques), domain):
        merged = _reshape_into(parts[i], cliques[i], union, domain) + _reshape_into(parts[j], cliques[j], union, domain)
        parts.append(merged)
        cliques.append(union)
    values, clique = parts[-1], cliques[-1]
    if clique != target:
        return np.broadcast_to(_reshape_into(values, clique, target, domain), domain.shape(target)).copy()
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


def _reduce_many(
    values: np.ndarray, attrs: Clique, targets: Sequence[Clique], domain: Domain
) -> dict[Clique, np.ndarray]:
    """``values`` (axes ``attrs``) summed down to each of ``targets`` (canonical subsets), following
    :func:`_reduction_plan` so that a big table is read a few times rather than once per target."""
    steps, index = _reduction_plan(attrs, tuple(targets), domain)
    tables, scopes = [values], [attrs]
    for source, clique in steps:
        tables.append(_sum_to(tables[source], scopes[source], clique))
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


@dataclass(frozen=True)
class _Term:
    """All measurements of one clique, merged: for a quadratic loss, measurements y_i of the same
    marginal with variances s_i^2 are equivalent (up to a constant) to their precision-weighted
    mean with precision sum_i 1/s_i^2."""

    clique: Clique
    values: np.ndarray  # axes in ``clique`` order
    precision: float
    cells: int


def _merge_measurements(domain: Domain, measurements: Sequence[Measurement]) -> list[_Term]:
    sums: dict[Clique, tuple[np.ndarray, float]] = {}
    for m in measurements:
        clique = canonical_clique(domain, m.attributes)
        values = np.asarray(m.values, dtype=np.float64)
        if values.shape != domain.shape(m.attributes):
            raise ValueError(
                f"measurement of {list(m.attributes)} has shape {values.shape}, expected {domain.shape(m.attributes)}"
            )
        if not (math.isfinite(m.stddev) and m.stddev > 0):
            raise ValueError(f"measurement of {list(m.attributes)}: stddev must be positive, got {m.stddev}")
        values = np.transpose(values, [list(m.attributes).index(a) for a in clique])
        weight = 1.0 / float(m.stddev) ** 2
        previous = sums.get(clique)
        sums[clique] = (values * weight, weight) if previous is None else (previous[0] + values * weight,
                                                                            previous[1] + weight)
    return [_Term(c, total / weight, weight, domain.cells(c)) for c, (total, weight) in sums.items()]


def _maximal(cliques: Sequence[Clique]) -> list[Clique]:
    """Cliques not contained in another one (first occurrence kept), in the given order."""
    out: list[Clique] = []
    for clique in sorted(set(cliques), key=lambda c: (-len(c), cliques.index(c))):
        if not any(set(clique) <= set(other) for other in out):
            out.append(clique)
    return sorted(out, key=cliques.index)


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
            self._reductions[key] = _sum_to(self.probabilities[node], self.tree.nodes[node], keep)
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
            joint = _einsum(parts, clique)
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
                return _einsum([(self._reduce(node, local), local), *incoming], clique)
            separator = tuple(a for a in attrs if a in tree.nodes[parent[node]])
            local = tuple(a for a in attrs if a in separator or a in wanted or a in seen)
            out = canonical_clique(self.domain, set(separator) | (wanted & (set(local) | seen)))
            marginal_sep = self._reduce(node, separator)
            inverse = np.divide(1.0, marginal_sep, out=np.zeros_like(marginal_sep), where=marginal_sep > 0)
            message = _einsum([(self._reduce(node, local), local), (inverse, separator), *incoming], out)
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

    # export ----------------------------------------------------------------------------------
    def to_mbi(self) -> Model:
        """The same model as an mbi ``MarkovRandomField``: potentials over the measured maximal
        cliques (structural zeros folded in as :data:`STRUCTURAL_ZERO_LOG`, on a clique of their own
        when no measured clique contains them), marginals over the same cliques."""
        logs = {c: np.array(v, dtype=np.float64) for c, v in self.potentials.items()}
        for clique, mask in self.zeros.items():
            target = next((c for c in logs if set(clique) <= set(c)), None)
            if target is None:
                logs[clique] = np.zeros(mask.shape)
                target = clique
            logs[target] = logs[target] + _reshape_into(np.where(mask, STRUCTURAL_ZERO_LOG, 0.0), clique, target,
                                                        self.domain)
        if self.zeros:
            return _as_mbi(calibrated(self.domain, logs, self.total))
        return _as_mbi(Fit(self.domain, self.tree, logs, {}, self.probabilities, self.total, self.loss,
                           self.stepsize, self.lipschitz, self.iterations))


def calibrated(domain: Domain, potentials: Mapping[Sequence[str], np.ndarray], total: float) -> Fit:
    """A :class:`Fit` (no optimisation) of the model with these log-potentials (axes in each key's
    order) and total, calibrated with numpy."""
    logs: dict[Clique, np.ndarray] = {}
    for attributes, values in potentials.items():
        attributes = tuple(attributes)
        clique = canonical_clique(domain, attributes)
        values = np.transpose(np.asarray(values, dtype=np.float64), [attributes.index(a) for a in clique])
        logs[clique] = logs[clique] + values if clique in logs else values
    tree = JunctionTree(domain, list(logs))
    probabilities, _ = _calibrate(tree, _node_factors(tree, [logs]), float(total))
    return Fit(domain, tree, logs, {}, probabilities, float(total), math.nan, math.nan, math.nan, 0)


def _as_mbi(view: Fit) -> Model:
    full = mbi_domain(view.domain)
    cliques = list(view.potentials)

    def factor(clique: Clique, values: np.ndarray) -> mbi.Factor:
        return mbi.Factor(full.project(clique), jax.device_put(np.ascontiguousarray(values, dtype=np.float64)))

    potentials = mbi.CliqueVector(full, cliques, {c: factor(c, view.potentials[c]) for c in cliques})
    marginals = mbi.CliqueVector(full, cliques, {c: factor(c, view.marginal(c)) for c in cliques})
    model = mbi.MarkovRandomField(potentials=potentials, marginals=marginals, total=view.total)
    with _VIEWS_LOCK:
        _VIEWS[id(model)] = (model, view)
        while len(_VIEWS) > _VIEWS_KEPT:
            _VIEWS.popitem(last=False)
    return model


def _node_factors(
    tree: JunctionTree, sources: Sequence[Mapping[Clique, np.ndarray]]
) -> list[list[tuple[np.ndarray, Clique]]]:
    """The log-potentials of each node: every clique goes to the smallest node containing it."""
    factors: list[list[tuple[np.ndarray, Clique]]] = [[] for _ in tree.nodes]
    for source in sources:
        for clique, values in source.items():
            factors[tree.home(clique)].append((values, clique))
    return factors


def _calibrate(
    tree: JunctionTree,
    factors: list[list[tuple[np.ndarray, Clique]]],
    total: float,
    wanted: Sequence[Sequence[Clique]] | None = None,
) -> tuple[list[np.ndarray], dict[tuple[int, Clique], np.ndarray]]:
    """Node marginals (each summing to ``total``) of the model with log-potentials ``factors[i]`` on
    node i, by two-pass belief propagation (Koller & Friedman 2009, Sec. 10.2-10.3); also node i's
    marginal summed down to each clique of ``wanted[i]``, keyed ``(i, clique)``. A node's belief is
    its potentials plus its children's messages, summed by :func:`_sum_of_factors` (one pass over
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
        values = _sum_of_factors(factors[node] + messages[node], tree.nodes[node], domain)
        top = float(values.max())
        if not math.isfinite(top):
            raise FloatingPointError(f"the model gives clique {tree.nodes[node]} no probability at all")
        np.subtract(values, top, out=values)
        np.exp(values, out=values)
        scaled[node] = values
        parent = tree.parent[node]
        if parent >= 0:
            message = _sum_to(values, tree.nodes[node], tree.separator[node])
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
            values *= _reshape_into(ratio, separator, tree.nodes[node], domain)
        probabilities[node] = values
        targets = [tree.separator[child] for child in tree.children[node]]
        targets += list(wanted[node]) if wanted is not None else []
        if targets:
            for clique, table in _reduce_many(values, tree.nodes[node], targets, domain).items():
                reductions[(node, clique)] = table
    return probabilities, reductions


class _Objective:
    """L = sum_terms precision/2 * ||mu_t - values_t||^2 with mu_t read from the calibrated tree,
    and its gradient per potential clique (each term belongs to the smallest potential clique that
    contains it; the gradient there is the term's residual times its precision, broadcast)."""

    def __init__(self, domain: Domain, tree: JunctionTree, terms: list[_Term], cliques: list[Clique]) -> None:
        self.domain = domain
        self.tree = tree
        self.terms = terms
        self.cliques = cliques
        by_size = sorted(cliques, key=lambda c: (domain.cells(c), cliques.index(c)))
        self.owner = {t.clique: next(c for c in by_size if set(t.clique) <= set(c)) for t in terms}
        self.node = [tree.home(t.clique) for t in terms]  # each term is read from its smallest node
        self.wanted: list[list[Clique]] = [[] for _ in tree.nodes]
        for t, node in zip(terms, self.node, strict=True):
            self.wanted[node].append(t.clique)
        # Lipschitz constant of the gradient: the Hessian is block diagonal by potential clique with
        # blocks sum_t precision_t P_t^T P_t, where P_t sums a clique table down to t and
        # ||P_t||^2 = cells(c)/cells(t) (attained at the constant vector, shared by all blocks).
        blocks: dict[Clique, float] = {}
        for t in terms:
            c = self.owner[t.clique]
            blocks[c] = blocks.get(c, 0.0) + t.precision * domain.cells(c) / t.cells
        self.lipschitz = max(blocks.values())

    def marginals(self, reductions: dict[tuple[int, Clique], np.ndarray]) -> list[np.ndarray]:
        return [reductions[(node, t.clique)] for t, node in zip(self.terms, self.node, strict=True)]

    def loss_and_gradient(self, marginals: list[np.ndarray]) -> tuple[float, dict[Clique, np.ndarray]]:
        loss = 0.0
        gradient = {c: np.zeros(self.domain.shape(c)) for c in self.cliques}
        for t, mu in zip(self.terms, marginals, strict=True):
            diff = mu - t.values
            loss += 0.5 * t.precision * float(np.vdot(diff, diff))
            owner = self.owner[t.clique]
            gradient[owner] += _reshape_into(t.precision * diff, t.clique, owner, self.domain)
        return loss, gradient

    def directional(self, marginals: list[np.ndarray], others: list[np.ndarray]) -> float:
        """<grad L(mu), mu - mu'>, evaluated term by term (the gradient of a term is its scaled
        residual broadcast over the owner clique, so the inner product reduces to the term)."""
        return sum(
            t.precision * float(np.vdot(mu - t.values, mu - other))
            for t, mu, other in zip(self.terms, marginals, others, strict=True)
        )


def minimum_variance_total(measurements: Sequence[Measurement]) -> float:
    """The total count estimated from the measurements' sums, each weighted by the inverse of its
    variance (stddev^2 * cells), as mbi's ``minimum_variance_unbiased_total``; at least 1."""
    estimates = [float(np.sum(m.values)) for m in measurements]
    weights = [1.0 / (float(m.stddev) ** 2 * np.size(m.values)) for m in measurements]
    return max(1.0, float(np.average(estimates, weights=weights)))


def fit(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iters: int = 1000,
    total: float | None = None,
    warm_start: Fit | None = None,
    structural_zeros: Mapping[Sequence[str], np.ndarray] | None = None,
    tol: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Fit:
    """Fit a graphical model to noisy marginals with numpy (no JAX compilation).

    Mirror descent of McKenna, Sheldon, Miklau 2019 (Alg. 1) with mbi 2.0.0's Armijo step rule:
    theta' = theta - alpha * grad L(mu(theta)); accept and grow alpha by 1.01 when
    L(mu) - L(mu') >= alpha/2 <grad, mu - mu'>, else halve alpha. The first alpha is 2 / (L_grad * N)
    (L_grad the gradient's Lipschitz constant); a warm start keeps the previous fit's potentials
    and rescales its accepted step by the change in L_grad. Marginals of an accepted step are
    reused, so an iteration costs one belief propagation.

    ``structural_zeros`` maps a clique to a boolean array (axes in the clique's order) that is True
    on impossible cells; those cells get probability exactly zero. ``tol`` stops early once the
    relative loss decrease over 50 iterations stays below it twice in a row. ``progress(done, iters)``
    is called before the first iteration and after each one (a long fit shows its own progress, and a
    caller may stop it there by raising).
    """
    if not measurements:
        raise ValueError("fit needs at least one measurement")
    if iters < 0:
        raise ValueError(f"iters must be non-negative, got {iters}")
    terms = _merge_measurements(domain, measurements)
    zeros = canonical_zeros(domain, structural_zeros or {})
    cliques = _maximal([t.clique for t in terms])
    tree = JunctionTree(domain, [*cliques, *zeros])
    zero_logs = {c: np.where(mask, -np.inf, 0.0) for c, mask in zeros.items()}
    objective = _Objective(domain, tree, terms, cliques)
    total = minimum_variance_total(measurements) if total is None else float(total)
    if not (math.isfinite(total) and total > 0):
        raise ValueError(f"total must be a positive number, got {total}")

    potentials = {c: np.zeros(domain.shape(c)) for c in cliques}
    stepsize = 2.0 / (objective.lipschitz * total)
    if warm_start is not None:
        by_size = sorted(cliques, key=lambda c: (domain.cells(c), cliques.index(c)))
        for old, values in warm_start.potentials.items():
            target = next((c for c in by_size if set(old) <= set(c)), None)
            if target is not None:
                potentials[target] = potentials[target] + _reshape_into(values, old, target, domain)
        stepsize = max(stepsize, warm_start.stepsize * warm_start.lipschitz / objective.lipschitz)

    def evaluate(theta: dict[Clique, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        probabilities, reductions = _calibrate(tree, _node_factors(tree, [theta, zero_logs]), total,
                                                objective.wanted)
        return probabilities, objective.marginals(reductions)

    probabilities, marginals = evaluate(potentials)
    loss, gradient = objective.loss_and_gradient(marginals)
    block_start, stalls = loss, 0
    done = 0
    if progress is not None:
        progress(0, iters)
    for done in range(1, iters + 1):
        trial = {c: potentials[c] - stepsize * gradient[c] for c in cliques}
        trial_probabilities, trial_marginals = evaluate(trial)
        trial_loss, trial_gradient = objective.loss_and_gradient(trial_marginals)
        if loss - trial_loss >= 0.5 * stepsize * objective.directional(marginals, trial_marginals):
            potentials, probabilities, marginals = trial, trial_probabilities, trial_marginals
            loss, gradient = trial_loss, trial_gradient
            stepsize *= 1.01
        else:
            stepsize *= 0.5
        if tol is not None and done % 50 == 0:
            stalls = stalls + 1 if block_start - loss <= tol * max(abs(loss), 1.0) else 0
            block_start = loss
            if stalls >= 2:
                break
        if progress is not None:
            progress(done, iters)
    return Fit(domain, tree, potentials, zeros, probabilities, total, loss, stepsize, objective.lipschitz, done)


def canonical_zeros(domain: Domain, zeros: Mapping[Sequence[str], np.ndarray]) -> dict[Clique, np.ndarray]:
    """Structural zeros keyed by canonical clique, masks transposed to match (True = impossible);
    raises ``ValueError`` naming the clique for a mask of the wrong type or shape."""
    out: dict[Clique, np.ndarray] = {}
    for attributes, mask in zeros.items():
        attributes = tuple(attributes)
        clique = canonical_clique(domain, attributes)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != domain.shape(attributes):
            raise ValueError(
                f"structural_zeros[{list(attributes)}] must be a boolean array of shape {domain.shape(attributes)}, "
                f"got {mask.dtype} {mask.shape}"
            )
        mask = np.transpose(mask, [attributes.index(a) for a in clique])
        out[clique] = out[clique] | mask if clique in out else mask
    return out
