"""DP-IHT: sparsity-constrained DP-ERM in the central model (linear, and logistic with an l2 penalty).

Source: Wang & Xu, "On sparse linear regression in the local differential privacy model" (ICML 2019), Sec. 6,
Alg. 3: ``x_{t+1} = Trunc(x_t - eta (grad L(x_t; D) + z_t), k)`` for ``t = 0..T-1``, ``z_t ~ N(0, sigma^2 I_p)``,
``sigma^2 = c T log(1/delta) G^2 / (n^2 eps^2)`` "for some constant c" and ``eps <= 1``, with ``G`` the Lipschitz
constant of the per-example loss. The constant is not given, so the paper's calibration cannot be charged as printed;
we run the same iteration as ``T`` Gaussian mechanisms with an exact zCDP cost:

**Clipping and sensitivity.** Each per-example gradient of the data term is clipped to l2 norm ``G``
(``clip_norm``; for the logistic loss ``||grad|| <= ||x||``, so ``G >= max ||x||`` clips nothing, and for the
squared loss ``||x (<theta, x> - y)||`` is unbounded in ``theta`` without it). Iteration ``t`` releases the noisy
*sum* ``S_t = sum_i clip_G(grad l(theta_t; z_i)) + N(0, sigma^2 I_p)``. Under add/remove-one neighbours (the
service's relation, ``docs/privacy.md`` section 1) adding a row adds one clipped vector, so the l2 sensitivity of
``S_t`` is exactly ``G`` for any ``theta_t``. The optional penalty ``(l2/2) ||theta||^2`` (Sec. 7.2 uses it with the
logistic loss) does not depend on the data and is added after the noise.

**Cost.** Each iteration is ``G^2 / (2 sigma^2)``-zCDP (Bun & Steinke 2016, Prop. 1.6); ``theta_t`` depends on
earlier releases only (post-processing), and the ``T`` mechanisms with costs fixed in advance compose adaptively to
the sum (Lemma 2.3). The average gradient needs ``n``, which is private under add/remove: either the caller passes a
``normalizer`` that is public or already released (then no budget goes to it), or DP-IHT first releases
``n_hat = n + N(0, sigma_n^2)`` (sensitivity 1) with a fraction ``count_fraction`` of the budget and divides by
``max(n_hat, 1)``. For a total ``rho`` (exact rationals, :class:`DPIHTCalibration`):

    rho_count = count_fraction * rho   (0 with a normalizer),   rho_iter = (rho - rho_count) / T,
    sigma = G / sqrt(2 rho_iter),   sigma_n = 1 / sqrt(2 rho_count),   total = rho_count + T rho_iter = rho.

Each ``sigma`` is computed from its share rounded down to a float and then rounded up by two ulps, so the noise is
never smaller than the charge requires (a test checks ``G^2 / (2 sigma^2) <= rho_iter`` in exact arithmetic).

A request at (eps, delta) is charged ``rho = cdp_rho(eps, delta)`` by the service (Canonne, Kamath & Steinke 2020,
Cor. 13), as for the other Gaussian releases.

**Noise comes from the caller.** ``fit(X, y, noise)`` takes ``noise(sigma, size) -> ndarray`` (the release engine
passes ``NoiseSource.gaussian``); nothing here creates a random generator. Every setting is checked before the first
draw. The step is ``theta - eta (S_t / n_hat + l2 theta)``, then ``Trunc(., k)`` (no ball projection: Alg. 3's
constraint set is ``{||theta||_0 <= k}``). The release's payload is the fitted model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np

from estimators.base import (
    BinaryClassifier,
    EstimatorError,
    LinearRegressor,
    as_matrix,
    check_count,
    check_non_negative,
    check_positive,
    check_sparsity,
    check_vector,
    feature_names_for,
)
from estimators.local.sparse.iht import hard_threshold
from estimators.psd import project_psd

#: ``noise(sigma, size)`` returns i.i.d. ``N(0, sigma^2)`` draws of shape ``size`` (``NoiseSource.gaussian``).
GaussianNoise = Callable[[float, int], np.ndarray]


def _exact(name: str, value: object) -> Fraction:
    """A finite number > 0 as an exact rational: a Fraction as is, a float at its shortest decimal form (0.1 is 1/10,
    as the accountant reads it), an int as is."""
    if isinstance(value, Fraction):
        if value <= 0:
            raise EstimatorError(f"{name} must be a positive finite number, got {value!r}")
        return value
    number = check_positive(name, value)
    return Fraction(repr(number)) if isinstance(value, float | np.floating) else Fraction(int(value))  # type: ignore[call-overload]


def _float_down(value: Fraction) -> float:
    """The largest float not above ``value``."""
    nearest = float(value)
    return math.nextafter(nearest, -math.inf) if Fraction(nearest) > value else nearest


def _sigma_for(sensitivity: float, rho: Fraction) -> float:
    """``Delta / sqrt(2 rho)`` from ``rho`` rounded down, then rounded up two ulps: ``Delta^2 / (2 sigma^2) <= rho``."""
    sigma = sensitivity / math.sqrt(2.0 * _float_down(rho))
    return math.nextafter(math.nextafter(sigma, math.inf), math.inf)


@dataclass(frozen=True)
class DPIHTCalibration:
    """The exact zCDP cost of one DP-IHT release and the noise scales that realise it."""

    rho: Fraction
    iterations: int
    clip_norm: float
    rho_count: Fraction
    rho_per_iteration: Fraction
    sigma_gradient: float
    sigma_count: float | None

    @property
    def rho_total(self) -> Fraction:
        """``rho_count + T rho_per_iteration``: equals ``rho`` exactly (what the accountant charges)."""
        return self.rho_count + self.iterations * self.rho_per_iteration


def dp_iht_calibration(
    rho: object,
    iterations: int,
    clip_norm: float,
    count_fraction: object = Fraction(1, 10),
    normalizer_given: bool = False,
) -> DPIHTCalibration:
    """Split ``rho`` between the count (unless a normalizer is given) and ``T`` equal gradient releases."""
    total = _exact("rho", rho)
    t_max = check_count("iterations", iterations)
    g = check_positive("clip_norm", clip_norm)
    if normalizer_given:
        rho_count = Fraction(0)
    else:
        fraction = _exact("count_fraction", count_fraction)
        if not fraction < 1:
            raise EstimatorError(f"count_fraction must be in (0, 1), got {count_fraction!r}")
        rho_count = total * fraction
    per_iteration = (total - rho_count) / t_max
    return DPIHTCalibration(
        rho=total,
        iterations=t_max,
        clip_norm=g,
        rho_count=rho_count,
        rho_per_iteration=per_iteration,
        sigma_gradient=_sigma_for(g, per_iteration),
        sigma_count=None if normalizer_given else _sigma_for(1.0, rho_count),
    )


def clip_rows(rows: np.ndarray, bound: float) -> np.ndarray:
    """Each row scaled down to l2 norm at most ``bound``."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows * (bound / np.maximum(norms, bound))  # min(1, G / ||row||), with no division by a zero norm


