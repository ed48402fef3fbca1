"""Submitting reports: the one path of a participant's report, a gateway's batch and the simulator.

:func:`submit_reports` does, for a columnar batch of reports made for round ``t``:

1. **validate** it against round ``t``'s report schema (``ReportSchema.validate``: shape, finiteness and range, the
   error naming the field and the report's index) and the protocol's own support check (``ProtocolSpec.check_reports``:
   e.g. the 1-bit Bernstein report is one-hot), before any lock: an open round's public state never changes;
2. in one serialised transaction (:func:`db.reports.lock_reports`): check the campaign and round ``t`` are open,
   map the participants (a participant key, or a gateway's or the simulator's pseudonyms) to ids, and **append** the
   batch through the local ledger's check (:func:`db.reports.append_reports`: one report per participant per round,
   one group per participant, the per-participant cap), refusing the whole batch at the first offending report;
3. in the same transaction, **add** the batch to round ``t``'s running aggregate (what the protocol sums:
   ``ProtocolSpec.aggregate_input``, e.g. label-ldp's ``x_row tilde y`` from the server's own public table)
   (:class:`~estimators.local.aggregate.ReportAggregate`), so estimation never re-reads reports, and **close** the
   round when its group's planned size has reported (the next round's state is computed then; when it cannot be,
   e.g. Alg. 5's first round gave ``w_ols = 0``, the round stays open and the batch is still accepted: a steward
   decides).

Anything refused leaves nothing behind: not a report, not a pseudonym, not a change of the aggregate. Refusals become
:class:`~service.errors.ServiceError` values with stable codes (docs/api.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, select

from db.engine import serialized_transaction, transaction
from db.gateways import charge_quota, require_scope
from db.models import Campaign, Participant, Report
from db.reports import (
    ReportRefused,
    append_reports,
    gateway_namespace,
    key_participant,
    lock_reports,
    lock_round,
    participants_of,
)
from service.campaigns.campaigns import close_round_locked, get_campaign, round_aggregate
from service.campaigns.public_tables import campaign_public_rows
from service.campaigns.types import CampaignInfo
from service.errors import Conflict, InvalidInput, ServiceError
from workloads.local.protocols import ProtocolError, ReportError

#: ReportRefused reasons -> (error code, HTTP status)
_REFUSALS = {
    "round_not_open": ("round_closed", 409),
    "duplicate_in_batch": ("duplicate_participant", 422),
    "already_reported": ("already_reported", 409),
    "other_group": ("wrong_group", 409),
    "cap_exceeded": ("local_cap_exceeded", 409),
    "bad_batch": ("invalid_report", 422),
    "out_of_scope": ("campaign_out_of_scope", 403),
    "quota_exceeded": ("gateway_quota_exceeded", 409),
}


@dataclass(frozen=True)
class Submitter:
    """Who the reports are for: one participant key (``participant_key``), or pseudonyms in a namespace (a gateway
    key's, or the simulator's), and the key that sent them (``None`` in process). ``gateway_key``: a gateway's
    batches are bound by the scope and quotas a steward gave the key (db/gateways.py)."""

    participant_key: int | None = None
    namespace: str | None = None
    sent_by: int | None = None
    gateway_key: int | None = None

    @classmethod
    def participant(cls, key_id: int) -> Submitter:
        return cls(participant_key=key_id, sent_by=key_id)

    @classmethod
    def gateway(cls, key_id: int) -> Submitter:
        return cls(namespace=gateway_namespace(key_id), sent_by=key_id, gateway_key=key_id)

    @classmethod
    def simulator(cls, run: str) -> Submitter:
        return cls(namespace=f"simulator:{run}")


@dataclass(frozen=True)
class SubmissionResult:
    campaign: str
    round_index: int
    accepted: int
    round_reports: int
    round_status: str
    campaign_status: str

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "round": self.round_index, "accepted": self.accepted,
                "round_reports": self.round_reports, "round_status": self.round_status,
                "campaign_status": self.campaign_status}


def refusal(error: ReportRefused) -> ServiceError:
    code, status = _REFUSALS.get(error.reason, ("invalid_report", 422))
    return ServiceError(str(error), code=code, status=status)


def validate_batch(campaign: CampaignInfo, round_index: object, fields: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The batch as float arrays, checked against round ``round_index``'s schema (naming field and report)."""
    if isinstance(round_index, bool) or not isinstance(round_index, int | np.integer) or not (
        0 <= round_index < len(campaign.rounds)
    ):
        raise InvalidInput(f"round must be an integer in [0, {len(campaign.rounds) - 1}] for campaign "
                           f"{campaign.name!r}, got {round_index!r}", code="invalid_round")
    round_info = campaign.rounds[int(round_index)]
    if campaign.status != "open" or round_info.status != "open":
        what = f"campaign {campaign.name!r} is closed" if campaign.status != "open" else (
            f"round {round_index} of campaign {campaign.name!r} is {round_info.status}")
        raise Conflict(f"{what}: it accepts no reports", code="round_closed")
    state = campaign.round_state(int(round_index))
    try:
        arrays = campaign.spec.report_schema(int(round_index), state).validate(fields)
        campaign.spec.check_reports(int(round_index), state, arrays)
        return arrays
    except ReportError as error:
        raise InvalidInput(str(error), code="invalid_report") from None


