"""The ledger's hash chain: each dataset's entries, oldest first, each hashed with the one before it.

The triggers make ``ledger_entries`` append-only for the service, not for whoever holds the database files: someone
could edit a row with the triggers dropped, or, the real risk (issue 31, point 8), **restore an older backup**, which
forgets the releases made since and so refunds budget already spent on published answers. Each entry therefore
gets a row of ``ledger_hashes`` in the same transaction (append-only too):

    entry_hash = SHA-256( previous_hash | canonical(entry) )

where ``previous_hash`` is the dataset's previous entry's ``entry_hash`` (:data:`GENESIS` for its first) and
``canonical(entry)`` is :func:`canonical` (every column that says what was spent, for what and by whom, as
integers and text; ``created_at`` is left out, as its text form differs between engines and sessions). Each
dataset has its own chain because entries of one dataset are written under that dataset's lock (the accountant's
serialised transaction): its order is the ledger's.

Two checks follow (:func:`verify`): the chain recomputes (no entry was edited, inserted or removed in the middle),
and a **head** published earlier (``marginalia ledger DATASET --head``: the last entry's id and hash) is still in it
(no entry after it was lost: a rolled-back ledger fails here, since its chain, valid on its own, no longer holds the
published entry, or holds another at its id).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select

from db.models import LedgerEntry, LedgerHash

#: The ``previous_hash`` of a dataset's first entry.
GENESIS = "0" * 64
#: The columns of an entry that its hash covers, in this order.
HASHED_COLUMNS = ("id", "dataset_id", "release_id", "campaign_id", "entry", "refunds_entry_id", "mechanism",
                  "epsilon_units", "delta_units", "rho_units", "epsilon_spent_after_units", "epsilon_priced_units",
                  "anchor_alpha_units", "anchor_delta_z_units", "anchor_offset_units", "principal", "note")


def canonical(entry: object) -> str:
    """The entry's :data:`HASHED_COLUMNS` as one line: each value as decimal digits or text, ``~`` for NULL, joined
    by ``|`` after escaping ``\\`` and ``|`` in text (so no two entries share a line)."""
    parts = []
    for column in HASHED_COLUMNS:
        value = getattr(entry, column)
        if value is None:
            parts.append("~")
        elif isinstance(value, int):
            parts.append(str(value))
        else:
            parts.append(str(value).replace("\\", "\\\\").replace("|", "\\|").replace("~", "\\~"))
    return "|".join(parts)


def entry_hash(previous: str, entry: object) -> str:
    """``SHA-256(previous | canonical(entry))`` as 64 hex digits (module docstring)."""
    return hashlib.sha256(f"{previous}|{canonical(entry)}".encode()).hexdigest()


def last_hash(connection: Connection, dataset_id: int) -> str:
    """The ``entry_hash`` of the dataset's newest chained entry (:data:`GENESIS` when it has none)."""
    found = connection.execute(select(LedgerHash.entry_hash).where(LedgerHash.dataset_id == dataset_id)
                               .order_by(LedgerHash.entry_id.desc()).limit(1)).scalar_one_or_none()
    return found or GENESIS


def chain(connection: Connection, entry: LedgerEntry) -> str:
    """Append ``entry``'s link (inside the transaction that wrote it, under its dataset's lock); its hash."""
    previous = last_hash(connection, entry.dataset_id)
    digest = entry_hash(previous, entry)
    connection.execute(LedgerHash.__table__.insert().values(entry_id=entry.id, dataset_id=entry.dataset_id,
                                                            previous_hash=previous, entry_hash=digest))
    return digest


@dataclass(frozen=True)
class Head:
    """The newest entry of a dataset's chain: what a steward publishes so that a rollback can be detected."""

    dataset: str
    entry_id: int
    entry_hash: str
    entries: int

    def to_json(self) -> dict[str, object]:
        return {"dataset": self.dataset, "entry_id": self.entry_id, "entry_hash": self.entry_hash,
                "entries": self.entries}


@dataclass(frozen=True)
class Verdict:
    """What :func:`verify` found: ``problems`` (empty when the chain holds) and the chain's current head."""

    head: Head
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "problems": list(self.problems), "head": self.head.to_json()}


def verify(connection: Connection, dataset: str, dataset_id: int, published: Head | None = None) -> Verdict:
    """Recompute the dataset's chain from its entries and compare, link by link; then check that ``published``
    (a head exported earlier) is one of its links. Each problem names the entry and what differs."""
    table, hashes = LedgerEntry.__table__, LedgerHash.__table__
    entries: Sequence[LedgerEntry] = connection.execute(
        select(table).where(table.c.dataset_id == dataset_id).order_by(table.c.id)).all()
    links = {row.entry_id: row for row in connection.execute(
        select(hashes).where(hashes.c.dataset_id == dataset_id))}
    stored = {entry_id: link.entry_hash for entry_id, link in links.items()}  # links is consumed below
    problems: list[str] = []
    previous = GENESIS
    for entry in entries:
        link = links.pop(entry.id, None)
        if link is None:
            problems.append(f"entry {entry.id} has no link in the chain (added outside the service?)")
            previous = entry_hash(previous, entry)
            continue
        if link.previous_hash != previous:
            problems.append(f"entry {entry.id} follows {link.previous_hash[:12]}..., not the entry before it: an "
                            "entry before it was removed or inserted")
        elif link.entry_hash != entry_hash(previous, entry):
            problems.append(f"entry {entry.id} does not hash to its link: a column of it was changed")
        previous = link.entry_hash  # the stored link: each problem is reported at the entry where it is
    for entry_id in sorted(links):
        problems.append(f"the chain links entry {entry_id}, which the ledger no longer holds (removed?)")
    last = entries[-1].id if entries else 0
    head = Head(dataset, last, previous, len(entries))
    if published is not None:
        if published.entry_id not in {entry.id for entry in entries}:
            problems.append(f"the published head, entry {published.entry_id}, is not in the ledger: the ledger was "
                            f"rolled back (an older backup restored?) to entry {last}; its charges since are lost")
        elif stored.get(published.entry_id) != published.entry_hash:
            problems.append(f"entry {published.entry_id} does not hash to the published head: the ledger up to "
                            "it is not the one published")
    return Verdict(head, tuple(problems))
