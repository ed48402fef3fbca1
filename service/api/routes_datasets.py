"""Dataset routes: list and describe tables, load a table (data goes in, never out), budgets,
marginal releases and the ledger. No route returns a row of a sensitive table."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from fastapi import Path as PathParam

from service.access.auth import Principal
from service.accounting import accountant
from service.api import limits, schemas
from service.api.charging import IDEMPOTENCY_HEADER, run_charged
from service.api.errors import SafeJSONResponse
from service.api.guard import GuardedRoute
from service.api.security import ANALYST, AUDITOR, EVERYONE, STEWARD, check_scope, engine_of, require
from service.data import datasets
from service.data.datasets import StoredDataset
from service.errors import ServiceError
from service.mechanisms.progress import Progress
from service.regression.fit import fit as fit_regression
from service.regression.fit import plan_fit
from service.releases import engine as release_engine
from service.releases import planning

router = APIRouter(prefix="/datasets", tags=["datasets"], route_class=GuardedRoute)

Name = Annotated[str, PathParam(min_length=1, max_length=schemas.MAX_NAME, pattern=schemas.NAME_PATTERN,
                                description="Dataset name.")]
IdempotencyKey = Annotated[str | None, Header(
    alias=IDEMPOTENCY_HEADER, description="Makes a retry of this charging request safe: same key, same answer, "
    "one charge (1–200 visible ASCII characters; a UUID is a good choice).")]
Prefer = Annotated[str | None, Header(
    alias="Prefer", description="`respond-async`: answer 202 at once with a job (`Location: /jobs/{id}`) whose "
    "progress and final answer `GET /jobs/{id}` shows (RFC 7240). Without it the request answers when done.")]
ACCEPTED = {202: {"model": schemas.JobOut, "description": "With `Prefer: respond-async`: the job doing the work; "
                  "poll `GET /jobs/{job_id}` (its `result` is this route's answer once `state` is done or failed)"}}


def dataset_out(dataset: StoredDataset, principal: Principal) -> dict[str, object]:
    """Public metadata; the exact row count is not a DP statistic, so only stewards see it."""
    rows = dataset.rows if principal.role == STEWARD else None
    return {"name": dataset.name, "rows": rows, "engine": dataset.engine, "privacy_unit": dataset.privacy_unit,
            "domain": dataset.domain.to_dict(), "labels": dataset.labels}


@router.get("", response_model=list[schemas.DatasetOut], summary="List datasets and their domains")
def list_datasets(request: Request, principal: Principal = Depends(require(*EVERYONE))) -> list[dict[str, object]]:
    items = datasets.list_datasets(engine_of(request))
    return [dataset_out(d, principal) for d in items if principal.may_access(d.name)]


@router.get("/{name}", response_model=schemas.DatasetOut, summary="A dataset's domain")
def get_dataset(request: Request, name: Name, principal: Principal = Depends(require(*EVERYONE))) -> dict[str, object]:
    check_scope(principal, name)
    return dataset_out(datasets.get_dataset(engine_of(request), name), principal)


@router.post("", status_code=201, response_model=schemas.DatasetOut, summary="Load a table (stewards)",
             openapi_extra=limits.body(limits.UPLOAD_BODY, fits=limits.UPLOAD_FITS, hint=limits.UPLOAD_HINT))
def load_dataset(
    request: Request, body: schemas.DatasetUpload, principal: Principal = Depends(require(STEWARD))
) -> SafeJSONResponse:
    """Load a sensitive table in one transaction: nothing is stored if any row is bad. For tables
    larger than the request size limit use `marginalia dataset load` on the server."""
    check_scope(principal, body.name)
    engine = engine_of(request)
    with tempfile.TemporaryDirectory(prefix="marginalia-upload-") as tmp:
        folder = Path(tmp)
        csv, domain, spec = folder / "upload.csv", folder / "domain.json", folder / "bins.json"
        names = {csv: "the uploaded csv", domain: "the uploaded domain", spec: "the uploaded bins"}
        csv.write_text(body.csv, encoding="utf-8")
        try:
            if body.domain is not None:
                sizes = {c: s if isinstance(s, int) else s.model_dump(exclude_none=True)
                         for c, s in body.domain.items()}
                domain.write_text(json.dumps(sizes), encoding="utf-8")
                info = datasets.load_coded_csv(engine, body.name, csv, domain, tuple(body.categorical),
                                               source=f"HTTP upload by {principal.name}", store=body.engine)
            else:
                spec.write_text(json.dumps(body.bins.model_dump(exclude_none=True)), encoding="utf-8")
                info = datasets.load_raw_csv(engine, body.name, [csv], spec, source=f"HTTP upload by {principal.name}",
                                             store=body.engine)
        except ServiceError as exc:
            raise _without_server_paths(exc, names) from None
    payload = {"name": info.name, "rows": info.rows, "engine": info.engine, "privacy_unit": None,
               "domain": info.domain.to_dict(),
               "labels": info.labels}
    return SafeJSONResponse(payload, status_code=201, headers={"Location": f"/datasets/{info.name}"})


def _without_server_paths(exc: ServiceError, names: dict[Path, str]) -> ServiceError:
    """``exc`` with the server's temporary file names in its message replaced by what the caller sent."""
    message = exc.message
    for path, name in names.items():
        message = message.replace(str(path), name)
    exc.message = message
    exc.args = (message,)
    return exc


