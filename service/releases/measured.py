"""Answers straight from a release's measurements, without a graphical model (issue 9).

A residual release (:mod:`service.mechanisms.residual`) stores noisy residuals with their public noise scales; a
direct Laplace or Gaussian release stores the least-squares residuals of its noisy marginals the same way
(:func:`estimators.residual.reconstruct.residuals_from_marginals`; docs/privacy.md, sections 8.1 and 8.8). Either
answers every marginal of its workload's downward closure from them alone:

* ``counts``: the non-negative, mutually consistent estimate (:func:`estimators.residual.nonnegative.
  nonnegative_marginals`, a GReM-LNN-style projection in the workload's metric; computed once per release and
  process);
* ``standard_errors``: per cell, the standard deviation of the *unbiased* estimate of that marginal (closed form,
  :meth:`NoisyResiduals.cell_variance`). The non-negative answer is a post-processing of the unbiased one, biased
  cell by cell, so the figure describes the unbiased answer: it is what the measurements support about each cell.

A marginal outside the closure, and synthetic rows, need a graphical model (:mod:`service.releases.stored_models`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from estimators.residual.basis import ResidualError, closure_clique
from estimators.residual.codec import is_residual_payload, residuals_from_bytes
from estimators.residual.nonnegative import ConsistentMarginals, nonnegative_marginals
from estimators.residual.reconstruct import NoisyResiduals
from workloads.domain import Domain


@dataclass(eq=False)
class MeasuredRelease:
    """A release's noisy residuals, and (once asked for) their non-negative consistent marginals."""

    residuals: NoisyResiduals
    _consistent: ConsistentMarginals | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def total(self) -> float:
        """The unbiased estimate of the number of rows (free: it is the release's empty residual)."""
        return float(self.residuals.marginal(()))

    def covers(self, attributes: Sequence[str]) -> bool:
        """Whether the marginal on ``attributes`` is inside the measured closure (answerable without a model)."""
        try:
            closure_clique(self.residuals.domain, self.residuals.values, attributes)
        except ResidualError:
            return False
        return True

    def consistent(self) -> ConsistentMarginals:
        with self._lock:
            if self._consistent is None:
                self._consistent = nonnegative_marginals(self.residuals)
            return self._consistent

    def unbiased(self, attributes: Sequence[str]) -> np.ndarray:
        """The unbiased estimate of the marginal on ``attributes``, axes in the order asked."""
        return _in_order(self.residuals.domain, self.residuals.marginal, attributes)

    def answer(self, attributes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, standard_errors)`` of the marginal on ``attributes`` (inside the closure), axes in the order
        asked (module docstring)."""
        counts = _in_order(self.residuals.domain, self.consistent().marginal, attributes)
        error = math.sqrt(self.residuals.cell_variance(attributes))
        return counts, np.full(counts.shape, error)


def _in_order(domain: Domain, read, attributes: Sequence[str]) -> np.ndarray:  # noqa: ANN001
    ordered = tuple(a for a in domain.names if a in attributes)
    values = read(ordered)
    return np.transpose(values, [ordered.index(a) for a in attributes]) if len(attributes) > 1 else values


def decode(payload: bytes, domain: Domain) -> MeasuredRelease | None:
    """The release's noisy residuals when ``payload`` holds them (:mod:`estimators.residual.codec`), else None (the
    payload is a fitted graphical model)."""
    if not is_residual_payload(payload):
        return None
    return MeasuredRelease(residuals_from_bytes(payload, domain))
