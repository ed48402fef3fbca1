"""The noise covariance of a linear form of a regression's ``Z^T Z`` read from noisy residuals, in closed form
(issue 29: DD-SSP's coefficient standard errors). Pure numpy.

DD-SSP reads ``Z^T Z`` from the unbiased reconstruction of a release's residuals
(:func:`estimators.central.sufficient_stats.gram_from_marginals` over :meth:`NoisyResiduals.marginal`), a linear
map of the residuals ``b_A``, whose noise is independent across residuals with covariance ``s_A P_A``
(:class:`~estimators.residual.reconstruct.NoisyResiduals`; ``P_A`` the Kronecker product of the centring projections of
``A``'s attributes). So for any fixed weights ``w`` the vector ``u = Z^T Z[:-1, :] w`` (the rows of ``X``) has noise
covariance ``sum_A s_A (J_A Q_A) (J_A Q_A)^T``, with ``J_A`` the map from ``b_A`` to ``u`` and ``Q_A`` an orthonormal
basis of ``P_A``'s range (``P_A = Q_A Q_A^T``). :func:`gram_form_covariance` evaluates ``J_A Q_A`` on all of
``Q_A``'s columns at once, block by block, mirroring ``gram_from_marginals``:

* a marginal ``S`` that holds ``A`` reads ``b_A`` broadcast over ``S minus A`` and divided by the sizes summed out
  (:func:`estimators.residual.basis.expand_residuals`);
* an attribute's diagonal block is ``A_j diag(mu_j) A_j^T``, its intercept row ``A_j mu_j``, a pair's block
  ``A_j mu_jk A_k^T`` (and its transpose), and the intercept's own entry is the total, the residual ``()``.

The delta method for a least-squares solution ``theta = c (X^T X)^{-1} X^T y`` takes ``w = (-theta, c)``: the
first-order change of ``theta`` is ``(X^T X)^{-1} (c d(X^T y) - d(X^T X) theta) = (X^T X)^{-1} u``.
"""

from __future__ import annotations

import numpy as np

from estimators.residual.basis import expansion_divisor, is_trivial
from estimators.residual.reconstruct import NoisyResiduals
from workloads.domain import Domain
from workloads.encodings import DesignEncoding

__all__ = ["centred_basis", "gram_form_covariance", "gram_form_jacobians"]


def centred_basis(size: int) -> np.ndarray:
    """An orthonormal basis (``size x (size - 1)``) of the vectors of ``R^size`` that sum to zero."""
    centring = np.eye(size) - 1.0 / size
    vectors, values, _ = np.linalg.svd(centring)
    return vectors[:, : size - 1] if size > 1 else np.zeros((1, 0))


def _residual_columns(residuals: NoisyResiduals, clique: tuple[str, ...]) -> np.ndarray:
    """``Q_A`` as an array over ``A``'s attributes (domain order) with one trailing axis per column."""
    columns = np.ones((1,))
    for a in clique:
        basis = centred_basis(residuals.domain.size(a))
        columns = np.einsum("...m,in->...imn", columns, basis).reshape(
            (*columns.shape[:-1], basis.shape[0], -1))
    return columns


def gram_form_jacobians(residuals: NoisyResiduals, design: DesignEncoding, weights: np.ndarray,
                        ) -> dict[tuple[str, ...], np.ndarray]:
    """For each residual ``A`` the design reads: ``J_A Q_A`` (``rows of X x columns of Q_A``, module docstring)."""
    weights = np.asarray(weights, dtype=float)
    q = len(design.gram_names)
    if weights.shape != (q,):
        raise ValueError(f"weights must have {q} entries (one per column of Z^T Z), got shape {weights.shape}")
    blocks = design.gram_blocks()
    attributes = tuple(enc.attribute for enc, _ in blocks)
    domain = residuals.domain
    out: dict[tuple[str, ...], np.ndarray] = {}
    for clique in residuals.values:
        if not set(clique) <= set(attributes) or len(clique) > 2 or is_trivial(domain, clique):
            continue
        columns = _residual_columns(residuals, clique)  # (*A sizes, m)
        m = columns.shape[-1]
        if m == 0:
            continue
        v = np.zeros((q, m))  # (Z^T Z) w, one column per column of Q_A
        if design.intercept and clique == ():
            v[0] += weights[0] * columns.reshape(m)  # the intercept's entry is the total, the residual ()

        for enc, rows in blocks:
            if not set(clique) <= {enc.attribute}:
                continue
            mu = _spread(domain, clique, columns, (enc.attribute,))  # (levels, m)
            matrix = np.asarray(enc.matrix, dtype=float)
            diagonal = np.einsum("pa,am,qa->pqm", matrix, mu, matrix)
            v[rows] += np.einsum("pqm,q->pm", diagonal, weights[rows])
            if design.intercept:
                row = matrix @ mu  # (width, m): Z^T Z[0, rows] and Z^T Z[rows, 0]
                v[0] += weights[rows] @ row
                v[rows] += weights[0] * row
        for a, (enc_a, rows_a) in enumerate(blocks):
            for enc_b, rows_b in blocks[a + 1:]:
                if not set(clique) <= {enc_a.attribute, enc_b.attribute}:
                    continue
                mu = _spread(domain, clique, columns, (enc_a.attribute, enc_b.attribute))
                block = np.einsum("pa,abm,qb->pqm", np.asarray(enc_a.matrix, float), mu,
                                  np.asarray(enc_b.matrix, float))
                v[rows_a] += np.einsum("pqm,q->pm", block, weights[rows_b])
                v[rows_b] += np.einsum("pqm,p->qm", block, weights[rows_a])
        out[clique] = v[:-1]
    return out


def _spread(domain: Domain, clique: tuple[str, ...], columns: np.ndarray, held: tuple[str, ...]) -> np.ndarray:
    """The contribution of residual ``clique``'s columns (trailing axis) to the marginal of ``held`` (axes in the order
    of ``held``): broadcast over the attributes it does not hold, divided by their sizes (``expand_residuals``)."""
    m = columns.shape[-1]
    in_domain = tuple(a for a in domain.names if a in held)
    shape = [domain.size(a) if a in clique else 1 for a in in_domain] + [m]
    table = columns.reshape(shape) / expansion_divisor(domain, clique, in_domain)
    table = np.broadcast_to(table, [domain.size(a) for a in in_domain] + [m])
    return np.moveaxis(table, [in_domain.index(a) for a in held], range(len(held)))


def gram_form_covariance(residuals: NoisyResiduals, design: DesignEncoding, weights: np.ndarray) -> np.ndarray:
    """The noise covariance of ``Z^T Z[:-1, :] @ weights`` read from ``residuals`` (module docstring)."""
    p = len(design.gram_names) - 1
    covariance = np.zeros((p, p))
    for clique, jacobian in gram_form_jacobians(residuals, design, weights).items():
        covariance += float(residuals.scales[clique]) * (jacobian @ jacobian.T)
    return covariance
