"""The analyst's regression form: a target, features, a method, and either a stored release to answer from (free,
and the preview says so) or an epsilon for a new release (the preview shows its charge first); the fit then runs as a
job of the visitor's key and its page shows the coefficients with their 95 % intervals as a chart. The same plan and
fit as ``POST /datasets/{name}/fit/{task}/plan`` and ``POST /datasets/{name}/fit/{task}``, for the same roles."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from service.api import background, limits
from service.api.console import render
from service.api.console.access import ConsoleRoute, Visitor, checked_form, field, form_fields, signed_in
from service.api.routes_datasets import Name
from service.api.security import ANALYST, STEWARD, check_scope, engine_of
from service.data import datasets
from service.errors import InvalidInput
from service.mechanisms.progress import Progress
from service.regression import methods
from service.regression.choice import AUTO_METHOD
from service.regression.fit import fit as fit_regression
from service.regression.fit import plan_fit
from service.releases import answers

router = APIRouter(prefix="/console/datasets", route_class=ConsoleRoute, include_in_schema=False)
fitting = signed_in(ANALYST, STEWARD)
FORM = limits.body(limits.SMALL_BODY)
TASKS = ("linear", "logistic")
METHODS = (*methods.names(), AUTO_METHOD)


@dataclass(frozen=True)
class FitRequest:
    """What the regression form asks for, as the fit and its plan take it."""

    task: str
    target: str | None
    features: tuple[str, ...]
    method: str
    release_id: int | None
    epsilon: str | None
    delta: str | None
    intercept: bool

    @classmethod
    def from_form(cls, fields: dict[str, list[str]]) -> FitRequest:
        task = field(fields, "task", "linear") or "linear"
        if task not in TASKS:
            raise InvalidInput(f"task must be one of {list(TASKS)}, got {task!r}", code="invalid_parameter")
        method = field(fields, "method", "dd-ssp") or "dd-ssp"
        if method not in METHODS:
            raise InvalidInput(f"method must be one of {list(METHODS)}, got {method!r}", code="invalid_parameter")
        release = field(fields, "release")
        if release is not None and not release.isdigit():
            raise InvalidInput(f"release must be a release id, got {release!r}", code="invalid_parameter")
        features = tuple(dict.fromkeys(v.strip() for v in fields.get("features", []) if v.strip()))
        return cls(task, field(fields, "target"), features, method, None if release is None else int(release),
                   None if release else field(fields, "epsilon"), None if release else field(fields, "delta"),
                   field(fields, "intercept", "yes") == "yes")

    def arguments(self) -> dict[str, object]:
        if not self.target:
            raise InvalidInput("target: choose the column to predict", code="invalid_parameter")
        if not self.features:
            raise InvalidInput("features: choose at least one feature", code="invalid_parameter")
        return {"method": self.method, "epsilon": self.epsilon, "delta": self.delta, "release_id": self.release_id,
                "intercept": self.intercept, "allow_unmeasured": False, "options": None}


def _form_page(request: Request, visitor: Visitor, name: str, chosen: FitRequest | None = None, *,
               plan: dict[str, object] | None = None, problem: str | None = None, status: int = 200) -> Response:
    engine = engine_of(request)
    dataset = datasets.get_dataset(engine, name)
    stored = [r.to_json(hide_seeded_details=True) for r in answers.list_releases(engine, name)
              if r.status == "complete" and not r.seeded]
    return render.page(request, "fit.html", visitor, title=f"Fit a regression on {name}", status=status, dataset=name,
                       columns=list(dataset.domain.names), tasks=TASKS, methods=METHODS, releases=stored,
                       chosen=chosen, plan=plan, problem=problem)


@router.get("/{name}/fit")
def fit_form(request: Request, name: Name, visitor: Visitor = Depends(fitting)) -> Response:
    check_scope(visitor.principal, name)
    return _form_page(request, visitor, name)


@router.post("/{name}/fit/plan", openapi_extra=FORM)
def fit_preview(request: Request, name: Name, visitor: Visitor = Depends(fitting),
                fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    """The fit's dry run: free with a stored release that answers it (and it says so), else the new release's
    charge; nothing is charged or stored."""
    check_scope(visitor.principal, name)
    checked_form(visitor, fields, request)
    chosen = FitRequest.from_form(fields)
    try:
        plan = plan_fit(engine_of(request), name, chosen.task, chosen.target, list(chosen.features),
                        **chosen.arguments())
    except InvalidInput as exc:
        return _form_page(request, visitor, name, chosen, problem=exc.message, status=exc.status)
    return _form_page(request, visitor, name, chosen, plan=plan.to_json())


@router.post("/{name}/fit", openapi_extra=FORM)
def fit(request: Request, name: Name, visitor: Visitor = Depends(fitting),
        fields: dict[str, list[str]] = Depends(form_fields)) -> Response:
    """The confirmed fit, as a job of the visitor's key; 303 to its page, which shows the coefficients once done."""
    check_scope(visitor.principal, name)
    checked_form(visitor, fields, request)
    chosen = FitRequest.from_form(fields)
    engine, label = engine_of(request), visitor.principal.label
    arguments = chosen.arguments()
    plan_fit(engine, name, chosen.task, chosen.target, list(chosen.features), **arguments)  # refusals before the job

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        outcome = fit_regression(engine, name, chosen.task, chosen.target, list(chosen.features), principal=label,
                                 progress=progress, **arguments)
        return 200, outcome.to_json()

    job_id, _ = background.launch(engine, visitor.principal.key_id, work, dataset=name, kind=f"fit/{chosen.task}")
    return RedirectResponse(f"/console/jobs/{job_id}", status_code=303)
