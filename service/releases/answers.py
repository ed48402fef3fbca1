"""Answers from stored releases (free post-processing: no row is read, no privacy is spent).

A stored release (:class:`StoredRelease`) is read back with its dataset. A complete marginal release answers any
marginal (:func:`answer_marginal`, with what the release measured of it) and draws synthetic rows
(:func:`synthetic_frame`): a release stored as noisy residuals (residual, and laplace and gaussian since issue 9)
answers the marginals of its measured closure straight from them, with per-cell standard errors
(:mod:`service.releases.measured`), and everything else from a graphical model fitted the first time it is needed
and stored (:mod:`service.releases.stored_models`); MST and AIM releases (and older direct ones) store their model,
since issue 29 with the measurements it was fitted to, which give a measured marginal's standard error and, on
request, a parametric bootstrap for the others (:func:`release_bootstrap`, :mod:`service.releases.bootstrap`). A
complete release never changes, so its decoded payload and model are cached per process (:func:`release_payload`,
:func:`release_model`), and so is what an answer derives from it for a request (:func:`derived_statistics`: DD-SSP's
``Z^T Z`` of a design); a release that is not complete is never cached. A release made with a known seed (tests and
benchmarks) answers nothing unless the in-process caller says ``allow_seeded``: whoever knows the seed can subtract the
noise.
"""

from __future__ import annotations

import collections
import json
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import Dataset, Release
from estimators.graphical import bootstrap as model_bootstrap
from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from estimators.graphical.mirror_descent import Measurement
from service.data.datasets import StoredDataset, stored_dataset
from service.errors import Conflict, InvalidInput, NotFound, ServiceError
from service.mechanisms.progress import Progress, no_progress
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import PrivacyCost
from service.releases import bootstrap as release_bootstraps
from service.releases import kinds, stored_models
from service.releases.coverage import Coverage, coverage, measured_cliques
from service.releases.measured import MeasuredRelease
from workloads.domain import Domain
from workloads.marginals import WorkloadError, canonical

MAX_SYNTHETIC_ROWS = 10_000_000
#: What an answer from a stored release costs: nothing (post-processing; the release paid when it was made).
FREE = PrivacyCost()


class SeededReleaseError(Conflict):
    """A release made with a known seed was asked to answer where privacy is expected."""

    code = "seeded_release"


def refuse_seeded(release_id: int) -> SeededReleaseError:
    return SeededReleaseError(
        f"release {release_id} was made with a known seed, for tests and benchmarks: anyone who knows the seed can "
        "regenerate and subtract its noise, so it carries no privacy and cannot answer here; make a new release "
        "without a seed"
    )


@dataclass(frozen=True)
class StoredRelease:
    id: int
    dataset: StoredDataset
    kind: str
    mechanism: str
    status: str
    params: dict[str, object]
    details: dict[str, object]
    payload: bytes | None
    seeded: bool = False

    def to_json(self, *, hide_seeded_details: bool = False) -> dict[str, object]:
        """Metadata. ``hide_seeded_details`` (the HTTP API) leaves out the details of a seeded release: they can be
        noisy outputs (AIM's selected cliques) whose noise the seed's holder knows."""
        details = {} if (self.seeded and hide_seeded_details) else self.details
        return {"release_id": self.id, "dataset": self.dataset.name, "kind": self.kind, "mechanism": self.mechanism,
                "status": self.status, "seeded": self.seeded, "params": self.params, "details": details}

    def check_answerable(self, allow_seeded: bool) -> None:
        """Refuse (409 ``seeded_release``) to answer from a seeded release unless ``allow_seeded`` (in-process tests
        and benchmarks)."""
        if self.seeded and not allow_seeded:
            raise refuse_seeded(self.id)

    def decoded_payload(self) -> object:
        """The payload read back by its kind's codec (:mod:`service.releases.kinds`); None when there is none."""
        return None if self.payload is None else kinds.get(self.kind).decode_payload(self.payload,
                                                                                     self.dataset.domain)

    def coverage(self, attributes: Sequence[str]) -> Coverage:
        """What this marginal release measured of ``attributes`` (:mod:`service.releases.coverage`)."""
        cliques = measured_cliques(self.mechanism, self.params, self.details, self.dataset.domain.names)
        return coverage(self.id, cliques, attributes)


def get_release(engine: Engine, release_id: int) -> StoredRelease:
    with transaction(engine) as session:
        release = session.get(Release, release_id)
        if release is None:
            raise NotFound(f"no release with id {release_id}", code="release_not_found")
        return _stored_release(release, stored_dataset(session.get(Dataset, release.dataset_id)))


