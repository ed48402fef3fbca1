"""A campaign's protocol options, read by type: what ``--option KEY=VALUE`` and ``POST /campaigns``' ``options`` give.

Options are JSON values (from the API, or the command line's ``--option KEY=VALUE`` read as JSON where the text is
a number or a boolean); :class:`Options` reads them by type and refuses unknown keys, every error naming the option.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from service.errors import InvalidInput
from workloads.parameters import MAX_COUNT


def invalid(message: str) -> InvalidInput:
    """The 400 ``invalid_parameter`` a campaign request with a bad parameter gets (the message names it)."""
    return InvalidInput(message, code="invalid_parameter")


def _shown(raw: object) -> str:
    """A refused option value as the message shows it: a string says it is one (``"0.01"`` is text, not a number)."""
    return f"the string {raw!r}" if isinstance(raw, str) else repr(raw)


@dataclass
class Options:
    """Protocol options as JSON values (a number is a JSON number, a flag a JSON boolean, a choice a string; the
    command line turns its ``KEY=VALUE`` text into such values first), each read key remembered, the rest refused.
    ``true`` or ``"0.01"`` where a number belongs is refused naming the option, never read as 1 or 0.01."""

    values: Mapping[str, object]
    used: set[str] = field(default_factory=set)

    def raw(self, key: str) -> object | None:
        """The value as given (``None`` when absent)."""
        self.used.add(key)
        return self.values.get(key)

    def number(self, key: str, default: float | None = None, positive: bool = True) -> float | None:
        raw = self.raw(key)
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
            raise invalid(f"option {key} must be a number, got {_shown(raw)}")
        value = float(raw)
        if not np.isfinite(value) or (positive and value <= 0):
            raise invalid(f"option {key} must be a finite{' positive' if positive else ''} number, got {raw!r}")
        return value

    def count(self, key: str) -> int | None:
        raw = self.raw(key)
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int | np.integer) or raw < 1:
            raise invalid(f"option {key} must be a positive integer, got {_shown(raw)}")
        if raw > MAX_COUNT:  # a typo such as 1e30: it would overflow the database's integer columns
            raise invalid(f"option {key} must be at most 2^53 = {MAX_COUNT:,}, got {raw!r}")
        return int(raw)

    def flag(self, key: str, default: bool) -> bool:
        raw = self.raw(key)
        if raw is None:
            return default
        if not isinstance(raw, bool):
            raise invalid(f"option {key} must be true or false, got {_shown(raw)}")
        return raw

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        raw = self.raw(key)
        if raw is None:
            return default
        if raw not in choices:
            raise invalid(f"option {key} must be one of {list(choices)}, got {raw!r}")
        return str(raw)

    def check_all_used(self, protocol: str) -> None:
        unknown = sorted(set(self.values) - self.used)
        if unknown:
            raise invalid(f"option {unknown[0]!r} is not an option of protocol {protocol!r} "
                           f"(options: {sorted(self.used)})")
