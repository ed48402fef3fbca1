"""The real noise source with every draw of MST and AIM recorded, to recompute the privacy spent from what was
actually drawn (shared by the mechanisms' tests and the release engine's tests of stopped releases)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from service.privacy.noise import NoiseSource


class RecordingNoise:
    """The real noise source, with every call's parameters recorded (to recompute the privacy
    spent from what was actually drawn, and to see whether anything was drawn at all)."""

    def __init__(self, seed: int | None = None) -> None:
        self.source = NoiseSource(seed)
        self.calls: list[tuple[str, object, object]] = []

    def discrete_gaussian(self, sigma2: Fraction, size: int) -> np.ndarray:
        self.calls.append(("gaussian", sigma2, size))
        return self.source.discrete_gaussian(sigma2, size)

    def exponential_mechanism(self, scores: np.ndarray, epsilon: float, sensitivity: float) -> int:
        self.calls.append(("exponential", epsilon, sensitivity))
        return self.source.exponential_mechanism(scores, epsilon, sensitivity)

    def __getattr__(self, name: str):  # noqa: ANN204
        """Every other draw (the other mechanisms' samplers: MST and AIM use none) goes to the source, unrecorded."""
        return getattr(self.source, name)


def rho_from_calls(noise: RecordingNoise) -> Fraction:
    """zCDP spent according to the draws themselves: 1/(2 sigma^2) per marginal measured (L2
    sensitivity 1), epsilon^2/8 per selection, with epsilon read back exactly from the float."""
    total = Fraction(0)
    for kind, parameter, _ in noise.calls:
        if kind == "gaussian":
            total += 1 / (2 * Fraction(parameter))
        else:
            total += Fraction(parameter) ** 2 / 8
    return total
