"""Linear regression with an intercept from local reports of sufficient statistics (the ``linear-ssp`` protocol).

Each participant sent one unbiased randomized ``s = [x, svec(x x^T), y, x y]``
(:mod:`workloads.local.randomizers.regression_statistics`). The mean report ``s_bar`` gives, by
:func:`~workloads.local.randomizers.regression_statistics.unpack_statistics`, ``G`` (estimating ``mean x~ x~^T``,
symmetric, ``G_00 = 1``) and ``m`` (estimating ``mean x~ y``), ``x~ = (1, x)``. The estimate is

    theta = (P(G) + Lambda)^+ m,    Lambda = diag(0, lambda, ..., lambda),

``P`` the Frobenius projection onto the PSD cone (the PSD repair of :mod:`estimators.psd`; Higham 1988), ``^+`` the
minimum-norm solve of :func:`estimators.psd.solve_psd`, the intercept ``theta_0`` unpenalised. Everything is
post-processing of the reports: any number of fits, free.

**The ridge.** A stated ``lambda`` (the spec's public ``ridge``) is used as given. The default is the smallest ridge
that lifts the noisy Gram's smallest eigenvalue to the level of its noise: ``lambda = max(0, nu - lambda_min(G))``,
``nu`` a bound on the spectral norm of the noise on ``G`` that holds with probability about 0.95:
``nu = tau (2 sqrt(P) + sqrt(2 ln 20))`` for a symmetric ``P x P`` noise matrix with independent entries of standard
deviation at most ``tau`` (``E||W|| <= 2 sqrt(P) tau`` and Gaussian concentration with Lipschitz constant
``sqrt(2) tau``; Bandeira & van Handel 2016, the Gaussian case, taken as the noise level for the l2-ball's bounded
entries too), ``tau = sqrt(v / n)``, ``v`` the randomizer's per-entry variance bound
(:attr:`~workloads.local.protocols.linear_ssp.LinearSspSpec.report_variance`, public). It is AdaSSP's rule (Wang 2018,
"Revisiting differentially private linear regression", Alg. 2 step 3; restated in Ferrando & Sheldon 2024, App. B)
without its lower-confidence shift of ``lambda_min``: AdaSSP spends budget on a noisy ``lambda_min``, here it is read
from the released ``G`` (post-processing in the local model). Measured in process (20 collections per cell,
epsilon 1, relative error; no ridge / AdaSSP's shifted rule / this rule): ``x`` uniform in ``{-1, 1}^p``,
``n = 10,000``: the ridge is 0 (0.067 at ``p = 1``; 0.217 / 0.226 / 0.217 at ``p = 2``); ``n = 2,000`` and 500 at
``p = 2``: 0.43 / 0.53 / 0.37 and 1.02 / 0.73 / 0.70; ``x`` uniform in ``[-1, 1]``, where noise can make ``G`` nearly
singular: ``p = 2``, ``n = 2,000``: 9.3 / 0.75 / 0.76, ``n = 20,000``: 0.55 / 0.53 / 0.34; ``p = 5``, ``n = 20,000``:
4.0 / 0.76 / 0.76. So within 1% of AdaSSP's rule where both are needed, and better where AdaSSP's shift over-shrinks.

**Standard errors** (the delta method, free). ``theta`` is a smooth function of ``s_bar`` where the PSD repair and
the ridge do not bind; its Jacobian ``J`` has columns ``(P(G) + Lambda)^+ (dm/ds_k - dG/ds_k theta)``, and
``Cov(theta) ~ J diag(v_hat / n) J^T`` with ``v_hat`` the empirical variance of each report entry (from the
aggregate's sums of squares: the randomizer's noise and the spread of the participants' own statistics together,
the correlations between entries left out). For the l2-ball randomizer ``E[Z Z^T] = B^2 I / D`` exactly, so the
reports' covariance is ``B^2 I / D - s_bar s_bar^T`` up to sampling: the left-out correlations are
``- s_bar s_bar^T``, small beside ``B^2 / D``. ``std_errors_`` are the square roots of the diagonal (intercept
first); ``None`` with fewer than two reports.

**Planning** (:func:`linear_ssp_error_model`, ``campaign plan``; the same linearisation, before any report). With the
participants distributed like the public rows (the devices' transformed features, scaled into the ball and their
labels clipped as the devices do), ``s_bar`` has mean ``s``, the mean of the public rows' statistics, and covariance
``Cov(R) / n``, ``Cov(R)`` the covariance of one report: ``B^2 I / D - s s^T`` for the l2-ball (its ``E[Z Z^T] =
B^2 I / D`` exactly), ``Cov(s) + (sigma^2 + g^2 / 4) I`` for the Gaussian (the discrete Gaussian's variance and the
rounding's bound). So

    Cov(theta_hat) ~ J Cov(R) J^T / n,    J = d theta / d s_bar at the public (G, m)

(:func:`statistics_jacobian`, the delta method's Jacobian above), with ``lambda`` the stated ridge or the default rule
applied to the public ``G`` at ``n`` (the ridge then shrinks the centre ``(G + Lambda)^+ m`` away from the reference
``G^+ m``, the least squares on the public rows, and the plan counts that bias). Without the target in the public table
``s``, ``theta`` and the labels' part of ``Cov(R)`` are unknown, and the plan is an upper bound on the absolute error:
``Cov(R) <= v I`` (``v = B^2 / D``, or ``sigma^2 + g^2 / 4 + R_s^2`` for the Gaussian, ``R_s^2`` bounding any covariance
of ``s``), and ``J J^T <= A^+ (I + c ||theta||^2 I) A^+`` (``A = P(G) + Lambda``, the matrix solved) with ``c = max(p,
(p + 3) / 2)`` (the sum over ``s``'s Gram entries ``k`` of ``||G_k theta||^2``) and ``||theta||^2 <= B^2 /
lambda_min(G)`` (``theta^T A theta = m^T A^{-1} m <= m^T G^{-1} m``, the second moment of the least-squares fit of a
label in ``[-B, B]``, at most ``B^2``). The plan measures the ``p`` slopes (the intercept not counted), on the devices'
features. The first-order expansion holds while the noise on ``G`` stays below ``lambda_min(A)``, which the default
ridge keeps it near; with a stated ridge the plan's notes say below which ``n`` it does not (there the prediction
was 0.57 of the measured error at ``n = 2,000``, ``lambda = 0.5``, standard-normal features, epsilon 1).

**Influence** (:mod:`estimators.local.influence`): one more accepted report moves ``s_bar`` by at most
``delta = mean_shift`` (from the validated schema); ``m`` by at most ``delta``, ``G`` in Frobenius norm by at most
``sqrt(2) delta`` (its first row and column repeat the ``x`` entries), and the default ridge by at most as much as
``lambda_min(G)``, so the matrix solved moves by at most ``2 sqrt(2) delta`` with the default ridge
(``sqrt(2) delta`` with a stated one); :func:`~estimators.local.influence.linear_solve_shift` turns that into a
bound on ``theta``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from estimators.base import EstimatorError, LinearRegressor, check_positive, feature_names_for
from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence, linear_solve_shift, mean_shift
from estimators.local.planning import ErrorModel, public_table
from estimators.psd import project_psd, smallest_eigenvalue, solve_psd
from workloads.local.protocols.linear_ssp import LinearSspSpec
from workloads.local.randomizers.regression_statistics import (
    regression_statistics,
    statistics_length,
    unpack_statistics,
)

#: ``sqrt(2 ln(1 / 0.05))``: the concentration term of the noise-norm bound (failure probability 0.05)
_CONCENTRATION = math.sqrt(2.0 * math.log(20.0))


def noise_norm_bound(spec: LinearSspSpec, reports: int) -> float:
    """``nu = tau (2 sqrt(P) + sqrt(2 ln 20))``, ``tau = sqrt(report_variance / n)``: the Gram noise's spectral norm
    bound of the default ridge (module docstring)."""
    tau = math.sqrt(spec.report_variance / reports)
    return tau * (2.0 * math.sqrt(spec.dimension + 1) + _CONCENTRATION)


def default_ridge(gram: np.ndarray, spec: LinearSspSpec, reports: int) -> float:
    """``max(0, nu - lambda_min(G))``: the smallest ridge that lifts ``G``'s smallest eigenvalue to ``nu``."""
    return max(0.0, noise_norm_bound(spec, reports) - smallest_eigenvalue(gram))


