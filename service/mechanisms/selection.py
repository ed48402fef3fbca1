"""Pieces shared by the data-dependent marginal mechanisms (MST, AIM): exact zCDP bookkeeping,
noisy measurement, private selection, the AIM candidate set, and count oracles.

Privacy facts used here (derivations in docs/mechanisms.md):

* A marginal has L2 sensitivity 1 under add/remove-one neighbours (one row moves one cell by one),
  so adding discrete Gaussian noise of variance parameter sigma^2 to its counts is
  1/(2 sigma^2)-zCDP (Canonne, Kamath & Steinke 2020, Thm. 4).
* The exponential mechanism with parameter epsilon, P(i) ∝ exp(epsilon q_i / (2 Delta)) for a score
  q of sensitivity Delta, is epsilon-bounded-range (Durfee & Rogers 2019), and an epsilon-bounded-
  range mechanism is epsilon^2/8-zCDP (Cesar & Rogers 2021, "Bounding, Concentrating, and
  Truncating: Unifying Privacy Loss Composition for Data Analytics", ALT 2021; the AIM paper uses
  the same fact). The generic pure-DP bound (Bun & Steinke 2016, Prop. 1.4) would give epsilon^2/2.
* zCDP composes additively, also adaptively (Bun & Steinke 2016, Lemma 2.3).

The calibrations themselves (sigma^2 from rho, the dyadic selection epsilon) live in
:mod:`service.privacy.calibration`.

Every amount is a :class:`fractions.Fraction`. Selection epsilons are dyadic rationals (an
integer over a power of two with about 30 significant bits), so the float handed to the sampler is
that very number and epsilon^2/8 is exact; noise variances are Fractions too. The sum of the
charges is therefore exactly the rho a run used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.graphical import factors
from estimators.graphical.mirror_descent import Measurement
from service.mechanisms.base import CountOracle, MechanismError, Progress, SpentSteps, record_spent
from service.privacy.calibration import exponential_rho, gaussian_rho
from workloads.domain import Domain
from workloads.marginals import Query

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

Clique = tuple[str, ...]


# privacy arithmetic ---------------------------------------------------------------------------
def check_rho(rho: object) -> Fraction:
    """``rho`` as a positive Fraction, or a :class:`MechanismError` naming the parameter."""
    if isinstance(rho, bool) or not isinstance(rho, Fraction | int):
        raise MechanismError(f"rho must be a Fraction (exact rational), got {rho!r}")
    rho = Fraction(rho)
    if rho <= 0:
        raise MechanismError(f"rho must be positive, got {rho}")
    return rho


@dataclass
class Ledger:
    """The zCDP charges of one run, in order: ``(what, rho)`` pairs and their exact sum.

    A step is charged *before* its noise is drawn (:func:`measure`, :func:`select`), so :attr:`total` is never below
    what the noise drawn so far costs. :meth:`reporting_stops` hands that record to the release engine when a stop
    request stops the run part-way (docs/privacy.md 6.5)."""

    steps: list[tuple[str, Fraction]] = field(default_factory=list)

    def charge(self, what: str, rho: Fraction) -> None:
        self.steps.append((what, Fraction(rho)))

    @property
    def total(self) -> Fraction:
        return sum((rho for _, rho in self.steps), Fraction(0))

    def spent(self) -> SpentSteps:
        """The steps charged so far, frozen."""
        return SpentSteps(tuple(self.steps))

    def summary(self) -> dict[str, float]:
        """Rho by kind of step (the text before the first ':' of ``what``), as floats for JSON."""
        return self.spent().by_kind()

    def reporting_stops(self, progress: Progress) -> Progress:
        """``progress`` for a run that charges this ledger: an exception raised by it -- the release engine raises
        its stop request at progress reports -- carries the steps charged so far (:func:`record_spent`), from which
        the engine keeps exactly their charge (docs/privacy.md 6.5)."""
        def reported(done: int, total: int, message: str) -> None:
            try:
                progress(done, total, message)
            except BaseException as exc:
                record_spent(exc, self.spent())
                raise

        return reported


# measuring and selecting ----------------------------------------------------------------------
def measure(
    counts: np.ndarray, attributes: Clique, sigma2: Fraction, noise: NoiseSource, ledger: Ledger
) -> Measurement:
    """Add discrete Gaussian noise of parameter ``sigma2`` to exact ``counts``, charged before the draw."""
    counts = np.asarray(counts)
    ledger.charge(f"measure:{'×'.join(attributes)}", gaussian_rho(sigma2))
    noisy = counts + np.asarray(noise.discrete_gaussian(sigma2, counts.size)).reshape(counts.shape)
    return Measurement(tuple(attributes), noisy.astype(np.float64), math.sqrt(float(sigma2)))


def select(
    scores: Sequence[float], epsilon: Fraction, sensitivity: float, noise: NoiseSource, ledger: Ledger, what: str
) -> int:
    """Index chosen by the exponential mechanism, P(i) ∝ exp(epsilon score_i / (2 sensitivity)),
    charged epsilon^2/8 before the draw."""
    ledger.charge(f"select:{what}", exponential_rho(epsilon))
    return int(noise.exponential_mechanism(np.asarray(scores, dtype=np.float64), float(epsilon), float(sensitivity)))


# AIM's candidates -------------------------------------------------------------------------------
def clique_key(domain: Domain, clique: Sequence[str]) -> tuple[int, tuple[int, ...]]:
    """Sort key of a canonical clique: size, then the domain positions of its attributes. Sorting
    by it makes candidate order independent of Python's string hashing."""
    position = {n: i for i, n in enumerate(domain.names)}
    return len(clique), tuple(position[a] for a in clique)


