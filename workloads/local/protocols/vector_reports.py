"""The randomizers a protocol can run on one bounded vector ``v`` (``||v||_2 <= R``), as a small table.

A protocol whose report is one vector of the l2 ball (``stein-glm``'s default variant: ``y (1, x)``) picks its
randomizer by name from :data:`VECTOR_RANDOMIZERS`. Each entry says whether it is pure epsilon-LDP (``delta`` must be
0) or needs ``delta`` in (0, 1), the schema of the report field it emits (what the server accepts: exactly the set the
randomizer can emit where that set is checkable) and how to randomize a batch of rows already in the ball.

* ``l2ball``: Duchi, Jordan & Wainwright (2018), pure epsilon (:mod:`workloads.local.randomizers.l2ball`); every
  report has norm ``l2_ball_output_norm(d, R, eps)`` exactly (:func:`~workloads.local.protocols.base.sphere_field`).
* ``privunit``: PrivUnit2 (Bhowmick, Freudiger, Duchi & Rogers 2018), pure epsilon, unbiased
  (:func:`workloads.local.randomizers.privunit.privunit_ball_randomize`); every report has norm
  ``privunit_ball_output_norm(d, R, eps) = R m`` exactly (up to its public grid rounding), validated as the l2-ball's;
  about 3-40 % less variance than ``l2ball`` (``docs/privacy.md`` 8.7.8).
* ``gaussian``: the discrete Gaussian on a power-of-two grid calibrated to the ball's l2 diameter ``2 R``
  (:func:`workloads.local.randomizers.sufficient_statistics.noise_scales` with ``gram=False``), (epsilon, delta) by
  the tight zCDP conversion (``docs/privacy.md`` 8.7.2); every entry a multiple of the grid within the tail range.

Adding one is one more :class:`VectorRandomizer` in the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from workloads.local.protocols.base import FieldSchema, noisy_field, sphere_field
from workloads.local.randomizers.l2ball import l2_ball_output_norm, l2_ball_randomize
from workloads.local.randomizers.privunit import privunit_ball_output_norm, privunit_ball_randomize
from workloads.local.randomizers.sufficient_statistics import (
    noise_scales,
    randomize_sufficient_statistics,
    statistics_ranges,
)

#: ``schema(field name, dimension, radius R, epsilon, delta)``
Schema = Callable[[str, int, float, float, float], FieldSchema]
#: ``randomize(rows (k, d) with norms <= R, R, epsilon, delta, rng)`` -> reports (k, d)
Randomize = Callable[[np.ndarray, float, float, float, "np.random.Generator | None"], np.ndarray]
#: ``output_norm(dimension, R, epsilon)``: the norm of every report of a randomizer onto a sphere
OutputNorm = Callable[[int, float, float], float]


@dataclass(frozen=True)
class VectorRandomizer:
    """One row of :data:`VECTOR_RANDOMIZERS`: ``pure`` (delta must be 0) or not (delta in (0, 1)), the report
    field's schema and the batch randomizer; ``output_norm`` (randomizers onto a sphere, ``None`` otherwise): the
    norm of every report, so ``E[r r^T]`` has trace ``output_norm^2`` (what the planner uses)."""

    name: str
    pure: bool
    schema: Schema
    randomize: Randomize
    output_norm: OutputNorm | None = None


def _l2ball_schema(name: str, dimension: int, radius: float, epsilon: float, delta: float) -> FieldSchema:
    return sphere_field(name, (dimension,), l2_ball_output_norm(dimension, radius, epsilon))


def _l2ball(rows: np.ndarray, radius: float, epsilon: float, delta: float,
            rng: np.random.Generator | None) -> np.ndarray:
    return l2_ball_randomize(rows, radius, epsilon, rng)


def _privunit_schema(name: str, dimension: int, radius: float, epsilon: float, delta: float) -> FieldSchema:
    return sphere_field(name, (dimension,), privunit_ball_output_norm(dimension, radius, epsilon))


def _privunit(rows: np.ndarray, radius: float, epsilon: float, delta: float,
              rng: np.random.Generator | None) -> np.ndarray:
    return privunit_ball_randomize(rows, radius, epsilon, rng)


def _gaussian_schema(name: str, dimension: int, radius: float, epsilon: float, delta: float) -> FieldSchema:
    noise = noise_scales(dimension, radius, 1.0, epsilon, delta, gram=False).xy_noise
    return noisy_field(name, (dimension,), *statistics_ranges(radius, 1.0)["xy"], noise, dimension)


def _gaussian(rows: np.ndarray, radius: float, epsilon: float, delta: float,
              rng: np.random.Generator | None) -> np.ndarray:
    # the vector is the "x" of an x y report with y = 1: the same clipping, grid and discrete Gaussian noise
    return randomize_sufficient_statistics(rows, np.ones(rows.shape[:-1]), norm_bound=radius, label_bound=1.0,
                                           epsilon=epsilon, delta=delta, gram=False, rng=rng)["xy"]


#: name -> randomizer
VECTOR_RANDOMIZERS: dict[str, VectorRandomizer] = {
    r.name: r for r in (
        VectorRandomizer("privunit", True, _privunit_schema, _privunit, privunit_ball_output_norm),
        VectorRandomizer("l2ball", True, _l2ball_schema, _l2ball, l2_ball_output_norm),
        VectorRandomizer("gaussian", False, _gaussian_schema, _gaussian),
    )
}
#: the randomizer a protocol using this table runs when the steward names none
DEFAULT_VECTOR_RANDOMIZER = "privunit"
