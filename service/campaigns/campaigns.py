"""Campaigns: create (validated before anything is stored), list, show, close; rounds and their public state.

A campaign stores its protocol's spec, the feature names in the order of a participant's vector, the target, the
public table it leans on, the public ``transform`` participants apply to their features before randomizing
(``x' = (x - center) / scale``, from the public table's means and standard deviations or from stated bounds, never
from private values), and its local guarantee: the largest (epsilon, delta) one participant spends over all its
rounds (``ProtocolSpec.max_participant_cost``).

Rounds (``campaign_rounds``): round 0 opens at creation with the spec's initial state; round ``t + 1`` stays
``pending`` until round ``t`` closes, when its protocol's transition (:func:`service.campaigns.protocols.next_state`)
computes its public state from the aggregates of rounds ``0..t``. A round closes when its group's planned size has
reported (:mod:`service.campaigns.submission` does it in the inserting transaction) or when a steward closes it; closing
takes the reports lock (:func:`db.reports.lock_reports`), so no report slips in while the next state is computed, and
is idempotent. Closing the last round, or the campaign, closes the campaign.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import serialized_transaction, transaction
from db.ids import parse_id
from db.models import DELTA_SCALE, EPSILON_SCALE, Campaign, CampaignRound, LocalCapDefault, PublicTable, utcnow
from db.reports import lock_reports, lock_round
from estimators.base import EstimatorError
from estimators.local.aggregate import ReportAggregate
from service.campaigns.options import OptionValues
from service.campaigns.protocols import build_spec, get_protocol, next_state
from service.campaigns.public_tables import PublicTableInfo, check_name, get_public_table, public_matrix
from service.campaigns.types import CampaignInfo, CampaignRequest, RoundInfo, Transform
from service.errors import Conflict, InvalidInput, NotFound
from service.privacy.cost import ceil_units, exact
from workloads.local.protocols import ProtocolSpec, RoundState, spec_from_json
from workloads.parameters import PrivacyParameterError, validate_delta, validate_epsilon


def _up(value: float, scale: int) -> int:
    """A privacy amount in storage units, rounded up (``0.1`` is read as exactly 1/10 first)."""
    return ceil_units(exact(value), scale)


def _round_info(row: CampaignRound) -> RoundInfo:
    return RoundInfo(int(row.round_index), row.group_name, row.epsilon_units / EPSILON_SCALE,
                     row.delta_units / DELTA_SCALE, None if row.expected_reports is None else int(row.expected_reports),
                     row.status, int(row.report_count), None if row.state_json is None else json.loads(row.state_json))


def _info(session: Session, row: Campaign) -> CampaignInfo:
    rounds = session.execute(select(CampaignRound).where(CampaignRound.campaign_id == row.id)
                             .order_by(CampaignRound.round_index)).scalars().all()
    public = None
    if row.public_table_id is not None:
        public = session.get(PublicTable, row.public_table_id).name
    return CampaignInfo(row.id, row.name, row.protocol, spec_from_json(json.loads(row.spec_json)),
                        tuple(json.loads(row.features_json)), row.target, public,
                        Transform.from_json(json.loads(row.transform_json)), row.epsilon_units / EPSILON_SCALE,
                        row.delta_units / DELTA_SCALE, row.status, tuple(_round_info(r) for r in rounds),
                        row.created_at, row.closed_at, bool(row.seeded))


def _campaign_row(session: Session, name_or_id: str | int) -> Campaign:
    """The campaign named ``name_or_id``, else the one whose id it is: an int, or ASCII decimals up to 2^31-1
    (:func:`db.ids.parse_id`: ``'٣'`` names no campaign, and a 26-digit id is a 404, not an overflow)."""
    text = str(name_or_id)
    row = session.execute(select(Campaign).where(Campaign.name == text)).scalar_one_or_none()
    campaign_id = parse_id(text)
    if row is None and campaign_id is not None:
        row = session.get(Campaign, campaign_id)
    if row is None:
        raise NotFound(f"no campaign named {name_or_id!r}", code="campaign_not_found")
    return row


def get_campaign(engine: Engine, name_or_id: str | int) -> CampaignInfo:
    with transaction(engine) as session:
        return _info(session, _campaign_row(session, name_or_id))


def list_campaigns(engine: Engine) -> list[CampaignInfo]:
    with transaction(engine) as session:
        return [_info(session, row) for row in session.execute(select(Campaign).order_by(Campaign.id)).scalars()]


def mark_seeded(engine: Engine, campaign_id: int) -> None:
    """Mark a campaign ``seeded`` before it receives a report randomized with a caller-chosen seed (for good: its
    stored reports cannot be told apart later)."""
    with transaction(engine) as session:
        session.execute(update(Campaign).where(Campaign.id == campaign_id).values(seeded=True))


# ----------------------------------------------------------------------------------------------------------- create
def _privacy(epsilon: object, delta: object) -> tuple[float, float]:
    try:
        eps = validate_epsilon(epsilon, "epsilon")
        dlt = validate_delta(0.0 if delta is None else delta, "delta")
    except PrivacyParameterError as error:
        raise InvalidInput(str(error), code="invalid_parameter") from None
    if eps > 1000:
        raise InvalidInput(f"epsilon must be at most 1000 for a local campaign, got {eps}", code="invalid_parameter")
    return eps, dlt


def _names(features: Sequence[str] | str, target: str | None) -> tuple[tuple[str, ...], str | None]:
    if isinstance(features, str):
        features = [f.strip() for f in features.split(",")]
    names = tuple(features)
    if not names or any(not isinstance(n, str) or not n.strip() for n in names):
        raise InvalidInput(f"features must be a non-empty list of column names, got {list(names)}",
                           code="invalid_parameter")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInput(f"features name {repeated[0]!r} more than once", code="invalid_parameter")
    if target is not None and target in names:
        raise InvalidInput(f"the target {target!r} cannot also be a feature", code="invalid_parameter")
    return names, target


def _transform(features: tuple[str, ...], public_rows: np.ndarray | None, public_name: str | None,
               options: OptionValues, protocol: str) -> Transform:
    """From the public table (standardize, the default with one) or stated per-feature bounds; else identity.
    A protocol that takes its features in their own units (LDP-AVG) has none."""
    if not get_protocol(protocol).transform:  # its record refused standardize and feature_bounds
        return Transform.identity(len(features))
    bounds = options["feature_bounds"]
    standardize = public_rows is not None if options["standardize"] is None else options["standardize"]
    if bounds is not None:
        parsed = _feature_bounds(bounds, features)
        center = tuple((lo + hi) / 2 for lo, hi in parsed)
        scale = tuple((hi - lo) / 2 for lo, hi in parsed)
        return Transform(center, scale, "stated bounds")
    if not standardize:
        return Transform.identity(len(features))
    if public_rows is None:
        raise InvalidInput("option standardize needs a public table (parameter public), or option feature_bounds",
                           code="invalid_parameter")
    spread = public_rows.std(axis=0)
    flat = [f for f, s in zip(features, spread, strict=True) if not s > 0]
    if flat:
        raise InvalidInput(f"public table {public_name!r}: column {flat[0]!r} is constant, it cannot be standardized "
                           "(leave it out, or give option standardize=false)", code="invalid_parameter")
    return Transform(tuple(public_rows.mean(axis=0).tolist()), tuple(spread.tolist()), f"public table {public_name}")


def _check_finite(features: tuple[str, ...], transform: Transform, public_rows: np.ndarray | None) -> None:
    """Refuse, naming the column, a transform or transformed public rows that are not finite (stated bounds near the
    float64 limit; a public scale so small that a row overflows). Devices apply the transform to every report, so a
    non-finite one (stored as JSON ``null``) would make every report fail."""
    for j, name in enumerate(features):
        what = None
        if not (np.isfinite(transform.center[j]) and np.isfinite(transform.scale[j])):
            what = f"its transform (center {transform.center[j]:g}, scale {transform.scale[j]:g}) is not finite"
        elif public_rows is not None and not np.all(np.isfinite(public_rows[:, j])):
            what = "its public values are not finite after the transform"
        if what is not None:
            raise InvalidInput(f"column {name!r}: {what} ({transform.source}); rescale the column or state other "
                               "bounds", code="invalid_value")


def _feature_bounds(raw: object, features: tuple[str, ...]) -> list[tuple[float, float]]:
    """``{"A": [lo, hi], ...}`` (API) or ``"A=lo:hi;B=lo:hi"`` (command line), one pair per feature."""
    if isinstance(raw, str):
        try:
            raw = {k.strip(): [float(v) for v in pair.split(":")] for k, pair in
                   (item.split("=", 1) for item in raw.split(";") if item.strip())}
        except ValueError:
            raise InvalidInput(f"option feature_bounds must read A=lo:hi;B=lo:hi, got {raw!r}",
                               code="invalid_parameter") from None
    if not isinstance(raw, Mapping) or set(raw) != set(features):
        raise InvalidInput(f"option feature_bounds must give bounds for exactly the features {list(features)}",
                           code="invalid_parameter")
    out = []
    for name in features:
        pair = raw[name]
        if not isinstance(pair, list | tuple) or len(pair) != 2 or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) for v in pair
        ) or not pair[0] < pair[1]:
            raise InvalidInput(f"option feature_bounds: {name!r} needs finite lo < hi, got {pair!r}",
                               code="invalid_parameter")
        out.append((float(pair[0]), float(pair[1])))
    return out


def _check_default_cap(session: Session, epsilon_units: int, delta_units: int) -> None:
    cap = session.get(LocalCapDefault, 1)
    if epsilon_units > cap.epsilon_units or delta_units > cap.delta_units:
        raise InvalidInput(
            f"the campaign's local guarantee (epsilon {epsilon_units / EPSILON_SCALE:g}, delta "
            f"{delta_units / DELTA_SCALE:g} per participant) exceeds the default per-participant cap (epsilon "
            f"{cap.epsilon_units / EPSILON_SCALE:g}, delta {cap.delta_units / DELTA_SCALE:g}): every report would be "
            "refused; lower epsilon or delta, or raise the cap (marginalia campaign cap)", code="invalid_parameter")


@dataclass(frozen=True)
class PreparedCampaign:
    """A campaign validated but not stored: what :func:`create_campaign` stores and ``campaign plan`` predicts from.
    ``public_rows``: the public table's feature columns after the transform (``None`` without a table)."""

    names: tuple[str, ...]
    target: str | None
    table: PublicTableInfo | None
    transform: Transform
    public_rows: np.ndarray | None
    spec: ProtocolSpec


