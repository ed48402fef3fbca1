"""What every marginal mechanism receives and returns.

A mechanism sees sensitive data only through a :class:`CountOracle` (exact counts, computed by the
database with ``GROUP BY``) and draws every random value from the project's one
:class:`service.privacy.noise.NoiseSource`. It returns a :class:`MechanismResult`: the noisy measurements,
the fitted graphical model that answers any marginal afterwards, and the privacy it actually used,
which the release engine checks against what the accountant charged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from estimators.graphical.mbi_adapter import Model
from estimators.graphical.mirror_descent import Measurement
from estimators.residual.reconstruct import NoisyResiduals
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
    """``model``: the fitted graphical model (MST, AIM); None for a release stored as its noisy ``residuals``
    (residual, and the direct laplace and gaussian releases since issue 9), which answers without a model and fits
    one only when an answer needs it (service/releases/stored_models.py)."""

    measurements: list[Measurement]
    model: Model | None
    cost: PrivacyCost
    details: dict[str, object] = field(default_factory=dict)
    residuals: NoisyResiduals | None = None
