"""Storing local-DP reports: participants by pseudonym, the local ledger's check-and-append, the per-participant cap.

Every function takes a :class:`~sqlalchemy.orm.Session` inside a transaction its caller opened with
:func:`db.engine.serialized_transaction`; :func:`lock_reports` makes it exclusive against every other writer of
reports (SQLite: the transaction began ``IMMEDIATE``; PostgreSQL: ``LOCK TABLE reports IN SHARE ROW EXCLUSIVE
MODE``, which conflicts with itself and lets readers through), so two batches can never both read a participant's
old spend and both pass the cap. The caller validates the reports' values against the protocol first and updates
the round's running aggregate in the same transaction after :func:`append_reports`: either all of a batch is stored
and counted, or none of it.

The reports table *is* the local ledger: each row spends its round's (epsilon, delta) for its participant, in the
fixed-point units of :mod:`db.models` (1e-12 for epsilon, 1e-18 for delta; charges rounded up, caps down). A
participant's spend is the sum of her rows over every campaign (basic composition, docs/privacy.md 8.7); the cap in
force is her override or the default row of ``local_cap_default``.

Ids travel as numpy ``int64`` arrays; on SQLite a set of ids reaches SQL as one JSON parameter (``json_each``), on
PostgreSQL as one array parameter (``= ANY``), so a batch of any size is one statement per step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from db.models import CampaignRound, LocalCapDefault, Participant, utcnow

#: The namespace of participants who report with a key of their own (pseudonym: the key's id).
KEY_NAMESPACE = "key"


class ReportRefused(ValueError):
    """A batch refused as a whole; ``index`` (0-based in the batch) and ``field`` name the first offending report
    when there is one, ``reason`` is a stable code: ``round_not_open``, ``duplicate_in_batch``,
    ``already_reported``, ``other_group``, ``cap_exceeded``, ``bad_batch``."""

    def __init__(self, message: str, reason: str, index: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.index = index
        self.field = field


def gateway_namespace(api_key_id: int) -> str:
    """The namespace of a gateway key's pseudonyms."""
    return f"gateway:{int(api_key_id)}"


def lock_reports(session: Session) -> None:
    """Exclude every other writer of reports until the transaction ends (see the module docstring)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE reports IN SHARE ROW EXCLUSIVE MODE"))


def lock_round(session: Session, campaign_id: int, round_index: int) -> CampaignRound | None:
    """The round's row, locked for the transaction on PostgreSQL (``FOR UPDATE``)."""
    query = select(CampaignRound).where(CampaignRound.campaign_id == campaign_id,
                                        CampaignRound.round_index == round_index).with_for_update()
    return session.execute(query).scalar_one_or_none()


def _ids_filter(session: Session, column: str, ids: np.ndarray) -> tuple[str, dict[str, object]]:
    """SQL ``column IN <ids>`` with one bound parameter ``ids``."""
    values = [int(i) for i in np.asarray(ids, dtype=np.int64)]
    if session.get_bind().dialect.name == "postgresql":
        return f"{column} = ANY(:ids)", {"ids": values}
    return f"{column} IN (SELECT value FROM json_each(:ids))", {"ids": json.dumps(values)}


def _names_filter(session: Session, column: str, names: Sequence[str]) -> tuple[str, dict[str, object]]:
    if session.get_bind().dialect.name == "postgresql":
        return f"{column} = ANY(:names)", {"names": list(names)}
    return f"{column} IN (SELECT value FROM json_each(:names))", {"names": json.dumps(list(names))}


def participant_ids(session: Session, namespace: str, pseudonyms: Sequence[str], create: bool = True) -> np.ndarray:
    """The participant id of each pseudonym of ``namespace`` (``int64``, in order), creating the missing ones
    (``create``), or ``-1`` for a missing one when not creating."""
    return participants_of(session, namespace, pseudonyms, create)[0]


