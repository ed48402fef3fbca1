"""``--mechanism auto``: the marginal mechanism, and its options, chosen for a workload at a cost from public
information only (issue 30, point 3).

A steward who asks for ``auto`` gets the zCDP mechanism that the benchmark over the shared tables found best for a
workload of this shape at this budget (``benchmarks/mechanism_choice.py``; its table and the rule's misses are in
docs/mechanisms.md, "Which mechanism: auto"). The rule reads only what is public before a release: the domain's
sizes, the workload's marginals and the rho the release is charged (from epsilon and delta, or given). It never
reads the table, not even its row count, so the choice reveals nothing and costs nothing (it is a function of public
inputs only: docs/privacy.md 6.7). Every candidate is a zCDP mechanism charged exactly the same rho for the same
request, so choosing among them changes the answers' accuracy, never the charge.

The rule, in the order it is applied (:func:`choose`):

1. **Small marginals: the residual plan.** When the workload's marginals average at most :data:`SMALL_MARGINAL_CELLS`
   cells (a binary table's pairs, say), measuring every marginal directly with the optimal Gaussian plan leaves too
   little for a data-adaptive mechanism to gain: each cell's noise is already small against what a model would get
   wrong. ResidualPlanner (Xiao et al. 2023), its ``sum_var`` loss: the lowest summed variance of every workload cell.
2. **A large budget per workload cell: the residual plan.** When the plan's per-cell standard error (the mean over
   the workload's marginals of the closed-form cell variance, :func:`~service.mechanisms.residual.forecast_residual`,
   square-rooted) is at most :data:`RESIDUAL_CELL_ERROR` counts, direct measurement of the whole workload beats AIM
   on the benchmark's tables: AIM's rounds, calibrated for 16 per attribute, measure each selected marginal with more
   noise than the plan gives every one of them.
3. **Otherwise: AIM** (McKenna et al. 2022), which measures the marginals that its model gets most wrong and
   extrapolates the rest: far ahead where the noise of measuring everything would swamp the counts.

The thresholds are the benchmark's, chosen on its table; a pick the benchmark found more than 5 % behind the best of
the four mechanisms is listed in docs/mechanisms.md as a miss, with the error it costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module is imported by the API schema and the command line to name AUTO: nothing numerical
    from workloads.domain import Domain
    from workloads.marginals import Query

#: The name a caller gives for the rule's choice (the API, the command line, the client).
AUTO = "auto"
#: The mechanisms the rule chooses among: every zCDP marginal mechanism, each charged the same rho.
CANDIDATES = ("gaussian", "residual", "mst", "aim")
#: Rule 1: a workload whose marginals average at most this many cells is measured directly (the benchmark's binary
#: table, 4 cells a pair, is measured best directly at every epsilon; the next smallest, ACSemployment's 98, is not).
SMALL_MARGINAL_CELLS = 16.0
#: Rule 2: the residual plan when its expected per-cell standard error (counts) is at most this (the benchmark's
#: tables cross over between 29 and 43 at epsilon 1; docs/mechanisms.md, "Which mechanism: auto").
RESIDUAL_CELL_ERROR = 40.0


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` chose: the mechanism, the options it runs with (none are the caller's), the rule that chose it
    (``rule``: its number in the module docstring) and one sentence a person reads (``reason``), with the public
    figures the rule compared."""

    mechanism: str
    rule: int
    reason: str
    options: dict[str, object] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"mechanism": self.mechanism, "options": dict(self.options), "rule": self.rule, "reason": self.reason,
                "figures": dict(self.figures)}


def choose(domain: Domain, queries: Sequence[Query], rho: Fraction) -> AutoChoice:
    """The mechanism ``auto`` runs for ``queries`` over ``domain`` at ``rho`` (module docstring). Public inputs only:
    the domain's sizes, the workload and the charge."""
    from service.mechanisms.residual import forecast_residual

    if not queries:
        raise ValueError("auto needs a workload to choose for")
    mean_cells = sum(domain.cells(q.attributes) for q in queries) / len(queries)
    figures = {"mean_marginal_cells": round(mean_cells, 1), "rho": float(rho)}
    if mean_cells <= SMALL_MARGINAL_CELLS:
        return AutoChoice("residual", 1, f"the workload's marginals average {mean_cells:.3g} cells (at most "
                          f"{SMALL_MARGINAL_CELLS:g}): every one is measured directly, by the optimal Gaussian plan",
                          figures=figures)
    forecast = forecast_residual(domain, queries, rho)
    mean_variance = sum(e.variance for e in forecast.errors) / len(forecast.errors)
    cell_error = mean_variance ** 0.5
    figures["residual_cell_standard_error"] = round(cell_error, 3)
    if cell_error <= RESIDUAL_CELL_ERROR:
        return AutoChoice("residual", 2, f"at this budget the optimal Gaussian plan measures every workload cell with "
                          f"a standard error of {cell_error:.3g} counts (at most {RESIDUAL_CELL_ERROR:g}): the whole "
                          "workload is measured directly", figures=figures)
    return AutoChoice("aim", 3, f"measuring every workload cell would leave a standard error of {cell_error:.3g} "
                      f"counts in each (above {RESIDUAL_CELL_ERROR:g}): AIM measures the marginals its model gets most "
                      "wrong and extrapolates the rest", figures=figures)
