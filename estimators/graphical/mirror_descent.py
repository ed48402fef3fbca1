"""The estimator: a graphical model fitted to noisy marginal measurements by entropic mirror descent, with numpy.

Private-pgm's estimator (``mbi.estimation.MirrorDescent``) is compiled anew by JAX for every set of cliques
(seconds each); data-dependent mechanisms such as AIM change the clique set every round, so there compilation
dominated the run time. :func:`fit` solves the same problem -- minimise
L(mu) = sum_m ||M_m mu - y_m||^2 / (2 sigma_m^2) over the marginals mu of a graphical model on the junction tree of
the measured cliques (McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference for
differential privacy", Alg. 1: entropic mirror descent, i.e. gradient steps on the log-potentials with marginals
from belief propagation) -- with numpy, so nothing is compiled. Its result (:class:`~estimators.graphical.model.Fit`)
converts to an mbi model for storage (:func:`estimators.graphical.mbi_adapter.fit_to_mbi`).

Estimation is post-processing of already-noisy measurements: it never touches sensitive rows and costs no privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from estimators.graphical.belief_propagation import calibrate, node_factors
from estimators.graphical.factors import Clique, canonical_clique, reshape_into
from estimators.graphical.junction_tree import JunctionTree
from estimators.graphical.model import Fit
from workloads.domain import Domain

#: Default stopping tolerance of :func:`fit`: stop once the loss fell by at most this fraction of itself over each of
#: two consecutive blocks of 50 iterations. Measured (``benchmarks/fit_tolerance.py``): a direct Laplace release of
#: titanic's pairs (epsilon 1) stops after 350 of 1,000 iterations with every measured marginal within 0.05 of its
#: noise standard deviation of the 1,000-iteration fit; fits still descending (an MST-like chain on adult) run on.
DEFAULT_TOLERANCE = 1e-4
STOP_BLOCK = 50  # iterations per block of the stopping rule


@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of one marginal: ``values`` has the marginal's shape (axes in the order
    of ``attributes``) and i.i.d. noise of standard deviation ``stddev`` on every cell."""

    attributes: tuple[str, ...]
    values: np.ndarray
    stddev: float


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
            gradient[owner] += reshape_into(t.precision * diff, t.clique, owner, self.domain)
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
    tol: float | None = DEFAULT_TOLERANCE,
    progress: Callable[[int, int], None] | None = None,
    step_boost: float = 1.0,
) -> Fit:
    """Fit a graphical model to noisy marginals with numpy (no JAX compilation).

    Mirror descent of McKenna, Sheldon, Miklau 2019 (Alg. 1) with mbi 2.0.0's Armijo step rule:
    theta' = theta - alpha * grad L(mu(theta)); accept and grow alpha by 1.01 when
    L(mu) - L(mu') >= alpha/2 <grad, mu - mu'>, else halve alpha. The first alpha is 2 / (L_grad * N)
    (L_grad the gradient's Lipschitz constant); a warm start keeps the previous fit's potentials
    and rescales its accepted step by the change in L_grad. Marginals of an accepted step are
    reused, so an iteration costs one belief propagation.

    ``structural_zeros`` maps a clique to a boolean array (axes in the clique's order) that is True
    on impossible cells; those cells get probability exactly zero. ``tol`` (default
    :data:`DEFAULT_TOLERANCE`; ``None`` runs all ``iters``) stops early once the loss decrease over a block of 50
    iterations is at most ``tol`` times the loss, twice in a row; the result's ``iterations`` says how many ran (a
    function of the noisy measurements only, so public). ``progress(done, iters)``
    is called before the first iteration and after each one (a long fit shows its own progress, and a
    caller may stop it there by raising). ``step_boost`` multiplies the first step: a refit warm-started from a
    converged model read back from storage (which keeps no step size) would otherwise restart at the cold-start step
    and crawl (the parametric bootstrap, :mod:`estimators.graphical.bootstrap`); a step too long is halved by the rule
    above, so a boost costs at most a few rejected iterations.
    """
    if not measurements:
        raise ValueError("fit needs at least one measurement")
    if iters < 0:
        raise ValueError(f"iters must be non-negative, got {iters}")
    if tol is not None and not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a non-negative number or None, got {tol!r}")
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
                potentials[target] = potentials[target] + reshape_into(values, old, target, domain)
        stepsize = max(stepsize, warm_start.stepsize * warm_start.lipschitz / objective.lipschitz)
    if not (math.isfinite(step_boost) and step_boost > 0):
        raise ValueError(f"step_boost must be a positive number, got {step_boost!r}")
    stepsize *= step_boost

    def evaluate(theta: dict[Clique, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        probabilities, reductions = calibrate(tree, node_factors(tree, [theta, zero_logs]), total,
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
        if tol is not None and done % STOP_BLOCK == 0:
            stalls = stalls + 1 if block_start - loss <= tol * max(abs(loss), 1.0) else 0
            block_start = loss
            if stalls >= 2:
                if progress is not None:
                    progress(done, done)  # converged: the bar ends here
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