@router.get("/{name}/budget", response_model=schemas.BudgetOut, summary="What is spent and what remains")
def get_budget(request: Request, name: Name, principal: Principal = Depends(require(*EVERYONE))) -> dict[str, object]:
    check_scope(principal, name)
    return accountant.budget_status(engine_of(request), name).to_json()


@router.put("/{name}/budget", response_model=schemas.BudgetOut, summary="Set the total budget (stewards)",
            openapi_extra=limits.body(limits.SMALL_BODY))
def set_budget(
    request: Request, name: Name, body: schemas.BudgetIn, principal: Principal = Depends(require(STEWARD))
) -> dict[str, object]:
    check_scope(principal, name)
    status = accountant.set_budget(engine_of(request), name, body.epsilon, body.delta, principal=principal.label,
                                   delta_reserve=body.delta_reserve)
    return status.to_json()


@router.post(
    "/{name}/releases/marginals",
    status_code=201,
    response_model=schemas.ReleaseCreated,
    responses=ACCEPTED,
    summary="Release a marginal workload (stewards; spends budget)",
    openapi_extra=limits.body(limits.SPEC_BODY, fits="a workload of 5,000 marginals of 8 columns named in up to 200 "
                              "ASCII characters"),
)
def release_marginals(
    request: Request,
    name: Name,
    body: schemas.MarginalReleaseIn,
    principal: Principal = Depends(require(STEWARD)),
    idempotency_key: IdempotencyKey = None,  # noqa: ARG001 - read by run_charged; declared for the schema
    prefer: Prefer = None,  # noqa: ARG001 - read by run_charged; declared for the schema
) -> SafeJSONResponse:
    """The accountant checks and charges the cost in one transaction (409 with what can still be
    spent when it does not fit). The answer says what the release cost in the budget's own epsilon
    (`budget`). Send an `Idempotency-Key` to make retries safe, and `Prefer: respond-async` to follow
    a long release's progress (202 and a job, whose result is this same answer). There is no seed:
    the noise always comes from the server's cryptographically secure source."""
    check_scope(principal, name)
    engine = engine_of(request)

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        outcome = release_engine.release_marginals(
            engine, name, body.mechanism, body.service_workload(), epsilon=body.epsilon, delta=body.delta,
            rho=body.rho, options=body.service_options(), principal=principal.label, progress=progress,
        )
        return 201, {"release_id": outcome.release_id, "dataset": name, "mechanism": outcome.mechanism,
                     "status": "complete", "cost": outcome.cost.to_json(), "budget": outcome.budget.to_json(),
                     **({} if outcome.auto is None else {"auto": outcome.auto.to_json()})}

    return run_charged(request, principal, body, work, location=lambda p: f"/releases/{p['release_id']}",
                       dataset=name, kind="release")


@router.post(
    "/{name}/releases/marginals/plan",
    response_model=schemas.ReleasePlanOut,
    summary="Dry run of a marginal release: its charge and accuracy (stewards; spends nothing)",
    openapi_extra=limits.body(limits.SPEC_BODY, fits="a workload of 5,000 marginals of 8 columns named in up to 200 "
                              "ASCII characters"),
)
def plan_marginals(
    request: Request, name: Name, body: schemas.MarginalPlanIn, principal: Principal = Depends(require(STEWARD))
) -> dict[str, object]:
    """What `POST /datasets/{name}/releases/marginals` with this body would charge, whether it fits, the budget's
    composed epsilon before -> after and why (`budget.note`), and the expected error of each workload marginal: in
    closed form for laplace, gaussian and residual; for mst and aim estimated by simulating the mechanism on the
    synthetic rows of a stored release of the dataset (free; it takes as long as that many runs of the mechanism,
    one AIM run for aim), or `accuracy_basis: none` with the reason when nothing can stand in for the table; with
    `target_error` (closed forms only), the smallest epsilon that meets it. Computed by the release's own checks and
    the accountant's own quote of the charge: nothing is reserved, read, written or run in the background (no
    `Idempotency-Key`, no `Prefer: respond-async`: the answer is always immediate). A charge that does not fit is
    `fits: false` with the `refusal` the release would meet; any other refusal (a bad workload, no budget) is the
    release's own error."""
    check_scope(principal, name)
    plan = planning.plan_marginals(engine_of(request), name, body.mechanism, body.service_workload(),
                                   epsilon=body.epsilon, delta=body.delta, rho=body.rho,
                                   options=body.service_options(), target_error=body.target_error)
    return plan.to_json()


