"""The public-moment GLM protocol (``glm``, issue 20): one report ``R(s(y) z(x))`` per participant, a unit vector of
public-constant features times a bounded label, through an unbiased randomizer of the l2 ball.

**The device's map** (every constant public, published in the spec; docs/privacy.md 8.7.9). With ``mu`` (``center``)
and ``W`` (``matrix``) computed by the service from the campaign's public table (:func:`public_feature_map`: ``mu``
the public mean, ``W`` the public standard deviations' inverse, or with ``whiten`` the inverse square root of the
public covariance), a participant with features ``x`` (already in the campaign's public transform) forms

    ``a = (1, W (x - mu))``,  ``z = a / ||a||``  (``||a|| >= 1``, so ``z`` is a unit vector, never undefined),

and her label's score ``s(y)``: ``y - 1/2`` for ``labels="binary"`` (``y`` in ``{0, 1}``, so ``|s| = 1/2``) or
``clip(y, -B, B) / B`` for ``labels="bounded"`` (``B = label_bound``; ``|s| <= 1``; a label beyond ``B`` is clipped,
which biases the fit: choose ``B`` above the labels' public range). She reports ``R(u)`` for ``u = s(y) z`` (dimension
``p + 1``, ``||u|| <= radius``: ``1/2`` binary, ``1`` bounded), with ``R`` the campaign's ``randomizer``
(:data:`GLM_RANDOMIZERS`). ``E[R(u)] = u`` for each of them, so the mean report estimates ``T = E[s(y) z(x)]``
without bias; the server solves a moment equation over the public rows for ``w``
(:mod:`estimators.local.glm.moment`).

Participant data: ``{"x": (p,) or (k, p), "y": () or (k,)}``. Report: ``{"u": (p + 1,)}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from workloads.local import clipping
from workloads.local.protocols.base import (
    FieldSchema,
    OneRound,
    ProtocolError,
    ProtocolSpec,
    ReportSchema,
    RoundState,
    _features_and_labels,
    checked_delta,
    noisy_field,
    register_protocol,
)
from workloads.local.protocols.vector_reports import VECTOR_RANDOMIZERS
from workloads.local.randomizers.grid import GridNoise, grid_report
from workloads.local.randomizers.l2ball import l2_ball_output_norm
from workloads.local.randomizers.privunit import (
    cached_privunit_parameters,
    privunit_ball_output_norm,
    privunit_direction_moments,
)
from workloads.local.randomizers.sufficient_statistics import clip_features, noise_scales, statistics_ranges
from workloads.local.rng import generator_or_device
from workloads.parameters import ParameterError, check_count, check_positive

#: how a label becomes its score ``s(y)`` (module docstring)
LABEL_KINDS = ("binary", "bounded")


# ---------------------------------------------------------------------------------------------------- randomizers
def _gaussian_noise(dimension: int, radius: float, epsilon: float, delta: float) -> GridNoise:
    """The grid and discrete Gaussian of a vector in the ball of ``radius``: ``u = s z`` with ``||z|| = 1`` and
    ``|s| <= radius`` is the ``x y`` statistic of :mod:`~workloads.local.randomizers.sufficient_statistics` with
    ``norm_bound = 1``, ``label_bound = radius`` (l2 diameter ``2 radius``, plus rounding), calibrated there."""
    return noise_scales(dimension, 1.0, radius, epsilon, delta, gram=False).xy_noise


def _gaussian_randomize(u: np.ndarray, radius: float, epsilon: float, delta: float,
                        rng: np.random.Generator | None) -> np.ndarray:
    noise = _gaussian_noise(u.shape[-1], radius, epsilon, delta)
    return grid_report(clip_features(u, radius), noise, generator_or_device(rng))


def _gaussian_field(name: str, dimension: int, radius: float, epsilon: float, delta: float) -> FieldSchema:
    low, high = statistics_ranges(1.0, radius)["xy"]
    return noisy_field(name, (dimension,), low, high, _gaussian_noise(dimension, radius, epsilon, delta), dimension)


def _gaussian_covariance(second_moment: np.ndarray, mean: np.ndarray, radius: float, epsilon: float,
                         delta: float) -> np.ndarray:
    """``Cov R = E[u u^T] - E[u] E[u]^T + (v + g^2 / 4) I``: the noise is independent of ``u``, with variance ``v``
    at most ``g^2 t c`` (:attr:`GridNoise.variance`), and the unbiased rounding adds at most ``g^2 / 4`` per entry."""
    noise = _gaussian_noise(mean.size, radius, epsilon, delta)
    extra = noise.variance + noise.grid**2 / 4.0
    return second_moment - np.outer(mean, mean) + extra * np.eye(mean.size)


def _l2ball_covariance(second_moment: np.ndarray, mean: np.ndarray, radius: float, epsilon: float,
                       delta: float) -> np.ndarray:
    """``Cov R = (B^2 / d) I - E[u] E[u]^T`` exactly: ``R = B U`` with ``U`` uniform on a hemisphere given the side,
    and ``U U^T`` is unchanged by ``U -> -U``, so ``E[U U^T]`` is the whole sphere's ``I / d`` whatever the input."""
    bound = l2_ball_output_norm(mean.size, radius, epsilon)
    return bound**2 / mean.size * np.eye(mean.size) - np.outer(mean, mean)


