"""Marginals from a ``marginals`` campaign's reports: unbiased per-set frequencies, then one graphical model.

Two steps, both post-processing of the round's aggregate (:class:`~estimators.local.aggregate.ReportAggregate`: per
set, the oracle's tally and the number of reports; :mod:`workloads.local.protocols.marginals`):

1. **Per set** (:func:`set_estimates`): the oracle's unbiased frequencies ``f_v = (c_v / n_j - q) / (p - q)`` with
   ``Var f_v = (q (1 - q) + f_v (p (1 - p) - q (1 - q))) / (n_j (p - q)^2)`` (Wang et al. 2017, eq. (1)-(2);
   :mod:`workloads.local.randomizers.frequency_oracles`), as counts on the scale of all ``N`` participants:
   ``N f_v``, whose noise standard deviation per cell is ``N`` times the root of the cell-averaged variance
   (``f_v = 1/k``): the scale the model's loss weighs the set by. The sets' reports are disjoint, so their
   estimates are independent.
2. **One model** (:func:`fit_marginal_model`): a graphical model fitted to the sets' estimates at once by the
   project's entropic mirror descent (McKenna, Sheldon & Miklau 2019, Alg. 1;
   :func:`estimators.graphical.mirror_descent.fit`) with total ``N``: each measurement weighted by its variance,
   the sets' shared sub-marginals made consistent, every cell non-negative, and every marginal -- measured or not --
   and synthetic rows answered from it. All pairs of a wide table form one clique no junction tree holds, so the
   model keeps the sets in decreasing order of their estimated interaction's signal-to-noise ratio
   (:func:`interaction_signal`, a function of the estimates only) while its junction tree stays within
   ``max_model_size`` MB (as a central residual release's model does: :mod:`estimators.residual.graphical`); a set
   left out still informs the model through its one-way margins (each summed from the set's cells, with the summed
   variance). This is the estimate the baselines of ``benchmarks/local_marginals.py``
   (each set on its own; a CALM-style consistency step) are measured against.

The standard error of a marginal inside a measured set is the raw measurement's
(:func:`estimators.graphical.bootstrap.measured_standard_error`), as for a central release's measured clique; an
unmeasured one gets the parametric bootstrap of the same module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from estimators.base import EstimatorError
from estimators.graphical import junction_tree, mirror_descent
from estimators.graphical.mirror_descent import Measurement
from estimators.graphical.model import Fit
from estimators.local.aggregate import ReportAggregate
from workloads.domain import Domain
from workloads.local.protocols.marginals import MarginalsSpec
from workloads.local.randomizers.frequency_oracles import FrequencyOracle

#: Mirror-descent iterations of a campaign's model (it stops earlier on the estimator's tolerance).
DEFAULT_ITERS = 2000
#: The largest junction tree of a campaign's model, in MB. Local estimates are noisy, so large cliques mostly model
#: noise: on adult's 105 pairs at epsilon 1 (48k reports) 4 MB gave the same 2-way error as 80 MB (0.548, 0.551) in
#: 14 s, not 187 s (scratch measurement of issue 33; benchmarks/local_marginals.py measures the model).
DEFAULT_MAX_MODEL_SIZE_MB = 4.0


@dataclass(frozen=True)
class SetEstimate:
    """One attribute set's unbiased estimate: ``frequencies`` (the marginal's shape, axes in ``attributes`` order;
    they may be negative), from ``reports`` reports through ``oracle``."""

    attributes: tuple[str, ...]
    frequencies: np.ndarray
    reports: int
    oracle: FrequencyOracle

    @property
    def mean_variance(self) -> float:
        """The cell-averaged variance of one frequency (``f_v = 1/k``)."""
        return self.oracle.mean_variance(self.reports)

    def standard_errors(self) -> np.ndarray:
        """Per cell, the standard error of its frequency at the estimate clipped to ``[0, 1]`` (plug-in)."""
        return np.sqrt(self.oracle.cell_variance(np.clip(self.frequencies, 0.0, 1.0), self.reports))

    def measurement(self, total: float) -> Measurement:
        """The estimate as a measurement of counts out of ``total``, with its cell-averaged noise scale."""
        return Measurement(self.attributes, total * self.frequencies, total * math.sqrt(self.mean_variance))

    def margins(self, total: float) -> list[Measurement]:
        """Its one-way margins as measurements: attribute ``a``'s cell sums the other axes' ``k / k_a`` cells, so
        its noise variance is that many cells' (the cells' estimates taken as independent)."""
        if len(self.attributes) == 1:
            return [self.measurement(total)]
        cells = self.frequencies.size
        out = []
        for axis, name in enumerate(self.attributes):
            others = tuple(i for i in range(len(self.attributes)) if i != axis)
            summed = cells // self.frequencies.shape[axis]
            out.append(Measurement((name,), total * self.frequencies.sum(axis=others),
                                   total * math.sqrt(self.mean_variance * summed)))
        return out


def domain_of(spec: MarginalsSpec) -> Domain:
    """The campaign's attributes and their sizes as a domain."""
    return Domain.from_sizes(dict(zip(spec.attributes, spec.sizes, strict=True)))


