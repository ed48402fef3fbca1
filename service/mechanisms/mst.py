"""MST: McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest: A scalable and general approach
to differentially private synthetic data" (J. Privacy and Confidentiality 11(3)), Sec. 4 / Alg. 1.

The budget rho is split in three equal parts:

1. measure every 1-way marginal (d of them) with discrete Gaussian noise, sigma_1^2 = d / (2 rho/3);
2. choose d - 1 pairs forming a spanning tree, Kruskal style: each step picks, among the pairs
   joining two different components, one pair by the exponential mechanism with score
   q_ab = || M_ab(D) - M_ab(p_1) ||_1, where p_1 is the model estimated from step 1's noisy 1-way
   marginals only; each step has epsilon^2/8 = (rho/3) / (d - 1) (rounded down to a dyadic epsilon);
3. measure the chosen pairs with the rest, sigma_2^2 = (d - 1) / (2 (rho - rho_1 - rho_select));

then fit a graphical model to all measurements (free post-processing). The score's sensitivity is
1: p_1 is a function of already released values, and adding or removing one row changes one cell
of M_ab(D) by one, hence the L1 distance by at most one. The privacy derivation is in
docs/mechanisms.md, section "MST".

Skipped from the paper: its compression of rare values (merging the 1-way cells whose noisy count
is below 3 sigma before step 2). It is an accuracy/speed refinement, not a privacy step; our
domains are already coarsened by public binning.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.graphical import mbi_adapter, mirror_descent
from estimators.graphical.mirror_descent import Measurement
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, fit_progress, no_progress
from service.mechanisms.payloads import MarginalsPayload
from service.mechanisms.selection import CachedCounts, Ledger, check_rho, measure, select
from service.privacy.calibration import exponential_epsilon, gaussian_sigma2_exact
from service.privacy.cost import PrivacyCost

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

DEFAULT_ITERS = 1000
#: Sensitivity of the selection score ||M_ab(D) - M_ab(p_1)||_1 under add/remove-one (module doc).
SCORE_SENSITIVITY = 1.0


def project_to_simplex(values: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``values`` onto {x >= 0, sum x = total} (Duchi, Shalev-Shwartz,
    Singer & Chandra 2008, "Efficient projections onto the l1-ball", Fig. 1): x = max(v - theta, 0)
    with theta chosen so that the sum is ``total``."""
    v = np.asarray(values, dtype=np.float64).ravel()
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    ks = np.arange(1, v.size + 1)
    k = ks[u - cumulative / ks > 0][-1]
    theta = cumulative[k - 1] / k
    return np.maximum(v - theta, 0.0).reshape(np.shape(values))


def oneway_model(oneway: list[Measurement]) -> tuple[dict[str, np.ndarray], float]:
    """The model step 2 scores against: the least-squares fit of the noisy 1-way marginals (equal
    noise everywhere) over independent models with one shared total N. The loss separates by
    attribute, so each marginal is the projection of its noisy counts onto the simplex scaled to
    N, with N the minimum-variance combination of the noisy sums (as in ``pgm.fit``)."""
    total = mirror_descent.minimum_variance_total(oneway)
    return {m.attributes[0]: project_to_simplex(m.values, total) for m in oneway}, total


def run_mst(
    oracle: CountOracle,
    rho: Fraction,
    noise: NoiseSource,
    *,
    progress: Progress = no_progress,
    iters: int = DEFAULT_ITERS,
) -> MechanismResult:
    """Run MST with total zCDP budget ``rho`` (exactly what the result's cost reports)."""
    rho = check_rho(rho)
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise MechanismError(f"iters must be a positive integer, got {iters!r}")
    domain = oracle.domain
    names = domain.names
    d = len(names)
    pairs = list(itertools.combinations(names, 2))  # domain order: independent of string hashing
    steps = d + 2 * (d - 1) + 1  # measure d, select d-1, measure d-1, fit
    counts = CachedCounts(oracle)
    counts.prefetch([(n,) for n in names] + pairs)  # every count MST can need, before any noise
    ledger = Ledger()
    done = 0
    progress(done, steps, "counted every marginal")

    # 1. one-way marginals
    rho_oneway = rho if d == 1 else rho / 3
    sigma2_oneway = d * gaussian_sigma2_exact(rho_oneway)
    oneway = []
    for name in names:
        oneway.append(measure(counts.counts((name,)), (name,), sigma2_oneway, noise, ledger))
        done += 1
        progress(done, steps, f"measured {name}")

    # 2. spanning tree by the exponential mechanism (Kruskal over components)
    tree: list[tuple[str, str]] = []
    if d > 1:
        epsilon = exponential_epsilon(rho / 3 / (d - 1))
        margins, total = oneway_model(oneway)
        scores = {
            (a, b): float(np.abs(counts.counts((a, b)) - np.multiply.outer(margins[a], margins[b]) / total).sum())
            for a, b in pairs
        }
        component = {n: n for n in names}

        def find(n: str) -> str:
            while component[n] != n:
                component[n] = component[component[n]]
                n = component[n]
            return n

        for edge in range(d - 1):
            candidates = [p for p in pairs if find(p[0]) != find(p[1])]
            index = select([scores[p] for p in candidates], epsilon, SCORE_SENSITIVITY, noise, ledger, f"edge {edge}")
            chosen = candidates[index]
            component[find(chosen[0])] = find(chosen[1])
            tree.append(chosen)
            done += 1
            progress(done, steps, f"selected {chosen[0]}×{chosen[1]}")

    # 3. the chosen pairs, with exactly what is left
    measurements = list(oneway)
    if tree:
        sigma2_pairs = len(tree) * gaussian_sigma2_exact(rho - ledger.total)
        for pair in tree:
            measurements.append(measure(counts.counts(pair), pair, sigma2_pairs, noise, ledger))
            done += 1
            progress(done, steps, f"measured {pair[0]}×{pair[1]}")

    if ledger.total != rho:
        raise AssertionError(f"MST accounting is off: used {ledger.total}, given {rho}")
    fitted = mirror_descent.fit(domain, measurements, iters=iters, progress=fit_progress(progress))
    progress(steps, steps, "fitted model")
    details = {
        "tree": [list(p) for p in tree],
        "rho_by_step": ledger.summary(),
        "fit_iterations": fitted.iterations,
        "model_size_mb": fitted.size_mb(),
    }
    return MechanismResult(PrivacyCost(rho=ledger.total),
                           MarginalsPayload(measurements, model=mbi_adapter.fit_to_mbi(fitted)), details)
