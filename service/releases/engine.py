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
:class:`~service.interrupts.Interrupted` carrying the release's :class:`ReleaseFailure`. A mechanism made of many
noisy steps (MST, AIM) says, on the stop request raised at one of its progress reports, which steps had drawn their
noise (:func:`service.mechanisms.base.spent_before_stop`): the ledger then keeps exactly their charge, rounded up to
its grid, and refunds the rest of the reservation (an appended, partial ``refund`` row). After a *failure* the whole
charge stands, since whether a release fails may depend on the data (docs/privacy.md 6.5). The release is
``failed_after_noise`` either way and answers nothing.

A process killed in step 3 or 4 leaves a ``pending`` release with its charge. The release records
its runner (process and heartbeat, :mod:`service.runners`);
:func:`service.releases.recovery.recover_interrupted`, run by every command and at server start, marks
``failed_after_noise`` the pending releases whose runner is provably gone, and only those.

A ``seed`` (in-process callers only: tests and benchmarks; no HTTP route and no client call takes one) makes the
noise reproducible by whoever knows the seed, so the release carries no privacy. Such a release is marked
``seeded`` in the database, is never reused to answer a question, and answers nothing unless the caller says
``allow_seeded=True`` (in-process tests and benchmarks; the HTTP API never does).

A dry run (:mod:`service.releases.planning`) starts from the same :class:`PreparedRelease` as the release and
stops before step 2: every refusal of step 1 is the release's own, and the charge it shows is the accountant's quote
of the very charge step 2 would make.

What a mechanism name means (its kind, privacy notion, options and runner) is the registry's
(:mod:`service.mechanisms.registry`); what a kind's payload is, :mod:`service.releases.kinds`. Answering from
stored releases is :mod:`service.releases.answers`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np
from sqlalchemy import Engine, update

from db.engine import transaction
from db.models import EPSILON_SCALE, Release, utcnow
from service import interrupts, runners
from service.accounting import accountant
from service.data.datasets import StoredDataset, get_dataset
from service.data.oracle import TableCountOracle
from service.error_text import is_own, shown_message
from service.errors import InvalidInput, ServiceError
from service.mechanisms import auto, registry
from service.mechanisms.auto import AutoChoice
from service.mechanisms.base import MechanismError, MechanismResult, SpentSteps, spent_before_stop
from service.mechanisms.progress import Progress, no_progress
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import PrivacyCost, exact, from_units
from service.privacy.noise import NoiseSource
from service.releases import kinds
from service.releases.recovery import ReleaseFailure
from workloads.marginals import Query, WorkloadError, parse_workload, total_cells

#: The command line refuses ``--seed`` on a release unless this environment variable is "1" (tests, benchmarks).
UNSAFE_SEEDED_RELEASES_ENV = "MARGINALIA_UNSAFE_SEEDED_RELEASES"
MAX_WORKLOAD_CELLS = 50_000_000


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


@dataclass(frozen=True)
class ReleaseOutcome:
    release_id: int
    cost: PrivacyCost
    mechanism: str
    details: dict[str, object] = field(default_factory=dict)
    budget: accountant.BudgetEffect | None = None
    seeded: bool = False
    auto: AutoChoice | None = None

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"release_id": self.release_id, "mechanism": self.mechanism,
                                   "cost": self.cost.to_json()}
        if self.budget is not None:
            body["budget"] = self.budget.to_json()
        if self.seeded:
            body["seeded"] = True
        if self.auto is not None:
            body["auto"] = self.auto.to_json()
        return body


def resolve_workload(dataset: StoredDataset, workload: str | list[object]) -> tuple[Query, ...]:
    """The checked workload of a request (a spec such as ``all-2way``, or entries); a dry run also resolves it for a
    mechanism that takes none (MST), to say how accurate its answers to it would be."""
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


