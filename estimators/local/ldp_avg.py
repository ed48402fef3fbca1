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

**Planning** (:func:`ldp_avg_error_model`, ``campaign plan``). A report is ``z = clip(v) + r + g N``: the clipped value,
the randomized rounding's error ``r`` (mean 0, variance at most ``g^2 / 4``) and the discrete Laplace noise (variance
``sigma_N^2 = 2 q / (1 - q)^2 g^2``, :attr:`~workloads.local.randomizers.grid.GridNoise.variance`, about ``2 ((upper -
lower) / epsilon)^2``), independent of each other, so the mean of ``n`` reports has variance

    Var(mean z) = (sigma_v^2 + g^2 / 4 + sigma_N^2) / n,

``sigma_v^2`` the variance of the clipped values: the public table's (its column, clipped to ``[lower, upper]``, the
participants assumed distributed like it; its mean is then the reference the error is measured against), or without
one the bound ``(upper - lower)^2 / 4`` (Popoviciu), which makes the answer an upper bound on the absolute error. The
estimate's projection onto ``[lower, upper]`` is its last step (applied to draws; it only moves an estimate toward the
true mean). The error is in the value's own units, as the fit's ``standard_errors``.
"""

from __future__ import annotations

import math

import numpy as np

from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence, mean_shift, project_interval
from estimators.local.planning import ErrorModel, public_table
from workloads.local.protocols import LdpAverageSpec

METRIC = "the mean of the participants' values clipped to [lower, upper], in the value's own units"


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


def ldp_avg_error_model(spec: LdpAverageSpec, rows: object = None, labels: object = None) -> ErrorModel:  # noqa: ARG001
    """The error model of an ``ldp-avg`` campaign before any report (module docstring, "Planning"); ``rows``: the
    public table's column (``(m, 1)``), if the campaign has one. ``labels`` is not used (the protocol has no
    target)."""
    noise = spec.noise
    report_noise = noise.variance + noise.grid**2 / 4.0
    notes = [f"each report adds discrete Laplace noise of standard deviation {math.sqrt(noise.variance):.4g} "
             f"(scale {spec.scale:.4g}, at least (upper - lower) / epsilon) and a rounding to the grid "
             f"{noise.grid:.3g}; the mean of n reports has variance (sigma_v^2 + g^2 / 4 + sigma_N^2) / n"]
    if rows is None:
        spread = (spec.upper - spec.lower) ** 2 / 4.0
        notes.append("no public table: the values' variance is taken at its largest, (upper - lower)^2 / 4, so the "
                     "prediction is an upper bound")
        return ErrorModel(lambda n: np.array([[(spread + report_noise) / n]]), None, "none (no public table)",
                          METRIC, notes=tuple(notes))
    column, _ = public_table(rows, None, 1, "ldp-avg")
    values = np.clip(column[:, 0], spec.lower, spec.upper)
    variance = float(values.var()) + report_noise
    notes.append("the participants' values are distributed like the public table's column")

    def project(draws: np.ndarray) -> np.ndarray:
        return np.clip(draws, spec.lower, spec.upper)

    return ErrorModel(lambda n: np.array([[variance / n]]), np.array([float(values.mean())]),
                      "the mean of the public table's column, clipped to [lower, upper]", METRIC, step=project,
                      notes=tuple(notes))
