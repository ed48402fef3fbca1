"""The error model of the one-round Stein GLM's private OLS, before any report (``campaign plan``; docs/campaigns.md,
"Planning a campaign").

Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021), Algs. 1-4: ``w_ols = S^{-1} m`` with ``m`` the mean of the reports'
``x y + E_xy`` and ``S`` the second-moment matrix from the source :class:`~estimators.local.glm.stein.PrivateOLS`
uses (``pooled``, ``private`` or ``public``). Linearising at the public rows' ``S`` and ``w``:

    ``w_hat - w ~ S^{-1} (dm - dS w)``,  ``Cov(dm) = (Sigma_xy + sigma_xy^2 I) / n``,
    ``Cov(dS w) = v_S (||w||^2 I + w w^T - diag(w * w))``,

where ``Sigma_xy`` is the covariance of one participant's clipped ``x y`` over the public rows (with the target; without
it the bound ``B^2 S``, and for ``w`` in the ``x x^T`` share the bound ``||w||^2 <= B^2 / lambda_min(S)``, since
``w^T S w`` is the variance the OLS explains, at most ``E[y^2] <= B^2``: the prediction is then an upper bound),
``sigma_xy^2`` and ``sigma_xx^2`` the discrete Gaussian variances of the report's parts
(:attr:`workloads.local.randomizers.grid.GridNoise.variance`), and ``v_S`` the variance of each entry of ``S``'s noise:
``sigma_xx^2 / n`` (private), ``sigma_xx^2 n / (n + m)^2`` (pooled with ``m`` public rows), 0 (public; or a report
without ``x x^T``). The second form is the covariance of ``E w`` for a symmetric ``E`` whose upper-triangle entries
are independent with variance ``v_S`` (entry ``(i, k)`` of ``E w`` is ``sum_j E_ij w_j``; ``E_ij`` and ``E_kl`` are the
same variable exactly when ``{i, j} = {k, l}``). The estimator projects the mean ``x y`` onto the ball of radius
``r B`` before the solve: with a reference, the draws ``w`` pass through ``S^{-1} Proj(S w)`` (exact for a public
``S``), which matters when the noise is large. A link model ``c w_ols`` has the same relative error to first order
(``c`` is found over the public rows, a smooth function of ``w_ols``'s direction and norm; its own error is not
included).

**The public-gram variant** (:func:`public_gram_error_model`, ``stein-glm``'s default). ``theta = G^{-1} m`` with ``G
= mean_j z_j z_j^T`` the public Gram of ``z = (1, clip(W x))`` (fixed) and ``m`` the mean of the reports ``R(v)``, ``v
= clip(y - y0) z``, so ``Cov(theta) = G^{-1} Cov(R) G^{-1} / n`` exactly, and the slope on the standardized features is
``w = W^T theta_{1..p}``. ``Cov(R) = Cov(v) + sigma^2 I`` for the Gaussian randomizer; for a randomizer onto the sphere
of radius ``rho`` (``l2ball``, ``privunit``) ``E[R R^T] = rho^2 I / (p + 1)`` (exact for the l2-ball's uniform
hemisphere, isotropic to first order for PrivUnit2), so ``Cov(R) = rho^2 I / (p + 1) - E[v] E[v]^T``. ``Cov(v)`` and
``E[v]`` over the public rows with their target; without it ``Cov(v) <= B^2 G`` and ``E[v] E[v]^T`` dropped: an upper
bound. The projection of ``m`` onto its ball is left out (it binds only where the noise is far above ``m``).
"""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError
from estimators.local.planning import ErrorModel
from workloads.local.protocols import SteinGlmSpec
from workloads.local.protocols.vector_reports import VECTOR_RANDOMIZERS
from workloads.local.randomizers.sufficient_statistics import clip_features, clip_labels

METRIC = ("the private OLS's coefficients on the devices' (standardized) features; a link model c w_ols has the same "
          "relative error to first order")
ABSOLUTE = "the private OLS's coefficients on the devices' (standardized) features"


