"""The error models of the sparse protocols before any report (``campaign plan``; docs/campaigns.md, "Planning a
campaign"): ``label-ldp`` (Wang & Xu, ICML 2019, Alg. 2 and Sec. 5) and ``ldp-iht`` (Alg. 1).

Both estimates end in ``Proj_{B_R}(Trunc_s(.))``: a linear part (a mean of independent reports, so Gaussian in the
limit) followed by hard thresholding and the projection, the non-linear step the error model applies to its draws
(:func:`sparse_step`). Where the public table holds no target the coefficients are unknown; the model then assumes
:func:`spread_profile` (``s`` non-zero coefficients spread evenly in magnitude, norm ``R``: the expected shape of
Sec. 7.1's ``theta*``, uniform draws normalised), and says so.

``label-ldp``: the server forms ``b = mean x_row tilde y`` and solves with the public ``G = X^T X / m``; to first
order (the IHT or the refitted Lasso at its support) the estimate is ``Proj(Trunc(G^{-1} b))``, with
``Cov(b) = (E[tilde y^2 x x^T] - b b^T) / n``: the pure report has ``tilde y^2 = C^2`` exactly (``C = B coth(eps/2)``,
so ``E[tilde y^2 x x^T] = C^2 G``); the Gaussian one ``E[clip(y)^2 x x^T] + sigma^2 G`` (``B^2`` for ``clip(y)^2``
without the target).

``ldp-iht``: one step from ``theta_0 = 0`` on a group of ``floor(n / T)`` participants, ``Proj(Trunc(eta mean R_eps(x
clip(y, c))))``; every report has norm ``B = l2_ball_output_norm(p, r_x c, eps)`` exactly, so the covariance of the mean
is ``(B^2 I / p - g g^T) / (n / T)``, taken as ``B^2 I / (p n / T)`` (``B`` is far above ``||g||``); with
``randomizer=coordinate`` the same holds with ``B = p C`` (every report is ``+-pC e_J``, ``E[Z Z^T] = p C^2 I = (pC)^2 I
/ p``, docs/privacy.md 8.9 (h)). With ``T > 1`` the last step's noise is predicted around the reference (earlier rounds
assumed converged). This is the formula docs/campaigns.md quotes (``sqrt(s) B / (R sqrt(p n))`` plus the truncation's
wrong picks): about 6,000 p participants at epsilon 1 for a relative error near 0.4 on Sec. 7.1's design.
"""

from __future__ import annotations

import numpy as np

from estimators.local.planning import ErrorModel, Step, public_table
from workloads.local.protocols.label_ldp import LabelLdpSpec
from workloads.local.protocols.ldp_iht import LdpIhtSpec
from workloads.local.randomizers.gaussian_label import label_noise

METRIC = "the sparse coefficients on the devices' features"


def sparse_step(sparsity: int, radius: float) -> Step:
    """``Proj_{B_R}(Trunc_s(v))`` for each row ``v`` (Alg. 1 steps 6-7; :func:`~estimators.local.sparse.iht.iht_step`
    on one row)."""

    def step(rows: np.ndarray) -> np.ndarray:
        values = np.atleast_2d(np.asarray(rows, dtype=float))
        drop = np.argsort(-np.abs(values), axis=1, kind="stable")[:, sparsity:]
        kept = values.copy()
        np.put_along_axis(kept, drop, 0.0, axis=1)
        norms = np.linalg.norm(kept, axis=1, keepdims=True)
        return kept * np.where(norms > radius, radius / np.where(norms > 0, norms, 1.0), 1.0)

    return step


def spread_profile(dimension: int, sparsity: int, radius: float) -> np.ndarray:
    """``s`` coefficients ``(j - 1/2) / s``, ``j = 1..s``, scaled to norm ``R``, then zeros: the assumed coefficients
    without a public target."""
    theta = np.zeros(dimension)
    theta[:sparsity] = (np.arange(sparsity) + 0.5) / sparsity
    return theta * (radius / float(np.linalg.norm(theta)))


def _reference(step: Step, least_squares: np.ndarray) -> np.ndarray:
    return step(least_squares[np.newaxis, :])[0]


_ASSUMED = "assumed: s coefficients spread evenly in magnitude with norm R (the public table has no target column)"


