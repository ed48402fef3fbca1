"""Marginal workloads: which marginals to measure, and with what weight.

A workload is a tuple of :class:`Query` (a sorted-by-domain-order tuple of attribute names and a
positive weight). Named workloads:

* ``all-1way``, ``all-2way``, ``all-3way``: every k-subset of the attributes;
* ``target:COL``: every 2-way marginal that contains ``COL`` (the pairs a model of ``COL``
  against one other attribute needs), plus nothing else;
* a JSON file: ``[["a", "b"], ["c"]]`` or ``[{"attributes": ["a", "b"], "weight": 2.0}, ...]``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workloads.domain import Domain, DomainError


class WorkloadError(ValueError):
    """A workload that cannot be used; the message names the offending entry."""


@dataclass(frozen=True, order=True)
class Query:
    attributes: tuple[str, ...]
    weight: float = 1.0


def canonical(domain: Domain, attributes: Iterable[str]) -> tuple[str, ...]:
    """Attributes in domain order, without repeats; raises for unknown names."""
    attributes = list(attributes)
    if not attributes:
        raise WorkloadError("a marginal needs at least one attribute")
    seen = set()
    for name in attributes:
        if name not in domain:
            raise WorkloadError(f"unknown attribute {name!r}; the domain has {list(domain.names)}")
        if name in seen:
            raise WorkloadError(f"attribute {name!r} is repeated in marginal {attributes}")
        seen.add(name)
    order = {n: i for i, n in enumerate(domain.names)}
    return tuple(sorted(attributes, key=order.__getitem__))


def all_kway(domain: Domain, k: int) -> tuple[Query, ...]:
    if k < 1 or k > len(domain):
        raise WorkloadError(f"all-{k}way needs 1 <= k <= {len(domain)} attributes")
    return tuple(Query(c) for c in itertools.combinations(domain.names, k))


def target_pairs(domain: Domain, target: str) -> tuple[Query, ...]:
    if target not in domain:
        raise WorkloadError(f"target column {target!r} is not in the domain {list(domain.names)}")
    return tuple(Query(canonical(domain, (target, other))) for other in domain.names if other != target)


def from_entries(domain: Domain, entries: Sequence[object]) -> tuple[Query, ...]:
    """Validate a list of marginals given as attribute lists or ``{attributes, weight}`` objects."""
    if not isinstance(entries, list) or not entries:
        raise WorkloadError("a workload must be a non-empty list of marginals")
    queries: dict[tuple[str, ...], float] = {}
    for position, entry in enumerate(entries):
        if isinstance(entry, dict):
            attrs, weight = entry.get("attributes"), entry.get("weight", 1.0)
        else:
            attrs, weight = entry, 1.0
        if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
            raise WorkloadError(f"workload entry {position}: attributes must be a list of column names, got {attrs!r}")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight <= 0:
            raise WorkloadError(f"workload entry {position}: weight must be a positive finite number, got {weight!r}")
        try:
            key = canonical(domain, attrs)
        except (WorkloadError, DomainError) as exc:
            raise WorkloadError(f"workload entry {position}: {exc}") from None
        queries[key] = queries.get(key, 0.0) + float(weight)
    return tuple(Query(k, w) for k, w in queries.items())


def parse_workload(spec: str, domain: Domain) -> tuple[Query, ...]:
    """Resolve a command-line workload spec (see module docstring)."""
    if spec.startswith("all-") and spec.endswith("way") and spec[4:-3].isdigit():
        return all_kway(domain, int(spec[4:-3]))
    if spec.startswith("target:"):
        return target_pairs(domain, spec.split(":", 1)[1])
    path = Path(spec)
    if not path.is_file():
        raise WorkloadError(
            f"workload {spec!r} is neither all-1way/all-2way/all-3way, target:COL, nor an existing JSON file"
        )
    try:
        entries = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"workload file {spec}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return from_entries(domain, entries)


def total_cells(domain: Domain, workload: Iterable[Query]) -> int:
    return sum(domain.cells(q.attributes) for q in workload)