def _stored_release(release: Release, dataset: StoredDataset) -> StoredRelease:
    return StoredRelease(release.id, dataset, release.kind, release.mechanism, release.status,
                         json.loads(release.params_json), json.loads(release.details_json), release.payload,
                         bool(release.seeded))


def list_releases(engine: Engine, name: str | None = None) -> list[StoredRelease]:
    """Every release (of dataset ``name``), oldest first, read in one query (each dataset once)."""
    with transaction(engine) as session:
        query = select(Release).order_by(Release.id)
        if name is not None:
            query = query.join(Dataset, Dataset.id == Release.dataset_id).where(Dataset.name == name)
        stored: dict[int, StoredDataset] = {}
        found = []
        for release in session.execute(query).scalars():
            if release.dataset_id not in stored:
                stored[release.dataset_id] = stored_dataset(session.get(Dataset, release.dataset_id))
            found.append(_stored_release(release, stored[release.dataset_id]))
        return found


def _complete_marginal_release(engine: Engine, release_id: int) -> StoredRelease:
    release = get_release(engine, release_id)
    if release.kind != ReleaseKind.MARGINALS:
        raise InvalidInput(f"release {release_id} is a {release.kind} release, not a marginal release",
                           code="wrong_release_kind")
    if release.status != "complete" or release.payload is None:
        raise ServiceError(f"release {release_id} is {release.status}; it has no model to answer from",
                           code="release_not_complete", status=409)
    return release