def submit_reports(engine: Engine, campaign_name: str | int, round_index: object, fields: Mapping[str, Any],
                   submitter: Submitter, pseudonyms: Sequence[str] | None = None,
                   campaign: CampaignInfo | None = None) -> SubmissionResult:
    """Validate, store, count and aggregate one batch (see the module docstring); all or nothing."""
    campaign = campaign or get_campaign(engine, campaign_name)
    arrays = validate_batch(campaign, round_index, fields)
    count = next(iter(arrays.values())).shape[0]
    if submitter.participant_key is not None:
        if pseudonyms is not None:
            raise InvalidInput("a participant key submits her own report: no pseudonyms", code="invalid_report")
        if count != 1:
            raise InvalidInput(f"a participant key submits one report per round, got {count}", code="invalid_report")
    elif pseudonyms is None or len(pseudonyms) != count:
        raise InvalidInput(f"a batch of {count} reports needs {count} pseudonyms, one per report, got "
                           f"{None if pseudonyms is None else len(pseudonyms)}", code="invalid_report")
    payloads = np.concatenate([a.reshape(count, -1) for a in arrays.values()], axis=1)
    index = int(round_index)
    spec = campaign.spec
    public = campaign_public_rows(engine, campaign) if spec.aggregates_public_rows else None
    try:
        summed = spec.aggregate_input(index, campaign.round_state(index), arrays, public)
    except ProtocolError as error:
        raise Conflict(f"campaign {campaign.name!r}: {error}", code="needs_public_table") from None
    try:
        with serialized_transaction(engine) as session:
            lock_reports(session)
            row = session.get(Campaign, campaign.id)
            round_row = lock_round(session, campaign.id, index)
            if row.status != "open":
                raise ReportRefused(f"campaign {campaign.name!r} is closed", "round_not_open", None, "round")
            if submitter.gateway_key is not None:  # under the reports lock: concurrent batches cannot overshoot
                charge_quota(session, submitter.gateway_key, campaign.id, campaign.name, index, count)
            created = None
            if submitter.participant_key is not None:
                ids = np.array([key_participant(session, submitter.participant_key)], dtype=np.int64)
            else:
                ids, created = participants_of(session, submitter.namespace, list(pseudonyms))
            append_reports(session, round_row, ids, payloads, submitter.sent_by, created)
            aggregate = round_aggregate(spec, round_row).add(summed)
            round_row.aggregate_json = json.dumps(aggregate.to_json(), separators=(",", ":"))
            if round_row.expected_reports is not None and round_row.report_count >= round_row.expected_reports:
                try:
                    close_round_locked(session, row, round_row)
                except Conflict:
                    pass  # the next state cannot be computed from these reports: the round stays open, the batch in
            session.flush()
            return SubmissionResult(campaign.name, index, count, int(round_row.report_count), round_row.status,
                                    row.status)
    except ReportRefused as error:
        raise refusal(error) from None


def report_width(campaign: CampaignInfo, round_index: int) -> int:
    """Numbers in one report of round ``round_index`` (its schema's fields, flattened)."""
    schema = campaign.spec.report_schema(round_index, campaign.round_state(round_index))
    return sum(int(np.prod(f.shape, dtype=np.int64)) for f in schema.fields)


def check_gateway_scope(engine: Engine, key_id: int, campaign: CampaignInfo) -> None:
    """403 ``campaign_out_of_scope`` at once when no steward opened the campaign to this gateway key (a cheap check
    before its batch is read; the quota is checked with the batch, in its transaction)."""
    try:
        with transaction(engine) as session:
            require_scope(session, key_id, campaign.id, campaign.name)
    except ReportRefused as error:
        raise refusal(error) from None


def participant_has_reported(engine: Engine, campaign: CampaignInfo, round_index: int, key_id: int) -> bool:
    """Whether the participant of ``key_id`` has a report in that round (for her own state only)."""
    with transaction(engine) as session:
        found = session.execute(
            select(Report.id).join(Participant, Participant.id == Report.participant_id)
            .where(Participant.api_key_id == key_id, Report.campaign_id == campaign.id,
                   Report.round_index == round_index)).first()
        return found is not None
