"""Answers from a ``marginals`` campaign: any marginal and synthetic rows, free, as a central release answers them.

A ``marginals`` campaign's round keeps, per attribute set, its frequency oracle's tally and its number of reports
(:mod:`workloads.local.protocols.marginals`). The first answer after the reports changed fits one graphical model to
every set's unbiased estimate (:func:`estimators.local.marginals.fit_marginal_model`) and stores it in
``campaign_models`` keyed by the number of reports it saw, with the measurements it was fitted to; every later answer,
in any process sharing the database, reads it (and this process keeps the last few in memory) until more reports
arrive. Two processes fitting at once both fit; the first to store wins and the other answers from the stored one.

An answer has the shape of a release's (:func:`service.releases.answers.answer_marginal`): the counts (out of the
campaign's reports), the coverage (which attribute sets were measured together), the standard error of a marginal
inside a measured set (the raw measurement's, :func:`estimators.graphical.bootstrap.measured_standard_error`; basis
``measurement``), or with ``bootstrap`` the spread over a parametric bootstrap of the model for one outside them
(computed the first time in this process), the labels of the public table's coded columns, and the cost: nothing.

Privacy: everything here reads the round's aggregate (sums of reports that are each epsilon-LDP) and public tables,
never a report, and never charges: post-processing (docs/privacy.md 8.10). A campaign that received seeded simulated
reports answers only in-process callers that allow it (``allow_seeded``), as a seeded release does.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.engine import transaction
from db.models import CampaignModel
from estimators.base import EstimatorError
from estimators.graphical import bootstrap as model_bootstrap
from estimators.graphical import mbi_adapter
from estimators.graphical.mirror_descent import Measurement
from estimators.graphical.model import Fit
from estimators.local.marginals import domain_of, fit_marginal_model
from service.campaigns.campaigns import get_campaign
from service.campaigns.estimates import stored_aggregates
from service.campaigns.public_tables import get_public_table
from service.campaigns.types import CampaignInfo
from service.errors import Conflict, InvalidInput
from service.mechanisms.progress import Progress, fit_progress, no_progress
from service.releases.answers import (
    FREE,
    MEASUREMENT_BASIS,
    NO_ERROR_BASIS,
    AnswerCache,
    check_rows,
    checked_question,
    labelled_frame,
)
from service.releases.coverage import coverage
from workloads.domain import Domain
from workloads.local.protocols.marginals import MarginalsSpec

FIT_MESSAGE = "fitting the campaign's graphical model (once per count of reports; stored for every later answer)"

#: models (and bootstraps) of campaigns by (database, campaign, reports), per process
_MODELS = AnswerCache(16)


def clear_cache() -> None:
    """Forget this process's models and bootstraps (tests compare with what is read back from the database)."""
    _MODELS.clear()


def _marginals_campaign(engine: Engine, name_or_id: str | int, allow_seeded: bool) -> CampaignInfo:
    campaign = get_campaign(engine, name_or_id)
    if not isinstance(campaign.spec, MarginalsSpec):
        raise InvalidInput(f"campaign {campaign.name!r} is a {campaign.protocol} campaign: only a marginals campaign "
                           "answers marginals and synthetic rows (its fits: marginalia campaign fit)",
                           code="wrong_campaign_kind")
    if not allow_seeded:
        campaign.refuse_if_seeded()
    return campaign


def _source(campaign: CampaignInfo) -> str:
    return f"campaign {campaign.name!r}"


def _stored(engine: Engine, campaign: CampaignInfo, reports: int, domain: Domain) -> tuple[Fit, list] | None:
    with transaction(engine) as session:
        payload = session.execute(select(CampaignModel.payload).where(
            CampaignModel.campaign_id == campaign.id, CampaignModel.reports == reports)).scalar_one_or_none()
    if payload is None:
        return None
    return mbi_adapter.model_from_bytes(payload, domain), mbi_adapter.measurements_from_bytes(payload) or []


def campaign_model(engine: Engine, campaign: CampaignInfo,
                   progress: Progress = no_progress) -> tuple[Fit, list[Measurement], int]:
    """The campaign's model, the measurements it was fitted to and the reports it saw (module docstring)."""
    (aggregate,) = stored_aggregates(engine, campaign)
    if aggregate is None or aggregate.count == 0:
        raise Conflict(f"campaign {campaign.name!r} has no reports yet: nothing to answer from", code="no_reports")
    spec: MarginalsSpec = campaign.spec  # type: ignore[assignment]
    reports = int(aggregate.count)

    def build() -> tuple[Fit, list[Measurement], int]:
        domain = domain_of(spec)
        found = _stored(engine, campaign, reports, domain)
        if found is not None:
            return (*found, reports)
        started = time.perf_counter()
        progress(0, 1, FIT_MESSAGE)
        try:
            fit, measurements = fit_marginal_model(spec, aggregate, progress=fit_progress(progress))
        except EstimatorError as error:
            raise Conflict(f"campaign {campaign.name!r}: {error}", code="estimation_failed") from None
        details = {"kept_whole": [list(m.attributes) for m in measurements if len(m.attributes) > 1],
                   "iterations": fit.iterations, "seconds": round(time.perf_counter() - started, 3)}
        try:
            with transaction(engine) as session:
                session.add(CampaignModel(campaign_id=campaign.id, reports=reports,
                                          payload=mbi_adapter.model_to_bytes(fit, measurements),
                                          details_json=json.dumps(details)))
        except IntegrityError:  # another process stored its fit first: answer from that one
            found = _stored(engine, campaign, reports, domain)
            if found is not None:
                return (*found, reports)
            raise
        progress(1, 1, "fitted the campaign's graphical model")
        return fit, measurements, reports

    return _MODELS.get(engine, (campaign.id, reports, "model"), build)


