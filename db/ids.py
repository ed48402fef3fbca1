"""Row ids as callers write them: what text names an id.

Every table's id is an ``INTEGER`` column: 32 bits on PostgreSQL, 64 on SQLite. A number outside ``1..2^31-1``
names no row on either, so it is refused here, before a query, instead of failing in the driver or the server (a
26-digit id overflowed SQLite's ``OverflowError``, and PostgreSQL answers ``integer out of range`` for an id past
2^31-1: both were 500s). An id is written in ASCII decimals only:
``str.isdigit`` also accepts ``'²'`` and ``'٣'`` (so ``/campaigns/%D9%A3`` was campaign 3), and ``int()`` accepts
``' 3'``, ``'+3'`` and ``'3_0'`` (30).
"""

from __future__ import annotations

import re

#: The largest id a table holds on every backend (``INTEGER``: signed 32 bits on PostgreSQL).
MAX_ID = 2**31 - 1

_ASCII_DECIMAL = re.compile(r"[0-9]+")


def parse_id(text: str, low: int = 1) -> int | None:
    """The id ``text`` names: ASCII decimal digits (leading zeros allowed) whose value is in ``low..MAX_ID``; None
    for anything else (checked on the digits first, so a 5,000-digit text is never converted)."""
    if not _ASCII_DECIMAL.fullmatch(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_ID)):
        return None
    value = int(digits)
    return value if low <= value <= MAX_ID else None
