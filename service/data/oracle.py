"""The count oracle: exact marginals of a stored dataset, counted by the data engine its table lives in.

It is handed to a mechanism by the release engine (:func:`service.releases.engine.run_release`) and lives
for one release. It is engine-agnostic: the counting itself is a :class:`service.data.engines.base.TableEngine`
(SQL, DuckDB), and the oracle adds the caching, the covering plan and the summation that every engine shares.
Marginals come back as counts (``GROUP BY``). The mechanisms that genuinely need row-level data
read :meth:`TableCountOracle.distinct_rows`, the distinct rows with their counts (also a ``GROUP BY``: memory bounded
by the distinct rows, not by the table's length); nothing reads every row's codes into memory any more. DP-IHT asks
:meth:`TableCountOracle.row_weight_sums` instead (a :class:`GradientQuery`), one float per attribute code per
iteration, where the engine sums them in one scan (:attr:`TableCountOracle.gradient_sums_in_one_scan`), with the
table's :meth:`~TableCountOracle.row_count`. A mechanism asks the oracle only, never its engine (``table``), so it
runs the same over every engine (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import closing

import numpy as np
from sqlalchemy import Engine

from service.data.datasets import StoredDataset
from service.data.engines.base import TableEngine, codes_outside_domain
from service.data.engines.queries import GradientQuery
from service.data.engines.registry import open_table
from workloads.domain import Domain

__all__ = ["GradientQuery", "TableCountOracle", "marginalize", "plan_cover"]

#: Largest marginal, in cells, that :meth:`TableCountOracle.counts_many` counts in SQL so as to answer several
#: requested marginals from it by summation (chosen by ``benchmarks/counting.py``, see benchmarks/README.md).
COVER_MAX_CELLS = 1 << 18
#: At most this many cells (int64 each) of counted groups are held at once by :meth:`TableCountOracle.counts_many`.
BATCH_CELLS = 1 << 23


def plan_cover(
    requests: Iterable[Sequence[str]], domain: Domain, max_cells: int = COVER_MAX_CELLS
) -> list[tuple[str, ...]]:
    """Attribute sets ("groups", each in domain order) such that every request is a subset of one group and
    every group has at most ``max_cells`` cells, unless it is a single request that alone has more.

    Counting a group and summing out attributes gives each of its sub-marginals exactly, so one ``GROUP BY``
    (one scan and one sort of the table) answers many requests: all 45 pairs of nist_taxi take 10 groups
    instead of 45. Greedy: seed a group with the uncovered request of most cells (the hardest to place),
    then add the attribute that completes the most uncovered requests (fewest cells on ties) while the
    group stays within ``max_cells``."""
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"max_cells must be a positive integer, got {max_cells!r}")
    order = {name: i for i, name in enumerate(domain.names)}
    todo: set[frozenset[str]] = set()
    for request in requests:
        _check_attributes(request, domain)
        todo.add(frozenset(request))
    by_attribute: dict[str, list[frozenset[str]]] = {name: [] for name in domain.names}
    for request in todo:
        for name in request:
            by_attribute[name].append(request)

    def rank(request: frozenset[str]) -> tuple[int, list[int]]:
        return domain.cells(request), sorted((order[a] for a in request), reverse=True)

    groups: list[tuple[str, ...]] = []
    while todo:
        group = set(max(todo, key=rank))
        cells = domain.cells(group)
        while True:
            best: tuple[int, int, str] | None = None
            for name in domain.names:
                grown = cells * domain.size(name)
                if name in group or grown > max_cells:
                    continue
                gain = sum(1 for r in by_attribute[name] if r in todo and r <= group | {name})
                if gain and (best is None or (gain, -grown) > (best[0], -best[1])):
                    best = (gain, grown, name)
            if best is None:
                break
            group.add(best[2])
            cells = best[1]
        todo = {r for r in todo if not r <= group}
        groups.append(tuple(sorted(group, key=order.__getitem__)))
    return groups


def marginalize(counts: np.ndarray, group: Sequence[str], attributes: Sequence[str]) -> np.ndarray:
    """Counts over ``attributes`` (axes in that order) from ``counts`` over ``group``, a superset: sum out the
    other axes, then put the remaining ones in the order asked."""
    group = list(group)
    missing = [a for a in attributes if a not in group]
    if missing:
        raise ValueError(f"attributes {missing} are not in the counted group {group}")
    summed = counts.sum(axis=tuple(i for i, a in enumerate(group) if a not in attributes), dtype=np.int64)
    kept = [a for a in group if a in attributes]
    return np.transpose(summed, [kept.index(a) for a in attributes])


def _batches(groups: Sequence[tuple[str, ...]], domain: Domain) -> list[list[tuple[str, ...]]]:
    """Consecutive runs of ``groups`` of at most :data:`BATCH_CELLS` cells together (a larger group alone)."""
    batches: list[list[tuple[str, ...]]] = []
    cells = 0
    for group in groups:
        size = domain.cells(group)
        if not batches or cells + size > BATCH_CELLS:
            batches.append([])
            cells = 0
        batches[-1].append(group)
        cells += size
    return batches


def _check_attributes(attributes: Sequence[str], domain: Domain) -> None:
    if isinstance(attributes, str):
        raise ValueError(f"attributes must be a sequence of attribute names, got the string {attributes!r}")
    domain.shape(attributes)  # DomainError (a ValueError) names an unknown attribute
    if len(set(attributes)) != len(attributes):
        raise ValueError(f"attributes {list(attributes)} repeat an attribute")


class TableCountOracle:
    """:class:`service.mechanisms.base.CountOracle` over a dataset's table, wherever it lives.

    Marginals are counted by the dataset's engine (``table``, default :func:`open_table`; closed by
    :meth:`close` or at the end of a ``with`` block). Answers are
    cached for the oracle's lifetime (one release), since AIM asks for the same candidates round after
    round, and a later request that is a subset of a cached answer is summed from it without SQL.
    :meth:`counts_many` counts a batch of requests through a few larger marginals (:func:`plan_cover`)."""

    def __init__(self, engine: Engine, dataset: StoredDataset, table: TableEngine | None = None) -> None:
        self.engine = engine
        self.dataset = dataset
        self.domain: Domain = dataset.domain
        self.table: TableEngine = open_table(engine, dataset) if table is None else table
        self._cache: dict[tuple[str, ...], np.ndarray] = {}
        #: marginals counted in SQL so far (a group of :meth:`counts_many` is one)
        self.queries = 0
        self.rows_read = 0
        #: distinct rows read by :meth:`distinct_rows` (each stands for ``count`` rows of ``rows_read``)
        self.distinct_rows_read = 0
        #: scans of :meth:`row_weight_sums` (nothing but one float per attribute code comes back from each)
        self.gradient_scans = 0

    def close(self) -> None:
        self.table.close()

    def __enter__(self) -> TableCountOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counts(self, attributes: tuple[str, ...]) -> np.ndarray:
        """Counts over ``attributes`` with shape ``domain.shape(attributes)``, axes in the order given."""
        attributes = tuple(attributes)
        return self.counts_many([attributes], max_cells=1)[attributes]

    def counts_many(
        self, requests: Iterable[Sequence[str]], max_cells: int = COVER_MAX_CELLS
    ) -> dict[tuple[str, ...], np.ndarray]:
        """Counts of every request (a sequence of attribute names), keyed by the request as a tuple.

        Requests not answerable from the cache are covered by :func:`plan_cover` groups of at most
        ``max_cells`` cells, counted on one connection (on PostgreSQL, one ``GROUPING SETS`` scan per batch of
        at most :data:`BATCH_CELLS` cells), and each request is summed out of its group: exact integer
        arithmetic on aggregated counts, no rows leave the database. Groups are dropped once summed, so memory
        stays at one batch plus the answers. ``max_cells=1`` counts each request on its own."""
        wanted = list(dict.fromkeys(tuple(r) for r in requests))
        for request in wanted:
            _check_attributes(request, self.domain)
        missing = [r for r in wanted if self._answer(r) is None]
        if missing:
            groups = plan_cover(missing, self.domain, max_cells)
            for batch in _batches(groups, self.domain):
                counted = self.table.count_marginals([(g, self.domain.shape(g)) for g in batch])
                self.queries += len(batch)
                for group, counts in zip(batch, counted, strict=True):
                    for request in missing:
                        if request not in self._cache and set(request) <= set(group):
                            self._cache[request] = marginalize(counts, group, request)
        answers = {}
        for request in wanted:
            answer = self._answer(request)
            if answer is None:  # cannot happen: every request is inside a group counted above
                raise RuntimeError(f"no counted marginal covers {list(request)}")
            answers[request] = answer.copy()
        return answers

    def _answer(self, attributes: tuple[str, ...]) -> np.ndarray | None:
        """The cached counts over ``attributes``, summed from the smallest cached superset if need be."""
        cached = self._cache.get(attributes)
        if cached is not None:
            return cached
        wanted = set(attributes)
        supersets = [a for a in self._cache if wanted <= set(a)]
        if not supersets:
            return None
        superset = min(supersets, key=self.domain.cells)
        cached = marginalize(self._cache[superset], superset, attributes)
        self._cache[attributes] = cached
        return cached

    @property
    def gradient_sums_in_one_scan(self) -> bool:
        """Whether the engine computes :meth:`row_weight_sums` in one scan of the table (DuckDB, PostgreSQL,
        Spark); where it does not (SQLite), a mechanism reads :meth:`distinct_rows` once instead."""
        return bool(self.table.gradient_sums_in_one_scan)

    def row_count(self) -> int:
        """The exact number of rows of the table (DP-IHT's ``n`` on the engine path; only a release may call this,
        as for :meth:`distinct_rows`: the mechanism releases it only through its noise)."""
        return self.table.row_count()

    def row_weight_sums(self, query: GradientQuery) -> list[np.ndarray]:
        """DP-IHT's per-(attribute, code) sums of clipped per-row weights, computed by the engine in one
        aggregation (:meth:`service.data.engines.base.TableEngine.row_weight_sums`): no row leaves the engine.
        Only a release may call this, as for :meth:`distinct_rows`."""
        unknown = [a for a in query.attributes if a not in self.dataset.sql_columns]
        if unknown:
            raise ValueError(f"attributes must be columns of {self.dataset.name!r}; unknown: {unknown}")
        sums = self.table.row_weight_sums(query)
        self.gradient_scans += 1
        return sums

    def distinct_rows(
        self, attributes: Sequence[str], *, max_rows: int | None = None, chunk_rows: int = 50_000
    ) -> tuple[np.ndarray, np.ndarray]:
        """The distinct rows over ``attributes`` and how many rows each stands for: ``(codes, counts)``, ``codes``
        an int64 array ``U x len(attributes)`` (columns in the order given, rows in ascending code order) and
        ``counts`` int64 of length ``U``, counted by the engine (``SELECT cols, COUNT(*) ... GROUP BY cols``).

        A sum over the rows of any per-row function is the ``counts``-weighted sum over these distinct rows, so a
        mechanism whose objective is such a sum (objective perturbation, DP-IHT's gradient sums) reads ``U`` rows
        instead of ``n``: at most the product of the attributes' domain sizes, whatever the table's length. They are
        streamed in chunks of ``chunk_rows``; ``max_rows`` (a public cap) stops the read with :class:`ValueError`
        as soon as more distinct rows arrive, so memory never exceeds the cap. Only a release may call this:
        nothing returned leaves the release except through the mechanism's noisy output (never stored, logged or put
        in a payload)."""
        names = list(attributes)
        unknown = [a for a in names if a not in self.dataset.sql_columns]
        if not names or unknown:
            raise ValueError(f"attributes must be columns of {self.dataset.name!r}; unknown: {unknown or names}")
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
            raise ValueError(f"max_rows must be a positive integer, got {max_rows!r}")
        chunks: list[np.ndarray] = []
        held = 0
        with closing(self.table.distinct_rows(names, chunk_rows=chunk_rows)) as parts:
            for part in parts:
                held += len(part)
                if max_rows is not None and held > max_rows:
                    raise ValueError(f"more than max_rows={max_rows} distinct rows over {names}")
                chunks.append(part)
        grouped = np.concatenate(chunks) if chunks else np.empty((0, len(names) + 1), dtype=np.int64)
        del chunks
        codes, counts = np.ascontiguousarray(grouped[:, :-1]), grouped[:, -1].copy()
        outside = ((codes < 0) | (codes >= np.array(self.domain.shape(names)))).any(axis=0)
        if outside.any():  # a stored table changed outside the service: never a code a mechanism would index with
            raise codes_outside_domain(self.dataset.name, [n for n, bad in zip(names, outside, strict=True) if bad])
        self.rows_read += int(counts.sum())
        self.distinct_rows_read += len(codes)
        return codes, counts