def matrix_noise_covariance(w: np.ndarray, entry_variance: float) -> np.ndarray:
    """``Cov(E w)`` for a symmetric noise ``E`` with independent upper-triangle entries of variance ``entry_variance``
    (module docstring)."""
    return entry_variance * (float(w @ w) * np.eye(w.size) + np.outer(w, w) - np.diag(w * w))


def stein_ols_error_model(spec: SteinGlmSpec, rows: object, labels: object = None,
                          covariance: str | None = None) -> ErrorModel:
    """The error model of ``PrivateOLS(covariance)`` on a ``spec`` campaign whose participants are like the public
    ``rows`` (the devices' transformed features); ``labels``: the public table's target, if it holds it (the reference
    ``w_ols`` and the data's own variance; without it only the noise's part is known, see the notes)."""
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != spec.dimension:
        raise EstimatorError(f"planning a stein-glm campaign needs its public rows ((m, {spec.dimension}) values), "
                             f"got shape {x.shape}")
    covariance = covariance or ("pooled" if spec.gram else "public")
    if covariance != "public" and not spec.gram:
        raise EstimatorError(f"a gram=false campaign takes X^T X from the public rows: covariance must be 'public', "
                             f"got {covariance!r}")
    clipped = clip_features(x, spec.norm_bound, spec.norm)
    m = clipped.shape[0]
    second = clipped.T @ clipped / m
    inverse = np.linalg.pinv(second, rcond=1e-10, hermitian=True)
    noise = spec.noise
    xy_variance = noise.xy_noise.variance
    xx_variance = 0.0 if noise.xx_noise is None else noise.xx_noise.variance
    notes = ["the participants' features are distributed like the public rows (their X^T X is the public one)"]
    if covariance != "public" and xx_variance > 0:
        # a symmetric noise matrix with entries of variance v has spectral norm about 2 sqrt(p v) (the semicircle's
        # edge): the first-order expansion holds while that is well below lambda_min(S), v ~ sigma_xx^2 / n
        smallest = float(np.linalg.eigvalsh(second)[0])
        valid = 4.0 * spec.dimension * xx_variance / smallest**2 if smallest > 0 else float("inf")
        notes.append(f"first order in the x x^T noise: valid for n well above {valid:,.0f} (where the noise's "
                     f"spectral norm, about 2 sqrt(p sigma_xx^2 / n), is below lambda_min(X^T X / m) = "
                     f"{smallest:.3g}); below it the error is larger than predicted: gram=false avoids it")
    if labels is None:
        w = None
        data = spec.label_bound**2 * second
        # w^T S w is the variance the OLS explains, at most E[y^2] <= B^2: ||w||^2 <= B^2 / lambda_min(S), the
        # smallest eigenvalue on S's range (the solve takes the minimum-norm solution, which lies in it)
        values = np.linalg.eigvalsh(second)
        if not values[-1] > 0:
            raise EstimatorError("the public rows are all zero: their X^T X says nothing of the error")
        w_squared = spec.label_bound**2 / float(values[values > 1e-10 * values[-1]].min())
        notes.append("the public table has no target column: an upper bound, absolute on the devices' standardized "
                     "features: the data's variance is bounded by B^2 E[x x^T] and the x x^T noise's share by "
                     "||w||^2 <= B^2 / lambda_min(E[x x^T]) (w^T S w <= E[y^2] <= B^2); put the target in the public "
                     "table for a relative error and an AUC range")
    else:
        y = clip_labels(np.asarray(labels, dtype=float), spec.label_bound)
        products = clipped * y[:, np.newaxis]
        moment = products.mean(axis=0)
        data = np.cov(products, rowvar=False, bias=True).reshape(spec.dimension, spec.dimension)
        w = inverse @ moment

    def covariance_at(n: int) -> np.ndarray:
        entry = {"private": xx_variance / n, "pooled": xx_variance * n / (n + m) ** 2, "public": 0.0}[covariance]
        inner = (data + xy_variance * np.eye(spec.dimension)) / n
        if entry > 0:
            # without w: the bound 2 ||w||^2 I on ||w||^2 I + w w^T - diag(w * w) (w w^T <= ||w||^2 I)
            inner = inner + (2.0 * entry * w_squared * np.eye(spec.dimension) if w is None
                             else matrix_noise_covariance(w, entry))
        return inverse @ inner @ inverse

    if w is None:
        return ErrorModel(covariance_at, None, "none (the public table has no target column)", ABSOLUTE,
                          notes=tuple(notes))
    radius = spec.norm_bound * spec.label_bound

    def feasible(draws: np.ndarray) -> np.ndarray:
        """The estimator's projection of the mean ``x y`` onto the ball of radius ``r B`` (``m = S w``)."""
        moments = draws @ second
        norms = np.linalg.norm(moments, axis=1, keepdims=True)
        moments = moments * np.where(norms > radius, radius / np.where(norms > 0, norms, 1.0), 1.0)
        return moments @ inverse

    return ErrorModel(covariance_at, w, "the non-private OLS on the public rows and their target (clipped as the "
                      "devices clip)", METRIC, step=feasible, notes=tuple(notes))


