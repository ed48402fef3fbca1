"""The graphical model of a release stored without one, fitted the first time an answer needs it and kept in the
database (issue 9).

A residual release, and a direct Laplace or Gaussian release, answer their measured marginals straight from their
measurements (:mod:`service.releases.measured`). Only a marginal outside the measured closure, synthetic rows, or
AIM-Synth need a model of the whole table. The first such request fits one to the release's noisy residuals
(:func:`estimators.residual.graphical.fit_model`: the closure's maximal marginals with their closed-form variances,
entropic mirror descent stopping on its tolerance) and stores it in ``release_models`` with public facts about the
fit (its cliques and iterations); every later request, in this process or any other sharing the database, reads it.
Fitting is post-processing of the release's noisy payload: it reads no row and costs nothing.

Two processes asking at once may both fit; the first to store wins and the other reads the stored model, so every
answer of a release comes from one model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.engine import transaction
from db.models import ReleaseModel
from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from estimators.residual.graphical import fit_model
from service.mechanisms.direct import DEFAULT_ITERS, DEFAULT_MAX_MODEL_SIZE_MB
from service.mechanisms.progress import Progress, fit_progress, no_progress
from service.releases.measured import MeasuredRelease
from workloads.domain import Domain

FIT_MESSAGE = "fitting the release's graphical model (first time only; stored for every later answer)"


def stored_model(engine: Engine, release_id: int, domain: Domain) -> tuple[Model, dict[str, object]] | None:
    """The model stored for ``release_id`` and its fit's details, or None."""
    with transaction(engine) as session:
        row = session.execute(select(ReleaseModel.payload, ReleaseModel.details_json)
                              .where(ReleaseModel.release_id == release_id)).first()
    if row is None:
        return None
    return mbi_adapter.model_from_bytes(row[0], domain), json.loads(row[1])


def model_of(engine: Engine, release_id: int, measured: MeasuredRelease, max_model_size: float | None = None,
             iters: int | None = None, progress: Progress = no_progress) -> Model:
    """The release's model: the stored one, or a new fit, stored (module docstring). ``max_model_size`` and
    ``iters`` are the release's options (defaults: a direct release's); ``progress`` sees the fit."""
    domain = measured.residuals.domain
    found = stored_model(engine, release_id, domain)
    if found is not None:
        return found[0]
    started = time.perf_counter()
    fitting: Callable[[int, int], None] = fit_progress(progress)
    progress(0, 1, FIT_MESSAGE)
    fit = fit_model(measured.residuals, max_model_size=max_model_size or DEFAULT_MAX_MODEL_SIZE_MB,
                    iters=iters or DEFAULT_ITERS, progress=fitting)
    model = mbi_adapter.fit_to_mbi(fit)
    details = {"cliques": [list(c) for c in fit.potentials], "iterations": fit.iterations,
               "seconds": round(time.perf_counter() - started, 3)}
    try:
        with transaction(engine) as session:
            session.add(ReleaseModel(release_id=release_id, payload=mbi_adapter.model_to_bytes(model),
                                     details_json=json.dumps(details)))
    except IntegrityError:  # another process stored its fit first: answer from that one
        found = stored_model(engine, release_id, domain)
        if found is not None:
            return found[0]
        raise
    progress(1, 1, "fitted the release's graphical model")
    return model
