"""The metrics the service database answers, read at each scrape of ``GET /metrics`` (the module docstring of
:mod:`service.observability.metrics` says what and why): releases by mechanism and status, refunds by mechanism, jobs
by state, each dataset's budget. Read from the database, every worker and every server answers the same."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from db.engine import transaction
from db.models import Dataset, Job, LedgerEntry, Release
from service.accounting.accountant import budget_status
from service.errors import ServiceError


class LedgerCollector(Collector):
    """The metrics the service database answers (module docstring), read at each scrape."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        releases = CounterMetricFamily("marginalia_releases", "Releases made, by mechanism and status.",
                                       labels=["mechanism", "status"])
        refunds = CounterMetricFamily("marginalia_refunds", "Charges refunded (whole or in part), by mechanism.",
                                      labels=["mechanism"])
        jobs = GaugeMetricFamily("marginalia_jobs", "Background jobs, by state.", labels=["state"])
        epsilon = GaugeMetricFamily("marginalia_budget_epsilon_spent", "Epsilon spent of each dataset's budget "
                                    "(the ledger's composition, as `budget show`).", labels=["dataset"])
        total = GaugeMetricFamily("marginalia_budget_epsilon_total", "Each dataset's epsilon budget.",
                                  labels=["dataset"])
        rho = GaugeMetricFamily("marginalia_budget_rho_spent", "zCDP rho charged to each dataset.", labels=["dataset"])
        with transaction(self.engine) as session:
            for mechanism, status, count in session.execute(
                    select(Release.mechanism, Release.status, func.count()).group_by(Release.mechanism,
                                                                                      Release.status)):
                releases.add_metric([mechanism, status], count)
            for mechanism, count in session.execute(
                    select(LedgerEntry.mechanism, func.count()).where(LedgerEntry.entry == "refund")
                    .group_by(LedgerEntry.mechanism)):
                refunds.add_metric([mechanism], count)
            states = dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
            names = list(session.execute(select(Dataset.name).order_by(Dataset.name)).scalars())
        for state in ("running", "done", "failed"):
            jobs.add_metric([state], states.get(state, 0))
        for name in names:
            try:
                status = budget_status(self.engine, name)
            except ServiceError:  # no budget set yet: nothing spent, nothing to spend
                continue
            epsilon.add_metric([name], float(status.epsilon_spent))
            total.add_metric([name], float(status.epsilon_total))
            rho.add_metric([name], float(status.rho_spent))
        yield from (releases, refunds, jobs, epsilon, total, rho)