@dataclass(frozen=True)
class PreparedRelease:
    """A release checked and ready to reserve (step 1): its dataset, its mechanism's spec, the request its runner is
    built from (the cost, the checked options, the workload or the design) and the parameters stored with it. A
    release (:func:`release_prepared`) and its dry run (:func:`service.releases.planning.plan_prepared`) both start
    from it."""

    dataset: StoredDataset
    spec: registry.MechanismSpec
    request: registry.RunRequest
    params: dict[str, object]
    auto: AutoChoice | None = None


def prepare_marginals(
    engine: Engine,
    name: str,
    mechanism: str,
    workload: str | list[object],
    *,
    epsilon: object = None,
    delta: object = None,
    rho: object = None,
    options: dict[str, object] | None = None,
) -> PreparedRelease:
    """Step 1 of a marginal release of dataset ``name`` by a registered marginal mechanism, or by the one ``auto``
    chooses from public information (:mod:`service.mechanisms.auto`): the cost, the dataset, the workload and the
    options checked, nothing written."""
    if mechanism == auto.AUTO:
        return _prepare_auto(engine, name, workload, epsilon=epsilon, delta=delta, rho=rho, options=options)
    spec = marginal_spec(mechanism)
    options = dict(options or {})
    cost = spec.cost(epsilon, delta, rho)
    dataset = get_dataset(engine, name)
    queries = resolve_workload(dataset, workload) if spec.uses_workload else ()
    spec.check_options(options)
    return _prepared(dataset, spec, cost, queries, options, epsilon=epsilon, delta=delta, rho=rho)


def marginal_spec(mechanism: object) -> registry.MechanismSpec:
    """The registered marginal mechanism called ``mechanism``; the refusal names every choice, ``auto`` included."""
    spec = registry.find(mechanism) if isinstance(mechanism, str) else None
    if spec is None or spec.kind != ReleaseKind.MARGINALS:
        choices = [*registry.names(ReleaseKind.MARGINALS), auto.AUTO]
        raise InvalidInput(f"mechanism must be one of {choices}, got {mechanism!r}", code="invalid_parameter")
    return spec


def _prepared(dataset: StoredDataset, spec: registry.MechanismSpec, cost: PrivacyCost, queries: tuple[Query, ...],
              options: dict[str, object], *, epsilon: object, delta: object, rho: object,
              choice: AutoChoice | None = None) -> PreparedRelease:
    params: dict[str, object] = {
        "workload": [{"attributes": list(q.attributes), "weight": q.weight} for q in queries],
        "options": options,
        "requested": {"epsilon": _num(epsilon), "delta": _num(delta), "rho": _num(rho)},
    }
    if choice is not None:
        params["auto"] = choice.to_json()
    request = registry.RunRequest(cost, options, queries=queries, epsilon=epsilon, delta=delta)
    return PreparedRelease(dataset, spec, request, params, choice)


def _prepare_auto(engine: Engine, name: str, workload: str | list[object], *, epsilon: object, delta: object,
                  rho: object, options: dict[str, object] | None) -> PreparedRelease:
    """Step 1 of an ``auto`` release: charged as every candidate would be (they are all zCDP, at the same rho), the
    mechanism chosen from the domain, the workload and that rho (never the table), then prepared as if named."""
    if options:
        raise InvalidInput(f"auto chooses the options too, and takes none (got {sorted(options)}): name a mechanism "
                           f"({', '.join(auto.CANDIDATES)}) to set its options", code="invalid_parameter")
    cost = registry.zcdp_cost(auto.AUTO, epsilon, delta, rho)
    dataset = get_dataset(engine, name)
    queries = resolve_workload(dataset, workload)
    choice = auto.choose(dataset.domain, queries, cost.rho)
    spec = marginal_spec(choice.mechanism)
    spec.check_options(choice.options)
    return _prepared(dataset, spec, cost, queries if spec.uses_workload else (), dict(choice.options),
                     epsilon=epsilon, delta=delta, rho=rho, choice=choice)


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
    """Release a marginal workload of dataset ``name`` by a registered marginal mechanism (module docstring)."""
    prepared = prepare_marginals(engine, name, mechanism, workload, epsilon=epsilon, delta=delta, rho=rho,
                                 options=options)
    return release_prepared(engine, prepared, seed=seed, principal=principal, progress=progress)


