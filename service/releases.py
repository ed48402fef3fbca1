"""The release engine: the only code path that touches sensitive rows and spends budget.

A release goes through four steps:

1. **validate** the privacy parameters, the workload and the mechanism's options; nothing is
   written if any is wrong;
2. **reserve**: in one serialised transaction, insert the release (``pending``) and its charge,
   after the accountant checked that the charge fits the budget;
3. **run** the mechanism, with every random value drawn from a :class:`TrackedNoise`, which
   remembers whether any noisy value was produced;
4. **store** the payload and mark the release ``complete``.

If step 3 fails before any noise was drawn, the charge is refunded (an appended ``refund`` row)
and the release is marked ``failed_before_noise``. Once noise exists, the charge stands whatever
happens next: a failure marks the release ``failed_after_noise``. Either way the exception carries
a :class:`ReleaseFailure` (``exc.release_failure``) saying which, and how much was charged.

A stop request (Ctrl-C in the command line, :mod:`service.interrupts`) is honoured at known points
only: before step 2 (nothing is charged) and at every progress callback of the mechanism (each
measurement, selection round and estimation iteration), where it raises
:class:`~service.interrupts.Interrupted` carrying the release's :class:`ReleaseFailure`.

A process killed in step 3 or 4 leaves a ``pending`` release with its charge. The release records
its runner (process and heartbeat, :mod:`service.runners`); :func:`service.recovery.recover_interrupted`,
run by every command and at server start, marks ``failed_after_noise`` the pending releases whose
runner is provably gone, and only those.

A ``seed`` (in-process callers only: tests and benchmarks; no HTTP route and no client call takes one) makes the
noise reproducible by whoever knows the seed, so the release carries no privacy. Such a release is marked
``seeded`` in the database, is never reused to answer a question, and answers nothing unless the caller says
``allow_seeded=True`` (in-process tests and benchmarks; the HTTP API never does).
"""

from __future__ import annotations

import collections
import inspect
import json
import math
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd
from sqlalchemy import Engine, select, update

from db.engine import transaction
from db.models import Release, utcnow
from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from service import accountant, interrupts, runners
from service.coverage import Coverage, coverage, measured_cliques
from service.datasets import StoredDataset, get_dataset, stored_dataset
from service.errors import Conflict, InvalidInput, NotFound, ServiceError
from service.mechanisms.base import MechanismResult, Progress, no_progress
from service.oracle import SqlCountOracle
from service.privacy import conversions
from service.privacy.cost import PrivacyCost, check_amount, exact, floor_to_grid
from service.privacy.noise import NoiseSource
from service.recovery import ReleaseFailure
from workloads import parameters
from workloads.marginals import Query, WorkloadError, canonical, parse_workload, total_cells

MECHANISMS = ("laplace", "gaussian", "mst", "aim")
#: The command line refuses ``--seed`` on a release unless this environment variable is "1" (tests, benchmarks).
UNSAFE_SEEDED_RELEASES_ENV = "MARGINALIA_UNSAFE_SEEDED_RELEASES"
ZCDP_MECHANISMS = ("gaussian", "mst", "aim")
MAX_WORKLOAD_CELLS = 50_000_000
MAX_SYNTHETIC_ROWS = 10_000_000


class TrackedNoise:
    """A :class:`NoiseSource` that records whether any random value has been drawn from it."""

    def __init__(self, source: NoiseSource) -> None:
        self._source = source
        self.drawn = False

    def __getattr__(self, name: str):  # noqa: ANN204
        attribute = getattr(self._source, name)
        if callable(attribute):
            def tracked(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                self.drawn = True
                return attribute(*args, **kwargs)
            return tracked
        return attribute


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
class ReleaseOutcome:
    release_id: int
    cost: PrivacyCost
    mechanism: str
    details: dict[str, object] = field(default_factory=dict)
    budget: accountant.BudgetEffect | None = None
    seeded: bool = False

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"release_id": self.release_id, "mechanism": self.mechanism,
                                   "cost": self.cost.to_json()}
        if self.budget is not None:
            body["budget"] = self.budget.to_json()
        if self.seeded:
            body["seeded"] = True
        return body


