"""Counting what a bound clipped on the device (issue 20, section 3): a local warning, never sent to the server.

The randomizers clip a participant's values into public bounds before adding noise (a feature row scaled into the
ball ``||x|| <= norm_bound``, a label into ``[-B, B]``, a value into ``[lower, upper]``, a residual into ``[-c, c]``).
Clipping is silent in the estimate (it biases it towards 0), so the device counts, per bound, how many of the rows it
was given were changed by it (:meth:`workloads.local.protocols.ProtocolSpec.clipped`), from the same values and the
same public bounds the randomizer uses. The count is a function of her private values: it stays on the device (the
simulator's summary, the client's ``UserWarning``) and is never part of a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Clipped:
    """``rows`` of the rows given had ``what`` beyond the bound ``name`` (the spec's parameter) ``= value``."""

    name: str
    value: float
    rows: int
    what: str

    def to_json(self) -> dict[str, Any]:
        return {"bound": self.name, "value": self.value, "rows": self.rows, "what": self.what}

    def sentence(self) -> str:
        return f"{self.rows:,} row(s) had {self.what} beyond {self.name} = {self.value:g} and were clipped to it"


def count(name: str, value: float, beyond: np.ndarray, what: str) -> tuple[Clipped, ...]:
    """``(Clipped(...),)`` when any entry of the boolean ``beyond`` (one per row) is set, else ``()``."""
    rows = int(np.count_nonzero(np.atleast_1d(beyond)))
    return (Clipped(name, float(value), rows, what),) if rows else ()


def norms(x: np.ndarray, norm: str = "l2") -> np.ndarray:
    """The l2 (or l1) norm of each row of ``x`` (``(p,)`` or ``(k, p)``)."""
    return np.linalg.norm(np.atleast_2d(np.asarray(x, dtype=float)), ord=2 if norm == "l2" else 1, axis=-1)


def merge(totals: dict[str, Clipped], found: tuple[Clipped, ...]) -> dict[str, Clipped]:
    """Running totals per bound name (a simulator's batches)."""
    for item in found:
        before = totals.get(item.name)
        totals[item.name] = item if before is None else Clipped(item.name, item.value, before.rows + item.rows,
                                                                item.what)
    return totals