def downward_closure(domain: Domain, workload: Sequence[Query]) -> list[tuple[Clique, float]]:
    """AIM's candidates and weights (McKenna et al. 2022, Sec. 4): every non-empty subset r of a
    workload marginal, with w_r = sum_{s in W} c_s |r ∩ s|, sorted by :func:`clique_key`."""
    if not workload:
        raise MechanismError("workload must contain at least one marginal")
    queries = []
    for q in workload:
        if not (math.isfinite(q.weight) and q.weight > 0):
            raise MechanismError(f"workload weight of {list(q.attributes)} must be positive, got {q.weight}")
        try:
            queries.append((factors.canonical_clique(domain, q.attributes), float(q.weight)))
        except ValueError as exc:
            raise MechanismError(f"workload marginal {list(q.attributes)}: {exc}") from None
    closure: set[Clique] = set()
    for clique, _ in queries:
        for k in range(1, len(clique) + 1):
            closure.update(itertools.combinations(clique, k))
    weights = {r: sum(c * len(set(r) & set(s)) for s, c in queries) for r in closure}
    return [(r, weights[r]) for r in sorted(closure, key=lambda r: clique_key(domain, r))]


# count oracles ----------------------------------------------------------------------------------
class CachedCounts:
    """Counts from a :class:`CountOracle`, each clique asked once per run (AIM scores every
    candidate every round)."""

    def __init__(self, oracle: CountOracle) -> None:
        self.oracle = oracle
        self.domain = oracle.domain
        self._cache: dict[Clique, np.ndarray] = {}

    def prefetch(self, cliques: Sequence[Clique]) -> None:
        """Ask for many cliques at once when the oracle can (an optional ``counts_many(requests)``
        returning ``{clique: counts}``, as the SQL oracle's batched GROUPING SETS); otherwise
        nothing happens here and :meth:`counts` asks one by one."""
        many = getattr(self.oracle, "counts_many", None)
        wanted = [c for c in dict.fromkeys(tuple(c) for c in cliques) if c not in self._cache]
        if many is None or not wanted:
            return
        answers = many(wanted)
        for clique in wanted:
            self._store(clique, answers[clique])

    def counts(self, attributes: Clique) -> np.ndarray:
        attributes = tuple(attributes)
        if attributes not in self._cache:
            self._store(attributes, self.oracle.counts(attributes))
        return self._cache[attributes]

    def _store(self, attributes: Clique, values: object) -> None:
        values = np.asarray(values)
        if values.shape != self.domain.shape(attributes):
            raise MechanismError(
                f"count oracle returned shape {values.shape} for {list(attributes)}, "
                f"expected {self.domain.shape(attributes)}"
            )
        self._cache[attributes] = values


class ArrayOracle:
    """An in-memory :class:`CountOracle` over integer-coded columns (tests, benchmarks, local
    files): one ``np.bincount`` over the raveled cell index per marginal."""

    def __init__(self, domain: Domain, columns: Mapping[str, np.ndarray]) -> None:
        self.domain = domain
        missing = [n for n in domain.names if n not in columns]
        if missing:
            raise ValueError(f"columns missing for attribute(s) {missing}")
        self.columns = {n: np.asarray(columns[n], dtype=np.int64) for n in domain.names}
        rows = {len(c) for c in self.columns.values()}
        if len(rows) != 1:
            raise ValueError(f"columns have different lengths {sorted(rows)}")
        for name, values in self.columns.items():
            if values.size and (values.min() < 0 or values.max() >= domain.size(name)):
                raise ValueError(f"column {name!r} has codes outside 0..{domain.size(name) - 1}")
        self.rows = rows.pop()

    def counts(self, attributes: tuple[str, ...]) -> np.ndarray:
        attributes = tuple(attributes)
        shape = self.domain.shape(attributes)
        if not attributes:
            return np.array(self.rows, dtype=np.int64)
        index = np.ravel_multi_index([self.columns[a] for a in attributes], shape)
        return np.bincount(index, minlength=math.prod(shape)).reshape(shape).astype(np.int64)
