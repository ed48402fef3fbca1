"""Routes of the local-DP collections: public tables, campaigns, their public state, reports, fits and caps.

Who may call what (the README's role table; ``tests/service/api/test_collections_roles.py`` walks every route with
every role): public tables are read by stewards, analysts and auditors (rows by stewards and analysts: they are
public), loaded by stewards; campaigns are created, closed and capped by stewards, read by stewards, analysts and
auditors, fitted by stewards and analysts (free), planned (``POST /campaigns/plan``: public tables only, free) by
whoever may read them; a **participant** key reaches only ``GET /campaigns/{name}/state``
and ``POST /campaigns/{name}/reports`` (her own report), a **gateway** key the same two with batches for pseudonyms,
reports only to the campaigns a steward put in its scope and within its quotas (service/campaigns/gateways.py).
No route takes a seed. A **seeded** campaign (it received reports of an in-process seeded simulation: tests, benchmarks)
answers nothing: its state, reports and fits are ``409 seeded_campaign`` for every caller, and listing, showing or
closing it shows ``"seeded": true`` without its published states (docs/privacy.md 8.7.7).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from pydantic import Field, ValidationError
from sqlalchemy import Engine

from db.tables import INT64_MAX
from service.access.auth import Principal
from service.api import limits, schemas
from service.api.declared import described_options
from service.api.guard import GuardedRoute
from service.api.paths import path_id
from service.api.security import ANALYST, AUDITOR, STEWARD, Forbidden, engine_of, require
from service.campaigns import campaigns, caps, estimates, marginal_answers, planning, public_tables
from service.campaigns.protocols.base import protocol_options
from service.campaigns.submission import (
    Submitter,
    check_gateway_scope,
    participant_has_reported,
    report_width,
    submit_reports,
)
from service.errors import InvalidInput, ServiceError
from workloads.local.wire import MEDIA_TYPE, WireError, decode_batch

PARTICIPANT, GATEWAY = "participant", "gateway"


def refuse_scoped(principal: Principal) -> Principal:
    """``principal`` unless its key is scoped to datasets (403): public tables, campaigns and caps are no dataset's."""
    if principal.scope is not None:
        raise Forbidden(f"this key is scoped to the datasets {list(principal.scope)}; public tables, campaigns and "
                        "local caps need a steward key without a scope")
    return principal


def unscoped_steward(principal: Principal = Depends(require(STEWARD))) -> Principal:
    """Stewards whose key is not scoped to datasets (checked before the body is read, as the role is)."""
    return refuse_scoped(principal)


unscoped_steward.admit = refuse_scoped  # type: ignore[attr-defined]  # service.api.guard runs it at the edge

READERS = (STEWARD, ANALYST, AUDITOR)
MAX_OPTIONS = 50
MAX_JSON_REPORTS = 10_000

Name = Annotated[str, PathParam(min_length=1, max_length=schemas.MAX_NAME, pattern=schemas.NAME_PATTERN,
                                description="A name, or (for a campaign) its id.")]
RoundIndex = path_id("Round index (from 0).", low=0)
router = APIRouter(tags=["collections"], route_class=GuardedRoute)


# ------------------------------------------------------------------------------------------------------- bodies
class PublicTableUpload(schemas.Strict):
    name: schemas.DatasetName
    csv: Annotated[schemas.Text, Field(max_length=schemas.MAX_CSV_CHARS, description="The table as CSV text.")]
    domain: dict[schemas.ColumnName, Annotated[schemas.Integer, Field(ge=1, le=2**31 - 1)]] | None = Field(
        None, description="Coded columns: {column: size}; the others are numeric.")


#: a campaign's options: each protocol checks its own (a 400 naming the option), so the schema describes them, one
#: property per declared name, and leaves the values free
OPTIONS_HELP = ("The protocol's options, as JSON values; each property below says which protocols take it. Any other "
                "name is refused naming it.")


class CampaignBody(schemas.Strict):
    """What a campaign is: its protocol, columns, local guarantee and options (created or planned)."""

    protocol: Annotated[str, Field(min_length=1, max_length=40)]
    features: Annotated[list[schemas.ColumnName], Field(min_length=1, max_length=schemas.MAX_COLUMNS)]
    target: schemas.ColumnName | None = None
    public: schemas.DatasetName | None = Field(None, description="A public table holding the features.")
    epsilon: schemas.Epsilon = Field(description="What one participant spends over the whole campaign.")
    delta: schemas.Delta = 0.0
    options: dict[Annotated[str, Field(max_length=40)], Any] = Field(
        default_factory=dict, max_length=MAX_OPTIONS, description=OPTIONS_HELP,
        json_schema_extra={"properties": described_options(protocol_options())})


