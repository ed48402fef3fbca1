"""Measurement helpers shared by the mechanism benchmarks (``aim_profile``, ``marginals``, ``residual_service``).

One configuration runs in a fresh Python process (:func:`benchmarks.harness.run_child`), so that its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, :func:`peak_rss_mb`) and its count of XLA
compilations (:class:`CompileCounter`, a ``jax.monitoring`` listener) belong to it alone.
"""

from __future__ import annotations

import itertools
import json
import resource
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import DATA

TABLES = {
    "adult": ("adult/adult_train.csv", "adult/adult-domain.json"),
    "adult-pgm": ("adult_pgm/adult.csv", "adult_pgm/adult-domain.json"),
    "acs-income": ("acs/ACSincome-LIN_train.csv", "acs/ACSincome-LIN-domain.json"),
    "titanic": ("titanic/titanic.csv", "titanic/titanic-domain.json"),
    "acs-employment": ("acs/ACSemployment_train.csv", "acs/ACSemployment-domain.json"),
    "acs-mobility": ("acs/ACSmobility_train.csv", "acs/ACSmobility-domain.json"),
    "nist-taxi": ("nist_taxi/nist-taxi.csv", "nist_taxi/nist-taxi-domain.json"),
    "salary": ("salary/salary.csv", "salary/salary-domain.json"),
    "nltcs": ("nltcs/nltcs.csv", "nltcs/nltcs-domain.json"),
}
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompileCounter:
    """Counts XLA backend compilations (and their seconds) from the moment it is created.

    Create it before anything compiles; :meth:`snapshot` / :meth:`since` give per-phase counts."""

    def __init__(self) -> None:
        import jax.monitoring

        self.count = 0
        self.seconds = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_duration(self, event: str, duration: float, **_: object) -> None:
        if event == COMPILE_EVENT:
            self.count += 1
            self.seconds += duration

    def snapshot(self) -> tuple[int, float]:
        return self.count, self.seconds

    def since(self, snapshot: tuple[int, float]) -> tuple[int, float]:
        return self.count - snapshot[0], self.seconds - snapshot[1]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports ru_maxrss in kB). Linux keeps ru_maxrss
    across ``execve``: a child started from a large parent reports the parent's peak if it is higher (use
    :func:`own_peak_rss_mb` there)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def own_peak_rss_mb() -> float:
    """Peak resident set size of this process's own address space, in MB: ``VmHWM`` of ``/proc/self/status``,
    which starts afresh at ``execve`` (so not the parent's), or :func:`peak_rss_mb` where /proc is absent."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return peak_rss_mb()
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return peak_rss_mb()


def load_domain(table: str) -> Any:
    """The table's public domain (its ``-domain.json``), without reading its rows."""
    from workloads.domain import Domain

    return Domain.from_sizes(json.loads((DATA / TABLES[table][1]).read_text()))


def load_oracle(table: str) -> Any:
    """The table's integer-coded columns as an in-memory ``selection.ArrayOracle`` (no SQL)."""
    import pandas as pd

    from service.mechanisms.selection import ArrayOracle

    domain = load_domain(table)
    frame = pd.read_csv(DATA / TABLES[table][0])
    return ArrayOracle(domain, {n: frame[n].to_numpy() for n in domain.names})


def engine_rho(epsilon: float, delta: float) -> Fraction:
    """The zCDP rho the release engine charges for (epsilon, delta): ``floor_to_grid(cdp_rho(.))``."""
    from service.privacy.conversions import cdp_rho
    from service.privacy.cost import floor_to_grid

    return floor_to_grid(cdp_rho(float(epsilon), float(delta)))


def two_way_pairs(oracle: Any) -> list[tuple[str, str]]:
    return list(itertools.combinations(oracle.domain.names, 2))


def workload_error(answer: Any, oracle: Any, pairs: list[tuple[str, ...]]) -> float:
    """The issue-3 metric: sum over ``pairs`` of the L1 distance between ``answer(pair)`` and the
    true counts, divided by N and by the number of marginals."""
    total = sum(float(np.abs(np.asarray(answer(p), dtype=float) - oracle.counts(p)).sum()) for p in pairs)
    return total / oracle.rows / len(pairs)
