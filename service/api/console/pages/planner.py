"""The steward's release planner: a workload, a mechanism and either an epsilon or a target error; the preview (the
exact charge in the budget's own epsilon, the budget before -> after and why, whether it fits, the expected error of
every workload marginal), computed by the same dry run as ``POST /datasets/{name}/releases/marginals/plan`` and
spending nothing; then, once confirmed, the release itself as a background job whose page follows its progress
(:func:`service.api.background.launch`, as ``Prefer: respond-async`` does). The confirmation carries the preview's
exact request (with a target error, the epsilon the preview solved for), so the charge is the one previewed."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from service.api import background, jobs, limits
from service.api.console import charts, render
from service.api.console.access import ConsoleRoute, Visitor, anyone, checked_form, field, form_fields, signed_in
from service.api.console.pages.datasets import budget_or_none
from service.api.paths import path_id
from service.api.routes_datasets import Name
from service.api.security import STEWARD, check_scope, engine_of
from service.data import datasets
from service.errors import InvalidInput, NotFound
from service.mechanisms import registry
from service.mechanisms.auto import AUTO
from service.mechanisms.progress import Progress
from service.mechanisms.registry import ReleaseKind
from service.releases import engine as release_engine
from service.releases import planning

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)
stewarding = signed_in(STEWARD)
FORM = limits.body(limits.SMALL_BODY)
JobId = path_id("Job id.")

MECHANISMS = (AUTO, *registry.names(ReleaseKind.MARGINALS))
WORKLOADS = {"all-1way": "every column alone (all 1-way marginals)", "all-2way": "every pair of columns (all 2-way)",
             "all-3way": "every triple of columns (all 3-way)", "target": "every column with a target column",
             "columns": "one marginal of the columns chosen below"}


@dataclass(frozen=True)
class PlanRequest:
    """What the planner's form asks for, as the release and its dry run take it."""

    workload_kind: str
    target_column: str | None
    columns: tuple[str, ...]
    mechanism: str
    epsilon: str | None
    delta: str | None
    target_error: str | None

    @classmethod
    def from_form(cls, fields: dict[str, list[str]]) -> PlanRequest:
        kind = field(fields, "workload", "all-2way") or "all-2way"
        if kind not in WORKLOADS:
            raise InvalidInput(f"workload must be one of {list(WORKLOADS)}, got {kind!r}", code="invalid_parameter")
        mechanism = field(fields, "mechanism", AUTO) or AUTO
        if mechanism not in MECHANISMS:
            raise InvalidInput(f"mechanism must be one of {list(MECHANISMS)}, got {mechanism!r}",
                               code="invalid_parameter")
        aim = field(fields, "aim", "epsilon")
        columns = tuple(dict.fromkeys(v.strip() for v in fields.get("columns", []) if v.strip()))
        return cls(kind, field(fields, "target_column"), columns, mechanism,
                   field(fields, "epsilon") if aim == "epsilon" else None, field(fields, "delta"),
                   field(fields, "target_error") if aim == "target" else None)

    def workload(self) -> str | list[object]:
        if self.workload_kind == "target":
            if not self.target_column:
                raise InvalidInput("target_column: choose the target column of the workload", code="invalid_parameter")
            return f"target:{self.target_column}"
        if self.workload_kind == "columns":
            if not self.columns:
                raise InvalidInput("columns: choose at least one column for the marginal", code="invalid_parameter")
            return [list(self.columns)]
        return self.workload_kind

    def plan(self, request: Request, name: str) -> planning.ReleasePlan:
        return planning.plan_marginals(engine_of(request), name, self.mechanism, self.workload(),
                                       epsilon=self.epsilon, delta=self.delta, target_error=self.target_error)

    def confirmed(self, plan: planning.ReleasePlan) -> PlanRequest:
        """The request the confirmation sends: with a target error, at the epsilon the preview solved for."""
        if plan.target is None:
            return self
        return PlanRequest(self.workload_kind, self.target_column, self.columns, self.mechanism,
                           f"{float(plan.target.epsilon):g}", self.delta, None)


def _form_page(request: Request, visitor: Visitor, name: str, chosen: PlanRequest | None = None, *,
               plan: dict[str, object] | None = None, confirm: PlanRequest | None = None,
               problem: str | None = None, status: int = 200) -> Response:
    dataset = datasets.get_dataset(engine_of(request), name)
    return render.page(request, "plan.html", visitor, title=f"Plan a release of {name}", status=status,
                       dataset=name, columns=list(dataset.domain.names), mechanisms=MECHANISMS, workloads=WORKLOADS,
                       chosen=chosen, plan=plan, confirm=confirm, problem=problem, budget=budget_or_none(request, name))