class CampaignIn(CampaignBody):
    name: schemas.DatasetName


class PlanIn(CampaignBody):
    """A campaign as ``POST /campaigns`` would create it (no name), and what to predict."""

    participants: Annotated[schemas.Integer, Field(ge=1)] | None = Field(
        None, description="The campaign's planned participants (its option participants, which options may give "
        "instead): the error is predicted at them, for the campaign created with them.")
    target_error: Annotated[schemas.Number, Field(gt=0)] | None = Field(
        None, description="Predict the participants needed for this error.")


class ReportIn(schemas.Strict):
    """A participant's own report: ``{field: number or list}`` for ``round``."""

    round: Annotated[schemas.Integer, Field(ge=0)]
    report: dict[Annotated[str, Field(max_length=40)], Any]


class BatchIn(schemas.Strict):
    """A gateway's batch: ``{field: [one entry per report]}`` and one pseudonym per report."""

    round: Annotated[schemas.Integer, Field(ge=0)]
    reports: dict[Annotated[str, Field(max_length=40)], list[Any]]
    pseudonyms: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                          Field(max_length=MAX_JSON_REPORTS)]


class FitCampaignIn(schemas.Strict):
    model: Annotated[str, Field(min_length=1, max_length=40)]
    covariance: Literal["pooled", "private", "public"] | None = None
    strict: schemas.Flag = Field(False, description="Refuse a noise-dominated fit (422 noise_dominated) instead of "
                                                    "answering it with quality.verdict 'noise-dominated'.")


class CapIn(schemas.Strict):
    epsilon: Annotated[schemas.Number, Field(ge=0, le=schemas.MAX_EPSILON)]
    delta: schemas.Delta
    key_id: schemas.Id | None = Field(None, description="A participant key's id (its participant's override).")
    gateway_id: schemas.Id | None = Field(None, description="With pseudonym: a gateway's participant.")
    pseudonym: Annotated[str, Field(min_length=1, max_length=200)] | None = None


#: A campaign's body (and its plan's): its options are free-form in the schema, checked by the protocol; the largest a
#: protocol accepts is 64 features and their ``feature_bounds`` (one [lower, upper] pair each), about 170 KB with
#: 200-character names in any encoding.
CAMPAIGN_LIMIT = limits.body(limits.NAMES_BODY, fits="64 features and their feature_bounds, named in up to 200 "
                             "characters, and every other option a protocol takes")


# ---------------------------------------------------------------------------------------------- public tables
@router.get("/public-tables", summary="List public tables")
def list_public(request: Request, _: Principal = Depends(require(*READERS))) -> list[dict[str, Any]]:
    return [t.to_json() for t in public_tables.list_public_tables(engine_of(request))]


@router.get("/public-tables/{name}", summary="A public table's columns and size")
def show_public(request: Request, name: Name, _: Principal = Depends(require(*READERS))) -> dict[str, Any]:
    return public_tables.get_public_table(engine_of(request), name).to_json()


@router.get("/public-tables/{name}/rows", summary="A page of a public table's rows (they are public)")
def public_rows(request: Request, name: Name, offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
                limit: Annotated[int, Query(ge=0, le=public_tables.MAX_PAGE_ROWS)] = 1000,
                _: Principal = Depends(require(STEWARD, ANALYST))) -> dict[str, Any]:
    info, rows = public_tables.public_rows(engine_of(request), name, offset, limit)
    return public_tables.rows_json(info, rows, offset)


@router.post("/public-tables", status_code=201, summary="Register a public table (stewards)",
             openapi_extra=limits.body(limits.UPLOAD_BODY, fits=limits.UPLOAD_FITS))
def load_public(request: Request, body: PublicTableUpload,
                principal: Principal = Depends(unscoped_steward)) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="marginalia-public-") as folder:
        csv, domain = Path(folder) / "upload.csv", Path(folder) / "domain.json"
        csv.write_text(body.csv, encoding="utf-8")
        if body.domain is not None:
            domain.write_text(json.dumps(body.domain), encoding="utf-8")
        try:
            info = public_tables.load_public_csv(engine_of(request), body.name, csv,
                                                 domain if body.domain is not None else None,
                                                 principal=principal.label)
        except ServiceError as error:
            message = error.message.replace(str(csv), "the uploaded csv").replace(str(domain), "the uploaded domain")
            raise ServiceError(message, code=error.code, status=error.status) from None
    return {**info.to_json(), "source": f"HTTP upload by {principal.name}"}


# -------------------------------------------------------------------------------------------------- campaigns
@router.post("/campaigns", status_code=201, summary="Create a campaign (stewards)", openapi_extra=CAMPAIGN_LIMIT)
def create_campaign(request: Request, body: CampaignIn,
                    principal: Principal = Depends(unscoped_steward)) -> dict[str, Any]:
    info = campaigns.create_campaign(engine_of(request), body.name, body.protocol, body.features, body.target,
                                     body.public, body.epsilon, body.delta, body.options, principal.label)
    return info.to_json()


