"""Coefficient standard errors and 95 % intervals for the regressions answered from marginal releases (issue 29):
DD-SSP and AIM-Synth, from the released statistics and the public noise scales only (post-processing: no row is read,
no privacy is spent). The answer's shape is :class:`service.regression.uncertainty.CoefficientErrors`.

Each variance has two independent parts, reported separately (``error_components``) and summed:

* **noise**: what the release's privacy noise does to the estimate.

  - DD-SSP from a release stored as residuals (residual, laplace, gaussian) that measured what the design reads: in
    closed form by the delta method. ``theta = c (X^T X)^{-1} X^T y`` (``c = 1`` for linear regression; Prop. 3.4's
    ``-b1 / (2 b2)`` for logistic), so to first order ``d theta = M u`` with ``M`` the inverse the estimator applies
    (PSD projection, ridge) and ``u = d(Z^T Z)[:-1, :] (-theta, c)``, whose covariance is exact
    (:func:`estimators.residual.gram_covariance.gram_form_covariance`).
  - DD-SSP from a graphical model (MST, AIM, or a release whose model extrapolates): the release's parametric
    bootstrap (:mod:`service.releases.bootstrap`): DD-SSP refitted on each replicate model's marginals; the variance
    over the replicates.
  - AIM-Synth: the same bootstrap, with synthetic rows drawn from each replicate model and the fit redone on them
    (so the synthetic sampling is in it too).

* **sampling**: the variance of the non-private estimator over samples of the population, estimated from the noisy
  statistics: ``c^2 s^2 M`` with ``s^2 = (y^T y - 2 b^T X^T y + b^T X^T X b) / (n - p)`` the residual variance of the
  least-squares fit ``b = theta / c`` (homoscedastic errors: the marginals hold no fourth moments for a sandwich). For
  AIM-Synth, the same from its synthetic rows (linear) or the inverse Fisher information on them (logistic).

Which to use: the ``noise`` part alone measures how far the answer is from the same estimator on the whole table
(the non-private fit); the sum also covers the table being a sample of a population. A graphical model's structural
error (a dependence it never measured) is in neither: the bootstrap reproduces the model's assumptions in every
replicate, and ``coverage`` says what was extrapolated.
"""

from __future__ import annotations

import secrets

import numpy as np
from sqlalchemy import Engine

from estimators.base import LinearScoreModel
from estimators.central.adassp import AdaSSPNoiseScales, adassp_noise_covariance
from estimators.central.dp_iht import dp_iht_covariance
from estimators.central.objpert import objpert_covariance
from estimators.central.reference import fit_on_rows
from estimators.central.sufficient_stats import GramStatistics, gram_from_marginals
from estimators.graphical.model import Fit
from estimators.psd import project_psd
from estimators.residual.gram_covariance import gram_form_covariance
from service.regression.uncertainty import CoefficientErrors
from service.releases import answers
from service.releases.answers import StoredRelease
from service.releases.measured import MeasuredRelease
from workloads.encodings import INTERCEPT_NAME, DesignEncoding

#: ``error_basis`` of DD-SSP's closed form.
CLOSED_FORM_BASIS = "delta method: noise in closed form from the release's noise scales, plus sampling variance"
#: ``error_basis`` of AdaSSP's closed form.
ADASSP_BASIS = ("delta method: noise in closed form from the Gram release's noise scales (the ridge's own noise "
                "included), plus sampling variance")
#: ``error_basis`` of AdaSSP's closed form from a Gram release that holds no row count (no constant column).
ADASSP_NOISE_ONLY_BASIS = ("delta method: noise in closed form from the Gram release's noise scales; no sampling part "
                           "(the release has no constant column, so no row count to estimate the residual variance)")
#: ``error_basis`` of DP-IHT's closed form (logistic: with a sampling part; linear: noise only).
DP_IHT_BASIS = ("delta method through the iterations linearised on the kept support: noise from the calibration's "
                "public scales and the released curvature (the loss's noisy Hessian over the kept coefficients at the "
                "released model)")
