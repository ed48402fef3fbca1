"""How the console writes numbers and times: a few significant digits, never a float's full repr."""

from __future__ import annotations

import math
from datetime import datetime


def number(value: object, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits (integers as they are; None as a dash)."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def epsilon(value: object) -> str:
    """An epsilon, delta or rho as the ledger states it: up to 6 significant digits."""
    return number(value, 6)


def moment(value: object) -> str:
    """A stored time (ISO 8601, UTC) to the second."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, str):
        return value.replace("T", " ")[:19]
    return "–" if value is None else str(value)
