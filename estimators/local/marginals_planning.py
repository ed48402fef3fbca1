"""Planning a ``marginals`` campaign: the expected error of each attribute set's marginal before any report, and the
participants a target needs.

Two figures, both from public information only (the spec, and a public table if the campaign has one):

* **closed form, each set on its own** (:meth:`MarginalsErrorModel.raw_errors`): set ``j`` receives ``n / G`` of the
  ``n`` reports (the uniform split), and its unbiased estimate's expected L1 error is
  ``sum_v E|f_v_hat - f_v| = sqrt(2 / pi) sum_v sqrt(Var f_v)`` (the central limit of a mean of independent reports;
  ``Var f_v`` from :meth:`~workloads.local.randomizers.frequency_oracles.FrequencyOracle.cell_variance` at the public
  table's frequencies, or at ``1/k`` without one). It is what the first baseline of ``benchmarks/local_marginals.py``
  answers, and it falls as ``1 / sqrt(n)``.
* **the campaign's model, simulated** (:meth:`MarginalsErrorModel.model_errors`): what a steward reads is the model's
  answer, which pools every set and is non-negative, far below the raw figure when a set has many cells. No closed
  form gives it, so the plan runs the protocol on the public table's rows resampled to ``n`` participants (or, without
  a public table, on rows drawn uniformly from the domain: a rough figure, stated as such), through the same oracles
  and the same fit (:func:`estimators.local.marginals.fit_marginal_model`), and measures each set's normalised L1
  error against the public table's own marginals. The draws use a fixed public stream (common random numbers): the
  plan is a deterministic function of public data, with nothing a caller chooses.

The inverse (:meth:`MarginalsErrorModel.participants_for`): the model's mean error is simulated at ``n_0`` and
``4 n_0`` and fitted by ``e(n) = a + b / sqrt(n)`` (a structural floor ``a``, the model's bias, plus noise); the
smallest ``n`` with ``e(n) <= target`` follows, or none when the target is below the floor.
"""

from __future__ import annotations

import collections
import hashlib
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.marginals import fit_marginal_model
from workloads.local.protocols import RoundState
from workloads.local.protocols.marginals import MarginalsSpec

#: the fixed stream of a plan's simulations (public; common random numbers)
_STREAM = 20_261_207
#: the most participants a plan simulates (beyond it the model's error is extrapolated by ``a + b / sqrt(n)``)
MAX_SIMULATED = 2_000_000
#: what the plan's errors are
METRIC = ("the L1 distance between a set's marginal, normalised to proportions, and the true proportions (0 to 2); "
          "the mean over the campaign's attribute sets")


