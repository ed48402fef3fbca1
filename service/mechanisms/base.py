"""What every mechanism receives and returns.

A mechanism sees sensitive data only through the count oracle (:class:`CountOracle`: exact counts, computed by the
data engine with ``GROUP BY``; the mechanisms that fit a model also read distinct rows with their counts or clipped
gradient sums through it, :class:`service.data.oracle.TableCountOracle`) and draws every random value from the
project's one :class:`service.privacy.noise.NoiseSource`. It returns a :class:`MechanismResult`, whatever its kind:
the privacy it actually used (which the release engine checks against what the accountant charged), its payload (of
its kind's type, :mod:`service.mechanisms.payloads`: what the release stores) and its public details.

A mechanism made of many noisy steps (MST, AIM) says what it had spent when a stop request, which the release engine
raises at a progress report, stops it part-way: :func:`record_spent` attaches its :class:`SpentSteps` to that
exception, and the engine reads them back (:func:`spent_before_stop`) to keep only their charge (docs/privacy.md 6.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
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


__all__ = ["FIT_PHASE", "CountOracle", "MechanismError", "MechanismResult", "Progress", "SpentSteps", "fit_progress",
           "no_progress", "record_spent", "spent_before_stop"]


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


@dataclass(frozen=True)
class SpentSteps:
    """The zCDP steps of one run that drew (or were about to draw) their noise, in order: ``(what, rho)`` with the
    exact rho of each, ``what`` being ``measure:<clique>`` or ``select:<step>``. Every step is recorded before its
    noise is drawn, so :attr:`rho` is never below what the noise drawn so far costs (docs/privacy.md 6.5)."""

    steps: tuple[tuple[str, Fraction], ...] = ()

    @property
    def rho(self) -> Fraction:
        return sum((rho for _, rho in self.steps), Fraction(0))

    def by_kind(self) -> dict[str, float]:
        """Rho by kind of step (the text before the first ':' of ``what``), as floats for JSON."""
        out: dict[str, Fraction] = {}
        for what, rho in self.steps:
            kind = what.split(":", 1)[0]
            out[kind] = out.get(kind, Fraction(0)) + rho
        return {k: float(v) for k, v in out.items()}


#: The attribute of an exception that carries the :class:`SpentSteps` of the run it stopped.
_SPENT = "spent_steps"


def record_spent(exc: BaseException, spent: SpentSteps) -> None:
    """Say on ``exc``, the exception that stops a run part-way, which of the run's steps had drawn their noise."""
    setattr(exc, _SPENT, spent)


def spent_before_stop(exc: BaseException) -> SpentSteps | None:
    """The :class:`SpentSteps` a mechanism recorded on the exception that stopped it, or None when the mechanism
    keeps no step-by-step record (every mechanism but MST and AIM): then nothing is known below its whole charge."""
    spent = getattr(exc, _SPENT, None)
    return spent if isinstance(spent, SpentSteps) else None