def statistics_jacobian(matrix: np.ndarray, theta: np.ndarray, dimension: int, rcond: float = 1e-10) -> np.ndarray:
    """``d theta / d s_bar`` at ``theta = matrix^+ m``, ``(p + 1) x D``: column ``k`` is ``matrix^+ (dm/ds_k - dG/ds_k
    theta)`` (``G``'s constant entry ``G_00 = 1`` does not move)."""
    length = statistics_length(dimension)
    constant = np.zeros((dimension + 1, dimension + 1))
    constant[0, 0] = 1.0
    columns = []
    for k in range(length):
        gram_k, moment_k = unpack_statistics(np.eye(length)[k], dimension)
        columns.append(solve_psd(matrix, moment_k - (gram_k - constant) @ theta, rcond=rcond))
    return np.column_stack(columns)


def _ridged(gram: np.ndarray, ridge: float) -> np.ndarray:
    """``P(G) + Lambda``, ``Lambda = diag(0, ridge, ..., ridge)`` (the intercept is not penalised)."""
    penalty = np.full(gram.shape[0], ridge)
    penalty[0] = 0.0
    return project_psd(gram) + np.diag(penalty)


class SspLinearRegression(LinearRegressor):
    """Least squares with an intercept from a ``linear-ssp`` aggregate (module docstring).

    Fitted: ``coef_``, ``intercept_``, ``ridge_`` (the lambda used), ``gram_`` and ``moment_`` (``G`` and ``m``
    from the mean report), ``covariance_`` (``(p+1) x (p+1)``, intercept first) and ``std_errors_`` (``None`` with
    fewer than two reports), ``n_reports_``, ``influence_``."""

    def __init__(self, rcond: float = 1e-10, feature_names: Sequence[str] | None = None) -> None:
        self.rcond = rcond
        self.feature_names = feature_names

    def fit(self, aggregate: ReportAggregate, spec: LinearSspSpec) -> SspLinearRegression:
        if not isinstance(spec, LinearSspSpec):
            raise EstimatorError(f"spec must be a LinearSspSpec, got {type(spec).__name__}")
        if not isinstance(aggregate, ReportAggregate):
            raise EstimatorError(f"aggregate must hold round 0 of a {spec.protocol!r} campaign, got {aggregate!r}")
        n = aggregate.round0_count(spec.protocol)
        rcond = check_positive("rcond", self.rcond)
        mean = aggregate.mean("statistics")
        self.gram_, self.moment_ = unpack_statistics(mean, spec.dimension)
        self.ridge_ = default_ridge(self.gram_, spec, n) if spec.ridge is None else spec.ridge
        matrix = _ridged(self.gram_, self.ridge_)
        theta = solve_psd(matrix, self.moment_, rcond=rcond)
        self._store(theta, feature_names_for(self.feature_names, spec.dimension), intercept=True)
        self.n_reports_ = n
        self.covariance_ = self._covariance(aggregate, spec, matrix, theta, rcond) if n >= 2 else None
        self.std_errors_ = None if self.covariance_ is None else np.sqrt(np.clip(np.diag(self.covariance_), 0, None))
        self.influence_ = self._influence(aggregate, spec, matrix, theta, mean, rcond)
        return self

    def _covariance(self, aggregate: ReportAggregate, spec: LinearSspSpec, matrix: np.ndarray, theta: np.ndarray,
                    rcond: float) -> np.ndarray:
        """``J diag(v_hat / n) J^T`` (module docstring)."""
        n = aggregate.count
        mean = aggregate.mean("statistics")
        variance = np.clip(aggregate.second_moment("statistics") - mean**2, 0.0, None) * n / (n - 1)
        jacobian = statistics_jacobian(matrix, theta, spec.dimension, rcond)
        return (jacobian * (variance / n)) @ jacobian.T

    def _influence(self, aggregate: ReportAggregate, spec: LinearSspSpec, matrix: np.ndarray, theta: np.ndarray,
                   mean: np.ndarray, rcond: float) -> Influence:
        (field,) = aggregate.schema.fields
        shift = mean_shift(field, mean, aggregate.count)
        matrix_shift = math.sqrt(2.0) * shift * (2.0 if spec.ridge is None else 1.0)
        bound = linear_solve_shift(matrix, theta, shift, matrix_shift, rcond)
        basis = ("(sup ||Delta m|| + sup ||Delta A|| ||theta||) / (lambda_min(A) - sup ||Delta A||), A the matrix "
                 "solved (the repaired Gram plus the ridge), each sup from the validated report range (Weyl)")
        if bound is None:
            basis = ("no finite bound: the matrix solved is within one report's change of singular; " + basis)
        return Influence(bound, "l2", "coefficients", basis)


