"""The accuracy of an MST or AIM release estimated by simulation, before anything is spent (docs/privacy.md 6.6).

MST and AIM choose what they measure from the data, so their error depends on the data and has no closed form (the
dry runs of laplace, gaussian and residual have one: :mod:`estimators.residual.accuracy`). What a plan can do for
free is run the planned mechanism, in this process, on a *proxy*: a table with the dataset's domain and row count
``N`` that is itself released, and measure the error of its answers against the proxy's own exact marginals. The
proxy here is ``N`` synthetic rows of a stored release of the dataset (:func:`choose_proxy`): post-processing of a
release already paid for. So the estimate reads only public things (the domain, the workload, the cost, the settings),
released things (that release's model) and the stored row count the closed forms use too; it never reads a row of
the table, draws no noise on it and writes nothing: it costs no budget (docs/privacy.md 6.6). The simulation's noise
and the synthetic rows come from one fixed internal stream (:data:`SIMULATION_SEED`; no caller chooses it): noise on
released numbers, whose predictability costs nothing, and which makes a plan repeatable.

**What the estimate captures, and what it misses.** A mechanism's error has two parts: the noise of what it measures,
and the misfit of the marginals it does not measure (its model extrapolates them). The proxy reproduces the first
exactly (same domain, same ``N``, same noise scales) but the second only as far as the proxy's model carries the
data's dependence: a model knows nothing beyond the cliques its release measured. On the synthetic rows of an MST
release (a tree), MST finds the tree again and nothing else to misfit, and the estimate leaves the misfit out: 0.21-0.70
of the measured error on adult and ACSincome (AIM 0.61-0.99); on those of an AIM release at epsilon 1 it was 0.73-0.94
(docs/mechanisms.md, "MST and AIM: an estimate by simulation"). So the proxy chosen is the stored release that measured
the most of the evaluated workload (then the newest), and the estimate states that share (``proxy_coverage``) and,
when the proxy measured no more of the workload's marginals than a spanning tree has edges (``d - 1`` for ``d``
attributes: :meth:`Proxy.tree_like`), that it is likely low.

**Cost in time.** One trial is one run of the mechanism, with the settings planned, on ``N`` rows: MST a few seconds
on adult, AIM as long as the release itself (tens of seconds at epsilon 1 on adult). A mechanism's registry entry
bounds the trials its plan runs (``MechanismSpec.simulation_trials``: MST 3, AIM 1, so an AIM estimate is one run and
states no spread); the plan reports the seconds it took. The settings are not lightened: capping the final model fit
at 100 iterations made MST's estimate 3-7 times the measured error at epsilon 0.1 (an unconverged fit).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from service.mechanisms.base import no_progress
from service.mechanisms.registry import MechanismSpec, ReleaseKind, RunRequest
from service.mechanisms.selection import ArrayOracle
from service.privacy.noise import NoiseSource
from service.releases import answers, stored_models
from service.releases.engine import checked_runner
from service.releases.measured import MeasuredRelease
from workloads.domain import Domain
from workloads.marginals import Query

#: The internal stream of the synthetic rows (this seed) and of trial t's noise (this seed + 1 + t); never a caller's.
SIMULATION_SEED = 29_2029


@dataclass(frozen=True)
class Proxy:
    """A stored release whose model stands in for the table: its id, its mechanism, its model and the share of the
    evaluated workload's marginals it measured."""

    release_id: int
    mechanism: str
    model: Model
    coverage: float
    measured: int = 0  # how many of the evaluated workload's marginals it measured

    def tree_like(self, attributes: int, marginals: int) -> bool:
        """Whether it measured no more of a workload of ``marginals`` marginals than a spanning tree of ``attributes``
        attributes has edges: then it carries no dependence a tree lacks, and the estimate is likely low."""
        return self.measured <= attributes - 1 < marginals


@dataclass(frozen=True)
class SimulatedError:
    """One workload marginal's error measured on the proxy over the trials: per cell in counts (the root mean square
    over cells and trials) and the L1 error of the marginal in counts, one figure per trial."""

    attributes: tuple[str, ...]
    cells: int
    mean_squared_error: float
    l1_per_trial: tuple[float, ...]

    @property
    def standard_error(self) -> float:
        """The root mean square cell error on the proxy, in counts (not a standard error of an unbiased answer: an
        MST or AIM answer is biased where the model extrapolates)."""
        return math.sqrt(self.mean_squared_error)

    @property
    def expected_l1(self) -> float:
        """The L1 error of the marginal, in counts, averaged over the trials."""
        return statistics.fmean(self.l1_per_trial)

    def expected_l1_normalised(self, rows: int) -> float:
        return self.expected_l1 / rows

    def to_json(self, rows: int | None = None) -> dict[str, object]:
        body: dict[str, object] = {"attributes": list(self.attributes), "cells": self.cells,
                                   "standard_error": self.standard_error, "expected_l1": self.expected_l1,
                                   "excess_kurtosis": None}
        if rows is not None:
            body["expected_l1_normalised"] = self.expected_l1_normalised(rows)
        return body


