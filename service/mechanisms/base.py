"""What every mechanism receives and returns.

A mechanism sees sensitive data only through the count oracle (:class:`CountOracle`: exact counts, computed by the
data engine with ``GROUP BY``; the mechanisms that fit a model also read distinct rows with their counts or clipped
gradient sums through it, :class:`service.data.oracle.TableCountOracle`) and draws every random value from the
project's one :class:`service.privacy.noise.NoiseSource`. It returns a :class:`MechanismResult`, whatever its kind:
the privacy it actually used (which the release engine checks against what the accountant charged), its payload (of
its kind's type, :mod:`service.mechanisms.payloads`: what the release stores) and its public details.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from service.mechanisms.payloads import Payload
from service.mechanisms.progress import FIT_PHASE, Progress, fit_progress, no_progress
from service.privacy.cost import PrivacyCost
from workloads.domain import Domain


class CountOracle(Protocol):
    """Exact marginal counts of one sensitive table."""

    domain: Domain

    def counts(self, attributes: tuple[str, ...]) -> np.ndarray:
        """Integer counts with shape ``domain.shape(attributes)``, axes in the order given."""
        ...


__all__ = ["FIT_PHASE", "CountOracle", "MechanismError", "MechanismResult", "Progress", "fit_progress",
           "no_progress"]


class MechanismError(ValueError):
    """A mechanism cannot run with the given settings (e.g. the model would not fit in memory).

    Raised before any noise is drawn, so the release is rolled back and nothing is charged."""


@dataclass
class MechanismResult:
    """What a run of any mechanism returns: ``cost``, what it used; ``payload``, what the release stores (the type of
    its kind, :attr:`service.releases.kinds.KindSpec.payload_type`); ``details``, public numbers stored beside it
    (functions of the request and the charge, and of the noisy output only)."""

    cost: PrivacyCost
    payload: Payload
    details: dict[str, object] = field(default_factory=dict)