def prepare_campaign(engine: Engine, protocol: str, features: Sequence[str] | str, target: str | None = None,
                     public: str | None = None, epsilon: object = None, delta: object = None,
                     options: Mapping[str, object] | None = None) -> PreparedCampaign:
    """Validate a campaign's request and build its spec, reading only the public table; nothing is stored."""
    record = get_protocol(protocol)
    eps, dlt = _privacy(epsilon, delta)
    names, target = _names(features, target)
    table = get_public_table(engine, public) if public is not None else None
    option_values = record.check_options(options)
    raw_public = public_matrix(engine, table, names) if table is not None else None
    transform = _transform(names, raw_public, public, option_values, protocol)
    public_rows = None if raw_public is None else transform.apply(raw_public)
    _check_finite(names, transform, public_rows)
    sizes = None if table is None else {c.name: int(c.size) for c in table.columns
                                        if c.kind == "coded" and c.size is not None and c.name in names}
    spec = build_spec(protocol, CampaignRequest(names, target, eps, dlt, option_values, public_rows, sizes))
    return PreparedCampaign(names, target, table, transform, public_rows, spec)


def create_campaign(engine: Engine, name: str, protocol: str, features: Sequence[str] | str, target: str | None = None,
                    public: str | None = None, epsilon: object = None, delta: object = None,
                    options: Mapping[str, object] | None = None, principal: str = "cli") -> CampaignInfo:
    """Validate everything, then store the campaign and its rounds (round 0 open) in one transaction."""
    check_name(name, "campaign name")
    prepared = prepare_campaign(engine, protocol, features, target, public, epsilon, delta, options)
    names, target, table, transform, public_rows, spec = (prepared.names, prepared.target, prepared.table,
                                                          prepared.transform, prepared.public_rows, prepared.spec)
    max_eps, max_delta = spec.max_participant_cost()
    epsilon_units, delta_units = _up(max_eps, EPSILON_SCALE), _up(max_delta, DELTA_SCALE)
    state = spec.initial_state(public_rows)
    spec.report_schema(0, state)
    groups = {g.name: g.size for g in spec.groups()}
    try:
        with serialized_transaction(engine) as session:
            _check_default_cap(session, epsilon_units, delta_units)
            if session.execute(select(Campaign.id).where(Campaign.name == name)).first() is not None:
                raise Conflict(f"a campaign named {name!r} exists already", code="campaign_exists")
            now = utcnow()
            row = Campaign(name=name, protocol=spec.protocol, spec_json=json.dumps(spec.to_json()),
                           features_json=json.dumps(list(names)), target=target,
                           public_table_id=None if table is None else table.id,
                           transform_json=json.dumps(transform.to_json()), epsilon_units=epsilon_units,
                           delta_units=delta_units, status="open", principal=principal, created_at=now)
            session.add(row)
            session.flush()
            for index, spec_round in enumerate(spec.rounds()):
                session.add(CampaignRound(
                    campaign_id=row.id, round_index=index, group_name=spec_round.group,
                    epsilon_units=_up(spec_round.epsilon, EPSILON_SCALE),
                    delta_units=_up(spec_round.delta, DELTA_SCALE), expected_reports=groups[spec_round.group],
                    status="open" if index == 0 else "pending",
                    state_json=json.dumps(state.to_json()) if index == 0 else None, report_count=0,
                    opened_at=now if index == 0 else None))
            session.flush()
            return _info(session, row)
    except IntegrityError:
        raise Conflict(f"a campaign named {name!r} exists already", code="campaign_exists") from None