@router.post("/campaigns/plan", summary="Predict a campaign's error before any report (free; reads public tables)",
             openapi_extra=CAMPAIGN_LIMIT)
def plan_campaign(request: Request, body: PlanIn, _: Principal = Depends(require(*READERS))) -> dict[str, Any]:
    return planning.plan_campaign(engine_of(request), body.protocol, body.features, body.target, body.public,
                                  body.epsilon, body.delta, body.options, body.participants,
                                  body.target_error).to_json()


@router.get("/campaigns", summary="List campaigns")
def list_campaigns(request: Request, _: Principal = Depends(require(*READERS))) -> list[dict[str, Any]]:
    return [c.to_json(hide_seeded=True) for c in campaigns.list_campaigns(engine_of(request))]


@router.get("/campaigns/{name}", summary="A campaign: spec, rounds, counts and published states")
def show_campaign(request: Request, name: Name, _: Principal = Depends(require(*READERS))) -> dict[str, Any]:
    return campaigns.get_campaign(engine_of(request), name).to_json(hide_seeded=True)


@router.post("/campaigns/{name}/close", summary="Close a campaign: no more reports (stewards; idempotent)")
def close_campaign(request: Request, name: Name, _: Principal = Depends(unscoped_steward)) -> dict[str, Any]:
    return campaigns.close_campaign(engine_of(request), name).to_json(hide_seeded=True)


@router.post("/campaigns/{name}/rounds/{index}/close", summary="Close a round and open the next (stewards)")
def close_round(request: Request, name: Name, index: RoundIndex,
                _: Principal = Depends(unscoped_steward)) -> dict[str, Any]:
    return campaigns.close_round(engine_of(request), name, index).to_json(hide_seeded=True)


@router.get("/campaigns/{name}/state", summary="A campaign's public state: what a device needs to report")
def campaign_state(request: Request, name: Name,
                   principal: Principal = Depends(require(PARTICIPANT, GATEWAY, STEWARD, ANALYST))) -> dict[str, Any]:
    engine = engine_of(request)
    info = campaigns.get_campaign(engine, name)
    info.refuse_if_seeded()
    state = campaigns.public_state(info)
    if principal.role == PARTICIPANT:
        reported = state["round"] is not None and participant_has_reported(engine, info, state["round"],
                                                                           principal.key_id)
        state["you"] = {"reported_in_round": reported, **caps.key_spend(engine, principal.key_id)}
    return state


@router.post("/campaigns/{name}/reports", status_code=201,
             summary="Submit a report (participants) or a batch for pseudonyms (gateways)",
             openapi_extra=limits.body(limits.UPLOAD_BODY, fits="its own bound: by caller and report width",
                                       requestBody={"content": {
                                           "application/json": {"schema": {"oneOf": [ReportIn.model_json_schema(),
                                                                                     BatchIn.model_json_schema()]}},
                                           MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}}))
