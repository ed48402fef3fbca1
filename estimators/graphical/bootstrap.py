"""Error bars for a graphical model's marginals, from the noisy measurements it was fitted to (issue 29). numpy only.

A marginal release made by MST or AIM answers every marginal from its model (:mod:`estimators.graphical.model`). Two
kinds of error bar, both post-processing of the measurements and their public noise scales:

* **measurement** (:func:`measured_standard_error`): a marginal inside a measured clique, summed from that
  measurement, has per-cell noise variance ``stddev^2 * cells(clique) / cells(marginal)`` (summing cells adds
  variances); independent measurements of cliques that contain it combine by inverse variance. This is the standard
  error of the *raw measurement* (the unbiased estimate it supports), not of the model's answer: the model is a
  post-processing that pools every measurement (usually a smaller error) and fits a structure (a bias the figure does
  not show).
* **parametric bootstrap** (:func:`parametric_bootstrap`): for an unmeasured (extrapolated) marginal no measurement
  says anything directly. Each replicate redraws every measurement's noise at its known scale around the fitted
  model's marginals (``y* = mu_hat_C + N(0, stddev^2)`` cell by cell; Efron & Tibshirani 1993, "An Introduction to the
  Bootstrap", Ch. 6, the parametric bootstrap) and refits the model warm-started from the fit; the spread of a marginal
  over the replicates (:func:`bootstrap_standard_errors`) is its standard error under the fitted model. It describes
  the measurement noise's effect through the estimator, not what else varies from release to release: AIM's and
  MST's choice of cliques (itself noisy) is kept fixed, a refit that has not converged moves less than the estimator
  could, and the model's structural error (an independence the data do not have) is reproduced in every replicate.
  docs/regression-results.md measures how often the resulting intervals cover.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from estimators.graphical import mirror_descent
from estimators.graphical.model import Fit
from workloads.domain import Domain

#: Replicates of the parametric bootstrap: enough for a standard error within about 16 % (the relative standard
#: deviation of a sample SD from K normal draws is about 1 / sqrt(2 (K - 1))), few enough to stay within seconds to a
#: minute per release.
DEFAULT_REPLICATES = 20
#: Mirror-descent iterations per replicate (warm-started from the release's fit, stopping on the estimator's
#: tolerance). Measured on an AIM release of five adult columns (epsilon 1, 8 replicates): 200 iterations from the
#: cold-start step left the replicates near their warm start (the mean SD of a 512-cell marginal 2.7 counts, against
#: 8.0 after 1,000), under-stating the error; with :data:`REPLICATE_STEP_BOOST`, 200 iterations gave 4.9, 300 gave 5.8
#: and 1,000 gave 8.2. 500 is a compromise with time (about 1 s per replicate there), not convergence.
DEFAULT_REPLICATE_ITERS = 500
#: The first step of a replicate's refit, times the cold-start step: a stored model keeps no step size, and the
#: release's own fit had grown its step by 1.01 per accepted iteration over a thousand or more
#: (:func:`estimators.graphical.mirror_descent.fit`, ``step_boost``).
REPLICATE_STEP_BOOST = 1000.0


def measured_standard_error(domain: Domain, measurements: Sequence[mirror_descent.Measurement],
                            attributes: Sequence[str]) -> float | None:
    """The per-cell standard error of the marginal on ``attributes`` read from the measurements of cliques that
    contain it (module docstring), or None when no measurement contains it."""
    wanted = set(attributes)
    precision = 0.0
    for m in measurements:
        if wanted <= set(m.attributes):
            summed = domain.cells(tuple(m.attributes)) / domain.cells(tuple(attributes))
            precision += 1.0 / (float(m.stddev) ** 2 * summed)
    return None if precision == 0.0 else float(precision ** -0.5)


def parametric_bootstrap(model: Fit, measurements: Sequence[mirror_descent.Measurement], replicates: int,
                         rng: np.random.Generator, iters: int = DEFAULT_REPLICATE_ITERS) -> list[Fit]:
    """``replicates`` models refitted to measurements redrawn around ``model``'s marginals (module docstring)."""
    if replicates < 2:
        raise ValueError(f"replicates must be at least 2, got {replicates}")
    centres = [model.marginal(m.attributes) for m in measurements]
    out = []
    for _ in range(replicates):
        redrawn = [mirror_descent.Measurement(m.attributes, centre + rng.normal(0.0, m.stddev, centre.shape), m.stddev)
                   for m, centre in zip(measurements, centres, strict=True)]
        out.append(mirror_descent.fit(model.domain, redrawn, iters=iters, warm_start=model,
                                      step_boost=REPLICATE_STEP_BOOST))
    return out


def bootstrap_standard_errors(replicates: Sequence[Fit], attributes: Sequence[str]) -> np.ndarray:
    """Per cell, the standard deviation (``ddof=1``) of the marginal on ``attributes`` over the replicates (axes in
    the order asked)."""
    values = np.stack([r.marginal(tuple(attributes)) for r in replicates])
    return values.std(axis=0, ddof=1)