@dataclass(frozen=True)
class SimulatedAccuracy:
    """The estimate of a plan (module docstring): one :class:`SimulatedError` per evaluated workload marginal, the
    proxy it was measured on, the number of trials and the seconds they took."""

    basis: str
    rows: int
    errors: tuple[SimulatedError, ...]
    trials: int
    proxy: Proxy
    seconds: float

    def worst(self) -> SimulatedError:
        return max(self.errors, key=lambda e: e.expected_l1)

    def mean_l1_normalised(self) -> float:
        """The workload's mean normalised L1 error (the metric of docs/mechanisms.md's tables)."""
        return statistics.fmean(e.expected_l1_normalised(self.rows) for e in self.errors)

    def to_json(self) -> dict[str, object]:
        """The plan's ``accuracy`` (which adds how the errors are normalised, as for a closed form)."""
        return {"basis": self.basis, "rows": self.rows, "total_standard_error": None,
                "worst": self.worst().to_json(self.rows), "marginals": [e.to_json(self.rows) for e in self.errors],
                "mean_l1_normalised": self.mean_l1_normalised(),
                "simulation": {"trials": self.trials, "seconds": self.seconds,
                               "proxy_release": self.proxy.release_id, "proxy_mechanism": self.proxy.mechanism,
                               "proxy_coverage": self.proxy.coverage}}


def choose_proxy(engine: Engine, name: str, domain: Domain, queries: Sequence[Query]) -> Proxy | None:
    """The complete, unseeded marginal release of dataset ``name`` whose model is at hand without fitting or writing
    anything (an MST or AIM release's own model, or one stored by an earlier answer: :mod:`service.releases.
    stored_models`) and that measured the largest share of ``queries`` (the newest among equals), or None.

    A seeded release is never a proxy (its noise is known to whoever knows the seed: docs/privacy.md 7), nor is a
    release stored as residuals whose model was never fitted (fitting it here would take long and write a model)."""
    best: Proxy | None = None
    for release in answers.list_releases(engine, name):
        if release.kind != ReleaseKind.MARGINALS or release.status != "complete" or release.seeded:
            continue
        _, payload = answers.release_payload(engine, release.id)
        if isinstance(payload, MeasuredRelease):
            found = stored_models.stored_model(engine, release.id, domain)
            if found is None:
                continue
            model = found[0]
        else:
            model = payload
        measured = sum(release.coverage(q.attributes).measured for q in queries)
        proxy = Proxy(release.id, release.mechanism, model, measured / len(queries), measured)
        if best is None or proxy.coverage >= best.coverage:
            best = proxy
    return best


def simulate(spec: MechanismSpec, request: RunRequest, domain: Domain, queries: Sequence[Query], rows: int,
             proxy: Proxy) -> SimulatedAccuracy:
    """Run ``spec``'s mechanism ``spec.simulation_trials`` times as ``request`` asks on ``rows`` synthetic rows of
    ``proxy``, and measure each of ``queries`` against the proxy's exact marginals. The runner is the release's own
    (:func:`~service.releases.engine.checked_runner`)."""
    started = time.perf_counter()
    proxy_rows = ArrayOracle(domain, mbi_adapter.synthetic_rows(proxy.model, rows, SIMULATION_SEED))
    runner = checked_runner(spec, request)
    truth = [proxy_rows.counts(q.attributes).astype(float) for q in queries]
    squared = [0.0] * len(queries)
    l1: list[list[float]] = [[] for _ in queries]
    trials = spec.simulation_trials
    for trial in range(trials):
        result = runner(proxy_rows, NoiseSource(SIMULATION_SEED + 1 + trial), no_progress)
        model = result.payload.model
        for i, query in enumerate(queries):
            error = mbi_adapter.marginal(model, query.attributes) - truth[i]
            squared[i] += float(np.mean(error * error)) / trials
            l1[i].append(float(np.abs(error).sum()))
    errors = tuple(SimulatedError(q.attributes, domain.cells(q.attributes), squared[i], tuple(l1[i]))
                   for i, q in enumerate(queries))
    low = proxy.tree_like(len(domain), len(queries))
    return SimulatedAccuracy(_basis(spec, proxy, trials, rows, low), rows, errors, trials, proxy,
                             time.perf_counter() - started)


def _basis(spec: MechanismSpec, proxy: Proxy, trials: int, rows: int, low: bool) -> str:
    basis = (f"simulation: {spec.name} run {trials} time(s) as planned on {rows:,} synthetic rows of release "
             f"{proxy.release_id} ({proxy.mechanism}), the error measured against those rows' own marginals; free: it "
             "reads that release's model, never the table")
    if low:
        basis += (f"; release {proxy.release_id} measured {proxy.measured} of the workload's marginals, no more than a "
                  "tree, so its rows lack the dependence it did not measure and the estimate is likely low (on an MST "
                  "release's rows it was 0.21-0.99 of the measured error on adult and ACSincome)")
    return basis