# ------------------------------------------------------------------------------------------------------------ rounds
def round_aggregate(spec: ProtocolSpec, row: CampaignRound) -> ReportAggregate:
    """The round's running aggregate (empty before its first report)."""
    if row.aggregate_json is not None:
        return ReportAggregate.from_json(json.loads(row.aggregate_json))
    state = RoundState.from_json(json.loads(row.state_json))
    return ReportAggregate.for_round(spec, int(row.round_index), state)


def close_round_locked(session: Session, campaign: Campaign, row: CampaignRound) -> None:
    """Close an open round inside a transaction holding the reports lock, open the next one with its public state
    (or close the campaign after its last round). A transition that cannot be computed (no reports yet) leaves the
    round open and raises :class:`Conflict`."""
    if row.status != "open":
        return
    spec = spec_from_json(json.loads(campaign.spec_json))
    index = int(row.round_index)
    now = utcnow()
    if index + 1 < spec.round_count:
        rows = session.execute(select(CampaignRound).where(CampaignRound.campaign_id == campaign.id)
                               .order_by(CampaignRound.round_index)).scalars().all()
        aggregates = [round_aggregate(spec, r) for r in rows[:index + 1]]
        try:
            state = next_state(spec, index, aggregates)
        except EstimatorError as error:
            raise Conflict(f"round {index} of campaign {campaign.name!r} cannot close yet: the next round's public "
                           f"state cannot be computed ({error})", code="round_not_ready") from None
        following = rows[index + 1]
        following.state_json = json.dumps(state.to_json())
        following.status = "open"
        following.opened_at = now
    else:
        campaign.status = "closed"
        campaign.closed_at = now
    row.status = "closed"
    row.closed_at = now


