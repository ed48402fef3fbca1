"""The participant's side of DR-ERM-LDP: a public random projection, then one private report of projected statistics.

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Alg. 4. Step 2: the server draws a sub-Gaussian matrix ``Phi`` (``m x p``, rows isotropic, scaled by
``1/sqrt(m)``, Lemma 4) and sends its *seed* to every participant; step 4: participant ``i`` holds
``(Phi x_i, y_i)``; step 5 runs a low-dimensional eps-LDP ERM algorithm on the projected data (the paper's
"modified algorithm of Smith et al. 2017" is in its supplementary material, which our copy lacks).

**The projection** (:func:`random_projection`) has Rademacher entries ``+-1/sqrt(m)`` (sub-Gaussian, isotropic rows,
as Lemma 4 allows), built from the bits of the raw 64-bit output of PCG64 seeded by ``SeedSequence(seed)``: integer
operations on a fixed, published generator (O'Neill 2014), independent of numpy's sampling algorithms, which NEP 19
allows to change between versions (a Gaussian ``Phi`` could differ between a participant's numpy and the server's).
A test pins the first entries for one seed. The seed is public by design (no privacy rests on it);
the server draws it from its own randomness.

**Our low-dimensional ERM step (squared loss).** Each participant reports, through the l2-ball randomizer of Duchi,
Jordan & Wainwright (2018) at her full epsilon, the vector ``[y u, vech(u u^T)]`` with ``u = Phi x`` clipped to norm
``R`` (``feature_radius``), ``y`` clipped to ``[-B, B]`` and ``vech`` the upper triangle (diagonal included) in
``numpy.triu_indices`` order. Its norm is at most ``sqrt(B^2 R^2 + R^4)``: ``||y u|| <= B R`` and
``sum_{i <= j} u_i^2 u_j^2 <= ||u||^4``. The mean of the reports is unbiased for the mean of these statistics, from
which the server minimises the projected least-squares risk over ``Phi C``. eps-LDP per participant; a participant
reports once.
"""

from __future__ import annotations

import math

import numpy as np

from workloads.local.randomizers.inputs import as_finite_rows, as_finite_vector
from workloads.local.randomizers.l2ball import l2_ball_randomize
from workloads.parameters import ParameterError, check_count, check_positive


def random_projection(rows: int, columns: int, seed: int) -> np.ndarray:
    """``Phi`` (``rows x columns``), entries ``+-1/sqrt(rows)`` from the public ``seed`` (the same on every machine)."""
    m = check_count("rows", rows)
    p = check_count("columns", columns)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    count = m * p
    raw = np.random.PCG64(np.random.SeedSequence(int(seed))).random_raw(-(-count // 64))
    bits = np.unpackbits(raw.astype("<u8").view(np.uint8), bitorder="little")[:count]
    return (2.0 * bits.astype(float) - 1.0).reshape(m, p) / math.sqrt(m)


def projected_statistics_bound(feature_radius: float, label_bound: float) -> float:
    """``sqrt(B^2 R^2 + R^4)``: the l2 bound of one participant's statistics vector."""
    r = check_positive("feature_radius", feature_radius)
    b = check_positive("label_bound", label_bound)
    return math.sqrt(b * b * r * r + r**4)


def projected_statistics(
    x: object, y: object, projection: object, feature_radius: float, label_bound: float
) -> np.ndarray:
    """``[y u, vech(u u^T)]`` per row of ``x``, ``u = Phi x`` clipped to norm ``R``, ``y`` clipped to ``[-B, B]``."""
    r = check_positive("feature_radius", feature_radius)
    b = check_positive("label_bound", label_bound)
    phi, _ = as_finite_rows("projection", projection)
    rows, single = as_finite_rows("x", x, width=phi.shape[1])
    labels = np.clip(as_finite_vector("y", y), -b, b)
    if labels.size != rows.shape[0]:
        raise ParameterError(f"y must hold {rows.shape[0]} label(s), got {labels.size}")
    projected = rows @ phi.T
    norms = np.linalg.norm(projected, axis=1, keepdims=True)
    projected = projected * np.minimum(1.0, r / np.maximum(norms, np.finfo(float).tiny))
    upper = np.triu_indices(phi.shape[0])
    outer = projected[:, upper[0]] * projected[:, upper[1]]
    statistics = np.hstack([labels[:, np.newaxis] * projected, outer])
    return statistics[0] if single else statistics


def unpack_projected_statistics(vector: object, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(mean y u, mean u u^T)`` (an ``m`` vector and a symmetric ``m x m`` matrix) from a (mean) statistics vector."""
    m = check_count("rows", rows)
    values = as_finite_vector("vector", vector)
    if values.size != m + m * (m + 1) // 2:
        raise ParameterError(f"vector must have {m + m * (m + 1) // 2} entries for m={m}, got {values.size}")
    cross = values[:m].copy()
    gram = np.zeros((m, m))
    upper = np.triu_indices(m)
    gram[upper] = values[m:]
    gram = gram + np.triu(gram, 1).T
    return cross, gram


def projected_statistics_report(
    x: object,
    y: object,
    projection: object,
    feature_radius: float,
    label_bound: float,
    epsilon: float,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The eps-LDP report(s): :func:`projected_statistics` through the l2-ball randomizer (radius: the bound above)."""
    radius = projected_statistics_bound(feature_radius, label_bound)
    check_positive("epsilon", epsilon)
    statistics = projected_statistics(x, y, projection, feature_radius, label_bound)
    return l2_ball_randomize(statistics, radius, epsilon, rng)
