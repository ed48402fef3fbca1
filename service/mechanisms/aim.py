"""AIM: McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data" (PVLDB 15(11)), Alg. 2.

Given a weighted workload W of marginals and a zCDP budget rho:

* candidates are the downward closure W+ of W with weights w_r = sum_{s in W} c_s |r ∩ s|;
* with T rounds planned (default 16 d) and alpha = 0.9, start with sigma^2 = T / (2 alpha rho) and
  epsilon with epsilon^2/8 = (1 - alpha) rho / T; measure the initial cliques (all 1-way marginals
  by default) with sigma^2 and fit a model;
* each round t: if the budget left is at most twice a round's cost, this is the last round and it
  gets all of it (a share 1 - alpha, rounded down to a dyadic epsilon, for selection, the exact rest
  for measurement); keep the candidates whose junction tree would stay within
  (rho_used / rho) * max_model_size; select r by the exponential mechanism with score
  q_r = w_r (||M_r(D) - M_r(p_{t-1})||_1 - sqrt(2/pi) sigma n_r) and sensitivity max_r w_r; measure
  r with sigma^2; refit; if the model's r-marginal moved by at most sqrt(2/pi) sigma n_r, halve
  sigma and double epsilon (budget annealing);
* finally fit the model to all measurements.

Privacy (derived in docs/mechanisms.md, section "AIM"): each selection is epsilon^2/8-zCDP, each
measurement 1/(2 sigma^2)-zCDP; their sum is exactly ``rho`` because the last round takes the
remainder in rationals.

Speed (docs/mechanisms.md): estimation runs in :func:`estimators.graphical.mirror_descent.fit` (numpy, nothing
compiled), warm-started round to round with ``round_iters`` iterations, and ``iters`` at the end. Candidate
marginals come from the calibrated junction tree in numpy as well.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.graphical import factors, junction_tree, mbi_adapter, mirror_descent
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, fit_progress, no_progress
from service.mechanisms.payloads import MarginalsPayload
from service.mechanisms.selection import CachedCounts, Ledger, check_rho, clique_key, downward_closure, measure, select
from service.privacy.calibration import exponential_epsilon, exponential_rho, gaussian_rho, gaussian_sigma2_exact
from service.privacy.cost import PrivacyCost
from workloads.domain import Domain
from workloads.marginals import Query

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

Clique = tuple[str, ...]

DEFAULT_MAX_MODEL_SIZE_MB = 80.0
DEFAULT_ITERS = 1000
DEFAULT_ROUND_ITERS = 100
#: Share of a round's budget spent on measurement (the paper's alpha).
MEASURE_SHARE = Fraction(9, 10)
#: E|Z| / sigma for Z ~ N(0, sigma^2): the expected per-cell L1 error of a measurement.
EXPECTED_ABS_NOISE = math.sqrt(2 / math.pi)


@dataclass(frozen=True)
class RoundBudget:
    sigma2: Fraction
    epsilon: Fraction
    last: bool

    @property
    def cost(self) -> Fraction:
        return gaussian_rho(self.sigma2) + exponential_rho(self.epsilon)


def plan_round(rho: Fraction, used: Fraction, sigma2: Fraction, epsilon: Fraction) -> RoundBudget:
    """The next round's parameters (Alg. 2): unchanged unless the budget left is at most twice their
    cost, in which case the round takes all of it, so the run ends with used == rho exactly."""
    remaining = rho - used
    planned = RoundBudget(sigma2, epsilon, False)
    if remaining > 2 * planned.cost:
        return planned
    epsilon = exponential_epsilon((1 - MEASURE_SHARE) * remaining)
    return RoundBudget(gaussian_sigma2_exact(remaining - exponential_rho(epsilon)), epsilon, True)


def run_aim(
    oracle: CountOracle,
    workload: Sequence[Query],
    rho: Fraction,
    noise: NoiseSource,
    *,
    rounds: int | None = None,
    max_model_size: float = DEFAULT_MAX_MODEL_SIZE_MB,
    initial_cliques: Sequence[tuple[str, ...]] | None = None,
    structural_zeros: Mapping[tuple[str, ...], np.ndarray] | None = None,
    progress: Progress = no_progress,
    iters: int = DEFAULT_ITERS,
    round_iters: int = DEFAULT_ROUND_ITERS,
) -> MechanismResult:
    """Run AIM with total zCDP budget ``rho`` (exactly what the result's cost reports).

    ``rounds`` is T of Alg. 2 (default 16 x attributes): it sets the first rounds' noise; budget
    annealing usually ends the run in fewer rounds. ``max_model_size`` caps the junction tree in MB
    (mbi's ``hypothetical_model_size``). ``initial_cliques`` are measured before the first round
    (default: every 1-way marginal). ``structural_zeros`` maps cliques to boolean masks (True =
    impossible cell). ``iters`` / ``round_iters``: estimation iterations at the end / per round.
    Every check happens before the first noisy value is drawn.
    """
    rho = check_rho(rho)
    domain = oracle.domain
    candidates = downward_closure(domain, workload)
    total_rounds = _positive_int("rounds", 16 * len(domain) if rounds is None else rounds)
    iters = _positive_int("iters", iters)
    round_iters = _positive_int("round_iters", round_iters)
    if isinstance(max_model_size, bool) or not isinstance(max_model_size, int | float) or not (
        math.isfinite(max_model_size) and max_model_size > 0
    ):
        raise MechanismError(f"max_model_size must be a positive number of MB, got {max_model_size!r}")
    initial = _initial_cliques(domain, initial_cliques)
    try:
        zeros = mirror_descent.canonical_zeros(domain, structural_zeros or {})
    except ValueError as exc:
        raise MechanismError(f"structural_zeros: {exc}") from None

    initial_size = junction_tree.model_size_mb(domain, [*initial, *zeros])
    if initial_size > max_model_size:
        raise MechanismError(
            f"the initial model ({len(initial)} initial cliques"
            f"{' and structural zeros' if zeros else ''}) needs {initial_size:.1f} MB, more than "
            f"max_model_size={max_model_size} MB; raise max_model_size or measure fewer initial cliques"
        )
    sigma2 = Fraction(total_rounds) / (2 * MEASURE_SHARE * rho)
    epsilon = exponential_epsilon((1 - MEASURE_SHARE) * rho / total_rounds)
    initial_cost = len(initial) * gaussian_rho(sigma2)
    if initial_cost >= rho:
        raise MechanismError(
            f"rounds={total_rounds} leaves no budget after measuring {len(initial)} initial cliques; "
            f"use at least {math.floor(len(initial) * MEASURE_SHARE) + 1} rounds"
        )
    first = plan_round(rho, initial_cost, sigma2, epsilon)
    tree = junction_tree.JunctionTree(domain, [*initial, *zeros])
    if not _eligible(domain, candidates, tree, [*initial, *zeros],
                     max_model_size * float((initial_cost + first.cost) / rho)):
        raise MechanismError(
            f"no workload marginal fits the first round's model size limit "
            f"({max_model_size * float((initial_cost + first.cost) / rho):.2f} MB); raise max_model_size"
        )

    counts = CachedCounts(oracle)
    counts.prefetch([*initial, *(r for r, _ in candidates)])  # round 1 scores every candidate anyway
    fitting = fit_progress(progress)
    progress(0, 1 + total_rounds, f"counted {len(candidates)} candidate marginals")

    # --- from here on, noise is drawn ---------------------------------------------------------
    ledger = Ledger()
    measurements = [measure(counts.counts(c), c, sigma2, noise, ledger) for c in initial]
    model = mirror_descent.fit(domain, measurements, iters=round_iters, structural_zeros=zeros, progress=fitting)
    measured: list[Clique] = list(initial)
    chosen: list[list[str]] = []
    annealed = 0
    t = 0
    while ledger.total < rho:
        t += 1
        budget = plan_round(rho, ledger.total, sigma2, epsilon)
        sigma2, epsilon = budget.sigma2, budget.epsilon
        limit = max_model_size * float((ledger.total + budget.cost) / rho)
        eligible = _eligible(domain, candidates, model.tree, [*measured, *zeros], limit)
        sigma = math.sqrt(float(sigma2))
        estimates = {r: model.marginal(r) for r, _ in eligible}
        scores = [
            w * (float(np.abs(counts.counts(r) - estimates[r]).sum()) - EXPECTED_ABS_NOISE * sigma * domain.cells(r))
            for r, w in eligible
        ]
        sensitivity = max(w for _, w in eligible)
        r = eligible[select(scores, epsilon, sensitivity, noise, ledger, f"round {t}")][0]
        measurements.append(measure(counts.counts(r), r, sigma2, noise, ledger))
        if r not in measured:
            measured.append(r)
        chosen.append(list(r))
        model = mirror_descent.fit(domain, measurements, iters=round_iters, warm_start=model, structural_zeros=zeros,
                        progress=fitting)
        moved = float(np.abs(model.marginal(r) - estimates[r]).sum())
        if not budget.last and moved <= EXPECTED_ABS_NOISE * sigma * domain.cells(r):
            sigma2, epsilon = sigma2 / 4, epsilon * 2
            annealed += 1
        left = rho - ledger.total
        expected = t + (math.ceil(left / RoundBudget(sigma2, epsilon, False).cost) if left > 0 else 0) + 1
        progress(t, expected, f"round {t}: measured {'×'.join(r)} (model {model.size_mb():.1f} MB)")

    if ledger.total != rho:
        raise AssertionError(f"AIM accounting is off: used {ledger.total}, given {rho}")
    progress(t, t + 1, "fitting the final model")
    model = mirror_descent.fit(domain, measurements, iters=iters, warm_start=model, structural_zeros=zeros,
                               progress=fitting)
    progress(t + 1, t + 1, "fitted final model")
    details = {
        "rounds": t,
        "planned_rounds": total_rounds,
        "selected": chosen,
        "annealed": annealed,
        "initial_cliques": [list(c) for c in initial],
        "rho_by_step": ledger.summary(),
        "model_size_mb": model.size_mb(),
        "fit_iterations": model.iterations,
    }
    return MechanismResult(PrivacyCost(rho=ledger.total),
                           MarginalsPayload(measurements, model=mbi_adapter.fit_to_mbi(model)), details)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MechanismError(f"{name} must be a positive integer, got {value!r}")
    return value


def _initial_cliques(domain: Domain, cliques: Sequence[Sequence[str]] | None) -> list[Clique]:
    if cliques is None:
        return [(n,) for n in domain.names]
    out: set[Clique] = set()
    for clique in cliques:
        try:
            out.add(factors.canonical_clique(domain, clique))
        except ValueError as exc:
            raise MechanismError(f"initial_cliques: {exc}") from None
    if not out or () in out:
        raise MechanismError("initial_cliques must name at least one non-empty clique")
    return sorted(out, key=lambda c: clique_key(domain, c))


def _eligible(
    domain: Domain,
    candidates: list[tuple[Clique, float]],
    tree: junction_tree.JunctionTree,
    model_cliques: list[Clique],
    limit: float,
) -> list[tuple[Clique, float]]:
    """Candidates whose junction tree, added to the model, stays within ``limit`` MB (Alg. 2's
    filter). One already inside a node of the current tree leaves the model unchanged and is always
    kept."""
    out = []
    for r, w in candidates:
        if tree.home(r) is not None or junction_tree.model_size_mb(domain, [*model_cliques, r]) <= limit:
            out.append((r, w))
    return out