DP_IHT_SAMPLING = ", plus sampling variance (the inverse information, shrunk by the iterations' contraction)"
DP_IHT_NO_SAMPLING = "; no sampling part (the squared loss's needs the residual variance, which no release holds)"
#: What every DP-IHT interval leaves out.
DP_IHT_SELECTION = ("; conditional on the kept support: coefficients the model set to 0 have none, and the support's "
                    "own noisy choice is not covered (selective inference)")
#: Why a DP-IHT model answers without error bars.
RELEASED_MODEL_BASIS = (
    "none: this DP-IHT release spent no budget on the loss's curvature (curvature_share 0, a model that kept no "
    "coefficient, or a release made before error bars existed), and its noise acts through the iterations on the "
    "table's own curvature; release again with curvature_share > 0 (the default) for standard errors")
#: ``error_basis`` of ObjPert's closed form.
OBJPERT_BASIS = ("delta method through the optimality condition: noise from the calibration's public scales and the "
                 "released curvature (the loss's noisy Hessian at the released coefficients), plus sampling variance "
                 "(the inverse information)")
#: Why an ObjPert release without a curvature answers without error bars.
NO_CURVATURE_BASIS = ("none: this objective-perturbation release spent no budget on the loss's curvature "
                      "(curvature_share 0, or made before error bars existed), and the coefficients' noise acts "
                      "through it; release again with curvature_share > 0 (the default) for standard errors")
#: Why a fit from a model without stored measurements gives no error bars.
NO_MEASUREMENTS = ("none: the release's model has no stored measurements to bootstrap (a residual, laplace or gaussian "
                   "release that did not measure every marginal the design reads, or an MST or AIM release made "
                   "before issue 29)")


def theta_of(model: LinearScoreModel, design: DesignEncoding) -> np.ndarray:
    """The fitted parameter vector laid out as ``Z^T Z``'s rows of ``X``: ``[intercept?, coefficients...]``."""
    return np.concatenate([[model.intercept_], model.coef_]) if design.intercept else np.asarray(model.coef_)


def _names(design: DesignEncoding) -> tuple[str, ...]:
    return design.gram_names[:-1]


def _solver(stats: GramStatistics, ridge: float | None) -> np.ndarray:
    """``M``: the (pseudo-)inverse DD-SSP applies to ``X^T y`` (its PSD projection of ``X^T X``, plus the ridge)."""
    return np.linalg.pinv(project_psd(stats.xtx) + (ridge or 0.0) * np.eye(stats.dimension), hermitian=True)


def least_squares_scale(model: LinearScoreModel) -> float:
    """``c`` of ``theta = c (X^T X)^{-1} X^T y``: 1 for linear DD-SSP, ``-b1 / (2 b2)`` for Prop. 3.4's logistic."""
    b = getattr(model, "chebyshev_coefficients_", None)
    return 1.0 if b is None else float(-b[1] / (2.0 * b[2]))


def sampling_variance(stats: GramStatistics, theta: np.ndarray, scale: float, solver: np.ndarray,
                      target_bound: float) -> np.ndarray:
    """Per coefficient, ``c^2 s^2 diag(M)`` (module docstring), from the (noisy) statistics alone. Where noise makes
    the residual sum of squares non-positive (a small table, a small epsilon), ``s^2`` is ``target_bound``, the
    largest square of the encoded target (public, and at least the residual variance: conservative)."""
    b = theta / scale
    p, n = stats.dimension, max(stats.n, 2.0)
    residual = stats.yty - 2.0 * float(b @ stats.xty) + float(b @ stats.xtx @ b)
    s2 = residual / max(n - p, 1.0) if residual > 0.0 else float(target_bound)
    return scale ** 2 * s2 * np.diag(solver)


