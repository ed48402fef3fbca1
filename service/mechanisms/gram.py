"""The AdaSSP sufficient-statistics release: a noisy Gram matrix ``Z^T Z`` plus a noisy ``lambda_min``.

AdaSSP (Wang 2018, "Revisiting differentially private linear regression: optimal and adaptive prediction &
estimation in unbounded domain", UAI; restated as Alg. 2 of Ferrando & Sheldon 2024, "Private Regression via
Data-Dependent Sufficient Statistic Perturbation", App. B) perturbs ``X^T X``, ``X^T y`` and ``lambda_min(X^T X)``.
The service releases the same kind of statistics once, over a *set of columns*, so that every linear regression
among them can be answered later for free:

* ``Z = [1?, A_1 x_1, ..., A_m x_m]`` holds the encoded columns of the requested features and target
  (:class:`workloads.encodings.DesignEncoding`; the constant column only when an intercept was asked for);
* ``Z^T Z`` is computed exactly from the 1- and 2-way marginals, counted in SQL (Prop. 3.2 of Ferrando & Sheldon with
  exact counts, :func:`estimators.central.sufficient_stats.gram_from_marginals`): no row leaves the database;
* its upper triangle (diagonal included) gets i.i.d. ``N(0, sigma_gram^2)`` noise and is mirrored (Alg. 2,
  steps 4 and 5 as one Gaussian mechanism); ``lambda_min(Z^T Z)`` gets ``N(0, sigma_lambda^2)`` (step 2).

Privacy (zCDP; derivation in docs/privacy.md, section 8.5). Neighbours differ by adding or removing one row
``z`` (the relation of Ferrando & Sheldon, App. B). Let ``s_j = ||A_j e||^2`` be the squared norm of block ``j`` of
``z`` (the intercept is a block with ``s = 1``) and ``m_j = max s_j`` (``AttributeEncoding.squared_norm_bound``).

* Upper triangle: it changes by ``(z_i z_j)_{i <= j}``, of squared norm
  ``sum_{i<=j} z_i^2 z_j^2 = (||z||^4 + sum_i z_i^4) / 2 <= (B^4 + sum_j m_j^2) / 2`` with ``B^2 = sum_j m_j`` the
  bound of Prop. 3.1 (``sum_i z_i^4 <= sum_j s_j^2`` within each block). Every built-in encoding has at most one
  non-zero entry per block, and a row with every block at its maximum exists, so the bound is attained: it is
  the exact l2 sensitivity, below the ``B^2`` of App. B (``||z z^T||_F``, which counts off-diagonal entries twice).
* ``lambda_min(Z^T Z)``: adding ``z z^T`` moves every eigenvalue up by between 0 and ``||z||^2`` (Weyl), so
  the sensitivity is ``B^2``. By Cauchy interlacing, ``lambda_min`` of any principal submatrix -- the
  ``X^T X`` of any regression among the columns -- is at least ``lambda_min(Z^T Z)``, so the released value
  is a valid (conservative) stand-in for Alg. 2's ``lambda_min(X^T X)`` for every such regression.
* Each part is a Gaussian mechanism: ``sigma = Delta / sqrt(2 rho_part)`` is ``rho_part``-zCDP (Bun & Steinke
  2016, Prop. 1.6); the parts get ``rho_lambda = lambda_share * rho`` (1/3 as in Alg. 2) and ``rho_gram = rho -
  rho_lambda`` (Alg. 2's two thirds for ``X^T X`` and ``X^T y``), which compose to exactly ``rho`` (Lemma 2.3).

Exact integer noise (docs/privacy.md, section 8.5). Every built-in encoding has rational entries, so each column
``c`` of ``Z`` becomes integer after multiplying it by an integer ``s_c`` (``k - 1`` for the scalar encoding
``2 v / (k - 1) - 1``, 1 for one-hot, ``{-1, +1}`` and the constant column): ``W = S Z^T Z S`` is an integer matrix,
computed exactly from integer counts. Each upper-triangle entry ``W_ij`` gets discrete Gaussian noise (Canonne,
Kamath & Steinke 2020, the exact sampler of ``NoiseSource.discrete_gaussian``) with the rational parameter
``sigma_ij^2 = sigma_gram^2 s_i^2 s_j^2``, and the release divides back: ``(W_ij + N_ij) / (s_i s_j)``. Adding a row
moves ``W_ij`` by ``s_i s_j z_i z_j``, so the Renyi divergence of order alpha is at most
``alpha sum_{i<=j} (s_i s_j z_i z_j)^2 / (2 sigma_ij^2) = alpha sum_{i<=j} (z_i z_j)^2 / (2 sigma_gram^2)``: the
same ``rho_gram`` as continuous noise of scale ``sigma_gram``, with no floating point in the noise. Only the
minimum eigenvalue, a real number, gets continuous Gaussian noise (from the OS CSPRNG, ``NoiseSource.gaussian``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from estimators.central.adassp import AdaSSPNoiseScales, lambda_min_shift, ridge_offset
from estimators.central.sufficient_stats import GramStatistics, gram_from_marginals
from service.mechanisms.base import CountOracle, MechanismError, MechanismResult, Progress, no_progress
from service.mechanisms.payloads import GramPayload
from service.privacy import calibration
from service.privacy.calibration import float_down, float_up, sqrt_up
from service.privacy.cost import PrivacyCost
from workloads.domain import Domain
from workloads.encodings import INTERCEPT_NAME, DesignEncoding, EncodingError

if TYPE_CHECKING:
    from service.privacy.noise import NoiseSource

#: Share of rho for the minimum eigenvalue (Alg. 2 gives it a third of the budget).
DEFAULT_LAMBDA_SHARE = Fraction(1, 3)
#: Alg. 2's failure probability (its "rho", 0.05 in Ferrando & Sheldon), used in the ridge constant.
DEFAULT_FAILURE_PROB = 0.05
#: Largest Gram matrix released (columns incl. intercept): q(q+1)/2 noisy entries.
MAX_COLUMNS = 2000


# the released columns -----------------------------------------------------------------------------
def column_design(domain: Domain, spec: Mapping[str, object]) -> DesignEncoding:
    """The :class:`DesignEncoding` whose ``Z = [1?, X, y]`` is the released column set ``spec``
    (``{"columns": [...], "encodings": {...}, "intercept": bool}``): its last column plays the target."""
    columns = list(spec["columns"])  # type: ignore[arg-type]
    return DesignEncoding(domain, columns[:-1], columns[-1], "linear", bool(spec["intercept"]),
                          overrides=dict(spec.get("encodings") or {}))  # type: ignore[arg-type]


def column_spec(design: DesignEncoding) -> dict[str, object]:
    """The column set of ``design`` (features then target), JSON-ready: what a Gram release measures."""
    def encoding(enc: object) -> object:
        return enc.matrix.tolist() if enc.kind == "custom" else enc.kind  # type: ignore[attr-defined]

    return {
        "columns": [enc.attribute for enc in design.attribute_encodings],
        "encodings": {enc.attribute: encoding(enc) for enc in design.attribute_encodings},
        "intercept": design.intercept,
    }


def release_params(design: DesignEncoding, delta: Fraction) -> dict[str, object]:
    """What a Gram release of ``design``'s columns stores beside its payload: the columns, and the constants of Alg. 2
    that answering reads back (the confidence ``delta`` of the request, the failure probability, the share of rho
    spent on ``lambda_min``)."""
    return {"columns": column_spec(design), "confidence_delta": float(delta), "failure_prob": DEFAULT_FAILURE_PROB,
            "lambda_share": str(DEFAULT_LAMBDA_SHARE)}


# calibration --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IntegralDesign:
    """The released columns made integral: column ``c`` of ``Z`` times ``scales[c]`` is an integer at every level.

    ``blocks[j]`` is the integer matrix ``S_j A_j`` of attribute ``j`` (feature blocks then the target, in Gram
    order; an object array of Python ints) and ``bounds`` the exact ``m_j`` (intercept first when present)."""

    scales: tuple[int, ...]
    blocks: tuple[np.ndarray, ...]
    bounds: tuple[Fraction, ...]


def integral_design(design: DesignEncoding) -> IntegralDesign:
    """Scales and integer blocks of ``design`` (:meth:`AttributeEncoding.exact_matrix`): each column's scale is the
    least common multiple of the denominators of its entries. Raises :class:`MechanismError` for a custom encoding
    whose entries are not such rationals."""
    scales = [1] if design.intercept else []
    bounds = [Fraction(1)] if design.intercept else []
    blocks = []
    for enc in design.attribute_encodings:
        try:
            exact = enc.exact_matrix()
        except EncodingError as exc:
            raise MechanismError(f"the Gram release adds exact integer noise: {exc}") from None
        row_scales = [math.lcm(*(x.denominator for x in row)) for row in exact]
        block = np.array([[int(x * m) for x in row] for row, m in zip(exact, row_scales, strict=True)], dtype=object)
        scales.extend(row_scales)
        blocks.append(block.reshape(len(exact), enc.levels))
        bounds.append(max((sum((row[v] ** 2 for row in exact), Fraction(0)) for v in range(enc.levels)),
                          default=Fraction(0)))
    return IntegralDesign(tuple(scales), tuple(blocks), tuple(bounds))


def block_bounds(design: DesignEncoding) -> list[Fraction]:
    """``m_j``: the largest squared norm of each block of a row of ``Z`` (intercept first when present), exactly."""
    return list(integral_design(design).bounds)


def gram_sensitivity_squared(design: DesignEncoding) -> Fraction:
    """``Delta_g^2 = (B^4 + sum_j m_j^2) / 2``, the squared l2 sensitivity of the upper triangle (module docstring)."""
    bounds = block_bounds(design)
    b2 = sum(bounds, Fraction(0))
    return (b2 * b2 + sum((m * m for m in bounds), Fraction(0))) / 2


def upper_triangle_sensitivity(design: DesignEncoding) -> float:
    """Exact l2 sensitivity of the upper triangle of ``Z^T Z``: ``sqrt((B^4 + sum_j m_j^2) / 2)``, rounded up."""
    return sqrt_up(gram_sensitivity_squared(design))


def lambda_min_sensitivity(design: DesignEncoding) -> float:
    """``B^2 = sum_j m_j``: how far one row can move ``lambda_min(Z^T Z)`` (Weyl), rounded up."""
    return float_up(sum(block_bounds(design), Fraction(0)))


@dataclass(frozen=True)
class GramCalibration:
    """The two Gaussian mechanisms of one release: their zCDP shares (exact), the exact discrete Gaussian parameter
    of the Gram part on the encoded scale (``sigma2_gram``, divided into ``s_i^2 s_j^2`` per entry) and the floats
    that post-processing uses (``sigma_gram = sqrt(sigma2_gram)`` rounded up)."""

    rho_gram: Fraction
    rho_lambda: Fraction
    sensitivity_gram: float
    sensitivity_lambda: float
    sigma_gram: float
    sigma_lambda: float
    sigma2_gram: Fraction

    @property
    def cost(self) -> PrivacyCost:
        return PrivacyCost(rho=self.rho_gram + self.rho_lambda)

    def to_json(self) -> dict[str, float]:
        return {
            "rho_gram": float(self.rho_gram),
            "rho_lambda_min": float(self.rho_lambda),
            "sensitivity_gram": self.sensitivity_gram,
            "sensitivity_lambda_min": self.sensitivity_lambda,
            "sigma_gram": self.sigma_gram,
            "sigma_lambda_min": self.sigma_lambda,
            "gram_noise": "discrete_gaussian",
        }


def calibrate(design: DesignEncoding, rho: Fraction, lambda_share: Fraction = DEFAULT_LAMBDA_SHARE) -> GramCalibration:
    """Split ``rho`` exactly; the Gram part gets ``sigma_gram^2 = Delta_g^2 / (2 rho_gram)`` exactly (the discrete
    Gaussian's parameter; CKS 2020, Thm. 4), the eigenvalue ``sigma = Delta_l / sqrt(2 rho_lambda)`` (rounded up)."""
    rho = Fraction(rho)
    lambda_share = Fraction(lambda_share)
    if rho <= 0:
        raise MechanismError(f"rho must be > 0, got {rho}")
    if not 0 < lambda_share < 1:
        raise MechanismError(f"lambda_share must be strictly between 0 and 1, got {lambda_share}")
    rho_lambda = rho * lambda_share
    rho_gram = rho - rho_lambda
    sigma2_gram = calibration.gaussian_sigma2_exact(rho_gram, 1) * gram_sensitivity_squared(design)
    sens_lambda = lambda_min_sensitivity(design)
    return GramCalibration(
        rho_gram=rho_gram,
        rho_lambda=rho_lambda,
        sensitivity_gram=upper_triangle_sensitivity(design),
        sensitivity_lambda=sens_lambda,
        sigma_gram=sqrt_up(sigma2_gram),
        sigma_lambda=calibration.gaussian_sigma(float_down(rho_lambda), sens_lambda),
        sigma2_gram=sigma2_gram,
    )


# the mechanism ------------------------------------------------------------------------------------
def exact_gram(oracle: CountOracle, design: DesignEncoding) -> GramStatistics:
    """``Z^T Z`` from exact 1- and 2-way counts (Prop. 3.2 with exact marginals equals the row computation), in
    floating point.

    With a :class:`service.data.oracle.TableCountOracle` the marginals are counted in one batch (``counts_many``)."""
    counts = _count(oracle, design)
    needed = design.required_marginals()
    total = float(counts[needed[0]].sum())
    return gram_from_marginals(design, lambda attrs: counts[tuple(attrs)], total=total)


def _count(oracle: CountOracle, design: DesignEncoding) -> dict[tuple[str, ...], np.ndarray]:
    needed = design.required_marginals()
    batch = getattr(oracle, "counts_many", None)
    return batch(needed) if batch is not None else {m: oracle.counts(m) for m in needed}


def integer_gram(oracle: CountOracle, design: DesignEncoding, integral: IntegralDesign) -> np.ndarray:
    """``W = S Z^T Z S`` exactly, as a ``q x q`` object array of Python ints, from integer 1- and 2-way counts
    (Prop. 3.2 with the integer blocks ``S_j A_j``: ``W_[j,k] = (S_j A_j) mu_jk (S_k A_k)^T``)."""
    counts = _count(oracle, design)
    q = len(design.gram_names)
    W = np.zeros((q, q), dtype=object)
    spans = [rows for _, rows in design.gram_blocks()]
    names = [enc.attribute for enc in design.attribute_encodings]
    singles = [np.asarray(counts[(name,)]).astype(np.int64).astype(object) for name in names]
    for block, rows, mu in zip(integral.blocks, spans, singles, strict=True):
        W[rows, rows] = (block * mu) @ block.T
        if design.intercept:
            W[0, rows] = W[rows, 0] = block @ mu
    if design.intercept:
        W[0, 0] = int(sum(singles[0]))
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            mu = np.asarray(counts[(names[a], names[b])]).astype(np.int64).astype(object)
            block = integral.blocks[a] @ mu @ integral.blocks[b].T
            W[spans[a], spans[b]] = block
            W[spans[b], spans[a]] = block.T
    return W


def perturb_symmetric(W: np.ndarray, scales: Sequence[int], sigma2: Fraction, noise: NoiseSource,
                      multiplier: int = 1) -> np.ndarray:
    """``(W_ij + N_ij) / p_ij`` on the upper triangle, mirrored: ``W`` an exact integer matrix (Python ints) of some
    matrix ``M = W / p`` with ``p_ij = multiplier s_i s_j``, ``N_ij`` exact discrete Gaussian of parameter
    ``sigma2 p_ij^2`` (so ``M`` gets the Renyi divergence of continuous noise of variance ``sigma2``; module
    docstring). Drawn by scale, in a fixed order, so that a seeded release is reproducible."""
    q = W.shape[0]
    rows, cols = np.triu_indices(q)
    by_scale: dict[int, list[int]] = {}
    for k, (i, j) in enumerate(zip(rows.tolist(), cols.tolist(), strict=True)):
        by_scale.setdefault(multiplier * scales[i] * scales[j], []).append(k)
    upper = np.empty(rows.size)
    for product in sorted(by_scale):
        entries = by_scale[product]
        draws = noise.discrete_gaussian(sigma2 * product * product, len(entries))
        for k, n in zip(entries, draws.tolist(), strict=True):
            upper[k] = (W[rows[k], cols[k]] + n) / product  # int / int: correctly rounded
    noisy = np.zeros((q, q))
    noisy[rows, cols] = upper
    noisy[cols, rows] = upper
    return noisy


class GramRelease:
    """A release runner for :func:`service.releases.engine.run_release`, built by the registry
    (:mod:`service.mechanisms.catalog`); its result's payload is a :class:`~service.mechanisms.payloads.GramPayload`.

    ``design`` fixes the released columns (:func:`column_spec`), ``rho`` the exact zCDP cost.
    """

    def __init__(self, design: DesignEncoding, rho: Fraction, lambda_share: Fraction = DEFAULT_LAMBDA_SHARE) -> None:
        q = len(design.gram_names)
        if q > MAX_COLUMNS:
            raise MechanismError(f"the Gram matrix would have {q} columns; the limit is {MAX_COLUMNS}")
        self.design = design
        self.integral = integral_design(design)
        self.calibration = calibrate(design, rho, lambda_share)

    def __call__(self, oracle: CountOracle, noise: NoiseSource, progress: Progress = no_progress) -> MechanismResult:
        W = integer_gram(oracle, self.design, self.integral)
        progress(1, 3, "counted the 1- and 2-way marginals")
        scales = self.integral.scales
        q = W.shape[0]
        exact = np.array([[W[i, j] / (scales[i] * scales[j]) for j in range(q)] for i in range(q)], dtype=float)
        exact_lambda = float(np.linalg.eigvalsh(exact)[0])
        cal = self.calibration
        noisy = perturb_symmetric(W, scales, cal.sigma2_gram, noise)
        lam = float(np.asarray(noise.gaussian(cal.sigma_lambda, 1), dtype=float)[0])
        payload = GramPayload(tuple(self.design.gram_names), noisy, exact_lambda + lam)
        progress(3, 3, "perturbed Z^T Z and lambda_min")
        details = {"gram_names": list(self.design.gram_names), "column_scales": list(scales), **cal.to_json()}
        return MechanismResult(cal.cost, payload, details)


# answering from a stored release (free post-processing) -------------------------------------------
def sub_statistics(payload: GramPayload, design: DesignEncoding) -> GramStatistics:
    """The noisy ``Z^T Z`` of ``design`` (a regression among the released columns): a principal submatrix.

    ``n`` is the noisy constant-column entry when the release has one, else 0.0 (not released; AdaSSP does
    not use it)."""
    index = {name: i for i, name in enumerate(payload.names)}
    missing = [name for name in design.gram_names if name not in index]
    if missing:
        raise KeyError(f"the release has no column(s) {missing}")
    picks = [index[name] for name in design.gram_names]
    zz = payload.zz[np.ix_(picks, picks)]
    n = float(payload.zz[index[INTERCEPT_NAME], index[INTERCEPT_NAME]]) if INTERCEPT_NAME in index else 0.0
    return GramStatistics.for_design(design, zz, n)


def adassp_scales(
    details: Mapping[str, object], d: int, confidence_delta: float, failure_prob: float
) -> AdaSSPNoiseScales:
    """Alg. 2's constants for a regression with ``d`` columns of ``X`` (intercept included) answered from a
    release with the noise scales in ``details``: ``shift = sqrt(log(6/delta)) sigma_lambda`` (step 2) and
    ``ridge_offset = sqrt(d log(2 d^2 / failure_prob)) sigma_gram`` (step 3), Alg. 2's formulas written with the
    release's own sigmas (as :func:`estimators.central.adassp.adassp_noise_scales` does for its zCDP calibration)."""
    sigma_gram = float(details["sigma_gram"])  # type: ignore[arg-type]
    sigma_lambda = float(details["sigma_lambda_min"])  # type: ignore[arg-type]
    return AdaSSPNoiseScales(
        calibration="zcdp",
        d=d,
        delta=confidence_delta,
        failure_prob=failure_prob,
        include_yty=True,
        sensitivity_lambda_min=float(details["sensitivity_lambda_min"]),  # type: ignore[arg-type]
        sensitivity_xtx=float(details["sensitivity_gram"]),  # type: ignore[arg-type]
        sensitivity_xty=float(details["sensitivity_gram"]),  # type: ignore[arg-type]
        sigma_lambda_min=sigma_lambda,
        sigma_xtx=sigma_gram,
        sigma_xty=sigma_gram,
        lambda_min_shift=lambda_min_shift(sigma_lambda, confidence_delta),
        ridge_offset=ridge_offset(sigma_gram, d, failure_prob),
    )