class AnswerCache:
    """A thread-safe least-recently-used map of at most ``size`` entries, keyed by the database too (one process
    may serve several databases: tests, benchmarks), so that nothing is ever answered across databases. It holds
    only what was built from a *complete* release, which never changes; building raises for any other release, and
    nothing is then stored."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: collections.OrderedDict[tuple[object, ...], object] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, engine: Engine, key: tuple[object, ...], build):  # noqa: ANN001, ANN206
        """The entry of ``key`` in this database, built by ``build()`` once (until evicted)."""
        full = (engine.url.render_as_string(hide_password=False), *key)
        with self._lock:
            if full in self._entries:
                self._entries.move_to_end(full)
                return self._entries[full]
        entry = build()  # outside the lock: two threads may build the same entry; both are equal
        with self._lock:
            self._entries[full] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: Decoded payloads and fitted models of complete releases (per process; a model can be large, hence few).
_RELEASES = AnswerCache(32)
#: Statistics that answers derive from a complete release (``Z^T Z`` of a design: small, hence many).
_STATISTICS = AnswerCache(512)


def _cached(engine: Engine, release_id: int, what: str, build) -> tuple[StoredRelease, object]:  # noqa: ANN001
    """``build()`` once per (database, release, what) per process, the last ``_RELEASES.size`` kept."""
    return _RELEASES.get(engine, (release_id, what), build)


def derived_statistics(engine: Engine, release_id: int, key: tuple[object, ...], build):  # noqa: ANN001, ANN201
    """What an answer derives from complete release ``release_id`` and a request ``key`` (e.g. the sufficient
    statistics of a design), built once per process: post-processing of an immutable release. The release must be
    complete (checked here, from the cached payload): nothing is derived from, nor kept for, any other release.
    Callers check seeded releases and the dataset before asking, as they do without the cache."""
    release_payload(engine, release_id)  # raises for a release that is not complete, caching nothing
    return _STATISTICS.get(engine, (release_id, *key), build)


def clear_caches() -> None:
    """Forget every cached payload, model and statistic of this process (tests compare with the uncached path)."""
    _RELEASES.clear()
    _STATISTICS.clear()


def release_payload(engine: Engine, release_id: int) -> tuple[StoredRelease, Model | MeasuredRelease]:
    """A complete marginal release and its decoded payload: a fitted model, or the noisy residuals of a release
    answered without one. Read from the database once per process (a complete release never changes)."""
    def build() -> tuple[StoredRelease, object]:
        release = _complete_marginal_release(engine, release_id)
        return release, release.decoded_payload()

    return _cached(engine, release_id, "payload", build)  # type: ignore[return-value]


def release_model(engine: Engine, release_id: int, progress: Progress = no_progress) -> tuple[StoredRelease, Model]:
    """The graphical model of a complete marginal release: its stored model, or -- for a release stored as noisy
    residuals -- the model fitted to them the first time one is needed and kept in the database
    (:func:`service.releases.stored_models.model_of`; ``progress`` sees that fit)."""
    release, payload = release_payload(engine, release_id)
    if not isinstance(payload, MeasuredRelease):
        return release, payload

    def build() -> tuple[StoredRelease, object]:
        options = release.params.get("options") if isinstance(release.params.get("options"), dict) else {}
        size, iters = options.get("max_model_size"), options.get("iters")
        return release, stored_models.model_of(engine, release_id, payload, float(size) if size else None,
                                        int(iters) if iters else None, progress)

    return _cached(engine, release_id, "model", build)  # type: ignore[return-value]


def release_measurements(engine: Engine, release_id: int) -> list[Measurement] | None:
    """The noisy measurements (with their noise scales) a complete release's stored model was fitted to: an MST or
    AIM release made since issue 29 keeps them in its payload; None for one made before, and for a release stored
    as residuals (its measurements are the residuals, :mod:`service.releases.measured`). Read once per process."""
    release, payload = release_payload(engine, release_id)
    if isinstance(payload, MeasuredRelease):
        return None
    return _cached(engine, release_id, "measurements",
                   lambda: mbi_adapter.measurements_from_bytes(release.payload))  # type: ignore[return-value]


def release_bootstrap(engine: Engine, release_id: int, *, seed: int | None = None,
                      progress: Progress = no_progress) -> release_bootstraps.Bootstrap | None:
    """The parametric bootstrap of a complete release's model (:mod:`service.releases.bootstrap`: computed the
    first time it is asked for, stored, then read), or None for a release that kept no measurements to redraw.
    ``seed`` only for in-process tests; it matters only when the bootstrap is first computed."""
    measurements = release_measurements(engine, release_id)
    if not measurements:
        return None
    _, model = release_model(engine, release_id)
    return _cached(engine, release_id, "bootstrap",  # type: ignore[return-value]
                   lambda: release_bootstraps.bootstrap_of(engine, release_id, model, measurements, seed, progress))


#: ``error_basis`` of an answer without error bars.
NO_ERROR_BASIS = "none"
#: ``error_basis`` of standard errors read from the release's measurements.
MEASUREMENT_BASIS = "measurement"


def answer_marginal(
    engine: Engine, release_id: int, attributes: list[str], *, codes: bool = False, allow_seeded: bool = False,
    progress: Progress = no_progress, bootstrap: bool = False, bootstrap_seed: int | None = None,
) -> dict[str, object]:
    """Any marginal of a release: free post-processing (refused for a seeded release unless ``allow_seeded``). The
    answer says what the release measured of it (``coverage``: what is data and what the model's extrapolation),
    what it cost (``cost``: nothing; release ``release_id`` paid when it was made) and, for a table whose spec or
    domain labels its codes, the label of each code of each axis (``labels``; none with ``codes``).

    ``standard_errors`` (per cell, or None) and ``error_basis`` (how they were computed) by the kind of release:

    * stored as residuals (residual, laplace, gaussian), a marginal inside the measured closure: from the residuals
      (basis ``measurement``: of the unbiased estimate the non-negative counts adjust; :mod:`service.releases.
      measured`); outside it the counts come from the model fitted to them and have none (basis ``none``);
    * a graphical model (MST, AIM) and a marginal inside a measured clique: the raw measurement's standard error
      (basis ``measurement``: summed cells add variances, several measurements combine by inverse variance;
      :func:`estimators.graphical.bootstrap.measured_standard_error`). It is not the model's error: the counts are
      the model's, a post-processing that pools every measurement, whose error can be smaller (and is biased where
      the model's structure is wrong);
    * a graphical model and a marginal it did not measure: with ``bootstrap``, the spread over the release's
      parametric bootstrap (basis ``parametric bootstrap, K replicates``; computed the first time, then stored:
      :mod:`service.releases.bootstrap`; ``progress`` sees it); without it, none (basis ``none``), so a plain
      answer stays a lookup;
    * an MST or AIM release made before issue 29 kept no measurements: none (basis ``none``).

    ``bootstrap_seed`` seeds a bootstrap computed by this call (in-process tests only; never from a caller)."""
    release, payload = release_payload(engine, release_id)
    release.check_answerable(allow_seeded)
    ordered = checked_question(release.dataset.domain, attributes, bootstrap)
    errors, basis = None, NO_ERROR_BASIS
    if isinstance(payload, MeasuredRelease) and payload.covers(attributes):
        values, errors = payload.answer(attributes)
        basis = MEASUREMENT_BASIS
    else:
        _, model = release_model(engine, release_id, progress)
        values = mbi_adapter.marginal(model, ordered)
        values = np.moveaxis(values, [ordered.index(a) for a in attributes], range(len(attributes)))
        errors, basis = _model_errors(engine, release_id, tuple(attributes), values.shape, bootstrap,
                                      bootstrap_seed, progress)
    return {
        "release_id": release_id,
        "attributes": list(attributes),
        "shape": list(values.shape),
        "counts": values.tolist(),
        "standard_errors": None if errors is None else errors.tolist(),
        "error_basis": basis,
        "labels": {} if codes else release.dataset.labels_of(attributes),
        "coverage": release.coverage(attributes).to_json(),
        "cost": FREE.to_json(),
    }


#: the most cells one marginal answer holds
MAX_MARGINAL_CELLS = 10_000_000


def checked_question(domain: Domain, attributes: list[str], bootstrap: object) -> tuple[str, ...]:
    """A marginal question's attributes in the domain's order, refused (400, naming them) when they are not the
    domain's, when the marginal has more than :data:`MAX_MARGINAL_CELLS` cells, or when ``bootstrap`` is not a
    boolean: the one check of a release's and a campaign's marginal answers."""
    try:
        ordered = canonical(domain, attributes)
    except WorkloadError as exc:
        raise InvalidInput(str(exc), code="invalid_attributes") from None
    cells = domain.cells(ordered)
    if cells > MAX_MARGINAL_CELLS:
        raise InvalidInput(f"marginal {attributes} has {cells:,} cells; the limit is {MAX_MARGINAL_CELLS:,}",
                           code="too_large")
    if not isinstance(bootstrap, bool):
        raise InvalidInput(f"bootstrap must be true or false, got {bootstrap!r}", code="invalid_parameter")
    return ordered


def _model_errors(engine: Engine, release_id: int, attributes: tuple[str, ...], shape: tuple[int, ...],
                  use_bootstrap: bool, seed: int | None, progress: Progress) -> tuple[np.ndarray | None, str]:
    """The standard errors of a marginal answered from a release's model, and their basis (:func:`answer_marginal`)."""
    measurements = release_measurements(engine, release_id)
    if not measurements:
        return None, NO_ERROR_BASIS
    release, _ = release_payload(engine, release_id)
    measured = model_bootstrap.measured_standard_error(release.dataset.domain, measurements, attributes)
    if measured is not None:
        return np.full(shape, measured), MEASUREMENT_BASIS
    if not use_bootstrap:
        return None, NO_ERROR_BASIS
    replicates = release_bootstrap(engine, release_id, seed=seed, progress=progress)
    return replicates.standard_errors(attributes), replicates.basis


def answer_synthetic(engine: Engine, release_id: int, rows: int, *, codes: bool = False) -> dict[str, object]:
    """``rows`` synthetic records of a release as the API answers them (fresh randomness of the server's): each
    column's values, its labels where the table's spec or domain gives them (its codes with ``codes``), the labels
    of each code (``labels``; none with ``codes``) and the cost (``cost``: nothing, release ``release_id`` paid)."""
    frame = synthetic_frame(engine, release_id, rows, labels=not codes)
    release, _ = release_payload(engine, release_id)
    return {"release_id": release_id, "rows": len(frame), "columns": [str(c) for c in frame.columns],
            "data": {str(c): frame[c].tolist() for c in frame.columns},
            "labels": {} if codes else release.dataset.labels_of(list(frame.columns)), "cost": FREE.to_json()}


def synthetic_frame(
    engine: Engine, release_id: int, rows: int, seed: int | None = None, *, labels: bool = False,
    allow_seeded: bool = False, progress: Progress = no_progress,
) -> pd.DataFrame:
    """``rows`` synthetic records drawn from a release's model (free). Without a seed, fresh entropy is used (the
    HTTP API never passes one); refused for a seeded release unless ``allow_seeded``. With ``labels``, the columns
    the table's spec or domain labels hold their codes' labels instead of the codes."""
    check_rows(rows)
    release, _ = release_payload(engine, release_id)
    release.check_answerable(allow_seeded)
    _, model = release_model(engine, release_id, progress)
    seed = secrets.randbits(32) if seed is None else int(seed)
    columns = mbi_adapter.synthetic_rows(model, rows, seed)
    return labelled_frame(columns, release.dataset.domain.names, release.dataset.labels if labels else {})


def check_rows(rows: object) -> None:
    """Refuse (400 ``invalid_rows``) a number of synthetic rows outside ``1..MAX_SYNTHETIC_ROWS``."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1 or rows > MAX_SYNTHETIC_ROWS:
        raise InvalidInput(f"rows must be an integer in 1..{MAX_SYNTHETIC_ROWS:,}, got {rows!r}", code="invalid_rows")


def labelled_frame(columns: dict[str, np.ndarray], names: Sequence[str], labels: dict[str, list[str]]) -> pd.DataFrame:
    """Drawn rows (codes per column) as a frame of ``names``, the columns in ``labels`` holding their codes' labels."""
    return pd.DataFrame({name: np.asarray(labels[name], dtype=object)[columns[name]] if name in labels
                         else columns[name] for name in names})