METRIC = "the least-squares slopes on the devices' (transformed) features, the intercept not counted"
ABSOLUTE = ("the least-squares slopes on the devices' (transformed) features, the intercept not counted (an upper "
            "bound)")


def linear_ssp_error_model(spec: LinearSspSpec, rows: object, labels: object = None,
                           rcond: float = 1e-10) -> ErrorModel:
    """The error model of a ``linear-ssp`` campaign whose participants are like the public ``rows`` (the devices'
    transformed features); ``labels``: the public table's target, if it holds it (module docstring, "Planning")."""
    p = spec.dimension
    x, y = public_table(rows, labels, p, "linear-ssp")
    statistics = regression_statistics(x, np.zeros(x.shape[0]) if y is None else y, spec.norm_bound,
                                       spec.label_bound)
    mean = statistics.mean(axis=0)
    gram, moment = unpack_statistics(mean, p)
    pure = spec.randomizer == "l2ball"
    entry_noise = spec.report_variance  # B^2 / D (l2ball, exact) or sigma^2 + g^2 / 4 (gaussian)
    source = "the l2-ball randomizer, E[Z Z^T] = B^2 I / D" if pure else "the discrete Gaussian and the rounding"
    notes = [f"the participants' features are distributed like the public rows (their statistics' mean and X^T X are "
             f"the public ones); each report adds noise of variance {entry_noise:.4g} per entry ({source})"]

    def ridge_at(n: int) -> float:
        return default_ridge(gram, spec, n) if spec.ridge is None else spec.ridge

    if spec.ridge is None:
        notes.append("the default ridge as its rule gives on the public X^T X at n (on the noisy one it can be a "
                     "little larger): it binds while lambda_min is below the noise level")
    else:
        lowest = smallest_eigenvalue(_ridged(gram, spec.ridge))
        below = math.inf if lowest <= 0 else (noise_norm_bound(spec, 1) / lowest) ** 2
        notes.append(f"with the stated ridge, below about {below:,.0f} participants the noise on X^T X (its bound nu) "
                     "exceeds lambda_min of the matrix solved: there the first-order prediction understates the error")
    if y is None:
        lowest = smallest_eigenvalue(gram)
        if lowest <= 0:
            raise EstimatorError("planning a linear-ssp campaign: the public rows' X^T X (with the intercept) is "
                                 "singular, so no bound on the coefficients' norm follows")
        bound = (entry_noise if pure else entry_noise + spec.radius**2) * (
            1.0 + max(p, (p + 3) / 2) * spec.label_bound**2 / lowest)
        notes.append("no target in the public table: the reports' covariance is bounded by v I and ||theta||^2 by "
                     "B^2 / lambda_min(X^T X), so the prediction is an upper bound (the ridge's shrinkage not counted)")

        def bounded(n: int) -> np.ndarray:
            inverse = np.linalg.pinv(_ridged(gram, ridge_at(n)), rcond=rcond, hermitian=True)
            return (bound * inverse @ inverse / n)[1:, 1:]

        return ErrorModel(bounded, None, "none (the public table has no target column)", ABSOLUTE, notes=tuple(notes))
    report_covariance = (entry_noise * np.eye(mean.size) - np.outer(mean, mean) if pure
                         else np.cov(statistics, rowvar=False, bias=True) + entry_noise * np.eye(mean.size))

    def theta_at(n: int) -> np.ndarray:
        return solve_psd(_ridged(gram, ridge_at(n)), moment, rcond=rcond)

    def covariance_at(n: int) -> np.ndarray:
        jacobian = statistics_jacobian(_ridged(gram, ridge_at(n)), theta_at(n), p, rcond)
        return (jacobian @ report_covariance @ jacobian.T / n)[1:, 1:]

    reference = solve_psd(gram, moment, rcond=rcond)[1:]
    return ErrorModel(covariance_at, reference, "the least squares on the public rows and their target (scaled and "
                      "clipped as the devices do)", METRIC, centre=lambda n: theta_at(n)[1:], notes=tuple(notes))