def release_prepared(engine: Engine, prepared: PreparedRelease, *, seed: int | None, principal: str,
                     progress: Progress = no_progress) -> ReleaseOutcome:
    """Reserve, run and store a :class:`PreparedRelease` (:func:`release_with`); the outcome says what ``auto``
    chose, if it chose."""
    outcome = release_with(engine, prepared.dataset, prepared.spec, prepared.request, prepared.params, seed=seed,
                           principal=principal, progress=progress)
    return outcome if prepared.auto is None else replace(outcome, auto=prepared.auto)


def checked_runner(spec: registry.MechanismSpec, request: registry.RunRequest) -> registry.Runner:
    """The runner of ``request``, or the refusal of settings the mechanism cannot run with (bad input: nothing is
    reserved, by a release or a dry run alike)."""
    try:
        return spec.make_runner(request)
    except MechanismError as exc:
        raise InvalidInput(str(exc), code="invalid_parameter") from None


def check_charged_kind(kind: str) -> None:
    """Refuse a kind of release that is not charged to a dataset's budget (the release engine cannot make those)."""
    if not kinds.get(kind).charged_to_dataset:
        raise InvalidInput(f"{kind} releases are not charged to a dataset's budget: the release engine cannot make "
                           "them", code="invalid_parameter")


def release_with(
    engine: Engine,
    dataset: StoredDataset,
    spec: registry.MechanismSpec,
    request: registry.RunRequest,
    params: dict[str, object],
    *,
    seed: int | None,
    principal: str,
    progress: Progress = no_progress,
) -> ReleaseOutcome:
    """A release of ``dataset`` by the mechanism ``spec``: its runner is built from ``request``, whose options the
    caller checked (:meth:`~service.mechanisms.registry.MechanismSpec.check_options` in :func:`prepare_marginals`,
    :meth:`~service.mechanisms.registry.MechanismSpec.settings` in a regression's fit) and may refuse before anything
    is reserved (:func:`checked_runner`); then :func:`run_release` reserves, runs and stores it."""
    runner = checked_runner(spec, request)
    return run_release(engine, dataset, kind=spec.kind, mechanism=spec.name, cost=request.cost, params=params,
                       runner=runner, seed=seed, principal=principal, progress=progress)


