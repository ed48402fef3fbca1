"""``label-ldp``: public features, label reports (Wang & Xu, ICML 2019, Alg. 2 and Sec. 5; docs/privacy.md 8.9); one
collection answers the IHT (Alg. 2) and the Lasso (Sec. 5), each free.

Build: the features are a ``--public`` table's columns (required); ``--target Y --epsilon E --option sparsity=S``;
``randomizer`` is ``pure`` (default, issue 20: Duchi et al.'s +-C reports, (epsilon, 0)-LDP, any ``--delta`` is not
spent) or ``gaussian`` (``--delta D`` > 0 required, (epsilon, delta)-LDP);
``iterations`` defaults to ``ceil(ln(n / p))`` with ``n`` the planned participants or the public rows;
``eta`` 1; ``alpha`` (the Lasso's lambda) defaults to Sec. 5's order made explicit
(:func:`estimators.local.sparse.lasso.default_lasso_penalty`); ``feature_bound`` defaults to the largest ``|x_j|``
of the public table (after the transform).

Estimates, models ``iht``, ``lasso`` (the Lasso refit by least squares on its support, the default Lasso: issue 20)
and ``lasso-raw`` (the penalised Lasso itself) from the SAME reports: ``G = X^T X / n`` from the public table's rows
(transformed as the devices transform them) and ``b = (sum of the reports x_i tilde y_i) / (number of reports)``.
A cvxpy failure (the Lasso) is the error ``solver_failed`` naming each solver's status, never a model.

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlalchemy import Engine

from estimators.local.aggregate import ReportAggregate
from estimators.local.influence import Influence, mean_shift
from estimators.local.sparse.iht import label_iht_from_moments
from estimators.local.sparse.uncertainty import label_iht_covariance, support_least_squares_covariance
from estimators.local.uncertainty import label_moment_covariance
from service.campaigns.options import invalid
from service.campaigns.protocols.common import (
    default_steps,
    diameter,
    no_covariance,
    round0,
    solved,
    sparse_fit,
    sparsity,
)
from service.campaigns.public_tables import campaign_public_rows
from service.campaigns.types import CampaignFit, CampaignInfo, CampaignRequest
from service.errors import Conflict
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.label_ldp import LabelLdpSpec


def build(request: CampaignRequest) -> ProtocolSpec:
    if request.public_rows is None:
        raise invalid("label-ldp needs a public table (parameter public) holding the participants' features (only "
                      "labels are private)")
    options = request.options
    randomizer = options["randomizer"]
    if randomizer == "gaussian" and request.delta <= 0:
        raise invalid(f"delta must be in (0, 1) for label-ldp with randomizer=gaussian, got {request.delta}")
    p = len(request.features)
    s = sparsity(options, "label-ldp", p)
    participants = options["participants"]
    iterations = options["iterations"] or default_steps(participants or request.public_rows.shape[0], p)
    largest = float(np.abs(request.public_rows).max()) if request.public_rows.size else 0.0
    feature_bound = options["feature_bound"] or (largest if largest > 0 else None)
    if feature_bound is None:
        raise invalid("the public table's features are all 0: give option feature_bound")
    return LabelLdpSpec(dimension=p, label_bound=options["label_bound"], feature_bound=feature_bound,
                        epsilon=request.epsilon, delta=request.delta if randomizer == "gaussian" else 0.0,
                        randomizer=randomizer, sparsity=s, iterations=iterations, eta=options["eta"],
                        public_rows=request.public_rows.shape[0], radius=options["radius"], alpha=options["alpha"],
                        participants=participants)


def fit(engine: Engine, campaign: CampaignInfo, aggregates: list[ReportAggregate | None], model: str,
        covariance: str | None) -> CampaignFit:
    no_covariance(campaign, covariance)
    spec = campaign.spec
    aggregate = round0(campaign, aggregates)
    public = campaign_public_rows(engine, campaign)
    if public is None:  # the builder refuses a label-ldp campaign without one; a deleted table lands here
        raise Conflict(f"campaign {campaign.name!r} has no public table to take X^T X from", code="needs_public_table")
    gram = public.T @ public / public.shape[0]
    moment = aggregate.mean("xy")
    moment_cov = label_moment_covariance(aggregate, "xy", gram)
    details: dict[str, Any] = {"public_rows": int(public.shape[0]), "label_noise_std": spec.label_noise,
                               "randomizer": spec.randomizer}
    if model == "iht":
        run = label_iht_from_moments(gram, moment, spec.sparsity, spec.iterations, spec.eta, spec.radius)
        details.update({"iterations": spec.iterations, "sparsity": spec.sparsity, "eta": spec.eta})
        return sparse_fit(campaign, model, run.theta, aggregate.count, details, (),
                          diameter(2.0 * spec.radius, f"the l2 ball of radius R = {spec.radius:g} (Alg. 2 "
                                   "projects every iterate onto it)"),
                          label_iht_covariance(gram, moment, moment_cov, run.theta, spec.iterations, spec.eta,
                                               spec.radius))
    from estimators.local.sparse.lasso import default_lasso_penalty, lasso_from_moments, refit_on_support

    penalty = spec.alpha if spec.alpha is not None else default_lasso_penalty(spec.label_noise, aggregate.count,
                                                                              spec.dimension)
    coef = solved(lambda: lasso_from_moments(gram, moment, penalty, "label-private Lasso"),
                  f"campaign {campaign.name!r}")
    details["alpha"] = penalty
    if model == "lasso-raw":
        return sparse_fit(campaign, model, coef, aggregate.count, details, (),
                          _lasso_influence(aggregate, gram, moment),
                          support_least_squares_covariance(gram, moment_cov, coef))
    details["refit"] = "least squares on the Lasso's support (same X^T X and x tilde y sums; free)"
    refit = refit_on_support(gram, moment, coef)
    return sparse_fit(campaign, model, refit, aggregate.count, details, (), _refit_influence(aggregate, gram),
                      support_least_squares_covariance(gram, moment_cov, refit))


def _lasso_influence(aggregate: ReportAggregate, gram: np.ndarray, moment: np.ndarray) -> Influence:
    """The Lasso ``argmin (1/2) w^T G w - b^T w + alpha ||w||_1`` is ``1 / lambda_min(G)``-Lipschitz in ``b`` (strong
    convexity and the monotone subdifferential); ``b`` is a mean of the server's ``x_row tilde y``, whose range is the
    aggregate's schema. The Lasso of Sec. 5 is penalised, not constrained: it has no feasible set to project onto."""
    field = next(f for f in aggregate.schema.fields if f.name == "xy")
    smallest = float(np.linalg.eigvalsh(gram)[0])
    if smallest <= 0.0:
        return Influence(None, "l2", "coefficients", "no finite bound: the public X^T X is singular, so the Lasso's "
                         "solution is not Lipschitz in the reports' mean")
    return Influence(mean_shift(field, moment, aggregate.count) / smallest, "l2", "coefficients",
                     "sup ||Delta b|| / lambda_min(X^T X / m): one more report within the validated range of x tilde "
                     "y moves b by at most its farthest point / (n + 1), and the Lasso is 1/lambda_min-Lipschitz in b")