@router.get("/{name}/ledger", response_model=schemas.LedgerOut, summary="The privacy ledger (auditors, stewards)")
def get_ledger(
    request: Request, name: Name, principal: Principal = Depends(require(AUDITOR, STEWARD))
) -> dict[str, object]:
    check_scope(principal, name)
    return {"dataset": name, "entries": accountant.ledger_rows(engine_of(request), name)}



#: A fit's body: up to 10,000 features (the schema's maximum) named in ASCII; a name written in \\u escapes takes up to
#: 6 bytes a character, so fewer such features fit.
FIT_LIMIT = limits.body(limits.FIT_BODY, fits="10,000 features named in up to 200 ASCII characters")


def _fit(request: Request, name: str, task: str, body: schemas.FitIn, principal: Principal) -> SafeJSONResponse:
    check_scope(principal, name)
    engine = engine_of(request)

    def work(progress: Progress) -> tuple[int, dict[str, object]]:
        outcome = fit_regression(
            engine, name, task, body.target, body.features, method=body.method, epsilon=body.epsilon,
            delta=body.delta, release_id=body.release, intercept=body.intercept, principal=principal.label,
            allow_unmeasured=body.allow_unmeasured, progress=progress, options=body.settings() or None,
        )
        return 200, {**outcome.to_json(), "design": outcome.design.to_dict()}

    return run_charged(request, principal, body, work, location=lambda p: f"/releases/{p['release_id']}",
                       dataset=name, kind=f"fit/{task}")


def _plan_fit(request: Request, name: str, task: str, body: schemas.FitIn, principal: Principal) -> dict[str, object]:
    check_scope(principal, name)
    plan = plan_fit(engine_of(request), name, task, body.target, body.features, method=body.method,
                    epsilon=body.epsilon, delta=body.delta, release_id=body.release, intercept=body.intercept,
                    allow_unmeasured=body.allow_unmeasured, options=body.settings() or None)
    return plan.to_json()


@router.post("/{name}/fit/linear", response_model=schemas.FitOut, responses=ACCEPTED, openapi_extra=FIT_LIMIT,
             summary="A private linear regression (analysts, stewards; spends budget only for a new release)")
def fit_linear(
    request: Request,
    name: Name,
    body: schemas.FitIn,
    principal: Principal = Depends(require(ANALYST, STEWARD)),
    idempotency_key: IdempotencyKey = None,  # noqa: ARG001 - read by run_charged; declared for the schema
    prefer: Prefer = None,  # noqa: ARG001 - read by run_charged; declared for the schema
) -> SafeJSONResponse:
    """Answered from a stored release when one can (free); otherwise a new release serving the
    question is made and charged. The answer says which release answered and what this call cost."""
    return _fit(request, name, "linear", body, principal)


@router.post("/{name}/fit/logistic", response_model=schemas.FitOut, responses=ACCEPTED, openapi_extra=FIT_LIMIT,
             summary="A private logistic regression (analysts, stewards; spends budget only for a new release)")
def fit_logistic(
    request: Request,
    name: Name,
    body: schemas.FitIn,
    principal: Principal = Depends(require(ANALYST, STEWARD)),
    idempotency_key: IdempotencyKey = None,  # noqa: ARG001 - read by run_charged; declared for the schema
    prefer: Prefer = None,  # noqa: ARG001 - read by run_charged; declared for the schema
) -> SafeJSONResponse:
    """As the linear fit, for a binary target (coded {-1, +1} by the design's encoding)."""
    return _fit(request, name, "logistic", body, principal)


@router.post("/{name}/fit/linear/plan", response_model=schemas.FitPlanOut, openapi_extra=FIT_LIMIT,
             summary="Dry run of a linear fit: the release that would answer it, or the charge of a new one "
                     "(analysts, stewards; spends nothing)")
def plan_fit_linear(
    request: Request, name: Name, body: schemas.FitIn, principal: Principal = Depends(require(ANALYST, STEWARD))
) -> dict[str, object]:
    """What `POST /datasets/{name}/fit/linear` with this body would do: a stored release answers (`answered_by`,
    free), or a new release is needed, with its charge as the accountant quotes it, whether it fits, and the
    budget's composed epsilon before -> after. Nothing is reserved, fitted, written or run in the background."""
    return _plan_fit(request, name, "linear", body, principal)


@router.post("/{name}/fit/logistic/plan", response_model=schemas.FitPlanOut, openapi_extra=FIT_LIMIT,
             summary="Dry run of a logistic fit (analysts, stewards; spends nothing)")
def plan_fit_logistic(
    request: Request, name: Name, body: schemas.FitIn, principal: Principal = Depends(require(ANALYST, STEWARD))
) -> dict[str, object]:
    """As the linear fit's dry run, for a binary target."""
    return _plan_fit(request, name, "logistic", body, principal)