def marginal_cost(mechanism: str, epsilon: object, delta: object, rho: object) -> PrivacyCost:
    """The charge for a marginal release, from what the steward asked for.

    ``laplace`` is pure DP: ``--epsilon`` only. The zCDP mechanisms take ``--rho``, or an
    (epsilon, delta) pair converted to the largest rho that satisfies it (CKS 2020), rounded down
    to the accountant's grid so the mechanism calibrates to exactly the rho that is charged."""
    if mechanism not in MECHANISMS:
        raise InvalidInput(f"mechanism must be one of {list(MECHANISMS)}, got {mechanism!r}", code="invalid_parameter")
    try:
        if mechanism == "laplace":
            if rho is not None:
                raise InvalidInput("laplace is a pure-DP mechanism: give --epsilon, not --rho",
                                   code="invalid_parameter")
            if delta not in (None, 0, 0.0, "0"):
                raise InvalidInput("laplace is pure DP: --delta must be omitted or 0", code="invalid_parameter")
            if epsilon is None:
                raise InvalidInput("laplace needs --epsilon", code="invalid_parameter")
            return PrivacyCost(epsilon=check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon"))
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise InvalidInput("give either --rho or --epsilon with --delta, not both", code="invalid_parameter")
            charged = floor_to_grid(check_amount(exact(parameters.validate_rho(rho, "rho")), "rho"))
            if charged <= 0:
                raise InvalidInput(f"rho={rho} is below the accountant's resolution of 1e-12 (the ledger's unit of "
                                   "rho): it cannot be charged", code="invalid_parameter")
            return PrivacyCost(rho=charged)
        if epsilon is None or delta is None:
            raise InvalidInput(
                f"{mechanism} is a zCDP mechanism: give --rho, or --epsilon and --delta (delta > 0)",
                code="invalid_parameter",
            )
        eps = float(check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon"))
        dlt = float(parameters.validate_delta(delta, "delta"))
        if dlt == 0:
            raise InvalidInput(f"{mechanism} needs delta > 0 to convert (epsilon, delta) to rho",
                               code="invalid_parameter")
        converted = floor_to_grid(conversions.cdp_rho(eps, dlt))
        if converted <= 0:
            raise InvalidInput(f"epsilon={eps}, delta={dlt} converts to rho below 1e-12", code="invalid_parameter")
        return PrivacyCost(rho=converted)
    except ValueError as exc:
        raise InvalidInput(str(exc), code="invalid_parameter") from None


def _resolve_workload(dataset: StoredDataset, workload: str | list[object]) -> tuple[Query, ...]:
    from workloads.marginals import from_entries

    try:
        queries = parse_workload(workload, dataset.domain) if isinstance(workload, str) else from_entries(
            dataset.domain, workload
        )
    except WorkloadError as exc:
        raise InvalidInput(f"workload: {exc}", code="invalid_workload") from None
    cells = total_cells(dataset.domain, queries)
    if cells > MAX_WORKLOAD_CELLS:
        raise InvalidInput(
            f"workload has {cells:,} cells in all, above the limit of {MAX_WORKLOAD_CELLS:,}", code="workload_too_large"
        )
    return queries


def release_marginals(
    engine: Engine,
    name: str,
    mechanism: str,
    workload: str | list[object],
    *,
    epsilon: object = None,
    delta: object = None,
    rho: object = None,
    seed: int | None = None,
    options: dict[str, object] | None = None,
    principal: str = "cli",
    progress: Progress = no_progress,
) -> ReleaseOutcome:
    """Release a marginal workload of dataset ``name`` (see module docstring for the steps)."""
    options = dict(options or {})
    cost = marginal_cost(mechanism, epsilon, delta, rho)
    dataset = get_dataset(engine, name)
    queries = _resolve_workload(dataset, workload) if mechanism != "mst" else ()
    runner = _runner(mechanism, queries, cost, options)
    params = {
        "workload": [{"attributes": list(q.attributes), "weight": q.weight} for q in queries],
        "options": options,
        "requested": {"epsilon": _num(epsilon), "delta": _num(delta), "rho": _num(rho)},
    }
    return run_release(engine, dataset, kind="marginals", mechanism=mechanism, cost=cost, params=params,
                       runner=runner, seed=seed, principal=principal, progress=progress)


def run_release(
    engine: Engine,
    dataset: StoredDataset,
    *,
    kind: str,
    mechanism: str,
    cost: PrivacyCost,
    params: dict[str, object],
    runner: Callable[[SqlCountOracle, TrackedNoise, Progress], MechanismResult],
    seed: int | None,
    principal: str,
    progress: Progress = no_progress,
    encode_payload: Callable[[MechanismResult], bytes] | None = None,
) -> ReleaseOutcome:
    """Reserve, run, store (module docstring). ``runner`` gets the count oracle, the noise and a
    progress callback, at each call of which a stop request is honoured."""
    interrupts.raise_if_requested("before the release was reserved: nothing was charged")
    seeded = seed is not None
    release_id, charge_id = accountant.reserve_release(engine, dataset.name, kind, mechanism, cost,
                                                       {**params, "seeded": seeded}, principal,
                                                       runner=runners.current().columns(), seeded=seeded)
    noise = TrackedNoise(NoiseSource(seed))
    where = f"during release {release_id}"

    def checked(done: int, total: int, message: str) -> None:
        interrupts.raise_if_requested(where)
        progress(done, total, message)

    with runners.Heartbeat(engine, Release.__table__, release_id):
        try:
            result = runner(SqlCountOracle(engine, dataset), noise, checked)
            if result.cost != cost:
                raise RuntimeError(f"mechanism {mechanism} used {result.cost} but was charged {cost}")
            payload = (encode_payload or _encode_marginal_payload)(result)
        except BaseException as exc:
            raise _failed(engine, release_id, charge_id, mechanism, cost, noise.drawn, exc) from None
        try:
            _store(engine, release_id, payload, result.details)
        except BaseException as exc:
            raise _failed(engine, release_id, charge_id, mechanism, cost, True, exc) from None
    return ReleaseOutcome(release_id, cost, mechanism, result.details, accountant.budget_effect(engine, charge_id),
                          seeded)


def _store(engine: Engine, release_id: int, payload: bytes, details: dict[str, object]) -> None:
    # One UPDATE (no read first): on SQLite a transaction that reads and then writes fails at once
    # with "database is locked" when another writer committed in between.
    with transaction(engine) as session:
        stored = session.execute(
            update(Release).where(Release.id == release_id, Release.status == "pending").values(
                payload=payload, details_json=json.dumps(details, default=_json_default),
                status="complete", finished_at=utcnow())
        ).rowcount
    if stored != 1:  # recovery took this runner for dead (it was stopped longer than the lease)
        raise ServiceError(f"release {release_id} was marked failed by recovery while it ran; its charge stands",
                           code="release_recovered", status=409)


def _failed(engine: Engine, release_id: int, charge_id: int, mechanism: str, cost: PrivacyCost, noise_drawn: bool,
            exc: BaseException) -> BaseException:
    """Mark the release failed (refunding its charge if no noise was drawn) and return the exception
    to raise: ``exc`` with the :class:`ReleaseFailure` attached as ``exc.release_failure`` (and as a
    note), or for a stop request an :class:`~service.interrupts.Interrupted` carrying it."""
    status = "failed_after_noise" if noise_drawn else "failed_before_noise"
    message = f"{type(exc).__name__}: {exc}"[:2000]
    with transaction(engine) as session:
        session.execute(update(Release).where(Release.id == release_id, Release.status == "pending")
                        .values(status=status, error=message, finished_at=utcnow()))
    if not noise_drawn:
        accountant.refund(engine, charge_id, f"release {release_id} failed before any noise was drawn: {message}")
    try:
        budget = accountant.budget_effect(engine, charge_id)
    except Exception:  # noqa: BLE001 - the report is secondary: never hide the failure behind a second one
        budget = None
    failure = ReleaseFailure(release_id, mechanism, status, cost, budget)
    if isinstance(exc, interrupts.Interrupted):
        exc = interrupts.Interrupted(f"interrupted by {interrupts.signal_name()}: {failure.sentence()}",
                                     outcome=failure)
    else:
        exc.add_note(failure.sentence())
    exc.release_failure = failure  # type: ignore[attr-defined]
    return exc


def _mechanism_function(mechanism: str) -> Callable[..., MechanismResult]:
    from service.mechanisms import direct

    if mechanism == "laplace":
        return direct.run_laplace
    if mechanism == "gaussian":
        return direct.run_gaussian
    if mechanism == "mst":
        from service.mechanisms.mst import run_mst

        return run_mst
    from service.mechanisms.aim import run_aim

    return run_aim


NUMERIC_OPTIONS = {"rounds": int, "iters": int, "max_model_size": float}


def check_options(mechanism: str, options: dict[str, object]) -> None:
    """Refuse unknown or ill-typed mechanism options BEFORE anything is reserved or charged."""
    function = _mechanism_function(mechanism)
    allowed = {
        name for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name != "progress"
    }
    for name, value in options.items():
        if name not in allowed:
            raise InvalidInput(f"{mechanism} has no option {name!r}; it takes {sorted(allowed)}",
                               code="invalid_parameter")
        kind = NUMERIC_OPTIONS.get(name)
        if kind is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                 or (kind is int and int(value) != value) or not math.isfinite(value) or value <= 0):
            raise InvalidInput(f"option {name} must be a positive {kind.__name__}, got {value!r}",
                               code="invalid_parameter")


def _runner(
    mechanism: str, queries: tuple[Query, ...], cost: PrivacyCost, options: dict[str, object]
) -> Callable[[SqlCountOracle, TrackedNoise, Progress], MechanismResult]:
    check_options(mechanism, options)
    function = _mechanism_function(mechanism)
    if mechanism == "laplace":
        return lambda oracle, noise, progress: function(oracle, queries, cost.epsilon, noise,
                                                        progress=progress, **options)
    if mechanism == "mst":
        return lambda oracle, noise, progress: function(oracle, cost.rho, noise, progress=progress, **options)
    return lambda oracle, noise, progress: function(oracle, queries, cost.rho, noise, progress=progress, **options)


def _encode_marginal_payload(result: MechanismResult) -> bytes:
    return mbi_adapter.model_to_bytes(result.model)


# answering from releases (free) -------------------------------------------------------------------
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

    def coverage(self, attributes: Sequence[str]) -> Coverage:
        """What this marginal release measured of ``attributes`` (service/coverage.py)."""
        cliques = measured_cliques(self.mechanism, self.params, self.details, self.dataset.domain.names)
        return coverage(self.id, cliques, attributes)


def get_release(engine: Engine, release_id: int) -> StoredRelease:
    with transaction(engine) as session:
        release = session.get(Release, release_id)
        if release is None:
            raise NotFound(f"no release with id {release_id}", code="release_not_found")
        from db.models import Dataset

        dataset = stored_dataset(session.get(Dataset, release.dataset_id))
        return StoredRelease(release.id, dataset, release.kind, release.mechanism, release.status,
                             json.loads(release.params_json), json.loads(release.details_json), release.payload,
                             bool(release.seeded))


def list_releases(engine: Engine, name: str | None = None) -> list[StoredRelease]:
    from db.models import Dataset

    with transaction(engine) as session:
        query = select(Release.id).order_by(Release.id)
        if name is not None:
            query = query.join(Dataset, Dataset.id == Release.dataset_id).where(Dataset.name == name)
        ids = list(session.execute(query).scalars())
    return [get_release(engine, i) for i in ids]


def _complete_marginal_release(engine: Engine, release_id: int) -> StoredRelease:
    release = get_release(engine, release_id)
    if release.kind != "marginals":
        raise InvalidInput(f"release {release_id} is a {release.kind} release, not a marginal release",
                           code="wrong_release_kind")
    if release.status != "complete" or release.payload is None:
        raise ServiceError(f"release {release_id} is {release.status}; it has no model to answer from",
                           code="release_not_complete", status=409)
    return release


_MODEL_CACHE: collections.OrderedDict[tuple[str, int], tuple[StoredRelease, Model]] = collections.OrderedDict()
_MODEL_CACHE_SIZE = 32
_MODEL_CACHE_LOCK = threading.Lock()


def release_model(engine: Engine, release_id: int) -> tuple[StoredRelease, Model]:
    """The fitted model of a complete marginal release. A complete release never changes, so the
    release and its model are cached per process (the last ``_MODEL_CACHE_SIZE`` used) and the
    payload is read from the database once."""
    key = (str(engine.url), release_id)
    with _MODEL_CACHE_LOCK:
        hit = _MODEL_CACHE.get(key)
        if hit is not None:
            _MODEL_CACHE.move_to_end(key)
            return hit
    release = _complete_marginal_release(engine, release_id)
    entry = (release, mbi_adapter.model_from_bytes(release.payload, release.dataset.domain))
    with _MODEL_CACHE_LOCK:
        _MODEL_CACHE[key] = entry
        while len(_MODEL_CACHE) > _MODEL_CACHE_SIZE:
            _MODEL_CACHE.popitem(last=False)
    return entry


def answer_marginal(
    engine: Engine, release_id: int, attributes: list[str], *, allow_seeded: bool = False
) -> dict[str, object]:
    """Any marginal of a release's model: free post-processing (refused for a seeded release unless
    ``allow_seeded``). The answer says what the release measured of it (``coverage``: what is data and what the
    model's extrapolation) and, for a raw table, the label of each code of each axis (``labels``)."""
    release, model = release_model(engine, release_id)
    release.check_answerable(allow_seeded)
    try:
        ordered = canonical(release.dataset.domain, attributes)
    except WorkloadError as exc:
        raise InvalidInput(str(exc), code="invalid_attributes") from None
    cells = release.dataset.domain.cells(ordered)
    if cells > 10_000_000:
        raise InvalidInput(f"marginal {attributes} has {cells:,} cells; the limit is 10,000,000", code="too_large")
    values = mbi_adapter.marginal(model, ordered)
    values = np.moveaxis(values, [ordered.index(a) for a in attributes], range(len(attributes)))
    return {
        "release_id": release_id,
        "attributes": list(attributes),
        "shape": list(values.shape),
        "counts": values.tolist(),
        "labels": release.dataset.labels_of(attributes),
        "coverage": release.coverage(attributes).to_json(),
    }


def synthetic_frame(
    engine: Engine, release_id: int, rows: int, seed: int | None = None, *, labels: bool = False,
    allow_seeded: bool = False,
) -> pd.DataFrame:
    """``rows`` synthetic records drawn from a release's model (free). Without a seed, fresh entropy is used (the
    HTTP API never passes one); refused for a seeded release unless ``allow_seeded``. With ``labels``, the columns
    of a raw table hold their codes' labels (from its binning spec) instead of the codes."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1 or rows > MAX_SYNTHETIC_ROWS:
        raise InvalidInput(f"rows must be an integer in 1..{MAX_SYNTHETIC_ROWS:,}, got {rows!r}", code="invalid_rows")
    release, model = release_model(engine, release_id)
    release.check_answerable(allow_seeded)
    seed = secrets.randbits(32) if seed is None else int(seed)
    columns = mbi_adapter.synthetic_rows(model, rows, seed)
    names = release.dataset.labels if labels else {}
    return pd.DataFrame({name: np.asarray(names[name], dtype=object)[columns[name]] if name in names else columns[name]
                         for name in release.dataset.domain.names})


def _num(value: object) -> float | None:
    return None if value is None else float(exact(value))


def _json_default(value: object) -> object:
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
