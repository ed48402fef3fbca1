"""What a release that did not complete left behind, and recovering the work of processes that died.

:class:`ReleaseFailure` is what the release engine reports when a release stops (refunded or not, and
how much). :func:`recover_interrupted` marks ``failed_after_noise`` the releases left ``pending`` by a
process that is provably gone (:mod:`service.runners`), and :func:`recover_jobs` fails the API jobs
such a process ran. Every command runs both (``marginalia init`` included), and so does the server at
start; neither touches the work of a live process. Light on purpose: no numerical imports, so that
quick commands stay quick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine, select, update

from db.engine import transaction
from db.models import Job, Release, utcnow
from service import runners
from service.access.idempotency import INTERRUPTED_BODY, INTERRUPTED_STATUS, recover_interrupted_claims
from service.privacy.cost import PrivacyCost

if TYPE_CHECKING:
    from service.accounting.accountant import BudgetEffect


@dataclass(frozen=True)
class ReleaseFailure:
    """What became of a release that did not complete: its status, whether its charge was refunded, and
    (``budget``, when known) the budget's composed epsilon spent before its charge and after its outcome, as
    a completed release reports it (:class:`service.accounting.accountant.BudgetEffect`).

    ``kept``: for a release stopped on request after some of its steps drew noise (MST, AIM), the part of the charge
    the ledger keeps, the rest having been refunded (docs/privacy.md 6.5); None when the whole charge stands (or was
    refunded). ``steps_drawn``: how many steps had drawn their noise, when the mechanism counts them. ``why``: a
    reason the sentence gives for keeping the whole charge."""

    release_id: int
    mechanism: str
    status: str  # failed_before_noise (refunded) or failed_after_noise (the charge, or the drawn steps' part, stands)
    cost: PrivacyCost
    budget: BudgetEffect | None = None
    kept: PrivacyCost | None = None
    steps_drawn: int | None = None
    why: str = ""

    @property
    def refunded(self) -> bool:
        """Whether the whole charge was refunded (no noise was drawn)."""
        return self.status == "failed_before_noise"

    @property
    def spent(self) -> PrivacyCost:
        """What the ledger keeps of the charge: nothing when refunded, the drawn steps' part when a stop request came
        part-way, else the whole charge."""
        if self.refunded:
            return PrivacyCost()
        return self.cost if self.kept is None else self.kept

    def sentence(self) -> str:
        from service.accounting.accountant import describe_cost  # light start: no numerical imports until needed

        charge = describe_cost(self.cost)
        if self.refunded:
            said = (f"release {self.release_id} ({self.mechanism}) stopped before any noise was drawn: "
                    f"its charge of {charge} was refunded, nothing was spent")
        elif self.kept is not None:
            said = (f"release {self.release_id} ({self.mechanism}) was stopped after {self.steps_drawn} of its steps "
                    f"drew their noise: it is failed_after_noise; those steps' {describe_cost(self.kept)} stands and "
                    f"the rest of its charge of {charge} was refunded")
        else:
            said = (f"release {self.release_id} ({self.mechanism}) stopped after its noise was drawn: it is "
                    f"failed_after_noise and its charge of {charge} stands")
            if self.why:
                said += f" ({self.why})"
        return f"{said}; {self.budget.describe()}" if self.budget is not None else said

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "release_id": self.release_id, "mechanism": self.mechanism, "status": self.status,
            "refunded": self.refunded, "charged": self.cost.to_json(), "spent": self.spent.to_json()}
        if self.steps_drawn is not None:
            body["steps_drawn"] = self.steps_drawn
        if self.budget is not None:
            body["budget"] = self.budget.to_json()
        return body


def _runner_columns(model: type[Release] | type[Job]) -> tuple[object, ...]:
    return (model.runner_host, model.runner_pid, model.runner_started, model.heartbeat_at, model.created_at)


def recover_interrupted(engine: Engine) -> list[ReleaseFailure]:
    """Mark ``failed_after_noise`` the releases left ``pending`` by a runner that is provably gone
    (:func:`service.runners.is_gone`); their charges stand whole, as nobody can prove that no noisy value
    left the process, and a process that died part-way is not refunded its undrawn steps as a stop request is: whether
    and when it died may depend on the data (the kernel's out-of-memory killer reads the memory it used;
    docs/privacy.md 6.5). Safe while other processes run releases. Returns what was marked."""
    with transaction(engine) as session:
        pending = session.execute(
            select(Release.id, Release.mechanism, *_runner_columns(Release)).where(Release.status == "pending")
        ).all()
    recovered = []
    for row in pending:
        if not runners.is_gone(*row[2:]):
            continue
        with transaction(engine) as session:
            marked = session.execute(
                update(Release).where(Release.id == row[0], Release.status == "pending").values(
                    status="failed_after_noise", finished_at=utcnow(),
                    error=f"interrupted: the process that ran it (pid {row[3]}) stopped during the release")
            ).rowcount
        if marked == 1:
            from service.accounting.accountant import release_costs

            cost = release_costs(engine, [row[0]])[row[0]]
            recovered.append(ReleaseFailure(row[0], row[1], "failed_after_noise", cost))
    return recovered


def recover_jobs(engine: Engine, only: int | None = None) -> int:
    """Fail the API jobs still ``running`` (all, or job ``only``) whose runner (the server) is provably gone, with a
    stored 409 ``request_interrupted`` answer. Returns how many."""
    query = select(Job.id, *_runner_columns(Job)).where(Job.state == "running")
    with transaction(engine) as session:
        running = session.execute(query if only is None else query.where(Job.id == only)).all()
    gone = [row[0] for row in running if runners.is_gone(*row[1:])]
    if not gone:
        return 0
    with transaction(engine) as session:
        result = session.execute(
            update(Job).where(Job.id.in_(gone), Job.state == "running").values(
                state="failed", response_status=INTERRUPTED_STATUS, response_json=json.dumps(INTERRUPTED_BODY),
                finished_at=utcnow())
        )
        return int(result.rowcount or 0)


def recover_everything(engine: Engine) -> dict[str, int]:
    """Every recovery of this module and of idempotency claims, each safe while other servers run: what a server
    does at start-up and every :data:`service.runners.HEARTBEAT_SECONDS` (service/api/lifespan.py)."""
    return {"releases_marked_failed_after_noise": len(recover_interrupted(engine)),
            "jobs_interrupted": recover_jobs(engine),
            "idempotency_claims_interrupted": recover_interrupted_claims(engine)}