def close_round(engine: Engine, name_or_id: str | int, round_index: int | None = None) -> CampaignInfo:
    """A steward closes the open round (or ``round_index``, which must be the open one); closing a closed round
    again changes nothing."""
    with serialized_transaction(engine) as session:
        lock_reports(session)
        campaign = _campaign_row(session, name_or_id)
        rows = session.execute(select(CampaignRound).where(CampaignRound.campaign_id == campaign.id)
                               .order_by(CampaignRound.round_index)).scalars().all()
        if round_index is None:
            row = next((r for r in rows if r.status == "open"), None)
        elif isinstance(round_index, bool) or not isinstance(round_index, int) or not 0 <= round_index < len(rows):
            raise InvalidInput(f"round must be an integer in [0, {len(rows) - 1}], got {round_index!r}",
                               code="invalid_parameter")
        else:
            row = lock_round(session, campaign.id, round_index)
            if row.status == "pending":
                raise Conflict(f"round {round_index} of campaign {campaign.name!r} has not opened yet",
                               code="round_pending")
        if row is not None:
            close_round_locked(session, campaign, row)
            session.flush()
        return _info(session, campaign)


def close_campaign(engine: Engine, name_or_id: str | int) -> CampaignInfo:
    """Close the campaign and every round still open or pending: no more reports. Idempotent."""
    with serialized_transaction(engine) as session:
        lock_reports(session)
        campaign = _campaign_row(session, name_or_id)
        now = utcnow()
        for row in session.execute(select(CampaignRound).where(CampaignRound.campaign_id == campaign.id,
                                                               CampaignRound.status == "open")).scalars():
            row.status, row.closed_at = "closed", now
        if campaign.status != "closed":
            campaign.status, campaign.closed_at = "closed", now
        session.flush()
        return _info(session, campaign)


def public_state(campaign: CampaignInfo) -> dict[str, Any]:
    """What a participant may fetch: the spec, the feature names and their public transform, and the open round's
    number, (epsilon, delta) and public state (``round`` is ``None`` when nothing is open)."""
    current = campaign.open_round
    return {"campaign": campaign.name, "protocol": campaign.protocol, "status": campaign.status,
            "features": list(campaign.features), "target": campaign.target, "spec": campaign.spec.to_json(),
            "transform": campaign.transform.to_json(), "epsilon": campaign.epsilon, "delta": campaign.delta,
            "round": None if current is None else current.index,
            "round_epsilon": None if current is None else current.epsilon,
            "round_delta": None if current is None else current.delta,
            "state": None if current is None else current.state}

