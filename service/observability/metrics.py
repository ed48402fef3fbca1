"""Prometheus metrics (``GET /metrics``): what a service does and spends, never anything derived from the data.

Two kinds, in one exposition (docs/operations.md, "Metrics"):

- **measured in the process** (prometheus_client's histograms): :data:`REQUEST_SECONDS`, each request's time to its
  answer by method, route *template* and status (:mod:`service.api.observe`), and :data:`ENGINE_SECONDS`, each data
  engine call's time by engine and operation (:mod:`service.data.engines.boundary`). With several uvicorn workers,
  ``marginalia serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh folder before they start, and a scrape, which
  any one worker answers, adds up every worker's (prometheus_client's multiprocess mode);
- **read from the service database at each scrape** (:class:`service.api.ledger_metrics.LedgerCollector`), so
  that every worker answers the same: releases by mechanism and status, refunds by mechanism, jobs by state, and
  each dataset's spent epsilon and rho. Spent budget is the ledger's, which auditors read anyway: it depends on
  what was released, not on a row of any table.

Nothing here holds a count of a table, a cell value, a key, a path or a URL; labels are route templates, engine and
mechanism names, states and dataset names.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.registry import Collector

#: prometheus_client's multiprocess folder variable (set by ``marginalia serve`` for several workers).
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
#: The content type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REQUEST_SECONDS = Histogram("marginalia_request_seconds", "Time from a request to its answer's first byte.",
                            ["method", "route", "status"],
                            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
ENGINE_SECONDS = Histogram("marginalia_engine_seconds", "Time of one data engine call (counting, checking, reading "
                           "a schema).", ["engine", "operation"],
                           buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 120))


def exposition(*collectors: Collector) -> bytes:
    """The text exposition of this process's metrics (or every worker's, in multiprocess mode) and ``collectors``'
    (the API's :class:`service.api.ledger_metrics.LedgerCollector`)."""
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROCESS_VARIABLE):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for collector in (REQUEST_SECONDS, ENGINE_SECONDS):
            registry.register(collector)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)


