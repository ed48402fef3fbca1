"""The questions a data engine answers (:class:`~service.data.engines.base.TableEngine`), as plain values: a marginal
to count, and one of DP-IHT's clipped gradient sums (:mod:`service.data.engines.gradients` writes its SQL).

They live below every engine module and below the interface itself, so that the interface, the SQL builders and the
callers (the count oracle, the mechanisms) all name them without importing one another: the interface used to name
:class:`GradientQuery` from the gradients' SQL module, which imports the grouping SQL, which imported the interface
(a circle, if only for type checkers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: One marginal to count: the attribute names (axes in that order) and their sizes.
Marginal = tuple[tuple[str, ...], tuple[int, ...]]

#: The losses whose slope the SQL knows (the estimator's ``loss`` names).
LOSSES = ("linear", "logistic")


@dataclass(frozen=True)
class GradientQuery:
    """One clipped gradient sum at one ``theta``, as lookup tables per attribute (the derivation is
    :mod:`service.data.engines.gradients`'s docstring).

    ``margins[j]`` and ``norms[j]`` hold ``m_a`` and ``q_a`` (one float per code) of ``features[j]``; ``labels``
    holds ``y`` per code of ``target``; ``margin_offset`` (``theta_0``) and ``norm_offset`` (1 with an intercept)
    are added to every row; ``clip_norm`` is ``G``."""

    loss: str
    clip_norm: float
    margin_offset: float
    norm_offset: float
    features: tuple[str, ...]
    margins: tuple[np.ndarray, ...]
    norms: tuple[np.ndarray, ...]
    target: str
    labels: np.ndarray

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if len(self.margins) != len(self.features) or len(self.norms) != len(self.features):
            raise ValueError("margins and norms must hold one array per feature")
        if any(len(m) != len(q) for m, q in zip(self.margins, self.norms, strict=True)):
            raise ValueError("each feature's margins and norms must have one value per code")

    @property
    def attributes(self) -> tuple[str, ...]:
        """The features, then the target: the order of the sums an engine returns."""
        return (*self.features, self.target)

    def marginals(self) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
        """One single-attribute marginal per attribute of :attr:`attributes`, of its number of codes."""
        levels = [len(m) for m in self.margins] + [len(self.labels)]
        return [((a,), (k,)) for a, k in zip(self.attributes, levels, strict=True)]