@dataclass(frozen=True)
class MarginalsErrorModel:
    """What ``campaign plan`` predicts a marginals campaign from (module docstring). ``rows``: the public table's codes
    of the campaign's attributes, or ``None``."""

    spec: MarginalsSpec
    rows: np.ndarray | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    _cache: dict[int, dict[str, float]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def basis(self) -> str:
        if self.rows is None:
            return ("a simulation of the campaign on rows drawn uniformly from the domain (no public table: a rough "
                    "figure; real data with structure can answer better or worse)")
        return (f"a simulation of the campaign on the public table's {self.rows.shape[0]:,} rows resampled to the "
                "participants, through the campaign's oracles and model, measured against the public table's marginals")

    def set_label(self, index: int) -> str:
        return " x ".join(self.spec.set_names(index))

    def _frequencies(self, index: int) -> np.ndarray:
        shape = self.spec.set_shape(index)
        if self.rows is None:
            return np.full(shape, 1.0 / math.prod(shape))
        columns = self.rows[:, list(self.spec.sets[index])].astype(np.int64)
        cells = np.ravel_multi_index(tuple(columns.T), shape)
        return (np.bincount(cells, minlength=math.prod(shape)) / self.rows.shape[0]).reshape(shape)

    def raw_errors(self, participants: int) -> dict[str, float]:
        """Per set, the expected L1 error of its own unbiased estimate at ``participants`` (closed form)."""
        share = participants / len(self.spec.sets)
        return {self.set_label(j): oracle.expected_l1(self._frequencies(j).ravel(), share)
                for j, oracle in enumerate(self.spec.oracles)}

    def _rows(self, participants: int, rng: np.random.Generator) -> np.ndarray:
        if self.rows is None:
            return np.stack([rng.integers(0, size, size=participants) for size in self.spec.sizes], axis=1)
        return self.rows[rng.integers(0, self.rows.shape[0], size=participants)]

    def model_errors(self, participants: int) -> dict[str, float]:
        """Per set, the model's simulated L1 error at ``participants`` (module docstring); cached per count."""
        n = min(int(participants), MAX_SIMULATED)
        if n in self._cache:
            return self._cache[n]
        rng = np.random.default_rng(_STREAM)
        rows = self._rows(n, rng)
        state = RoundState(0, {})
        reports = self.spec.randomize(0, state, {"x": rows}, rng)
        aggregate = ReportAggregate.for_round(self.spec, 0, state).add(
            self.spec.aggregate_input(0, state, self.spec.report_schema(0, state).validate(reports)))
        model, _ = fit_marginal_model(self.spec, aggregate)
        out = {}
        for j in range(len(self.spec.sets)):
            estimate = model.marginal(self.spec.set_names(j)) / n
            out[self.set_label(j)] = float(np.abs(estimate - self._frequencies(j)).sum())
        self._cache[n] = out
        return out

    def mean_model_error(self, participants: int) -> float:
        """The model's mean L1 over the sets at ``participants``: simulated up to :data:`MAX_SIMULATED`, beyond it
        extrapolated by ``a + b / sqrt(n)`` (:meth:`_curve`)."""
        errors = self.model_errors(participants)
        mean = float(np.mean(list(errors.values())))
        if participants <= MAX_SIMULATED:
            return mean
        floor, slope = self._curve(MAX_SIMULATED // 4)
        return floor + slope / math.sqrt(participants)

    def _curve(self, start: int) -> tuple[float, float]:
        """``(a, b)`` of ``e(n) = a + b / sqrt(n)`` through the simulated means at ``start`` and ``4 start``."""
        low = float(np.mean(list(self.model_errors(start).values())))
        high = float(np.mean(list(self.model_errors(4 * start).values())))
        slope = max(2.0 * math.sqrt(start) * (low - high), 0.0)  # e(n) - e(4n) = b / (2 sqrt(n))
        return max(high - slope / (2.0 * math.sqrt(start)), 0.0), slope

    @staticmethod
    def curve_start(start: int) -> int:
        """The first of the two simulated counts the inverse fits its curve through (the second is four times it):
        ``start`` within ``[100, MAX_SIMULATED / 4]``."""
        return max(min(int(start), MAX_SIMULATED // 4), 100)

    def participants_for(self, target: float, start: int) -> int | None:
        """The smallest ``n`` whose predicted mean model error is at most ``target`` (module docstring), or None;
        the curve goes through the simulations at :meth:`curve_start` of ``start`` and four times it."""
        if not (math.isfinite(target) and target > 0):
            raise EstimatorError(f"target_error must be a positive number, got {target!r}")
        start = self.curve_start(start)
        floor, slope = self._curve(start)
        if target <= floor:
            return None
        return max(1, math.ceil((slope / (target - floor)) ** 2)) if slope > 0 else start


#: the last few error models by (spec, public rows): their simulations are seconds, and a campaign's page asks again
_KEPT: collections.OrderedDict[tuple[object, ...], MarginalsErrorModel] = collections.OrderedDict()
_KEEP = 8
_KEPT_LOCK = threading.Lock()


def marginals_error_model(spec: MarginalsSpec, rows: object = None, labels: object = None) -> MarginalsErrorModel:  # noqa: ARG001
    """The planner of a ``marginals`` campaign (module docstring); ``rows``: the public table's codes of its
    attributes, if it has one (``labels`` is not used: the protocol has no target). The same spec and rows give the
    same model, kept for the last few (its simulations are deterministic, so a cached figure is the figure)."""
    codes = None if rows is None else np.asarray(rows, dtype=float)
    key = (spec, None if codes is None else (codes.shape, hashlib.sha256(codes.tobytes()).hexdigest()))
    with _KEPT_LOCK:
        found = _KEPT.get(key)
        if found is not None:
            _KEPT.move_to_end(key)
            return found
    model = _error_model(spec, codes)  # checks the rows; outside the lock (its simulations run later, on demand)
    with _KEPT_LOCK:
        _KEPT[key] = model
        while len(_KEPT) > _KEEP:
            _KEPT.popitem(last=False)
    return model


def _error_model(spec: MarginalsSpec, rows: np.ndarray | None) -> MarginalsErrorModel:
    if rows is None:
        return MarginalsErrorModel(spec, None, ("no public table: the domain's cells are taken as equally likely",))
    codes = np.asarray(rows, dtype=float)
    if codes.ndim != 2 or codes.shape[1] != len(spec.attributes) or codes.shape[0] == 0:
        raise EstimatorError(f"planning a marginals campaign: the public rows must be ({len(spec.attributes)} "
                             f"attributes), got shape {codes.shape}")
    bad = (codes != np.floor(codes)) | (codes < 0) | (codes >= np.asarray(spec.sizes))
    if bad.any():
        column = spec.attributes[int(np.argmax(bad.any(axis=0)))]
        raise EstimatorError(f"planning a marginals campaign: the public table's column {column!r} holds values "
                             "that are not its codes")
    return MarginalsErrorModel(spec, codes.astype(np.int64),
                               ("the participants are distributed like the public table's rows",))