def set_estimates(spec: MarginalsSpec, aggregate: ReportAggregate) -> list[SetEstimate]:
    """Every set with at least one report, estimated on its own (step 1 of the module docstring)."""
    aggregate.round0_count(spec.protocol)
    counts, reports = aggregate.sums["counts"], aggregate.sums["reports"]
    if counts.shape != (spec.offsets[-1],) or reports.shape != (len(spec.sets),):
        raise EstimatorError(f"the aggregate does not match the spec's {len(spec.sets)} attribute sets")
    out = []
    for j, oracle in enumerate(spec.oracles):
        n = int(round(float(reports[j])))
        if n == 0:
            continue
        tally = counts[spec.offsets[j]:spec.offsets[j + 1]]
        out.append(SetEstimate(spec.set_names(j), oracle.estimate(tally, n).reshape(spec.set_shape(j)), n, oracle))
    return out


def interaction_signal(estimate: SetEstimate) -> float:
    """How far a set's estimate is from the product of its one-way margins, in units of its noise:
    ``||f - prod_a f_a||^2 / (k Var)`` (about 1 for a set whose attributes are independent; a function of the
    estimate only). A one-attribute set has no interaction: 0."""
    if len(estimate.attributes) == 1:
        return 0.0
    product = np.ones(())
    for axis in range(estimate.frequencies.ndim):
        others = tuple(i for i in range(estimate.frequencies.ndim) if i != axis)
        product = np.multiply.outer(product, estimate.frequencies.sum(axis=others))
    residual = estimate.frequencies - product.reshape(estimate.frequencies.shape)
    return float(np.square(residual).sum() / (estimate.frequencies.size * estimate.mean_variance))


def model_sets(domain: Domain, estimates: Sequence[SetEstimate], max_model_size: float) -> list[SetEstimate]:
    """The sets the model measures whole (module docstring, step 2), strongest interaction first, within
    ``max_model_size`` MB."""
    chosen: list[SetEstimate] = []
    singles = [(name,) for name in domain.names]
    for estimate in sorted(estimates, key=lambda e: -interaction_signal(e)):
        cliques = [*singles, *(c.attributes for c in chosen), estimate.attributes]
        if junction_tree.model_size_mb(domain, cliques) <= max_model_size:
            chosen.append(estimate)
    return chosen


def fit_marginal_model(spec: MarginalsSpec, aggregate: ReportAggregate, *, iters: int = DEFAULT_ITERS,
                       max_model_size: float = DEFAULT_MAX_MODEL_SIZE_MB,
                       progress: Callable[[int, int], None] | None = None) -> tuple[Fit, list[Measurement]]:
    """The campaign's graphical model (step 2 of the module docstring) and the measurements it was fitted to."""
    estimates = set_estimates(spec, aggregate)
    if not estimates:
        raise EstimatorError("no attribute set has a report yet")
    domain = domain_of(spec)
    total = float(aggregate.count)
    kept = model_sets(domain, estimates, max_model_size)
    found = [e.measurement(total) for e in kept]
    kept_ids = {id(e) for e in kept}
    found += [m for e in estimates if id(e) not in kept_ids for m in e.margins(total)]
    model = mirror_descent.fit(domain, found, iters=iters, total=total, progress=progress)
    return model, found