def dd_ssp_errors(engine: Engine, release: StoredRelease, design: DesignEncoding, stats: GramStatistics,
                  ridge: float | None, model: LinearScoreModel, seed: int | None) -> CoefficientErrors:
    """DD-SSP's error bars (module docstring) for ``model``, fitted on ``stats`` with ``ridge``."""
    theta = theta_of(model, design)
    scale = least_squares_scale(model)
    solver = _solver(stats, ridge)
    sampling = sampling_variance(stats, theta, scale, solver, design.target_encoding.squared_norm_bound)
    _, payload = answers.release_payload(engine, release.id)
    if isinstance(payload, MeasuredRelease) and all(payload.covers(m) for m in design.required_marginals()):
        form = gram_form_covariance(payload.residuals, design, np.concatenate([-theta, [scale]]))
        noise = np.diag(solver @ form @ solver.T)
        return CoefficientErrors.from_variances(_names(design), {"noise": noise, "sampling": sampling},
                                                CLOSED_FORM_BASIS)
    replicates = answers.release_bootstrap(engine, release.id, seed=seed)
    if replicates is None:
        return CoefficientErrors.none(NO_MEASUREMENTS)
    estimator = type(model)(**({} if ridge is None else {"ridge": ridge}))
    thetas = [theta_of(estimator.fit(gram_from_marginals(design, _reader(fit), total=float(fit.total))), design)
              for fit in replicates.replicates]
    noise = np.var(np.stack(thetas), axis=0, ddof=1)
    return CoefficientErrors.from_variances(_names(design), {"noise": noise, "sampling": sampling},
                                            f"{replicates.basis} for the noise, plus sampling variance")


def adassp_errors(design: DesignEncoding, stats: GramStatistics, model: LinearScoreModel,
                  scales: AdaSSPNoiseScales) -> CoefficientErrors:
    """AdaSSP's error bars for ``model``, fitted on the Gram release's ``stats`` with ``model.ridge_``: the noise part
    in closed form (:func:`estimators.central.adassp.adassp_noise_covariance`, the ridge varying with the noisy
    ``lambda_min`` when ``tilde_lambda > 0``), plus :func:`sampling_variance` when the release holds the row count."""
    theta = theta_of(model, design)
    solver = np.linalg.pinv(project_psd(stats.xtx + model.ridge_ * np.eye(stats.dimension)), hermitian=True)
    ridge_varies = model.ridge_ > 0.0 and model.lambda_min_tilde_ > 0.0
    noise = np.diag(adassp_noise_covariance(theta, solver, scales, ridge_varies))
    if stats.n <= stats.dimension:  # no constant column in the release: n is not known
        return CoefficientErrors.from_variances(_names(design), {"noise": noise}, ADASSP_NOISE_ONLY_BASIS)
    sampling = sampling_variance(stats, theta, 1.0, solver, design.target_encoding.squared_norm_bound)
    return CoefficientErrors.from_variances(_names(design), {"noise": noise, "sampling": sampling}, ADASSP_BASIS)


def aim_synth_errors(engine: Engine, release: StoredRelease, design: DesignEncoding, frame: object,
                     model: LinearScoreModel, rows: int, seed: int | None) -> CoefficientErrors:
    """AIM-Synth's error bars (module docstring) for ``model``, fitted on the synthetic ``frame`` of ``rows`` rows."""
    sampling = _rows_sampling_variance(frame, design, model)
    replicates = answers.release_bootstrap(engine, release.id, seed=seed)
    if replicates is None:
        return CoefficientErrors.none(NO_MEASUREMENTS)
    rng = np.random.default_rng(secrets.randbits(64) if seed is None else int(seed) + 1)
    names = release.dataset.domain.names
    thetas = []
    for fit in replicates.replicates:
        synthetic = fit.sample(rows, rng)
        thetas.append(theta_of(fit_on_rows({n: synthetic[n] for n in names}, design), design))
    noise = np.var(np.stack(thetas), axis=0, ddof=1)
    return CoefficientErrors.from_variances(
        _names(design), {"noise": noise, "sampling": sampling},
        f"{replicates.basis} (synthetic rows redrawn from each) for the noise, plus sampling variance")