def _privunit_covariance(second_moment: np.ndarray, mean: np.ndarray, radius: float, epsilon: float,
                         delta: float) -> np.ndarray:
    """``Cov R = r^2 m^2 (alpha M + beta (I - M)) - E[u] E[u]^T`` with ``M = E[a a^T]`` for the unit direction
    ``a = u / ||u||`` given to PrivUnit2 and ``(alpha, beta)`` from
    :func:`~workloads.local.randomizers.privunit.privunit_direction_moments`. ``M = E[u u^T] / r^2`` exactly for
    binary labels (``||u|| = r`` always); for bounded labels ``E[u u^T] / r^2 = E[s^2 z z^T]`` stands in for
    ``E[z z^T]`` (an approximation from below, as for the Gaussian's bounded case)."""
    d = mean.size
    m = privunit_ball_output_norm(d, radius, epsilon)
    alpha, beta = privunit_direction_moments(cached_privunit_parameters(d, float(epsilon)))
    directions = second_moment / radius**2
    return m**2 * ((alpha - beta) * directions + beta * np.eye(d)) - np.outer(mean, mean)


@dataclass(frozen=True)
class BallRandomizer:
    """An unbiased randomizer of vectors in an l2 ball of ``radius`` (``E[R(u)] = u``), as the protocol uses it.

    ``randomize(u, radius, epsilon, delta, rng)``: one report per row of ``u``; ``field(name, d, radius, epsilon,
    delta)``: the schema of everything it can emit; ``covariance(E[u u^T], E[u], radius, epsilon, delta)``: the
    covariance of one report (what the standard errors and the planner use); ``pure``: (epsilon, 0)-LDP (``delta``
    must be 0) or (epsilon, delta)-LDP (``delta`` in (0, 1))."""

    name: str
    pure: bool
    randomize: Callable[[np.ndarray, float, float, float, np.random.Generator | None], np.ndarray]
    field: Callable[[str, int, float, float, float], FieldSchema]
    covariance: Callable[[np.ndarray, np.ndarray, float, float, float], np.ndarray]
    source: str


def _sphere(name: str, covariance: Callable[[np.ndarray, np.ndarray, float, float, float], np.ndarray],
            source: str) -> BallRandomizer:
    """A randomizer onto a sphere shared with stein-glm's vector reports (:data:`VECTOR_RANDOMIZERS`: the same
    sampler and report schema), with the report covariance this protocol's standard errors and planner use."""
    shared = VECTOR_RANDOMIZERS[name]
    return BallRandomizer(name, shared.pure, shared.randomize, shared.schema, covariance, source)