@router.get("/datasets/{name}/plan")
def plan_form(request: Request, name: Name, visitor: Visitor = Depends(stewarding)) -> Response:
    check_scope(visitor.principal, name)
    return _form_page(request, visitor, name)


@router.post("/datasets/{name}/plan", openapi_extra=FORM)
def preview(request: Request, name: Name, visitor: Visitor = Depends(stewarding),
            fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    """The dry run of the form's release: nothing is charged, stored or run. A refusal of the request itself (a bad
    epsilon, a workload of unknown columns) is shown on the form with its message (422)."""
    check_scope(visitor.principal, name)
    checked_form(visitor, fields, request)
    chosen = PlanRequest.from_form(fields)
    try:
        plan = chosen.plan(request, name)
    except InvalidInput as exc:
        return _form_page(request, visitor, name, chosen, problem=exc.message, status=exc.status)
    return _form_page(request, visitor, name, chosen, plan=plan.to_json(), confirm=chosen.confirmed(plan))


@router.post("/datasets/{name}/release", openapi_extra=FORM)
def release(request: Request, name: Name, visitor: Visitor = Depends(stewarding),
            fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    """The confirmed release, as a job of the visitor's key (what ``Prefer: respond-async`` starts); 303 to its page."""
    check_scope(visitor.principal, name)
    checked_form(visitor, fields, request)
    chosen = PlanRequest.from_form(fields)
    engine = engine_of(request)
    prepared = release_engine.prepare_marginals(engine, name, chosen.mechanism, chosen.workload(),
                                                epsilon=chosen.epsilon, delta=chosen.delta)
    label = visitor.principal.label

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        outcome = release_engine.release_prepared(engine, prepared, seed=None, principal=label, progress=progress)
        return 201, {"release_id": outcome.release_id, "dataset": name, "mechanism": outcome.mechanism,
                     "status": "complete", "cost": outcome.cost.to_json(),
                     "budget": None if outcome.budget is None else outcome.budget.to_json(),
                     **({} if outcome.auto is None else {"auto": outcome.auto.to_json()})}

    job_id, _ = background.launch(engine, visitor.principal.key_id, work, dataset=name, kind="release")
    return RedirectResponse(f"/console/jobs/{job_id}", status_code=303)


def visible_job(request: Request, job_id: int, visitor: Visitor) -> jobs.JobView:
    """The job, when the visitor may read it (its owner, or a steward whose scope covers it): 404 otherwise, as
    ``GET /jobs/{id}`` answers."""
    job = jobs.get(engine_of(request), job_id)
    if not jobs.visible_to(job, visitor.principal.key_id, visitor.role, visitor.principal.may_access(job.dataset)):
        raise NotFound(f"no job with id {job_id}", code="job_not_found")
    return job


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: JobId, visitor: Visitor = Depends(anyone)) -> Response:
    job = visible_job(request, job_id, visitor).to_json()
    return render.page(request, "job.html", visitor, title=f"Job {job_id}", job=job,
                       cancellable=job["state"] == "running" and jobs.cancellable(str(job["kind"])),
                       coefficients=coefficient_chart(job["result"]) if job["state"] == "done" else None)


def coefficient_chart(result: object) -> dict[str, object] | None:
    """A fit's coefficients with their intervals, as a chart (None for a job that is no fit)."""
    if not isinstance(result, dict) or not isinstance(result.get("coefficients"), dict):
        return None
    names = list(result["coefficients"])
    errors = result.get("standard_errors") or {}
    return {"chart": charts.intervals(names, [float(result["coefficients"][n]) for n in names],
                                      [None if errors.get(n) is None else float(errors[n]) for n in names],
                                      label=f"Coefficients of the regression of {result.get('target')} with their "
                                            "95 % intervals")}


@router.post("/jobs/{job_id}/cancel", openapi_extra=FORM)
def cancel_job(request: Request, job_id: JobId, visitor: Visitor = Depends(anyone),
               fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    """Ask a running release to stop at its next safe point (:func:`service.api.jobs.request_cancel`: refunded if no
    noise was drawn, else charged for exactly the steps that drew noise); 303 back to the job's page."""
    checked_form(visitor, fields, request)
    visible_job(request, job_id, visitor)
    jobs.request_cancel(engine_of(request), job_id)
    return RedirectResponse(f"/console/jobs/{job_id}", status_code=303)


@router.get("/jobs/{job_id}/progress")
def job_progress(request: Request, job_id: JobId, visitor: Visitor = Depends(anyone)) -> Response:
    """The job's state for the page's script (``static/console.js``), which updates the page until it ends."""
    job = visible_job(request, job_id, visitor).to_json()
    result = job["result"] if isinstance(job["result"], dict) else {}
    return JSONResponse({"state": job["state"], "progress": job["progress"], "fit": job["fit"],
                         "release_id": result.get("release_id"), "message": result.get("message")})