def objpert_errors(design: DesignEncoding, payload: object, details: dict[str, object]) -> CoefficientErrors:
    """ObjPert's error bars from its release alone: :func:`estimators.central.objpert.objpert_covariance` of the
    released curvature (a :class:`~service.mechanisms.payloads.ModelPayload`'s, reordered to the design) and the
    calibration's public scales. When the curvature's noise (about ``2 sigma sqrt(d)`` in spectral norm) exceeds the
    smallest eigenvalue of the regularised curvature, the basis says the standard errors are unreliable."""
    if payload.curvature is None:
        return CoefficientErrors.none(NO_CURVATURE_BASIS)
    head = [INTERCEPT_NAME] if payload.intercept is not None else []
    order = {name: i for i, name in enumerate([*head, *payload.feature_names])}
    index = [order[name] for name in _names(design)]
    curvature = np.asarray(payload.curvature, dtype=float)[np.ix_(index, index)]
    regularization = float(details["regularization"])
    parts = objpert_covariance(curvature, regularization, float(details["noise_std"]),
                               float(details["output_noise_std"]))
    basis = OBJPERT_BASIS
    noise_norm = 2.0 * float(details.get("curvature_noise_std", 0.0)) * np.sqrt(len(index))
    smallest = float(np.linalg.eigvalsh(project_psd(curvature))[0]) + regularization
    if noise_norm > smallest:
        basis += (f"; unreliable: the curvature's noise (about {noise_norm:.3g} in spectral norm) exceeds the "
                  f"smallest eigenvalue of the regularised curvature ({smallest:.3g}); a larger curvature_share or "
                  "epsilon helps")
    return CoefficientErrors.from_variances(_names(design), {name: np.diag(m) for name, m in parts.items()}, basis)


def dp_iht_errors(design: DesignEncoding, payload: object, details: dict[str, object]) -> CoefficientErrors:
    """DP-IHT's error bars from its release alone: :func:`estimators.central.dp_iht.dp_iht_covariance` of the
    released curvature over the kept coefficients (a :class:`~service.mechanisms.payloads.ModelPayload`'s, with its
    noisy row count) and the calibration's public numbers. When the curvature's noise (about ``2 sigma sqrt(k)`` in
    spectral norm) exceeds the smallest eigenvalue of ``H + n_hat l2 I``, the basis says they are unreliable."""
    if payload.curvature is None or payload.curvature_names is None or payload.row_count is None:
        return CoefficientErrors.none(RELEASED_MODEL_BASIS)
    names = payload.curvature_names
    curvature = np.asarray(payload.curvature, dtype=float)
    n_hat, l2 = float(payload.row_count), float(details["l2"])
    parts = dp_iht_covariance(curvature, n_hat, float(details["step"]), l2, float(details["sigma_gradient"]),
                              int(details["iterations"]), design.task)
    basis = DP_IHT_BASIS + (DP_IHT_SAMPLING if "sampling" in parts else DP_IHT_NO_SAMPLING) + DP_IHT_SELECTION
    noise_norm = 2.0 * float(details.get("curvature_noise_std", 0.0)) * np.sqrt(len(names))
    smallest = float(np.linalg.eigvalsh(project_psd(curvature))[0]) + max(n_hat, 1.0) * l2
    if noise_norm > smallest:
        basis += (f"; unreliable: the curvature's noise (about {noise_norm:.3g} in spectral norm) exceeds the "
                  f"smallest eigenvalue of the regularised curvature ({smallest:.3g}); a larger curvature_share or "
                  "epsilon helps")
    return CoefficientErrors.from_variances(names, {name: np.diag(m) for name, m in parts.items()}, basis)


def _rows_sampling_variance(frame: object, design: DesignEncoding, model: LinearScoreModel) -> np.ndarray:
    """The non-private fit's variance on these rows: ``s^2 (X^T X)^{-1}`` (linear), ``(X^T W X)^{-1}`` with
    ``W = p (1 - p)`` (logistic's inverse Fisher information)."""
    X, y = design.encode(frame)
    X = np.column_stack([np.ones(X.shape[0]), X]) if design.intercept else np.asarray(X, dtype=float)
    theta = theta_of(model, design)
    score = X @ theta
    if design.task == "linear":
        s2 = float(np.sum((y - score) ** 2)) / max(X.shape[0] - X.shape[1], 1)
        return s2 * np.diag(np.linalg.pinv(X.T @ X, hermitian=True))
    p = 1.0 / (1.0 + np.exp(-score))
    return np.diag(np.linalg.pinv((X * (p * (1.0 - p))[:, None]).T @ X, hermitian=True))


def _reader(fit: Fit):  # noqa: ANN202
    def read(attributes: tuple[str, ...]) -> np.ndarray:
        return fit.marginal(attributes)

    return read