def label_ldp_error_model(spec: LabelLdpSpec, rows: object, labels: object = None) -> ErrorModel:
    """The error model of a ``label-ldp`` campaign over the public ``rows`` (module docstring)."""
    x, y = public_table(rows, labels, spec.dimension, "label-ldp")
    m = x.shape[0]
    gram = x.T @ x / m
    inverse = np.linalg.pinv(gram, rcond=1e-10, hermitian=True)
    step = sparse_step(spec.sparsity, spec.radius)
    pure = spec.randomizer == "pure"
    notes = ["the participants' rows are drawn from the public table",
             "the IHT run to its fixed point Trunc_s(G^{-1} b); the Lasso refit on a correct support is the same"]
    noise = 0.0 if pure else label_noise(spec.label_bound, spec.epsilon, spec.delta).variance
    if y is None:
        reference = spread_profile(spec.dimension, spec.sparsity, spec.radius)
        centre, source = reference, _ASSUMED
        notes.append("the label bound clips no label (no bias from clipping)")
        moment = gram @ reference
        second = (spec.label_noise**2 if pure else spec.label_bound**2 + noise) * gram
    else:
        clipped = np.clip(y, -spec.label_bound, spec.label_bound)
        moment = x.T @ clipped / m
        centre = inverse @ moment
        reference, source = _reference(step, centre), "Trunc_s of the least squares on the public rows and their target"
        squares = spec.label_noise**2 * np.ones(m) if pure else clipped**2 + noise
        second = (x * squares[:, np.newaxis]).T @ x / m
    moment_covariance = second - np.outer(moment, moment)

    def covariance_at(n: int) -> np.ndarray:
        return inverse @ moment_covariance @ inverse / n

    return ErrorModel(covariance_at, reference, source, METRIC, centre=centre, step=step, notes=tuple(notes))


def ldp_iht_error_model(spec: LdpIhtSpec, rows: object = None, labels: object = None) -> ErrorModel:
    """The error model of an ``ldp-iht`` campaign (module docstring); ``rows`` and ``labels`` (the public table, its
    target) are optional: the report noise does not depend on the design."""
    p = spec.dimension
    report_norm = spec.report_norm  # B (l2 ball) or p C (coordinate): either way E[Z Z^T] = B^2 I / p
    step = sparse_step(spec.sparsity, spec.radius)
    if spec.randomizer == "coordinate":
        notes = [f"every report is one coordinate of value +-pC = +-{report_norm:.4g} (the coordinate randomizer, "
                 f"entries clipped at feature_bound c = {spec.feature_bound * spec.residual_bound:.4g}; "
                 "docs/privacy.md 8.9 (h)); the mean of a group of n / T reports has covariance at most "
                 "(pC)^2 I / (p n / T)"]
    else:
        notes = [f"every report has norm B = {report_norm:.4g} (the l2-ball randomizer at radius r_x c = "
                 f"{spec.feature_norm_bound * spec.residual_bound:.4g}); the mean of a group of n / T reports has "
                 "covariance B^2 I / (p n / T)"]
    if rows is None or labels is None:
        reference = spread_profile(p, spec.sparsity, spec.radius)
        centre, source = reference, _ASSUMED
        notes.append("one step recovers theta (eta E[x x^T] = I, the unit step on an isotropic design) and the "
                     "residual clip c adds no bias")
    else:
        x, y = public_table(rows, labels, p, "ldp-iht")
        reference = _reference(step, np.linalg.lstsq(x, y, rcond=None)[0])
        source = "Trunc_s of the least squares on the public rows and their target"
        gradients = x * np.clip(y, -spec.residual_bound, spec.residual_bound)[:, np.newaxis]
        norms = np.linalg.norm(gradients, axis=1, keepdims=True)
        limit = spec.feature_norm_bound * spec.residual_bound
        gradients *= np.where(norms > limit, limit / np.where(norms > 0, norms, 1.0), 1.0)
        centre = spec.eta * gradients.mean(axis=0) if spec.steps == 1 else reference
    if spec.steps > 1:
        notes.append(f"T = {spec.steps} rounds: the last round's step on its group of n / T, around the reference "
                     "(the earlier rounds assumed converged)")

    def covariance_at(n: int) -> np.ndarray:
        group = max(1, n // spec.steps)
        return spec.eta**2 * report_norm**2 / (p * group) * np.eye(p)

    return ErrorModel(covariance_at, reference, source, METRIC, centre=centre, step=step, notes=tuple(notes))