def clipped_gradient_sum(
    X: np.ndarray, row_norms: np.ndarray, slopes: np.ndarray, bound: float, weights: np.ndarray | None = None
) -> np.ndarray:
    """``sum_i w_i clip_G(slope_i x_i)`` for generalized linear losses, whose per-example gradient is ``slope_i x_i``.

    ``||slope_i x_i|| = |slope_i| ||x_i||``, so the clipped sum is ``X^T (w * slope * min(1, G / (|slope| ||x||)))``:
    the same vector as :func:`clip_rows` on the ``n x p`` gradients, in two passes over ``X`` instead of a copy.
    ``weights`` (default 1) are row multiplicities: clipping is per example, and identical rows have identical clipped
    gradients, so the distinct rows weighted by their counts give exactly the sum over the rows with duplicates.
    """
    norms = np.abs(slopes) * row_norms
    scaled = slopes * (bound / np.maximum(norms, bound))  # min(1, G / norm), never G / 0
    return X.T @ (scaled if weights is None else weights * scaled)


#: The losses DP-IHT fits, by name (what a data engine's gradient SQL is told: service/data/engines/gradients.py).
LOSSES = ("linear", "logistic")


def loss_slopes(loss: str, margins: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The scalars ``a_i`` with per-example gradient ``a_i x_i`` of the data term, from ``u_i = <theta, x_i>``.

    ``linear``: ``grad (1/2)(u - y)^2 = (u - y) x``. ``logistic``: ``d/du log(1 + e^{-y u}) = -y / (1 + e^{y u})``,
    written ``-y (1 - tanh(y u / 2)) / 2`` (no overflow for any ``u``)."""
    if loss == "linear":
        return margins - y
    if loss == "logistic":
        return -y * 0.5 * (1.0 - np.tanh(0.5 * (y * margins)))
    raise EstimatorError(f"loss must be one of {LOSSES}, got {loss!r}")


class ClippedGradients(Protocol):
    """Where DP-IHT's data term lives: ``gradients(theta, G)`` is ``sum_i clip_G(grad l(theta; z_i))`` over the rows
    (a float64 vector of ``theta``'s length), exactly, with no noise. :class:`ArrayGradients` holds the rows in
    memory; the service asks its data engine instead (``service/mechanisms/dp_iht.py``)."""

    def __call__(self, theta: np.ndarray, bound: float) -> np.ndarray: ...


class ArrayGradients:
    """:class:`ClippedGradients` over the rows ``X``, ``y`` (each row ``weights[i]`` times, default once) for the
    loss ``loss``: :func:`clipped_gradient_sum` of :func:`loss_slopes`."""

    def __init__(self, X: np.ndarray, y: np.ndarray, loss: str, weights: np.ndarray | None = None) -> None:
        self.X, self.y, self.loss, self.weights = X, y, loss, weights
        self.row_norms = np.linalg.norm(X, axis=1)

    def __call__(self, theta: np.ndarray, bound: float) -> np.ndarray:
        slopes = loss_slopes(self.loss, self.X @ theta, self.y)
        return clipped_gradient_sum(self.X, self.row_norms, slopes, bound, self.weights)


def _draw(noise: GaussianNoise, sigma: float, size: int) -> np.ndarray:
    values = np.asarray(noise(sigma, size), dtype=float).reshape(-1)
    if values.shape != (size,) or not np.all(np.isfinite(values)):
        raise EstimatorError(f"noise(sigma, {size}) must return {size} finite numbers")
    return values


class _DPIHT:
    """Alg. 3 with clipped per-example gradients and an exact zCDP cost; subclasses give the loss.

    Settings: ``sparsity`` (``k``), ``iterations`` (``T``), ``eta`` (the step), ``rho`` (the total zCDP charge),
    ``clip_norm`` (``G``), ``l2`` (the data-free penalty ``(l2/2) ||theta||^2``), ``normalizer`` (a public or released
    row count, else one is released), ``count_fraction`` (its share of ``rho``), ``theta0`` (a public start, default 0).
    Fitted: ``coef_``, ``calibration_`` (:class:`DPIHTCalibration`), ``normalizer_`` (the ``n_hat`` used).
    """

    def __init__(
        self,
        sparsity: int,
        iterations: int,
        eta: float,
        rho: float,
        clip_norm: float,
        l2: float = 0.0,
        normalizer: float | None = None,
        count_fraction: object = Fraction(1, 10),
        theta0: object = None,
    ) -> None:
        self.sparsity = sparsity
        self.iterations = iterations
        self.eta = eta
        self.rho = rho
        self.clip_norm = clip_norm
        self.l2 = l2
        self.normalizer = normalizer
        self.count_fraction = count_fraction
        self.theta0 = theta0

    def calibration(self) -> DPIHTCalibration:
        """The cost and noise scales these settings give (what the accountant charges: ``rho_total``)."""
        if self.normalizer is not None:
            check_positive("normalizer", self.normalizer)
        return dp_iht_calibration(
            self.rho, self.iterations, self.clip_norm, self.count_fraction, self.normalizer is not None
        )

    #: the data term's loss (:data:`LOSSES`)
    loss = "linear"

    def _check_labels(self, y: np.ndarray) -> None:
        """Label checks of the loss (none for the squared loss)."""

    def fit(
        self, X: object, y: object, noise: GaussianNoise, feature_names: object = None, sample_weight: object = None
    ) -> _DPIHT:
        """Run Alg. 3 on the rows of ``X``, ``y``. ``sample_weight`` (non-negative integers, default 1 each) gives
        each row's multiplicity: the distinct rows of a table with their counts give the same clipped gradient sums
        and the same ``n`` as the table itself (every iteration uses all rows: there is no subsampling)."""
        design = as_matrix("X", X)
        rows, p = design.shape
        n = rows
        weights = None
        if sample_weight is not None:
            counts = np.asarray(sample_weight)
            if counts.shape != (rows,) or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
                raise EstimatorError("sample_weight must hold one non-negative integer (a row count) per row of X")
            n = int(counts.sum())
            weights = counts.astype(np.float64)
        labels = check_vector("y", y, rows)
        self._check_labels(labels)
        return self.fit_gradients(ArrayGradients(design, labels, self.loss, weights), n, p, noise, feature_names)

    def fit_gradients(
        self, gradients: ClippedGradients, n: int, p: int, noise: GaussianNoise, feature_names: object = None
    ) -> _DPIHT:
        """Run Alg. 3 on a table of ``n`` rows (private: only its noisy ``n_hat`` is used) and ``p`` coefficients
        whose clipped gradient sums ``gradients`` computes wherever the rows are (:class:`ClippedGradients`).
        The first sum (at ``theta0``) is asked before any draw, so a table that cannot be read fails before noise."""
        names = feature_names_for(feature_names, p)
        n = check_count("n", n, minimum=0)
        k = check_sparsity(self.sparsity, p)
        step = check_positive("eta", self.eta)
        theta = np.zeros(p) if self.theta0 is None else check_vector("theta0", self.theta0, p)
        calibration = self.calibration()
        penalty = check_non_negative("l2", self.l2)
        if not callable(noise):
            raise EstimatorError("noise must be callable as noise(sigma, size)")
        clipped_sum = self._sum(gradients, theta, calibration.clip_norm, p)
        if calibration.sigma_count is None:
            n_hat = float(self.normalizer)  # type: ignore[arg-type]
        else:
            n_hat = max(n + float(_draw(noise, calibration.sigma_count, 1)[0]), 1.0)
        for t in range(calibration.iterations):
            if t:
                clipped_sum = self._sum(gradients, theta, calibration.clip_norm, p)
            noisy_sum = clipped_sum + _draw(noise, calibration.sigma_gradient, p)
            theta = hard_threshold(theta - step * (noisy_sum / n_hat + penalty * theta), k)
        self.calibration_ = calibration
        self.normalizer_ = n_hat
        self._store(theta, names, intercept=False)  # type: ignore[attr-defined]
        return self

    @staticmethod
    def _sum(gradients: ClippedGradients, theta: np.ndarray, bound: float, p: int) -> np.ndarray:
        total = np.asarray(gradients(theta, bound), dtype=np.float64)
        if total.shape != (p,) or not np.all(np.isfinite(total)):
            raise EstimatorError(f"the clipped gradient sum must be {p} finite numbers, got shape {total.shape}")
        return total


class DPIHTLinearRegression(_DPIHT, LinearRegressor):
    """DP-IHT for ``(1/2n) sum_i (<theta, x_i> - y_i)^2 + (l2/2) ||theta||^2`` s.t. ``||theta||_0 <= k``.

    No intercept: add a constant column to ``X`` (it counts towards ``k`` and towards ``||x||``)."""

    loss = "linear"


class DPIHTLogisticRegression(_DPIHT, BinaryClassifier):
    """DP-IHT for ``(1/n) sum_i log(1 + exp(-y_i <theta, x_i>)) + (l2/2) ||theta||^2``, ``y`` in ``{-1, +1}``."""

    def _check_labels(self, y: np.ndarray) -> None:
        if not np.all(np.isin(y, (-1.0, 1.0))):
            raise EstimatorError("y must hold labels in {-1, +1}")

    loss = "logistic"


def dp_iht_covariance(curvature: np.ndarray, n_hat: float, eta: float, l2: float, sigma: float, iterations: int,
                      loss: str) -> dict[str, np.ndarray]:
    """The covariance, to first order, of DP-IHT's coefficients on the support its model kept, from the loss's
    curvature ``H = sum_i l''(u_i) x_i x_i^T`` over that support at the released point (rows whose gradient is
    clipped left out; a noisy estimate is projected onto the PSD cone here): ``{"noise": ...}`` and, for the logistic
    loss, ``"sampling"``, ``k x k`` matrices.

    Derivation (ours; Alg. 3 of Wang & Xu 2019 linearised on a fixed support). Once the support ``S`` stops
    changing, the step on ``S`` is ``theta_{t+1} = theta_t - eta (g(theta_t) / n_hat + l2 theta_t + z_t / n_hat)``
    with ``g`` the clipped gradient sum and ``z_t ~ N(0, sigma^2 I)``. Around the noise-free fixed point ``theta_bar``
    (``g(theta_bar) / n_hat + l2 theta_bar = 0``), ``g(theta) = g(theta_bar) + H (theta - theta_bar) + o(.)`` (a
    clipped gradient is locally constant), so ``e_t = theta_t - theta_bar`` follows ``e_{t+1} = A e_t - (eta / n_hat)
    z_t`` with ``A = I - eta (H / n_hat + l2 I)``, symmetric: after ``T`` iterations the noise part is ``(eta sigma /
    n_hat)^2 sum_{j<T} A^{2j}``, per eigenvalue ``a`` of ``A`` ``(1 - a^{2T}) / (1 - a^2)`` (``T`` at ``|a| = 1``).
    Without noise, ``theta_T = (I - A^T) theta_bar`` (the iterations start at 0), and ``theta_bar`` varies over
    samples of the population as ``J^{-1} V J^{-1}`` with ``J = H + n_hat l2 I`` and ``V = H`` for the logistic loss
    (the information identity, as for objective perturbation), so the sampling part is ``M H M^T`` with ``M = (I -
    A^T) J^{-1}``. The squared loss's ``V`` needs the residual variance, which no release holds: noise part only.
    Neither part covers the choice of the support itself (a selective-inference question)."""
    H = project_psd(np.asarray(curvature, dtype=float))
    k = H.shape[0]
    n = check_positive("n_hat", n_hat)
    step, scale = check_positive("eta", eta), check_non_negative("sigma", sigma)
    penalty, T = check_non_negative("l2", l2), check_count("iterations", iterations)
    if loss not in LOSSES:
        raise EstimatorError(f"loss must be one of {LOSSES}, got {loss!r}")
    a, Q = np.linalg.eigh(np.eye(k) - step * (H / n + penalty * np.eye(k)))
    a = np.clip(a, -1.0, 1.0)
    square = a * a
    with np.errstate(divide="ignore", invalid="ignore"):
        sums = np.where(1.0 - square > 1e-12, (1.0 - square ** T) / (1.0 - square), float(T))
    noise = (step * scale / n) ** 2 * (Q * sums) @ Q.T
    if loss == "linear":
        return {"noise": noise}
    M = (Q * (1.0 - a ** T)) @ Q.T @ np.linalg.pinv(H + n * penalty * np.eye(k), hermitian=True)
    return {"noise": noise, "sampling": M @ H @ M.T}