PUBLIC_GRAM_METRIC = ("the OLS slope (with its intercept, on the public Gram) on the devices' (standardized) features; "
                      "a link model c w has the same relative error to first order")
PUBLIC_GRAM_ABSOLUTE = "the OLS slope on the devices' (standardized) features"


def public_gram_error_model(spec: SteinGlmSpec, rows: object, labels: object = None) -> ErrorModel:
    """The error model of the public-gram OLS (module docstring) on a ``spec`` campaign whose participants are like the
    public ``rows`` (the devices' transformed features); ``labels``: the public table's target, if it holds it."""
    x = np.asarray(rows, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != spec.dimension:
        raise EstimatorError(f"planning a stein-glm campaign needs its public rows ((m, {spec.dimension}) values), "
                             f"got shape {x.shape}")
    features = spec.device_features(x)
    gram = features.T @ features / x.shape[0]
    inverse = np.linalg.pinv(gram, rcond=1e-10, hermitian=True)
    slope = spec.whitening_matrix.T @ inverse[1:]  # w = W^T theta_{1..p}, theta = G^{-1} m
    size = spec.dimension + 1
    randomizer = VECTOR_RANDOMIZERS[spec.randomizer]
    notes = ["the participants' features are distributed like the public rows (their X^T X is the public one)"]
    if randomizer.output_norm is None:
        noise, note = spec.noise.xy_noise.variance * np.eye(size), "Gaussian noise of known variance"
    else:
        rho = randomizer.output_norm(size, spec.report_radius, spec.epsilon)
        noise, note = rho**2 / size * np.eye(size), f"reports on the sphere of radius {rho:.4g}, taken isotropic"
    notes.append(f"randomizer {spec.randomizer}: {note}")
    if labels is None:
        report = noise + (spec.label_bound**2 * gram if randomizer.output_norm is None else 0.0)
        notes.append("the public table has no target column: an upper bound, absolute on the devices' standardized "
                     "features (Cov(v) <= B^2 G, E[v] E[v]^T dropped); put the target in the public table for a "
                     "relative error and an AUC range")
        unit = slope @ report @ slope.T
        return ErrorModel(lambda n: unit / n, None, "none (the public table has no target column)",
                          PUBLIC_GRAM_ABSOLUTE, notes=tuple(notes))
    y = clip_labels(np.asarray(labels, dtype=float) - spec.label_center, spec.label_bound)
    vectors = features * y[:, np.newaxis]
    mean = vectors.mean(axis=0)
    if randomizer.output_norm is None:
        report = noise + np.cov(vectors, rowvar=False, bias=True).reshape(size, size)
    else:
        report = noise - np.outer(mean, mean)
    unit = slope @ report @ slope.T
    return ErrorModel(lambda n: unit / n, slope @ mean, "the non-private OLS with an intercept on the public rows and "
                      "their target (whitened and clipped as the devices do)", PUBLIC_GRAM_METRIC, notes=tuple(notes))
