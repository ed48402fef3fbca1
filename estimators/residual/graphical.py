"""A graphical model fitted to a residual release, for what only a model can do: marginals outside the measured
closure, and synthetic rows.

The workload's marginals (and every marginal of their downward closure) are answered straight from the residuals
(:mod:`estimators.residual.reconstruct`, :mod:`estimators.residual.nonnegative`); a model is fitted only when an
answer needs one. Its measurements are the closure's maximal marginals, reconstructed without bias from the
residuals, each with its closed-form cell variance (:meth:`NoisyResiduals.cell_variance`), fitted by entropic mirror
descent (McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference for differential privacy",
Alg. 1; :func:`estimators.graphical.mirror_descent.fit`). (The reconstructions of two maximal sets share their common
residuals, so treating them as independent measurements over-weights the shared low-order part; the estimate stays a
function of the release, i.e. free post-processing.)

When all maximal marginals do not fit a junction tree of ``max_model_size`` MB (all pairs of a wide table form one
huge clique), the model keeps the 1-way marginals and then the maximal sets in decreasing order of their interaction's
signal-to-noise ratio ``||b_A||^2 / (s_A d_A)`` (``d_A = prod (n_i - 1)``), a function of the noisy residuals only,
while the tree fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from estimators.graphical import junction_tree, mirror_descent
from estimators.graphical.mirror_descent import Measurement
from estimators.graphical.model import Fit
from estimators.residual.basis import Clique, ResidualError, maximal_cliques
from estimators.residual.reconstruct import NoisyResiduals

__all__ = ["fit_model", "model_cliques"]


def _signal_to_noise(residuals: NoisyResiduals, clique: Clique) -> float:
    values = residuals.values.get(clique)
    scale = residuals.scales.get(clique, 0.0)
    if values is None:
        return 0.0
    dimension = math.prod(residuals.domain.size(a) - 1 for a in clique)
    return math.inf if scale == 0 else float(np.multiply(values, values).sum()) / (scale * dimension)


def model_cliques(residuals: NoisyResiduals, max_model_size: float) -> list[Clique]:
    """The closure's maximal sets that the model keeps (module docstring), within ``max_model_size`` MB."""
    domain = residuals.domain
    maximal = [c for c in maximal_cliques(domain, residuals.residuals) if c]
    covered = {a for c in maximal for a in c}
    singles = [(a,) for a in domain.names if a in covered]
    ranked = sorted((c for c in maximal if len(c) > 1), key=lambda c: -_signal_to_noise(residuals, c))
    chosen: list[Clique] = [c for c in maximal if len(c) == 1]
    for clique in ranked:
        if junction_tree.model_size_mb(domain, [*singles, *chosen, clique]) <= max_model_size:
            chosen.append(clique)
    if not chosen and not singles:
        raise ResidualError("the release measured no attribute: there is nothing to fit a model to")
    return chosen or singles


def fit_model(
    residuals: NoisyResiduals,
    *,
    max_model_size: float = 80.0,
    iters: int = 1000,
    progress: Callable[[int, int], None] | None = None,
) -> Fit:
    """A graphical model fitted to the release's maximal marginals (module docstring); stops on the estimator's
    default tolerance, ``Fit.iterations`` says after how many iterations."""
    if not isinstance(residuals, NoisyResiduals):
        raise ResidualError(f"residuals must be NoisyResiduals, got {type(residuals).__name__}")
    cliques = model_cliques(residuals, max_model_size)
    measurements = []
    for clique in cliques:
        variance = residuals.cell_variance(clique)
        if variance <= 0:
            raise ResidualError(f"marginal {list(clique)} has no noise variance; cannot weigh it in a model")
        measurements.append(Measurement(clique, residuals.marginal(clique), math.sqrt(variance)))
    total = float(residuals.marginal(()))
    return mirror_descent.fit(residuals.domain, measurements, iters=iters, total=max(total, 1.0), progress=progress)
