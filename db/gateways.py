"""Gateway keys' scopes and quotas: which campaigns a gateway may submit to, and how many reports (issue 18, 7).

A gateway relays reports for participants it names by pseudonyms; the service cannot tell a real participant from an
invented one, so without a bound one request of 1,000 invented pseudonyms filled (and closed) a campaign planned for
1,000. A steward therefore names, per gateway key, the campaigns it may submit to and a quota of reports over the
campaign and per round (:class:`~db.models.GatewayScope`). :func:`charge_quota` runs in the transaction that inserts
a batch, after :func:`db.reports.lock_reports` (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``LOCK TABLE reports IN
SHARE ROW EXCLUSIVE MODE``), so two concurrent batches can never both read the old count and both pass: a batch
that would pass either quota is refused whole, and the caller's rollback leaves nothing behind.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import GatewayScope, GatewayUsage
from db.reports import ReportRefused


def used_reports(session: Session, api_key_id: int, campaign_id: int) -> dict[int, int]:
    """The reports the gateway has had accepted in each round of the campaign ``{round index: count}``."""
    rows = session.execute(select(GatewayUsage.round_index, GatewayUsage.reports).where(
        GatewayUsage.api_key_id == api_key_id, GatewayUsage.campaign_id == campaign_id))
    return {int(index): int(count) for index, count in rows}


def scope_of(session: Session, api_key_id: int, campaign_id: int) -> GatewayScope | None:
    return session.get(GatewayScope, (api_key_id, campaign_id))


def require_scope(session: Session, api_key_id: int, campaign_id: int, campaign_name: str) -> GatewayScope:
    """The key's scope on the campaign, or :class:`~db.reports.ReportRefused` ``out_of_scope``."""
    scope = scope_of(session, api_key_id, campaign_id)
    if scope is None:
        raise ReportRefused(f"gateway key {api_key_id} may not submit to campaign {campaign_name!r}: a steward must "
                            f"name the campaign in the key's scope (marginalia keys scope {api_key_id} --campaign "
                            f"{campaign_name} --reports N)", "out_of_scope", None, "campaign")
    return scope


def charge_quota(session: Session, api_key_id: int, campaign_id: int, campaign_name: str, round_index: int,
                 count: int) -> None:
    """Count ``count`` more reports of this gateway in round ``round_index``, or refuse the batch.

    Refused (:class:`~db.reports.ReportRefused`) with reason ``out_of_scope`` when no steward opened the campaign
    to the key, ``quota_exceeded`` when the campaign's or the round's count would pass its quota. The caller holds
    the reports lock (module docstring)."""
    scope = require_scope(session, api_key_id, campaign_id, campaign_name)
    used = used_reports(session, api_key_id, campaign_id)
    total, in_round = sum(used.values()), used.get(round_index, 0)
    if total + count > scope.max_reports:
        raise ReportRefused(f"a batch of {count} reports would take gateway key {api_key_id} past its quota of "
                            f"{scope.max_reports} reports in campaign {campaign_name!r} ({total} accepted so far): "
                            "nothing was stored", "quota_exceeded", None, "reports")
    if scope.max_reports_per_round is not None and in_round + count > scope.max_reports_per_round:
        raise ReportRefused(f"a batch of {count} reports would take gateway key {api_key_id} past its quota of "
                            f"{scope.max_reports_per_round} reports per round in round {round_index} of campaign "
                            f"{campaign_name!r} ({in_round} accepted so far): nothing was stored",
                            "quota_exceeded", None, "reports")
    row = session.get(GatewayUsage, (api_key_id, campaign_id, round_index))
    if row is None:
        session.add(GatewayUsage(api_key_id=api_key_id, campaign_id=campaign_id, round_index=round_index,
                                 reports=count))
    else:
        row.reports = int(row.reports) + count
    session.flush()

