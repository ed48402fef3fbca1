"""Campaign builders of the sparse and low-dimensional protocols: ``ldp-iht`` and ``label-ldp`` (Wang & Xu, ICML 2019),
``bernstein``, ``bernstein-1bit`` and ``dr-erm`` (Wang, Gaboardi & Xu, NeurIPS 2018).

Registered with :func:`service.campaigns.builders.register_builder` (imported at the end of that module). Every
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

``bernstein`` / ``bernstein-1bit`` (Algs. 2 and 3, squared loss, p <= 3): options ``degree`` (k, default 6),
``order`` (the iterated Bernstein order h, default 2), ``lower``/``upper`` (the parameter box, default [-1, 1]),
``feature_bound`` and ``label_bound`` (default 1: only the default ``loss_scale`` uses them, the largest squared
residual over the box), ``participants``. ``dr-erm`` (Alg. 4): ``rows`` (m, the projection's dimension, default 20),
``constraint`` (``l1`` or ``simplex``), ``radius`` (of C, default 1), ``feature_radius`` (the clip on ``||Phi x||``,
default 1), ``label_bound`` (1), ``participants``; the projection's seed is drawn here (public, published). All three
are pure epsilon (delta must be 0) and take the features in their own units unless a transform is asked for.
"""

from __future__ import annotations

import math
import secrets

import numpy as np

from service.campaigns.builders import (
    CampaignRequest,
    Options,
    ProtocolBuilder,
    _invalid,
    register_builder,
)
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.bernstein import BernsteinSpec, OneBitBernsteinSpec, default_loss_scale
from workloads.local.protocols.dr_erm import MAX_SEED, DrErmSpec
from workloads.local.protocols.label_ldp import LabelLdpSpec
from workloads.local.protocols.ldp_iht import LdpIhtSpec
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
                        eta=options.number("eta", 1.0), public_rows=request.public_rows.shape[0],
                        radius=options.number("radius", 1.0),
                        alpha=options.number("alpha"), participants=participants)


def _pure(request: CampaignRequest, protocol: str, why: str) -> None:
    if request.delta != 0:
        raise _invalid(f"delta must be 0 for {protocol} ({why}), got {request.delta}")


def _bernstein_settings(request: CampaignRequest, protocol: str) -> dict[str, object]:
    _pure(request, protocol, "Laplace noise" if protocol == "bernstein" else "one randomized bit")
    p = len(request.features)
    if p > 3:
        raise _invalid(f"dimension mismatch: {protocol} is for p <= 3 (a grid of (k + 1)^p losses), got {p} features "
                       f"{list(request.features)}")
    options = request.options
    lower, upper = options.number("lower", -1.0, positive=False), options.number("upper", 1.0, positive=False)
    if not lower < upper:
        raise _invalid(f"option lower must be below upper, got lower={lower}, upper={upper}")
    scale = options.number("loss_scale")
    if scale is None:
        scale = default_loss_scale(p, lower, upper, options.number("feature_bound", 1.0),
                                   options.number("label_bound", 1.0))
    return {"dimension": p, "degree": options.count("degree") or 6, "order": options.count("order") or 2,
            "lower": lower, "upper": upper, "loss_scale": scale, "epsilon": request.epsilon,
            "participants": options.count("participants")}


def _bernstein(request: CampaignRequest) -> ProtocolSpec:
    return BernsteinSpec(**_bernstein_settings(request, "bernstein"))


def _one_bit_bernstein(request: CampaignRequest) -> ProtocolSpec:
    return OneBitBernsteinSpec(**_bernstein_settings(request, "bernstein-1bit"))


def _dr_erm(request: CampaignRequest) -> ProtocolSpec:
    _pure(request, "dr-erm", "the l2-ball randomizer")
    options = request.options
    return DrErmSpec(dimension=len(request.features), rows=options.count("rows") or 20,
                     projection_seed=secrets.randbelow(MAX_SEED), epsilon=request.epsilon,
                     feature_radius=options.number("feature_radius", 1.0),
                     label_bound=options.number("label_bound", 1.0),
                     constraint=options.choice("constraint", ("l1", "simplex"), "l1"),
                     radius=options.number("radius", 1.0), participants=options.count("participants"))


register_builder(ProtocolBuilder("ldp-iht", _ldp_iht, "required",
                                 "LDP-IHT (Wang & Xu 2019, Alg. 1): T rounds, T disjoint groups, l2-ball gradients "
                                 "(options: sparsity, rounds, eta, radius, label_bound, residual_bound, "
                                 "feature_norm_bound, participants)"))
register_builder(ProtocolBuilder("label-ldp", _label_ldp, "required",
                                 "public features, Gaussian label reports; answers IHT (Alg. 2) and the Lasso "
                                 "(Sec. 5) (options: sparsity, iterations, eta, radius, alpha, label_bound, "
                                 "feature_bound, participants)"))
register_builder(ProtocolBuilder("bernstein", _bernstein, "required",
                                 "Local Bernstein Mechanism (Wang, Gaboardi & Xu 2018, Alg. 2), squared loss, p <= 3 "
                                 "(options: degree, order, lower, upper, loss_scale, feature_bound, label_bound, "
                                 "participants)", transform=False))
register_builder(ProtocolBuilder("bernstein-1bit", _one_bit_bernstein, "required",
                                 "its 1-bit variant (Alg. 3), same options", transform=False))
register_builder(ProtocolBuilder("dr-erm", _dr_erm, "required",
                                 "DR-ERM-LDP (Alg. 4): public random projection, l2-ball projected statistics, "
                                 "recovery over the l1 ball or the simplex (options: rows, constraint, radius, "
                                 "feature_radius, label_bound, participants)", transform=False))
