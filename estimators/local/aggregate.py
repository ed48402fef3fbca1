"""Running sums of one round's local reports: what the server keeps instead of re-reading every report.

Every estimator of this package is a function of per-field sums (and sums of squares) of the reports and their
count, so a :class:`ReportAggregate` is enough: the server validates and adds each batch once (:meth:`add`),
aggregates of shards merge exactly as sums do (:meth:`merge`), and the state serialises to JSON
(:meth:`to_json`, :meth:`to_bytes`; floats are written with ``repr`` and read back bit for bit).

Floating-point sums depend on the order of addition; two aggregates of the same reports in different batches agree
to rounding (relative ~1e-15 per addition), not bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from estimators.base import EstimatorError
from workloads.local.protocols import ProtocolSpec, ReportError, ReportSchema, RoundState
from workloads.local.protocols.base import BatchTotals

_FORMAT = "marginalia.local.aggregate/1"


class ReportAggregate:
    """Count, per-field sums and per-field sums of squares of the accepted reports of one round of one protocol."""

    def __init__(self, schema: ReportSchema, protocol: str, round_index: int = 0) -> None:
        if not isinstance(schema, ReportSchema):
            raise EstimatorError(f"schema must be a ReportSchema, got {type(schema).__name__}")
        self.schema = schema
        self.protocol = str(protocol)
        self.round_index = int(round_index)
        self.count = 0
        self.sums = {f.name: np.zeros(f.shape) for f in schema.fields}
        self.squares = {f.name: np.zeros(f.shape) for f in schema.fields}

    @classmethod
    def for_round(cls, spec: ProtocolSpec, round_index: int, state: RoundState) -> ReportAggregate:
        """An empty aggregate for round ``round_index`` of ``spec`` with public state ``state`` (its fields are the
        spec's :meth:`~workloads.local.protocols.ProtocolSpec.aggregate_schema`)."""
        return cls(spec.aggregate_schema(round_index, state), spec.protocol, round_index)

    def add(self, batch: Mapping[str, Any] | BatchTotals) -> ReportAggregate:
        """Validate a columnar batch (refused whole: :class:`~workloads.local.protocols.ReportError`) and add it; or
        add a batch's :class:`~workloads.local.protocols.base.BatchTotals` (checked by :meth:`_checked_totals`)."""
        if isinstance(batch, BatchTotals):
            count, sums, squares = self._checked_totals(batch)
        else:
            arrays = self.schema.validate(batch)
            sums = {name: array.sum(axis=0) for name, array in arrays.items()}
            squares = {name: np.square(array).sum(axis=0) for name, array in arrays.items()}
            count = next(iter(arrays.values())).shape[0] if arrays else 0
        for name in self.sums:
            self.sums[name] = self.sums[name] + sums[name]
            self.squares[name] = self.squares[name] + squares[name]
        self.count += count
        return self

    def _checked_totals(self, totals: BatchTotals) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The totals' count, sums and squares, refused (:class:`~workloads.local.protocols.ReportError`) unless
        every field of the schema is there with its shape, finite, and within ``count`` times its range (squares
        within ``count`` times the largest square)."""
        count = totals.count
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise ReportError(f"a batch's totals need a report count >= 0, got {count!r}")
        out: list[dict[str, np.ndarray]] = [{}, {}]
        for f in self.schema.fields:
            largest = max(f.low * f.low, f.high * f.high)
            bounds = ((count * f.low, count * f.high), (0.0, count * largest))
            for part, given, (low, high) in zip(out, (totals.sums, totals.squares), bounds, strict=True):
                if f.name not in given:
                    raise ReportError(f"the batch's totals lack field {f.name!r}", f.name)
                value = np.asarray(given[f.name], dtype=float)
                if value.shape != f.shape or not np.all(np.isfinite(value)) or np.any(value < low) or np.any(
                        value > high):
                    raise ReportError(f"the batch's totals of field {f.name!r} must be finite with shape {f.shape} "
                                      f"and within {count} reports' range", f.name)
                part[f.name] = value
        return int(count), out[0], out[1]

    def merge(self, other: ReportAggregate) -> ReportAggregate:
        """A new aggregate holding both (same protocol, round and schema required)."""
        if not isinstance(other, ReportAggregate):
            raise EstimatorError(f"can only merge a ReportAggregate, got {type(other).__name__}")
        if (other.protocol, other.round_index, other.schema) != (self.protocol, self.round_index, self.schema):
            raise EstimatorError(
                f"cannot merge an aggregate of {other.protocol!r} round {other.round_index} into one of "
                f"{self.protocol!r} round {self.round_index} (or their report schemas differ)")
        merged = ReportAggregate(self.schema, self.protocol, self.round_index)
        merged.count = self.count + other.count
        merged.sums = {name: self.sums[name] + other.sums[name] for name in self.sums}
        merged.squares = {name: self.squares[name] + other.squares[name] for name in self.squares}
        return merged

    def mean(self, name: str) -> np.ndarray:
        """The average report of field ``name``."""
        self._require_reports()
        return self.sums[self._field(name)] / self.count

    def second_moment(self, name: str) -> np.ndarray:
        """The average of the squared reports of field ``name``."""
        self._require_reports()
        return self.squares[self._field(name)] / self.count

    def _field(self, name: str) -> str:
        if name not in self.sums:
            raise EstimatorError(f"the aggregate has no field {name!r} (fields: {list(self.sums)})")
        return name

    def round0_count(self, protocol: str) -> int:
        """The number of reports, after checking that this is round 0 of a ``protocol`` campaign holding at least one
        (what a one-round estimator's ``fit`` asks of its aggregate)."""
        if (self.round_index, self.protocol) != (0, protocol):
            raise EstimatorError(f"aggregate must hold round 0 of a {protocol!r} campaign, got {self!r}")
        if self.count == 0:
            raise EstimatorError("the aggregate holds no reports yet")
        return self.count

    def _require_reports(self) -> None:
        if self.count == 0:
            raise EstimatorError(f"the aggregate of {self.protocol!r} round {self.round_index} holds no reports yet")

    # ---------------------------------------------------------------------------------------------- serialisation
    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "protocol": self.protocol,
            "round_index": self.round_index,
            "schema": self.schema.to_json(),
            "count": self.count,
            "sums": {name: np.asarray(value).tolist() for name, value in self.sums.items()},
            "squares": {name: np.asarray(value).tolist() for name, value in self.squares.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReportAggregate:
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise EstimatorError(f"not a serialised report aggregate (expected format {_FORMAT!r})")
        aggregate = cls(ReportSchema.from_json(data["schema"]), data["protocol"], data["round_index"])
        count = data["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise EstimatorError(f"count must be a non-negative integer, got {count!r}")
        aggregate.count = count
        for part in ("sums", "squares"):
            target = getattr(aggregate, part)
            if set(data[part]) != set(target):
                raise EstimatorError(f"{part} must have the fields {sorted(target)}, got {sorted(data[part])}")
            for f in aggregate.schema.fields:
                value = np.asarray(data[part][f.name], dtype=float)
                if value.shape != f.shape or not np.all(np.isfinite(value)):
                    raise EstimatorError(f"{part}[{f.name!r}] must be finite with shape {f.shape}")
                target[f.name] = value
        return aggregate

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, payload: bytes) -> ReportAggregate:
        try:
            data = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise EstimatorError(f"not a serialised report aggregate: {error}") from None
        return cls.from_json(data)

    def __repr__(self) -> str:
        return f"ReportAggregate(protocol={self.protocol!r}, round_index={self.round_index}, count={self.count})"