#: the randomizers a ``glm`` campaign may use, by name (add one here: its three functions and whether it is pure).
#: The Gaussian is this protocol's own: its grid is calibrated with the unit vector ``z`` as the bounded feature and
#: ``s(y)`` as the label (``noise_scales(d, 1, r)``), where the shared row bounds the vector and fixes the label at 1.
GLM_RANDOMIZERS: dict[str, BallRandomizer] = {
    r.name: r for r in (
        _sphere("privunit", _privunit_covariance,
                "PrivUnit2, Bhowmick et al. 2018 (workloads.local.randomizers.privunit), pure epsilon; the lowest "
                "variance of the three"),
        _sphere("l2ball", _l2ball_covariance,
                "Duchi, Jordan & Wainwright 2018 (workloads.local.randomizers.l2ball), pure epsilon"),
        BallRandomizer("gaussian", False, _gaussian_randomize, _gaussian_field, _gaussian_covariance,
                       "exact discrete Gaussian on a public grid (Canonne, Kamath & Steinke 2020), (epsilon, delta)"),
    )
}

#: the randomizer of a campaign that names none
DEFAULT_RANDOMIZER = "privunit"


def get_randomizer(name: str) -> BallRandomizer:
    if name not in GLM_RANDOMIZERS:
        raise ProtocolError(f"randomizer must be one of {list(GLM_RANDOMIZERS)}, got {name!r}")
    return GLM_RANDOMIZERS[name]


# ------------------------------------------------------------------------------------------------- the device's map
def public_feature_map(public_rows: object, whiten: bool = False,
                       names: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, W)`` from public rows ``(m, p)``: the mean, and ``diag(1 / sd)`` (``whiten=False``) or
    ``Sigma^{-1/2}`` of the public covariance (``whiten=True``). A constant column (or a singular covariance) is
    refused, naming the column where one is at fault."""
    rows = np.asarray(public_rows, dtype=float)
    if rows.ndim != 2 or rows.shape[0] < 2 or not np.all(np.isfinite(rows)):
        raise ProtocolError(f"the public rows must be a finite matrix of at least 2 rows, got shape {rows.shape}")
    labels = list(names) if names is not None else [f"feature {j}" for j in range(rows.shape[1])]
    center = rows.mean(axis=0)
    spread = rows.std(axis=0)
    flat = [label for label, s in zip(labels, spread, strict=True) if not s > 0]
    if flat:
        raise ProtocolError(f"public column {flat[0]!r} is constant: it cannot be scaled (leave it out)")
    if not whiten:
        return center, np.diag(1.0 / spread)
    values, vectors = np.linalg.eigh(np.cov(rows, rowvar=False, bias=True).reshape(rows.shape[1], rows.shape[1]))
    if values.min() <= 1e-10 * values.max():
        raise ProtocolError("the public covariance is singular (a column is a combination of others): whitening "
                            "needs it invertible; use whiten=false or leave a column out")
    return center, (vectors / np.sqrt(values)) @ vectors.T


def directions(x: np.ndarray, center: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``z = (1, W (x - mu)) / ||(1, W (x - mu))||`` for each row of ``x`` (``(k, p)`` -> ``(k, p + 1)``)."""
    a = np.concatenate([np.ones(x.shape[:-1] + (1,)), (x - center) @ matrix.T], axis=-1)
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def label_scores(y: np.ndarray, labels: str, label_bound: float) -> np.ndarray:
    """``s(y)``: ``y - 1/2`` for binary labels (``y`` must be 0 or 1), ``clip(y, -B, B) / B`` for bounded ones."""
    if labels == "binary":
        if np.any((y != 0) & (y != 1)):
            raise ProtocolError("participant data 'y' must be 0 or 1 for a glm campaign with binary labels")
        return y - 0.5
    return np.clip(y, -label_bound, label_bound) / label_bound


