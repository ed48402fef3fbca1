"""What a release that did not complete left behind, and recovering the work of processes that died.

:class:`ReleaseFailure` is what the release engine reports when a release stops (refunded or not, and
how much). :func:`recover_interrupted` marks ``failed_after_noise`` the releases left ``pending`` by a
process that is provably gone (:mod:`service.releases.runners`), and :func:`recover_jobs` fails the API jobs
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
from service.access.idempotency import INTERRUPTED_BODY, INTERRUPTED_STATUS
from service.privacy.cost import PrivacyCost
from service.releases import runners

if TYPE_CHECKING:
    from service.accounting.accountant import BudgetEffect


@dataclass(frozen=True)
class ReleaseFailure:
    """What became of a release that did not complete: its status, whether its charge was refunded, and
    (``budget``, when known) the budget's composed epsilon spent before its charge and after its outcome, as
    a completed release reports it (:class:`service.accounting.accountant.BudgetEffect`)."""

    release_id: int
    mechanism: str
    status: str  # failed_before_noise (refunded) or failed_after_noise (the charge stands)
    cost: PrivacyCost
    budget: BudgetEffect | None = None

    @property
    def refunded(self) -> bool:
        return self.status == "failed_before_noise"

    def sentence(self) -> str:
        from service.accounting.accountant import describe_cost  # light start: no numerical imports until needed

        charge = describe_cost(self.cost)
        if self.refunded:
            said = (f"release {self.release_id} ({self.mechanism}) stopped before any noise was drawn: "
                    f"its charge of {charge} was refunded, nothing was spent")
        else:
            said = (f"release {self.release_id} ({self.mechanism}) stopped after its noise was drawn: it is "
                    f"failed_after_noise and its charge of {charge} stands")
        return f"{said}; {self.budget.describe()}" if self.budget is not None else said

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "release_id": self.release_id, "mechanism": self.mechanism, "status": self.status,
            "refunded": self.refunded, "charged": self.cost.to_json(),
            "spent": (PrivacyCost() if self.refunded else self.cost).to_json()}
        if self.budget is not None:
            body["budget"] = self.budget.to_json()
        return body


def _runner_columns(model: type[Release] | type[Job]) -> tuple[object, ...]:
    return (model.runner_host, model.runner_pid, model.runner_started, model.heartbeat_at, model.created_at)


def recover_interrupted(engine: Engine) -> list[ReleaseFailure]:
    """Mark ``failed_after_noise`` the releases left ``pending`` by a runner that is provably gone
    (:func:`service.releases.runners.is_gone`); their charges stand, as nobody can prove that no noisy value
    left the process. Safe while other processes run releases. Returns what was marked."""
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


def recover_jobs(engine: Engine) -> int:
    """Fail the API jobs still ``running`` whose runner (the server) is provably gone, with a stored
    409 ``request_interrupted`` answer. Returns how many."""
    with transaction(engine) as session:
        running = session.execute(select(Job.id, *_runner_columns(Job)).where(Job.state == "running")).all()
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
