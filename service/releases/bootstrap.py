"""The parametric bootstrap of a graphical-model release, computed once and kept in the database (issue 29).

An MST or AIM release stores its model with the noisy measurements it was fitted to and their noise scales
(:func:`estimators.graphical.mbi_adapter.measurements_from_bytes`). A marginal it did not measure has no measurement
to read an error from; its error bar comes from :func:`estimators.graphical.bootstrap.parametric_bootstrap`: the
measurements' noise redrawn at their public scales around the model's marginals, the model refitted warm-started,
:data:`~estimators.graphical.bootstrap.DEFAULT_REPLICATES` times. That is seconds to a minute of fitting, so it runs
only when asked for (a marginal answer with ``bootstrap``, a DD-SSP or AIM-Synth fit from such a release), once per
release: the replicate models are stored in ``release_bootstraps`` and every later answer, in any process sharing the
database, reads them (the answers' cache keeps them per process, :func:`service.releases.answers.release_bootstrap`).

Privacy: the bootstrap reads nothing but the stored release (its model, its measurements' public noise scales) and
fresh randomness of the server's; it never reads the table and costs nothing (docs/privacy.md, "Free answers").
A replicate model is not a release: it is only ever read to measure a spread. The randomness is the server's
(``secrets``); only an in-process caller (a test) passes a seed, never the HTTP API, the client or the command line.

Two processes asking at once may both compute; the first to store wins and the other reads the stored replicates, so
every answer of a release uses one bootstrap.
"""

from __future__ import annotations

import io
import json
import secrets
import time
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.engine import transaction
from db.models import ReleaseBootstrap
from estimators.graphical import bootstrap, mbi_adapter
from estimators.graphical.mbi_adapter import Model
from estimators.graphical.mirror_descent import Measurement
from estimators.graphical.model import Fit
from service.mechanisms.progress import Progress, no_progress
from workloads.domain import Domain

BOOTSTRAP_MESSAGE = "parametric bootstrap of the release's model (first time only; stored for every later answer)"


@dataclass(frozen=True, eq=False)
class Bootstrap:
    """The replicate models of a release's parametric bootstrap."""

    replicates: tuple[Fit, ...]

    @property
    def basis(self) -> str:
        """How the error bars it gives were computed, as an answer's ``error_basis`` states it."""
        return f"parametric bootstrap, {len(self.replicates)} replicates"

    def standard_errors(self, attributes: tuple[str, ...]) -> np.ndarray:
        return bootstrap.bootstrap_standard_errors(self.replicates, attributes)


def stored_bootstrap(engine: Engine, release_id: int, domain: Domain) -> Bootstrap | None:
    """The bootstrap stored for ``release_id``, or None."""
    with transaction(engine) as session:
        payload = session.execute(select(ReleaseBootstrap.payload)
                                  .where(ReleaseBootstrap.release_id == release_id)).scalar_one_or_none()
    if payload is None:
        return None
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        count = int(npz["replicates"][0])
        return Bootstrap(tuple(mbi_adapter.model_from_bytes(npz[f"replicate_{i}"].tobytes(), domain)
                               for i in range(count)))


def bootstrap_of(engine: Engine, release_id: int, model: Model, measurements: list[Measurement],
                 seed: int | None = None, progress: Progress = no_progress) -> Bootstrap:
    """The release's bootstrap: the stored one, or a new one, stored (module docstring). ``seed`` only in-process
    (tests); without it the server's own entropy."""
    fit = mbi_adapter.numpy_view(model)
    found = stored_bootstrap(engine, release_id, fit.domain)
    if found is not None:
        return found
    started = time.perf_counter()
    progress(0, 1, BOOTSTRAP_MESSAGE)
    rng = np.random.default_rng(secrets.randbits(64) if seed is None else int(seed))
    replicates = bootstrap.parametric_bootstrap(fit, measurements, bootstrap.DEFAULT_REPLICATES, rng,
                                              bootstrap.DEFAULT_REPLICATE_ITERS)
    arrays = {f"replicate_{i}": np.frombuffer(mbi_adapter.model_to_bytes(r), dtype=np.uint8)
              for i, r in enumerate(replicates)}
    buffer = io.BytesIO()
    np.savez(buffer, replicates=np.array([len(replicates)]), **arrays)
    details = {"replicates": len(replicates), "iters": bootstrap.DEFAULT_REPLICATE_ITERS,
               "seconds": round(time.perf_counter() - started, 3)}
    try:
        with transaction(engine) as session:
            session.add(ReleaseBootstrap(release_id=release_id, payload=buffer.getvalue(),
                                         details_json=json.dumps(details)))
    except IntegrityError:  # another process stored its bootstrap first: answer from that one
        found = stored_bootstrap(engine, release_id, fit.domain)
        if found is not None:
            return found
        raise
    progress(1, 1, "computed the release's parametric bootstrap")
    return Bootstrap(tuple(replicates))