async def submit(request: Request, name: Name,
                 principal: Principal = Depends(require(PARTICIPANT, GATEWAY))) -> dict[str, Any]:
    """A participant sends `{"round", "report"}` (JSON); a gateway `{"round", "reports", "pseudonyms"}` (JSON) or
    a batch in the binary format `application/vnd.marginalia.reports` (docs/campaigns.md). A gateway submits only to
    the campaigns a steward put in its key's scope, within its quotas. The body is bounded by the caller's role and
    the campaign's report width (413 past it, service/api/limits.py) and parsed off the event loop."""
    engine = engine_of(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    info, limit, what = await run_in_threadpool(_body_limit, engine, principal, name, kind,
                                                request.app.state.max_body_bytes)
    body = await limits.read_body(request, limit, what)
    round_index, fields, pseudonyms = await run_in_threadpool(_parse_reports, principal, kind, body)
    submitter = Submitter.participant(principal.key_id) if principal.role == PARTICIPANT else (
        Submitter.gateway(principal.key_id))
    result = await run_in_threadpool(submit_reports, engine, name, round_index, fields, submitter, pseudonyms, info)
    # what was accepted and whether the round is still open; not how many others reported (nothing aggregate)
    return {k: v for k, v in result.to_json().items() if k != "round_reports"}


def _body_limit(engine: Engine, principal: Principal, name: str, kind: str,
                ceiling: int) -> tuple[campaigns.CampaignInfo, int, str]:
    """The campaign, and the most bytes the caller's body may have (a gateway outside its scope: 403 first)."""
    info = campaigns.get_campaign(engine, name)
    info.refuse_if_seeded()
    if principal.role == GATEWAY:
        check_gateway_scope(engine, principal.key_id, info)
    width = max((report_width(info, r.index) for r in info.rounds if r.status == "open"), default=0)
    if principal.role == PARTICIPANT:
        return info, limits.participant_limit(width), "one participant's report"
    binary = kind == MEDIA_TYPE
    return info, limits.batch_limit(width, binary, MAX_JSON_REPORTS, ceiling), "a gateway's batch"


def _parse_reports(principal: Principal, kind: str, body: bytes) -> tuple[int, dict[str, Any], list[str] | None]:
    if kind == MEDIA_TYPE:
        if principal.role != GATEWAY:
            raise InvalidInput("binary batches are for gateway keys; a participant sends one JSON report",
                               code="invalid_report")
        try:
            batch = decode_batch(body)
        except WireError as error:
            raise InvalidInput(f"the batch: {error}", code="invalid_batch") from None
        if batch.pseudonyms is None:
            raise InvalidInput("a gateway's batch needs one pseudonym per report", code="invalid_report")
        return batch.round_index, batch.fields, batch.pseudonyms
    if kind not in ("application/json", ""):
        raise ServiceError(f"send application/json or {MEDIA_TYPE}, not {kind!r}", code="unsupported_media_type",
                           status=415)
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ServiceError("the body is not JSON", code="malformed_json", status=400) from None
    try:
        if principal.role == PARTICIPANT:
            one = ReportIn.model_validate(data)
            return one.round, {k: [v] for k, v in one.report.items()}, None
        many = BatchIn.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"{where}: {first['msg']}", code="invalid_request") from None
    return many.round, many.reports, many.pseudonyms


@router.post("/campaigns/{name}/fit", summary="A model from a campaign's stored aggregates (free)",
             openapi_extra=limits.body(limits.SMALL_BODY))
def fit_campaign(request: Request, name: Name, body: FitCampaignIn,
                 _: Principal = Depends(require(STEWARD, ANALYST))) -> dict[str, Any]:
    campaigns.get_campaign(engine_of(request), name).refuse_if_seeded()
    return estimates.fit_campaign(engine_of(request), name, body.model, body.covariance, body.strict).to_json()


@router.post("/campaigns/{name}/marginal", response_model=schemas.CampaignMarginalOut,
             summary="Any marginal from a marginals campaign's model (free; analysts, stewards)",
             openapi_extra=limits.body(limits.NAMES_BODY))
def campaign_marginal(request: Request, name: Name, body: schemas.MarginalQuery,
                      _: Principal = Depends(require(STEWARD, ANALYST))) -> dict[str, Any]:
    return marginal_answers.answer_marginal(engine_of(request), name, list(body.attributes), codes=body.codes,
                                            bootstrap=body.bootstrap)


@router.post("/campaigns/{name}/synthetic", response_model=schemas.CampaignSyntheticOut,
             summary="Synthetic rows drawn from a marginals campaign's model (free; analysts, stewards)",
             openapi_extra=limits.body(limits.SMALL_BODY))
def campaign_synthetic(request: Request, name: Name, body: schemas.SyntheticQuery,
                       _: Principal = Depends(require(STEWARD, ANALYST))) -> dict[str, Any]:
    return marginal_answers.answer_synthetic(engine_of(request), name, body.rows, codes=body.codes)


# ------------------------------------------------------------------------------------------------------- caps
@router.get("/local-caps/default", summary="The default per-participant cap on local spend")
def get_default_cap(request: Request, _: Principal = Depends(require(STEWARD, AUDITOR))) -> dict[str, float]:
    return caps.default_cap(engine_of(request)).to_json()


@router.put("/local-caps/default", summary="Set the default per-participant cap (stewards)",
            openapi_extra=limits.body(limits.SMALL_BODY))
def put_default_cap(request: Request, body: CapIn,
                    principal: Principal = Depends(unscoped_steward)) -> dict[str, float]:
    if body.key_id is not None or body.gateway_id is not None or body.pseudonym is not None:
        raise InvalidInput("the default cap names no participant; use PUT /local-caps/participant",
                           code="invalid_parameter")
    return caps.set_default_cap(engine_of(request), body.epsilon, body.delta, principal.label).to_json()


@router.put("/local-caps/participant", summary="Override one participant's cap (stewards)",
            openapi_extra=limits.body(limits.SMALL_BODY))
def put_participant_cap(request: Request, body: CapIn, _: Principal = Depends(unscoped_steward)) -> dict[str, float]:
    return caps.set_participant_cap(engine_of(request), body.epsilon, body.delta, body.key_id, body.gateway_id,
                                    body.pseudonym).to_json()