@register_protocol
@dataclass(frozen=True)
class GlmSpec(OneRound, ProtocolSpec):
    """The public-moment GLM (module docstring): one round, one group, one report ``R(s(y) z(x))`` of ``p + 1``
    entries. ``center`` and ``matrix`` are the public ``mu`` and ``W`` (rows of ``W``), ``randomizer`` a key of
    :data:`GLM_RANDOMIZERS`; the link is not part of the spec (one collection answers every link)."""

    protocol: ClassVar[str] = "glm"
    dimension: int
    epsilon: float
    delta: float
    center: tuple[float, ...]
    matrix: tuple[tuple[float, ...], ...]
    labels: str = "binary"
    label_bound: float = 1.0
    randomizer: str = DEFAULT_RANDOMIZER
    participants: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension, error=ProtocolError))
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon, error=ProtocolError))
        object.__setattr__(self, "label_bound", check_positive("label_bound", self.label_bound, error=ProtocolError))
        if self.labels not in LABEL_KINDS:
            raise ProtocolError(f"labels must be one of {list(LABEL_KINDS)}, got {self.labels!r}")
        randomizer = get_randomizer(self.randomizer)
        object.__setattr__(self, "delta", checked_delta(self.delta, randomizer.pure, self.randomizer))
        center = np.asarray(self.center, dtype=float)
        matrix = np.asarray(self.matrix, dtype=float)
        p = self.dimension
        if center.shape != (p,) or matrix.shape != (p, p) or not (np.all(np.isfinite(center))
                                                                    and np.all(np.isfinite(matrix))):
            raise ProtocolError(f"center must be {p} finite numbers and matrix {p} rows of {p}, got shapes "
                                f"{center.shape} and {matrix.shape}")
        if np.linalg.matrix_rank(matrix) < p:
            raise ProtocolError("matrix (W) must be invertible")
        object.__setattr__(self, "center", tuple(center.tolist()))
        object.__setattr__(self, "matrix", tuple(tuple(row) for row in matrix.tolist()))
        if self.participants is not None:
            object.__setattr__(self, "participants",
                               check_count("participants", self.participants, error=ProtocolError))
        try:
            self.report_field()
        except ParameterError as error:
            raise ProtocolError(str(error)) from None
        self._check_groups_and_rounds()

    @property
    def radius(self) -> float:
        """The largest ``||u||``: 1/2 for binary labels, 1 for bounded ones."""
        return 0.5 if self.labels == "binary" else 1.0

    @property
    def report_dimension(self) -> int:
        return self.dimension + 1

    def ball_randomizer(self) -> BallRandomizer:
        return get_randomizer(self.randomizer)

    def report_field(self) -> FieldSchema:
        return self.ball_randomizer().field("u", self.report_dimension, self.radius, self.epsilon, self.delta)

    def map_features(self, x: np.ndarray) -> np.ndarray:
        """:func:`directions` with this campaign's public ``mu`` and ``W``."""
        return directions(np.asarray(x, dtype=float), np.asarray(self.center), np.asarray(self.matrix))

    def report_schema(self, round_index: int, state: RoundState) -> ReportSchema:
        self._check_state_round(round_index, state)
        return ReportSchema((self.report_field(),))

    def clipped(self, round_index: int, state: RoundState, data: Mapping[str, Any]) -> tuple[clipping.Clipped, ...]:
        """Labels beyond ``label_bound`` (``labels="bounded"``; binary labels are 0 or 1 and features are mapped to
        the unit sphere, so nothing else is ever clipped)."""
        self._check_state_round(round_index, state)
        _, y = _features_and_labels(data, self.dimension)
        if self.labels != "bounded":
            return ()
        return clipping.count("label_bound", self.label_bound, np.abs(y) > self.label_bound, "a label")

    def randomize(
        self, round_index: int, state: RoundState, data: Mapping[str, Any], rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        self._check_state_round(round_index, state)
        x, y = _features_and_labels(data, self.dimension)
        u = label_scores(y, self.labels, self.label_bound)[..., np.newaxis] * self.map_features(x)
        return {"u": self.ball_randomizer().randomize(u, self.radius, self.epsilon, self.delta, rng)}
