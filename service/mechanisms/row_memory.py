"""The memory guard of the mechanisms that read rows: objective perturbation, and DP-IHT on an engine that cannot sum
its clipped gradients in one scan (SQLite; elsewhere the engine sums them and DP-IHT holds a few floats per attribute
code, with no cap: :class:`service.mechanisms.dp_iht.EngineGradients`).

They read the table as its distinct rows with their counts (:meth:`service.data.oracle.TableCountOracle.distinct_rows`),
so their working set grows with the number ``U`` of distinct rows, never with the row count ``n``. ``U`` is private,
but it has two public bounds: the product of the domain sizes of the attributes read (the tables are coded), and a
public cap (:data:`MAX_DISTINCT_ROWS_ENV`, default :data:`DEFAULT_MAX_DISTINCT_ROWS`). :func:`check_memory` multiplies
the smaller of the two by a public per-row cost of the design (:func:`bytes_per_distinct_row`) and refuses, with a
:class:`~service.mechanisms.base.MechanismError` raised *before any noise is drawn* (the release engine then marks
the release ``failed_before_noise`` and refunds its charge), when that exceeds the memory budget
(:data:`MEMORY_BUDGET_ENV`, default :data:`DEFAULT_MEMORY_BUDGET_MB`). Everything it reads is public (the domain,
the design, the settings), so the refusal reveals nothing about the rows.

The read then enforces the cap: on a table with more distinct rows than the cap (only possible when the product of
the domain sizes exceeds it) it stops as soon as the cap is passed, still before any noise, so memory stays within the
estimate. That refusal does depend on the data (whether ``U`` exceeds the cap); docs/mechanisms.md says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from service.mechanisms.base import MechanismError
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

if TYPE_CHECKING:
    from service.data.oracle import TableCountOracle

#: Environment variable: the memory budget, in MB, of one row-reading release's working set.
MEMORY_BUDGET_ENV = "MARGINALIA_MECHANISM_MEMORY_MB"
DEFAULT_MEMORY_BUDGET_MB = 4096
#: Environment variable: the public cap on the distinct rows a row-reading release holds.
MAX_DISTINCT_ROWS_ENV = "MARGINALIA_MAX_DISTINCT_ROWS"
DEFAULT_MAX_DISTINCT_ROWS = 100_000
#: What the process holds besides the rows (interpreter, numpy/scipy, the database driver), in bytes.
BASE_BYTES = 200 * 2**20
#: Bytes per Python object the decimal certificate keeps per stored non-zero entry (a tuple, its list slot, an int)
#: and per distinct row (its count and label as ``Decimal``, the margin being summed).
_PYTHON_ENTRY_BYTES = 120
_PYTHON_ROW_BYTES = 400


def _setting(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MechanismError(f"{name} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise MechanismError(f"{name} must be a positive integer, got {raw!r}")
    return value


def memory_budget_bytes() -> int:
    """The budget of :data:`MEMORY_BUDGET_ENV`, in bytes."""
    return _setting(MEMORY_BUDGET_ENV, DEFAULT_MEMORY_BUDGET_MB) * 2**20


def max_distinct_rows() -> int:
    """The public cap of :data:`MAX_DISTINCT_ROWS_ENV`."""
    return _setting(MAX_DISTINCT_ROWS_ENV, DEFAULT_MAX_DISTINCT_ROWS)


def distinct_row_bound(domain: Domain, attributes: Sequence[str]) -> int:
    """The public bound on the distinct rows over ``attributes``: ``min(prod of domain sizes, the cap)``."""
    return min(domain.cells(attributes), max_distinct_rows())


def nonzeros_per_row(design: DesignEncoding) -> int:
    """A public bound on the non-zero entries of an encoded row (the intercept included): per attribute, the most
    non-zeros in an encoded level (a column of its ``width x levels`` matrix; 1 for one-hot)."""
    return int(design.intercept) + sum(int(np.max(np.count_nonzero(enc.matrix, axis=0), initial=0))
                                       for enc in design.feature_encodings)


def bytes_per_distinct_row(design: DesignEncoding, *, certified: bool) -> int:
    """The working set per distinct row: the codes and counts read (``k + 1`` int64, twice while they are split),
    about eight float64 copies of the encoded row (the design, its intercept column, the solver's weighted copy,
    the certificate's grouped copies) and, for the decimal certificate of objective perturbation
    (:mod:`estimators.central.certified`), its Python objects per non-zero entry and per row."""
    k = len(design.features) + 1
    d = design.n_features + int(design.intercept) + 1
    per_row = 16 * (k + 1) + 8 * 8 * d
    if certified:
        per_row += _PYTHON_ENTRY_BYTES * nonzeros_per_row(design) + _PYTHON_ROW_BYTES
    return per_row


def estimate_bytes(design: DesignEncoding, domain: Domain, *, certified: bool) -> int:
    """The public estimate of a row-reading release's memory: ``BASE_BYTES`` plus the distinct-row bound times the
    cost per distinct row."""
    attributes = (*design.features, design.target)
    return BASE_BYTES + distinct_row_bound(domain, attributes) * bytes_per_distinct_row(design, certified=certified)


def check_memory(mechanism: str, design: DesignEncoding, domain: Domain, *, certified: bool) -> int:
    """Refuse (before any noise) when :func:`estimate_bytes` exceeds the budget; else return the distinct-row cap the
    read must enforce (:func:`distinct_row_bound`)."""
    estimate, budget = estimate_bytes(design, domain, certified=certified), memory_budget_bytes()
    if estimate > budget:
        raise MechanismError(
            f"{mechanism}: refused before any noise: its memory estimate from public quantities, "
            f"{estimate / 2**20:.0f} MB (up to {distinct_row_bound(domain, (*design.features, design.target))} "
            f"distinct rows of {len(design.features) + 1} attributes), exceeds the budget of {budget / 2**20:.0f} MB "
            f"({MEMORY_BUDGET_ENV}); use fewer or coarser attributes, or lower {MAX_DISTINCT_ROWS_ENV}")
    return distinct_row_bound(domain, (*design.features, design.target))


def weighted_design(oracle: TableCountOracle, design: DesignEncoding, mechanism: str, *, certified: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, counts)``: the encoded distinct rows of the design's attributes and how many rows each stands for,
    after :func:`check_memory` (which may refuse). Call it before drawing any noise: every refusal here is then
    ``failed_before_noise`` (refunded)."""
    cap = check_memory(mechanism, design, oracle.domain, certified=certified)
    attributes = (*design.features, design.target)
    try:
        codes, counts = oracle.distinct_rows(attributes, max_rows=cap)
    except ValueError:  # more distinct rows than the public cap: stop before any noise
        raise MechanismError(f"{mechanism}: refused before any noise: the table has more than {cap} distinct rows "
                             f"over its attributes ({MAX_DISTINCT_ROWS_ENV})") from None
    X, y = design.encode({name: codes[:, i] for i, name in enumerate(attributes)})
    return X, y, counts
