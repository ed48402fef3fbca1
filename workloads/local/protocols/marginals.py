"""Marginals from participants: each reports one marginal cell of her record through a frequency oracle.

The protocol behind a campaign that answers marginals and synthetic rows (issue 33), after the local marginal-release
designs of Cormode, Kulkarni & Srivastava (2018, "Marginal release under local differential privacy", SIGMOD) and
CALM (Zhang, Wang, Li, He & Chen 2018, "CALM: consistent adaptive local marginal for marginal release under local
differential privacy", CCS): participants are split among the **attribute sets** of the spec (by default every
``way``-subset of the attributes), and each reports the cell of her record in one set's marginal through a frequency
oracle (:mod:`workloads.local.randomizers.frequency_oracles`) at the whole epsilon.

* **The split is a public rule**: the device draws the set uniformly at random, independently of her record
  (:meth:`MarginalsSpec.randomize`). The report ``(j, y)`` then has ``P(j, y | x) = P(y | x_j) / G``, so its privacy
  ratio is the oracle's: epsilon-LDP for the whole record (``docs/privacy.md`` 8.10). The number of reports per set
  is a function of those draws only, hence public.
* **Report**: ``{"set": j, "seed": a, "value": y}`` (GRR, OLH, Hadamard; ``seed`` is 0 but for OLH), or
  ``{"set": j, "bits": b}`` for OUE (``b`` has the width of the largest set's marginal; the bits past set ``j``'s
  cells are 0). The server accepts only what the set's oracle can emit (:meth:`MarginalsSpec.check_reports`).
* **What the server sums** (:meth:`MarginalsSpec.aggregate_input`): per set, the oracle's tally (the support count of
  every cell, or Hadamard's histogram of outputs) and the number of reports, one ``counts`` vector (the sets' tallies
  end to end) and one ``reports`` vector: a batch is added as totals (:class:`~workloads.local.protocols.base.
  BatchTotals`), so memory is the domain's, not the batch's.

Participant data: ``{"x": codes}``, the record's code of every attribute in the spec's order (shape ``(d,)``, or
``(k, d)`` for a simulator's batch).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    BatchTotals,
    FieldSchema,
    OneRound,
    ProtocolError,
    ProtocolSpec,
    ReportError,
    ReportSchema,
    RoundState,
    _features,
    check_whole_numbers,
    register_protocol,
)
from workloads.local.randomizers.frequency_oracles import (
    MAX_CELLS,
    ORACLES,
    FrequencyOracle,
    OracleReports,
    make_oracle,
)
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: the most attribute sets one campaign splits its participants among
MAX_SETS = 4096


def all_sets(attributes: int, way: int) -> tuple[tuple[int, ...], ...]:
    """Every ``way``-subset of ``attributes`` attributes, as sorted index tuples."""
    return tuple(itertools.combinations(range(attributes), min(way, attributes)))


#: :func:`planned_sets` admits a pair whose own estimate's expected L1 error is at most this (of at most 2)
PAIR_ERROR = 0.25


def own_error(cells: int, epsilon: float, reports: float, oracle: str = "auto") -> float:
    """The expected L1 error of a ``cells``-cell marginal estimated on its own from ``reports`` reports, its cells
    taken as equally likely (:meth:`~workloads.local.randomizers.frequency_oracles.FrequencyOracle.expected_l1`)."""
    return make_oracle(oracle, cells, epsilon).expected_l1(np.full(cells, 1.0 / cells), reports)


def planned_sets(sizes: tuple[int, ...], epsilon: float, participants: int,
                 oracle: str = "auto") -> tuple[tuple[int, ...], ...]:
    """The default split for ``participants`` at ``epsilon`` (public inputs only): every single attribute, then the
    pairs in increasing number of cells while each added pair's own estimate, at its share of the participants, is
    expected within :data:`PAIR_ERROR` in L1. A pair of many cells measured by few participants is noise that costs
    every other set its share: on adult (47,842 participants, 5 trials, ``benchmarks/local_marginals.py``) every pair
    answered the 2-way marginals at mean L1 0.559 (epsilon 1) and 0.257 (epsilon 4), this split at 0.451 and 0.183
    (docs/campaigns.md, "Marginals from participants")."""
    singles = [(i,) for i in range(len(sizes))]
    pairs = sorted(itertools.combinations(range(len(sizes)), 2), key=lambda p: (sizes[p[0]] * sizes[p[1]], p))
    chosen: list[tuple[int, ...]] = []
    for pair in pairs:
        cells = sizes[pair[0]] * sizes[pair[1]]
        if cells > MAX_CELLS:
            break
        share = participants / (len(singles) + len(chosen) + 1)
        if own_error(cells, epsilon, share, oracle) > PAIR_ERROR:
            break
        chosen.append(pair)
    sets = [s for s in singles if sizes[s[0]] >= 2] + chosen
    return tuple(sets)


@register_protocol
@dataclass(frozen=True)
class MarginalsSpec(OneRound, ProtocolSpec):
    """One round: each participant reports her cell of one attribute set's marginal (module docstring).

    ``oracle``: ``"auto"`` (per set, the one of least variance for its cells and epsilon:
    :func:`~workloads.local.randomizers.frequency_oracles.best_oracle`) or one of
    :data:`~workloads.local.randomizers.frequency_oracles.ORACLES` for every set."""

    protocol: ClassVar[str] = "marginals"
    unlabeled_rows: ClassVar[bool] = True
    attributes: tuple[str, ...]
    sizes: tuple[int, ...]
    sets: tuple[tuple[int, ...], ...]
    epsilon: float
    oracle: str = "auto"
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(str(a) for a in self.attributes))
        if len(self.attributes) < 1 or len(set(self.attributes)) != len(self.attributes):
            raise ProtocolError(f"attributes must be distinct names, at least one, got {list(self.attributes)}")
        try:
            sizes = tuple(check_count(f"size of {a!r}", s, error=ProtocolError)
                          for a, s in zip(self.attributes, self.sizes, strict=True))
        except ValueError as error:
            if isinstance(error, ProtocolError):
                raise
            raise ProtocolError(f"sizes must give one size per attribute ({len(self.attributes)}), got "
                                f"{len(self.sizes)}") from None
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        if self.oracle != "auto" and self.oracle not in ORACLES:
            raise ProtocolError(f"oracle must be 'auto' or one of {list(ORACLES)}, got {self.oracle!r}")
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        sets = tuple(tuple(sorted(int(i) for i in s)) for s in self.sets)
        if not sets or len(sets) > MAX_SETS:
            raise ProtocolError(f"a marginals campaign needs 1 to {MAX_SETS} attribute sets, got {len(sets)}")
        for s in sets:
            if not s or len(set(s)) != len(s) or min(s) < 0 or max(s) >= len(self.attributes):
                raise ProtocolError(f"attribute set {list(s)} must name distinct attributes 0..{len(sizes) - 1}")
            cells = math.prod(sizes[i] for i in s)
            if not 2 <= cells <= MAX_CELLS:
                raise ProtocolError(f"the marginal of {[self.attributes[i] for i in s]} has {cells:,} cells; an "
                                    f"attribute set needs 2 to {MAX_CELLS:,}")
        if len(set(sets)) != len(sets):
            raise ProtocolError("the attribute sets must be distinct")
        object.__setattr__(self, "sets", sets)
        self._check_groups_and_rounds()

    @property
    def dimension(self) -> int:
        return len(self.attributes)

    @property
    def delta(self) -> float:
        return 0.0

    # ---- the sets and their oracles
    def set_names(self, index: int) -> tuple[str, ...]:
        """The attributes of set ``index``."""
        return tuple(self.attributes[i] for i in self.sets[index])

    def set_shape(self, index: int) -> tuple[int, ...]:
        return tuple(self.sizes[i] for i in self.sets[index])

    @cached_property
    def oracles(self) -> tuple[FrequencyOracle, ...]:
        """Per set, its frequency oracle over the set's cells."""
        try:
            return tuple(make_oracle(self.oracle, math.prod(self.set_shape(j)), self.epsilon, self.set_shape(j))
                         for j in range(len(self.sets)))
        except ParameterError as error:
            raise ProtocolError(str(error)) from None

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Where each set's tally starts in the ``counts`` vector (the last entry: its length)."""
        return tuple(itertools.accumulate((o.tally_width for o in self.oracles), initial=0))

    @property
    def _unary(self) -> bool:
        return self.oracle == "oue"

    # ---- schemas
    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        """Whole numbers are checked by :meth:`check_reports`; the ranges here are their outer bounds."""
        self._check_state_round(round_index, state)
        sets = FieldSchema("set", (), -0.5, len(self.sets) - 0.5)
        if self._unary:
            width = max(o.cells for o in self.oracles)
            return ReportSchema((sets, FieldSchema("bits", (width,), 0.0, 1.0)))
        seeds = max(o.seed_limit for o in self.oracles)
        values = max(o.value_limit for o in self.oracles)
        return ReportSchema((sets, FieldSchema("seed", (), -0.5, seeds - 0.5),
                             FieldSchema("value", (), -0.5, values - 0.5)))

    def aggregate_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        return ReportSchema((FieldSchema("counts", (self.offsets[-1],), 0.0, 1.0),
                             FieldSchema("reports", (len(self.sets),), 0.0, 1.0)))

    def _split(self, batch: Mapping[str, np.ndarray]) -> list[tuple[int, np.ndarray, OracleReports]]:
        """Per set with reports in the batch: its index, the reports' positions in the batch and the reports (OUE's
        bits cut to the set's cells: :meth:`check_reports` refuses a bit set past them)."""
        chosen = np.asarray(batch["set"]).astype(np.int64)
        out = []
        for j in np.unique(chosen):
            where = np.flatnonzero(chosen == j)
            if self._unary:
                bits = np.asarray(batch["bits"], dtype=float)[where, :self.oracles[int(j)].cells]
                reports = OracleReports(np.zeros(where.size), np.zeros(where.size), bits)
            else:
                reports = OracleReports(np.asarray(batch["value"], dtype=float)[where],
                                        np.asarray(batch["seed"], dtype=float)[where])
            out.append((int(j), where, reports))
        return out

    def check_reports(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray]) -> None:
        """The set is a whole number; each report is one its set's oracle can emit (OUE: no bit set past the set's
        cells); refused at the first that is not."""
        self._check_state_round(round_index, state)
        check_whole_numbers(batch, "set", "the whole-number index of an attribute set")
        for j, where, reports in self._split(batch):
            oracle = self.oracles[j]
            if self._unary:
                bad = np.any(np.asarray(batch["bits"], dtype=float)[where, oracle.cells:] != 0, axis=1)
                if bad.any():
                    index = int(where[np.argmax(bad)])
                    raise ReportError(f"report {index}: set {j} has {oracle.cells} cells, but a bit past them is set",
                                      "bits", index)
            refused = oracle.first_refused(reports)
            if refused is not None:
                index, field, why = refused
                raise ReportError(f"report {int(where[index])}: set {j}: {why}", field, int(where[index]))

    def aggregate_input(self, round_index: int, state: RoundState, batch: Mapping[str, np.ndarray],
                        public_rows: np.ndarray | None = None) -> BatchTotals:
        """The batch's totals: every set's tally added into its slice of ``counts``, and the reports per set."""
        self._check_state_round(round_index, state)
        counts = np.zeros(self.offsets[-1])
        reports = np.zeros(len(self.sets))
        for j, where, chosen in self._split(batch):
            counts[self.offsets[j]:self.offsets[j + 1]] += self.oracles[j].tally(chosen)
            reports[j] += where.size
        count = int(np.asarray(batch["set"]).shape[0])
        sums = {"counts": counts, "reports": reports}
        return BatchTotals(count, sums, dict(sums))  # indicators: squares are the sums

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Nothing: a code outside an attribute's domain is refused on the device (:meth:`randomize`), never
        clipped."""
        return ()

    # ---- the device
    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        """Each participant's report: a uniform set (independent of her record), then her cell of its marginal
        through its oracle."""
        self._check_state_round(round_index, state)
        x = _features(data, self.dimension)
        single = x.ndim == 1
        rows = x.reshape(-1, self.dimension)
        sizes = np.asarray(self.sizes)
        if np.any((rows != np.floor(rows)) | (rows < 0) | (rows >= sizes)):
            column = int(np.argmax(np.any((rows != np.floor(rows)) | (rows < 0) | (rows >= sizes), axis=0)))
            raise ProtocolError(f"participant data 'x': attribute {self.attributes[column]!r} takes the codes "
                                f"0..{self.sizes[column] - 1}")
        generator = generator_or_device(rng)
        codes = rows.astype(np.int64)
        chosen = generator.integers(0, len(self.sets), size=codes.shape[0])
        seed, value = np.zeros(codes.shape[0]), np.zeros(codes.shape[0])
        bits = np.zeros((codes.shape[0], max(o.cells for o in self.oracles))) if self._unary else None
        for j in np.unique(chosen):
            where = np.flatnonzero(chosen == j)
            cells = np.ravel_multi_index(tuple(codes[where][:, i] for i in self.sets[j]), self.set_shape(int(j)))
            oracle = self.oracles[int(j)]
            reports = oracle.randomize(cells, generator)
            if bits is not None:
                bits[where, :oracle.cells] = reports.bits
            else:
                seed[where], value[where] = reports.seed, reports.value
        out = {"set": chosen.astype(float)}
        out.update({"bits": bits} if bits is not None else {"seed": seed, "value": value})
        if single:
            out = {name: array[0] for name, array in out.items()}
        return out
