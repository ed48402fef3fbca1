"""1-dim LDP-AVG (Wang, Gaboardi & Xu 2018, "Empirical risk minimization in non-interactive local differential privacy
revisited", Alg. 1): the average of the reports.

Each report is ``clip(v_i) + Lap(b)`` (:mod:`workloads.local.randomizers.laplace`), so ``mean_`` is unbiased for the
participants' average clipped value; Lemma 1 bounds its error by ``2 (upper - lower) sqrt(log(1/beta)) / (sqrt(n)
epsilon)`` with probability ``1 - beta``. ``std_error_`` estimates the standard error from the reports' own spread
(noise plus the spread of the values: the error for the population mean), ``noise_std_error_`` is the part due to
privacy, ``sqrt(2) b / sqrt(n)`` (the error for the participants' own average).

The average of the reports may fall outside ``[lower, upper]`` (noise, or forged reports: issue 18 finding 6, 31
reports took a mean on ``[0, 1]`` to 1.23); the participants' average clipped value cannot, so ``mean_`` is the
average projected onto ``[lower, upper]`` (never farther from the truth: :mod:`estimators.local.influence`) and
``raw_mean_`` the average itself. ``influence_`` bounds how far one more accepted report moves ``mean_``: the
schema's range ``[low, high]`` of a report gives ``max(|low - raw|, |high - raw|) / (n + 1)``, at most the interval's
width.
"""

from __future__ import annotations

import math

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence, mean_shift, project_interval
from workloads.local.protocols import LdpAverageSpec


class LdpAverage:
    """``fit(aggregate, spec)`` sets ``mean_`` (in ``[lower, upper]``), ``raw_mean_``, ``std_error_``,
    ``noise_std_error_``, ``n_reports_`` and ``influence_``."""

    def fit(self, aggregate: ReportAggregate, spec: LdpAverageSpec) -> LdpAverage:
        if not isinstance(spec, LdpAverageSpec):
            raise EstimatorError(f"spec must be an LdpAverageSpec, got {type(spec).__name__}")
        if not isinstance(aggregate, ReportAggregate) or aggregate.protocol != spec.protocol:
            raise EstimatorError(f"aggregate must hold reports of an {spec.protocol!r} campaign, got {aggregate!r}")
        n = aggregate.count
        if n == 0:
            raise EstimatorError("the aggregate holds no reports yet")
        self.raw_mean_ = float(aggregate.mean("value"))
        self.mean_ = project_interval(self.raw_mean_, spec.lower, spec.upper)
        spread = max(float(aggregate.second_moment("value")) - self.raw_mean_**2, 0.0) * n / max(n - 1, 1)
        self.std_error_ = math.sqrt(spread / n)
        self.noise_std_error_ = math.sqrt(2.0) * spec.scale / math.sqrt(n)
        self.n_reports_ = n
        field = next(f for f in aggregate.schema.fields if f.name == "value")
        self.influence_ = Influence(
            min(mean_shift(field, self.raw_mean_, n), spec.upper - spec.lower), "abs", "mean",
            "one more report within the validated range [low, high] moves the average by max(|low - average|, "
            "|high - average|) / (n + 1) at most, and the projection onto [lower, upper] by no more (nor by more than "
            "upper - lower)")
        return self