def participants_of(session: Session, namespace: str, pseudonyms: Sequence[str],
                    create: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`participant_ids`, and a mask of the participants this call created: in this transaction, so they have
    no report and no cap of their own yet (:func:`append_reports` need not ask the ledger about them)."""
    names = [str(p) for p in pseudonyms]
    bad = next((i for i, p in enumerate(names) if not p or len(p) > 200), None)
    if bad is not None:
        raise ReportRefused(f"report {bad}: a pseudonym must have 1 to 200 characters", "bad_batch", bad, "pseudonym")
    found = _lookup(session, namespace, names)
    missing = list(dict.fromkeys(p for p in names if p not in found))
    created: set[str] = set()
    if missing and create:
        now = utcnow()
        sqlite = session.get_bind().dialect.name == "sqlite"
        stamp = now.isoformat(" ") if sqlite else now  # on SQLite, the string its datetime adapter would write
        before = _fetch(session, "SELECT MAX(id) FROM participants", {})[0][0] if sqlite else None
        _executemany(session, "INSERT INTO participants (namespace, pseudonym, created_at) VALUES (?, ?, ?)",
                     [(namespace, p, stamp) for p in missing])
        first = (before or 0) + 1
        if sqlite and _fetch(session, "SELECT MAX(id) FROM participants", {})[0][0] == first + len(missing) - 1:
            # the transaction holds SQLite's write lock and each new rowid is the largest plus one: the rows took
            # exactly the ids after the largest, in insertion order (checked by the new largest)
            found.update(zip(missing, range(first, first + len(missing)), strict=True))
        else:
            found.update(_lookup(session, namespace, missing))
        created = set(missing)
    return (np.array([found.get(p, -1) for p in names], dtype=np.int64),
            np.array([p in created for p in names], dtype=bool))


def _lookup(session: Session, namespace: str, names: Sequence[str]) -> dict[str, int]:
    if not names:
        return {}
    where, params = _names_filter(session, "pseudonym", names)
    rows = _fetch(session, f"SELECT pseudonym, id FROM participants WHERE namespace = :ns AND {where}",
                  {"ns": namespace, **params})
    return {str(name): int(pid) for name, pid in rows}


def _fetch(session: Session, sql: str, params: dict[str, object]) -> list[tuple]:
    """Rows of ``sql`` (named ``:param`` markers) through the DB-API cursor of the session's transaction: a batch's
    lookups return tens of thousands of rows, which SQLAlchemy's result objects would triple the cost of."""
    if session.get_bind().dialect.name == "postgresql":
        sql = re.sub(r"(?<!:):([a-z_]+)", r"%(\1)s", sql)
    cursor = session.connection().connection.cursor()
    try:
        cursor.execute(sql, params)
        return cursor.fetchall()
    finally:
        cursor.close()


def _executemany(session: Session, sql: str, rows: list[tuple]) -> None:
    """``sql`` (``?`` markers) for every row, on the DB-API cursor of the session's transaction."""
    if session.get_bind().dialect.name == "postgresql":
        sql = sql.replace("?", "%s")
    cursor = session.connection().connection.cursor()
    try:
        cursor.executemany(sql, rows)
    finally:
        cursor.close()


def key_participant(session: Session, api_key_id: int) -> int:
    """The participant a participant key reports as (created on its first report)."""
    row = session.execute(select(Participant.id).where(Participant.api_key_id == api_key_id)).scalar_one_or_none()
    if row is not None:
        return int(row)
    participant = Participant(namespace=KEY_NAMESPACE, pseudonym=str(int(api_key_id)), api_key_id=api_key_id)
    session.add(participant)
    session.flush()
    return int(participant.id)


def spent_units(session: Session, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each participant's total local spend over every campaign, (epsilon units, delta units), aligned with ``ids``."""
    return _per_participant(session, ids, "participant_id", "SELECT participant_id, SUM(epsilon_units), "
                            "SUM(delta_units) FROM reports WHERE {where} GROUP BY participant_id", default=(0, 0))


def default_cap_units(session: Session) -> tuple[int, int]:
    """The default per-participant cap, (epsilon units, delta units)."""
    default = session.get(LocalCapDefault, 1)
    if default is None:
        raise RuntimeError("the local_cap_default row is missing (migration 0005 writes it)")
    return int(default.epsilon_units), int(default.delta_units)


def cap_units(session: Session, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each participant's cap in force, (epsilon units, delta units): her override, else the default."""
    fallback = default_cap_units(session)
    return _per_participant(session, ids, "id", "SELECT id, COALESCE(cap_epsilon_units, :de), "
                            "COALESCE(cap_delta_units, :dd) FROM participants WHERE {where} AND "
                            "(cap_epsilon_units IS NOT NULL OR cap_delta_units IS NOT NULL)", default=fallback,
                            extra={"de": fallback[0], "dd": fallback[1]})


def _per_participant(session: Session, ids: np.ndarray, id_column: str, sql: str, default: tuple[int, int],
                     extra: dict[str, object] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Two integer columns of ``sql`` (rows keyed by their first column) aligned with ``ids``; ``default`` where
    ``sql`` has no row."""
    ids = np.asarray(ids, dtype=np.int64)
    where, params = _ids_filter(session, id_column, np.unique(ids))
    rows = _fetch(session, sql.format(where=where), {**params, **(extra or {})})
    table = {int(r[0]): (int(r[1]), int(r[2])) for r in rows}
    eps = np.array([table.get(int(i), default)[0] for i in ids], dtype=np.int64)
    delta = np.array([table.get(int(i), default)[1] for i in ids], dtype=np.int64)
    return eps, delta


def _reported(session: Session, ids: np.ndarray, condition: str, params: dict[str, object]) -> np.ndarray:
    """A mask over ``ids``: which of them have a report matching ``condition``."""
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    where, id_params = _ids_filter(session, "r.participant_id", np.unique(ids))
    rows = _fetch(session, f"SELECT DISTINCT r.participant_id FROM reports r WHERE {where} AND {condition}",
                  {**id_params, **params})
    return np.isin(ids, np.array([int(r[0]) for r in rows], dtype=np.int64))


def append_reports(session: Session, round_row: CampaignRound, ids: np.ndarray, payloads: np.ndarray,
                   submitted_by: int | None = None, created: np.ndarray | None = None) -> None:
    """Check a batch against the ledger and the constraints of its round, then insert it and count it.

    ``round_row`` comes from :func:`lock_round` in this transaction (after :func:`lock_reports`); ``ids`` are the
    participants (one per report), ``payloads`` the reports' values ``(k, width)`` in the round's field order.
    Refused with :class:`ReportRefused` naming the first offending report: the round is not open; a participant
    twice in the batch; one who already reported in this round; one who reported in a round of another group of this
    campaign (a participant belongs to one group); one whose spend would pass her cap."""
    ids = np.asarray(ids, dtype=np.int64)
    values = np.ascontiguousarray(payloads, dtype="<f8")
    if ids.ndim != 1 or values.ndim != 2 or values.shape[0] != ids.shape[0]:
        raise ReportRefused(f"a batch needs one participant per report: {ids.shape} participants, "
                            f"{values.shape} payloads", "bad_batch")
    where = f"round {round_row.round_index} of campaign {round_row.campaign_id}"
    if round_row.status != "open":
        raise ReportRefused(f"{where} is {round_row.status}: it accepts no reports", "round_not_open", None, "round")
    if ids.size == 0:
        return
    _refuse_first(_repeated(ids), "duplicate_in_batch", "names a participant an earlier report of the batch names")
    created = np.zeros(ids.shape, dtype=bool) if created is None else np.asarray(created, dtype=bool)
    known = ids[~created]  # the ledger knows nothing yet of participants created in this transaction
    _refuse_first(_spread(created, _reported(session, known, "r.campaign_id = :c AND r.round_index = :r",
                                             {"c": round_row.campaign_id, "r": round_row.round_index})),
                  "already_reported", f"its participant has already reported in {where} (one report per round)")
    _refuse_first(_spread(created, _reported(session, known, "r.campaign_id = :c AND r.round_index IN (SELECT "
                                                             "round_index FROM campaign_rounds WHERE campaign_id = :c "
                                                             "AND group_name <> :g)",
                                             {"c": round_row.campaign_id, "g": round_row.group_name})),
                  "other_group", f"its participant reported in a round of another group than {round_row.group_name!r}")
    spent_eps, spent_delta = (np.zeros(ids.shape, dtype=np.int64) for _ in range(2))
    cap_eps, cap_delta = (np.full(ids.shape, value, dtype=np.int64) for value in default_cap_units(session))
    if known.size:
        spent_eps[~created], spent_delta[~created] = spent_units(session, known)
        cap_eps[~created], cap_delta[~created] = cap_units(session, known)
    over = (spent_eps + round_row.epsilon_units > cap_eps) | (spent_delta + round_row.delta_units > cap_delta)
    if over.any():
        i = int(np.argmax(over))
        raise ReportRefused(
            f"report {i}: its participant has spent epsilon {spent_eps[i] / 1e12:.6g}, delta "
            f"{spent_delta[i] / 1e18:.3g} of her cap (epsilon {cap_eps[i] / 1e12:.6g}, delta "
            f"{cap_delta[i] / 1e18:.3g}); this round spends epsilon "
            f"{round_row.epsilon_units / 1e12:.6g}, delta {round_row.delta_units / 1e18:.3g} more",
            "cap_exceeded", i, "participant")
    _insert(session, round_row, ids, values, submitted_by)
    round_row.report_count = int(round_row.report_count) + int(ids.size)


def _spread(created: np.ndarray, known: np.ndarray) -> np.ndarray:
    """A mask over the batch from a mask over its known (not just created) participants: False for the created."""
    out = np.zeros(created.shape, dtype=bool)
    out[~created] = known
    return out


def _repeated(ids: np.ndarray) -> np.ndarray:
    """A mask of the reports whose participant appeared earlier in the batch."""
    _, first = np.unique(ids, return_index=True)
    mask = np.ones(ids.shape, dtype=bool)
    mask[first] = False
    return mask


def _refuse_first(mask: np.ndarray, reason: str, what: str) -> None:
    if mask.any():
        index = int(np.argmax(mask))
        raise ReportRefused(f"report {index}: {what}", reason, index, "participant")


def _insert(session: Session, round_row: CampaignRound, ids: np.ndarray, values: np.ndarray,
            submitted_by: int | None) -> None:
    """One executemany on the DB-API cursor (SQLAlchemy's per-row work would dominate a large batch)."""
    raw = values.tobytes()
    width = values.shape[1] * 8
    campaign, index = int(round_row.campaign_id), int(round_row.round_index)
    eps, delta = int(round_row.epsilon_units), int(round_row.delta_units)
    rows = [(campaign, index, pid, eps, delta, raw[k * width:(k + 1) * width], submitted_by)
            for k, pid in enumerate(ids.tolist())]
    _executemany(session, "INSERT INTO reports (campaign_id, round_index, participant_id, epsilon_units, "
                 "delta_units, payload, submitted_by) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)


def read_payloads(session: Session, campaign_id: int, round_index: int, width: int) -> np.ndarray:
    """Every stored report of a round, ``(k, width)`` in insertion order (audits and re-aggregation only: estimation
    reads the running aggregate)."""
    rows = session.execute(text("SELECT payload FROM reports WHERE campaign_id = :c AND round_index = :r ORDER BY id"),
                           {"c": campaign_id, "r": round_index}).scalars().all()
    return np.frombuffer(b"".join(bytes(r) for r in rows), dtype="<f8").reshape(len(rows), width)