def _refit_influence(aggregate: ReportAggregate, gram: np.ndarray) -> Influence:
    """The refit on a support ``S`` solves ``G_SS w_S = b_S``, so ``||w|| <= ||b_S|| / lambda_min(G_SS) <= B /
    lambda_min(G)`` (Cauchy's interlacing: a principal submatrix's smallest eigenvalue is at least ``G``'s), ``B`` the
    largest norm a mean of accepted ``x_row tilde y`` can have (the aggregate's validated range). One more report can
    change the support, so the refit is not Lipschitz in ``b``; every refit still lies in that ball, and one report
    moves it by at most the ball's diameter. Loose, but finite and valid whatever the support does."""
    field = next(f for f in aggregate.schema.fields if f.name == "xy")
    smallest = float(np.linalg.eigvalsh(gram)[0])
    if smallest <= 0.0:
        return Influence(None, "l2", "coefficients", "no finite bound: the public X^T X is singular, so a refit on a "
                         "support that includes its null space is unbounded")
    largest = math.sqrt(math.prod(field.shape)) * max(abs(field.low), abs(field.high))
    return Influence(2.0 * largest / smallest, "l2", "coefficients",
                     "2 sup ||b|| / lambda_min(X^T X / m): every refit on a support lies in the ball of radius "
                     "sup ||b|| / lambda_min (interlacing), b the mean of x tilde y within its validated range")
