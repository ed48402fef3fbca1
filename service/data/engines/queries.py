"""The questions a data engine answers (:class:`~service.data.engines.base.TableEngine`), as plain values: a marginal
to count, and one of DP-IHT's sums of a per-row weight (its clipped gradient, or its loss's curvature for the error
bars; :mod:`service.data.engines.gradients` writes their SQL).

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
#: What a :class:`GradientQuery` sums: each row's clipped gradient weight (float), or its curvature weight on the
#: grid ``2^-CURVATURE_GRID_BITS`` (an integer; :mod:`service.mechanisms.curvature`).
STATISTICS = ("gradient", "curvature")
#: K: a curvature weight ``l''(u)`` is rounded to a multiple of ``2^-K`` (the engines' SQL and numpy alike).
CURVATURE_GRID_BITS = 16


@dataclass(frozen=True)
class GradientQuery:
    """One clipped gradient sum at one ``theta``, as lookup tables per attribute (the derivation is
    :mod:`service.data.engines.gradients`'s docstring).

    ``margins[j]`` and ``norms[j]`` hold ``m_a`` and ``q_a`` (one float per code) of ``features[j]``; ``labels``
    holds ``y`` per code of ``target``; ``margin_offset`` (``theta_0``) and ``norm_offset`` (1 with an intercept)
    are added to every row; ``clip_norm`` is ``G``.

    ``statistic`` ``"gradient"`` (the default) sums the clipped gradient weight ``w`` per code of every attribute;
    ``"curvature"`` sums the integer weight ``round(2^K l''(u))`` of the rows whose gradient is not clipped (0 for
    the others: a clipped gradient is locally constant in ``theta``), per code of every attribute and per pair of
    codes of each pair of features in ``pairs``, from which the curvature ``sum_i w_i x_i x_i^T`` over the features
    of ``pairs`` follows (:func:`service.mechanisms.curvature.assemble`)."""

    loss: str
    clip_norm: float
    margin_offset: float
    norm_offset: float
    features: tuple[str, ...]
    margins: tuple[np.ndarray, ...]
    norms: tuple[np.ndarray, ...]
    target: str
    labels: np.ndarray
    statistic: str = "gradient"
    pairs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {STATISTICS}, got {self.statistic!r}")
        if self.pairs and self.statistic != "curvature":
            raise ValueError("pairs are summed for the curvature statistic only")
        if any(a not in self.features or b not in self.features or a == b for a, b in self.pairs):
            raise ValueError("each pair must name two different features")
        if len(self.margins) != len(self.features) or len(self.norms) != len(self.features):
            raise ValueError("margins and norms must hold one array per feature")
        if any(len(m) != len(q) for m, q in zip(self.margins, self.norms, strict=True)):
            raise ValueError("each feature's margins and norms must have one value per code")

    @property
    def attributes(self) -> tuple[str, ...]:
        """The features, then the target: the order of the sums an engine returns."""
        return (*self.features, self.target)

    def marginals(self) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
        """One single-attribute marginal per attribute of :attr:`attributes`, of its number of codes, then one
        two-attribute marginal per pair of :attr:`pairs`: the order of the sums an engine returns."""
        levels = dict(zip(self.attributes, [len(m) for m in self.margins] + [len(self.labels)], strict=True))
        return ([((a,), (levels[a],)) for a in self.attributes]
                + [((a, b), (levels[a], levels[b])) for a, b in self.pairs])
