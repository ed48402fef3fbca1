"""Campaign builders of the sparse-regression protocols (Wang & Xu, ICML 2019): ``ldp-iht`` and ``label-ldp``.

Registered with :func:`service.collections.builders.register_builder` (imported at the end of that module). Every
setting the server will use (sparsity, rounds, step, radius, clipping bounds, the Lasso's lambda) is fixed here, so a
bad one (``s > p``, ``T < 1``, ``eta <= 0``, ...) is an error naming the option before any report is collected.

``ldp-iht`` (Alg. 1): ``--target Y --epsilon E --option sparsity=S [--option rounds=T] [--option participants=N]``;
``T`` defaults to ``ceil(ln(N / p))`` (Sec. 7.1, at least 1) when ``participants`` is given. ``eta`` defaults to 1
(features on a unit scale give ``E[x x^T] = I``, for which a unit step is the natural one; Sec. 7.1 states 0.1 or
0.2, see docs/sparse-results.md). Clipping: ``label_bound`` (default 1), ``residual_bound`` (default the worst case
``sqrt(s) R + label_bound``, which never binds for features in ``[-1, 1]``), ``feature_norm_bound`` (default
``sqrt(p)``, the norm of a point of ``{-1, +1}^p``). Pure epsilon (delta must be 0).

``label-ldp`` (Alg. 2 and Sec. 5): the features are a ``--public`` table's columns (required); ``--target Y
--epsilon E --delta D --option sparsity=S``; ``iterations`` defaults to ``ceil(ln(n / p))`` with ``n`` the planned
participants or the public rows; ``eta`` 1; ``alpha`` (the Lasso's lambda) defaults to Sec. 5's order made explicit
(``estimators.local.sparse.lasso.default_lasso_penalty``); ``feature_bound`` defaults to the largest ``|x_j|`` of the
public table (after the transform).
"""

from __future__ import annotations

import math

import numpy as np

from service.collections.builders import (
    CampaignRequest,
    Options,
    ProtocolBuilder,
    _invalid,
    register_builder,
)
from workloads.local.protocol_label_ldp import LabelLdpSpec
from workloads.local.protocol_ldp_iht import LdpIhtSpec
from workloads.local.protocols import ProtocolSpec
from workloads.local.randomizers.iht_gradient import worst_case_residual_bound


def default_steps(participants: int, dimension: int) -> int:
    """``T = ceil(ln(n / p))`` (Sec. 7.1 of Wang & Xu 2019), at least 1."""
    return max(1, math.ceil(math.log(participants / dimension)))


def _sparsity(options: Options, protocol: str, dimension: int) -> int:
    sparsity = options.count("sparsity")
    if sparsity is None:
        raise _invalid(f"{protocol} needs option sparsity (the s kept by hard thresholding): --option sparsity=S")
    if sparsity > dimension:
        raise _invalid(f"option sparsity must be at most the number of features p={dimension}, got {sparsity}")
    return sparsity


def _ldp_iht(request: CampaignRequest) -> ProtocolSpec:
    if request.delta != 0:
        raise _invalid(f"delta must be 0 for ldp-iht (the l2-ball randomizer is pure epsilon-LDP), got {request.delta}")
    options = request.options
    p = len(request.features)
    sparsity = _sparsity(options, "ldp-iht", p)
    participants = options.count("participants")
    steps = options.count("rounds")
    if steps is None:
        if participants is None:
            raise _invalid("ldp-iht needs option rounds (T) or option participants (T = ceil(ln(n / p)))")
        steps = default_steps(participants, p)
    radius = options.number("radius", 1.0)
    label_bound = options.number("label_bound", 1.0)
    residual_bound = options.number("residual_bound", worst_case_residual_bound(sparsity, radius, label_bound))
    return LdpIhtSpec(dimension=p, sparsity=sparsity, steps=steps, eta=options.number("eta", 1.0),
                      epsilon=request.epsilon, residual_bound=residual_bound,
                      feature_norm_bound=options.number("feature_norm_bound", math.sqrt(p)), radius=radius,
                      participants=participants)


def _label_ldp(request: CampaignRequest) -> ProtocolSpec:
    if request.public_rows is None:
        raise _invalid("label-ldp needs a --public table holding the participants' features (only labels are private)")
    if request.delta <= 0:
        raise _invalid(f"delta must be in (0, 1) for label-ldp (Gaussian label reports), got {request.delta}")
    options = request.options
    p = len(request.features)
    sparsity = _sparsity(options, "label-ldp", p)
    participants = options.count("participants")
    iterations = options.count("iterations") or default_steps(participants or request.public_rows.shape[0], p)
    largest = float(np.abs(request.public_rows).max()) if request.public_rows.size else 0.0
    feature_bound = options.number("feature_bound", largest if largest > 0 else None)
    if feature_bound is None:
        raise _invalid("the public table's features are all 0: give option feature_bound")
    return LabelLdpSpec(dimension=p, label_bound=options.number("label_bound", 1.0), feature_bound=feature_bound,
                        epsilon=request.epsilon, delta=request.delta, sparsity=sparsity, iterations=iterations,
                        eta=options.number("eta", 1.0), radius=options.number("radius", 1.0),
                        alpha=options.number("alpha"), participants=participants)


register_builder(ProtocolBuilder("ldp-iht", _ldp_iht, "required",
                                 "LDP-IHT (Wang & Xu 2019, Alg. 1): T rounds, T disjoint groups, l2-ball gradients "
                                 "(options: sparsity, rounds, eta, radius, label_bound, residual_bound, "
                                 "feature_norm_bound, participants)"))
register_builder(ProtocolBuilder("label-ldp", _label_ldp, "required",
                                 "public features, Gaussian label reports; answers IHT (Alg. 2) and the Lasso "
                                 "(Sec. 5) (options: sparsity, iterations, eta, radius, alpha, label_bound, "
                                 "feature_bound, participants)"))