def _bootstrap(engine: Engine, campaign: CampaignInfo, model: Fit, measurements: list[Measurement], reports: int,
               seed: int | None) -> list[Fit]:
    """The parametric bootstrap of the campaign's model (computed once per process and count of reports)."""
    def build() -> list[Fit]:
        rng = np.random.default_rng(secrets.randbits(64) if seed is None else int(seed))
        return model_bootstrap.parametric_bootstrap(model, measurements, model_bootstrap.DEFAULT_REPLICATES, rng,
                                                    model_bootstrap.DEFAULT_REPLICATE_ITERS)

    return _MODELS.get(engine, (campaign.id, reports, "bootstrap"), build)


def campaign_labels(engine: Engine, campaign: CampaignInfo) -> dict[str, list[str]]:
    """The labels of the campaign's attributes, from its public table's coded columns (none without one)."""
    if campaign.public_table is None:
        return {}
    table = get_public_table(engine, campaign.public_table)
    return {c.name: list(c.labels) for c in table.columns if c.labels is not None and c.name in campaign.features}


def answer_marginal(engine: Engine, name_or_id: str | int, attributes: Sequence[str], *, codes: bool = False,
                    bootstrap: bool = False, allow_seeded: bool = False, progress: Progress = no_progress,
                    bootstrap_seed: int | None = None) -> dict[str, object]:
    """Any marginal of a marginals campaign (module docstring); ``bootstrap_seed`` only for in-process tests."""
    campaign = _marginals_campaign(engine, name_or_id, allow_seeded)
    spec: MarginalsSpec = campaign.spec  # type: ignore[assignment]
    domain = domain_of(spec)
    checked_question(domain, list(attributes), bootstrap)
    model, measurements, reports = campaign_model(engine, campaign, progress)
    values = model.marginal(tuple(attributes))
    measured = model_bootstrap.measured_standard_error(domain, measurements, tuple(attributes))
    errors, basis = None, NO_ERROR_BASIS
    if measured is not None:
        errors, basis = np.full(values.shape, measured), MEASUREMENT_BASIS
    elif bootstrap:
        replicates = _bootstrap(engine, campaign, model, measurements, reports, bootstrap_seed)
        errors = model_bootstrap.bootstrap_standard_errors(replicates, tuple(attributes))
        basis = f"parametric bootstrap, {len(replicates)} replicates"
    measured_sets = [spec.set_names(j) for j in range(len(spec.sets))]
    labels = {} if codes else {a: v for a, v in campaign_labels(engine, campaign).items() if a in attributes}
    return {"campaign": campaign.name, "release_id": None, "attributes": list(attributes),
            "shape": list(values.shape), "counts": values.tolist(), "reports": reports,
            "standard_errors": None if errors is None else np.asarray(errors).tolist(), "error_basis": basis,
            "labels": labels, "coverage": coverage(_source(campaign), measured_sets, list(attributes)).to_json(),
            "cost": FREE.to_json()}


def synthetic_frame(engine: Engine, name_or_id: str | int, rows: int, seed: int | None = None, *,
                    labels: bool = False, allow_seeded: bool = False, progress: Progress = no_progress) -> pd.DataFrame:
    """``rows`` synthetic records drawn from the campaign's model (free); fresh server entropy without a seed (the
    HTTP API never passes one); with ``labels``, the public table's labels in place of codes."""
    check_rows(rows)
    campaign = _marginals_campaign(engine, name_or_id, allow_seeded)
    return _drawn(engine, campaign, rows, seed, campaign_labels(engine, campaign) if labels else {}, progress)


def _drawn(engine: Engine, campaign: CampaignInfo, rows: int, seed: int | None, labels: dict[str, list[str]],
           progress: Progress = no_progress) -> pd.DataFrame:
    model, _, _ = campaign_model(engine, campaign, progress)
    columns = model.sample(rows, np.random.default_rng(secrets.randbits(64) if seed is None else int(seed)))
    return labelled_frame(columns, campaign.features, labels)


def answer_synthetic(engine: Engine, name_or_id: str | int, rows: int, *, codes: bool = False) -> dict[str, object]:
    """``rows`` synthetic records as the API answers them (:func:`service.releases.answers.answer_synthetic`'s
    shape, with the campaign's name)."""
    check_rows(rows)
    campaign = _marginals_campaign(engine, name_or_id, allow_seeded=False)
    labels = {} if codes else campaign_labels(engine, campaign)
    frame = _drawn(engine, campaign, rows, None, labels)
    return {"campaign": campaign.name, "release_id": None, "rows": len(frame),
            "columns": [str(c) for c in frame.columns], "data": {str(c): frame[c].tolist() for c in frame.columns},
            "labels": labels, "cost": FREE.to_json()}