def run_release(
    engine: Engine,
    dataset: StoredDataset,
    *,
    kind: str,
    mechanism: str,
    cost: PrivacyCost,
    params: dict[str, object],
    runner: Callable[[TableCountOracle, TrackedNoise, Progress], MechanismResult],
    seed: int | None,
    principal: str,
    progress: Progress = no_progress,
) -> ReleaseOutcome:
    """Reserve, run, store (module docstring). ``runner`` gets the count oracle, the noise and a
    progress callback, at each call of which a stop request is honoured; the payload its result carries, of the
    kind's type (:attr:`~service.releases.kinds.KindSpec.payload_type`), is what is stored."""
    check_charged_kind(kind)
    kind_spec = kinds.get(kind)
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
            with TableCountOracle(engine, dataset) as oracle:
                result = runner(oracle, noise, checked)
            if result.cost != cost:
                raise RuntimeError(f"mechanism {mechanism} used {result.cost} but was charged {cost}")
            if not isinstance(result.payload, kind_spec.payload_type):
                raise RuntimeError(f"mechanism {mechanism} returned a {type(result.payload).__name__} payload; a "
                                   f"{kind} release stores a {kind_spec.payload_type.__name__}")
            payload = result.payload.to_bytes()
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
    """Mark the release failed (refunding its charge if no noise was drawn, or the part of it beyond the steps that
    drew noise when a stop was requested: :func:`_kept_after_stop`) and return the exception to raise: ``exc`` with
    the :class:`ReleaseFailure` attached as ``exc.release_failure`` (and as a note), or for a stop request an
    :class:`~service.interrupts.Interrupted` carrying it."""
    status = "failed_after_noise" if noise_drawn else "failed_before_noise"
    # the release's row and the ledger's refund reason are read by auditors: a foreign message is withheld
    message = (f"{type(exc).__name__}: {exc}" if is_own(exc) else shown_message(exc))[:2000]
    spent = spent_before_stop(exc) if noise_drawn else None
    requested = isinstance(exc, interrupts.Interrupted)
    kept = _kept_after_stop(cost, spent) if requested else None
    values: dict[str, object] = {"status": status, "error": message, "finished_at": utcnow()}
    if spent is not None:
        values["details_json"] = json.dumps({"stopped": _stop_record(spent, requested)})
    with transaction(engine) as session:
        marked = session.execute(update(Release).where(Release.id == release_id, Release.status == "pending")
                                 .values(**values)).rowcount
    if kept is not None and marked != 1:  # recovery took the runner for dead meanwhile: its whole charge stands
        kept = None
    if not noise_drawn:
        accountant.refund(engine, charge_id, f"release {release_id} failed before any noise was drawn: {message}")
    elif kept is not None:
        accountant.refund(engine, charge_id, _partial_refund_reason(release_id, spent), keep=kept)
    try:
        budget = accountant.budget_effect(engine, charge_id)
    except Exception:  # noqa: BLE001 - the report is secondary: never hide the failure behind a second one
        budget = None
    why = ("after a failure nothing is refunded: whether a release fails may depend on the data, docs/privacy.md 6.5"
           if noise_drawn and not requested else "")
    failure = ReleaseFailure(release_id, mechanism, status, cost, budget, kept=kept,
                             steps_drawn=None if spent is None else len(spent.steps), why=why)
    if requested:
        by = getattr(exc, "by", None) or interrupts.signal_name()
        exc = interrupts.Interrupted(f"interrupted by {by}: {failure.sentence()}", outcome=failure, by=by)
    else:
        exc.add_note(failure.sentence())
    exc.release_failure = failure  # type: ignore[attr-defined]
    return exc


def _kept_after_stop(cost: PrivacyCost, spent: SpentSteps | None) -> PrivacyCost | None:
    """What the ledger keeps of a zCDP reservation when a stop was requested after some of the run's steps drew their
    noise: exactly those steps' rho, rounded up to the ledger's grid as every charge is (so the number reported is the
    number charged). None -- keep the whole reservation -- when the mechanism recorded no steps, when the record is
    not a zCDP run within its reservation (a bug: nothing then proves less was spent), or when every step had drawn
    its noise."""
    if spent is None or cost.epsilon or cost.delta or spent.rho > cost.rho:
        return None
    kept = PrivacyCost(rho=from_units(PrivacyCost(rho=spent.rho).as_units()[2], EPSILON_SCALE))
    return None if kept == cost else kept


def _stop_record(spent: SpentSteps, requested: bool) -> dict[str, object]:
    """What a stopped release's details say of its steps (public: the charges of the steps, never their outputs), so
    that an auditor recomputes what the ledger kept: ``rho_drawn`` is the exact rational sum."""
    return {"requested": requested, "steps_drawn": len(spent.steps), "rho_drawn": str(spent.rho),
            "rho_drawn_by_step": spent.by_kind()}


def _partial_refund_reason(release_id: int, spent: SpentSteps) -> str:
    """The ledger's note of a partial refund: what an auditor recomputes the charge kept from (docs/privacy.md 6.5)."""
    return (f"release {release_id} was stopped on request after {len(spent.steps)} steps drew their noise: their "
            f"charge rho={spent.rho} (exact), rounded up to the ledger's grid, stands; the rest of the reservation is "
            "refunded")


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
