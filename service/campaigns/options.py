"""A campaign's protocol options, checked against its protocol's declaration: what ``--option KEY=VALUE``, the
named flags of ``campaign create`` / ``campaign plan`` and ``POST /campaigns``' ``options`` give.

Each protocol declares its options once (:class:`~service.options.OptionSpec` on its
:class:`~service.campaigns.protocols.base.CampaignProtocol`); :func:`check_options` refuses a value of the wrong type
or out of its bounds, naming the option, and fills in the declared defaults; an undeclared name is refused once the
builder has run (:meth:`OptionValues.refuse_undeclared`, as before the declarations existed). The builder receives
the result, :class:`OptionValues`: it reads checked values only, and reading a name its record does not declare is a
programming error (:class:`UndeclaredOption`), which the protocol contract test turns into a failure.

Options are JSON values (from the API, or the command line's ``--option KEY=VALUE`` read as JSON where the text is
a number or a boolean): ``true`` or ``"0.01"`` where a number belongs is refused naming the option, never read as 1
or 0.01; a JSON ``null`` is the option omitted.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from service.errors import InvalidInput
from service.options import OptionSpec
from workloads.parameters import MAX_COUNT


def invalid(message: str) -> InvalidInput:
    """The 400 ``invalid_parameter`` a campaign request with a bad parameter gets (the message names it)."""
    return InvalidInput(message, code="invalid_parameter")


def _shown(raw: object) -> str:
    """A refused option value as the message shows it: a string says it is one (``"0.01"`` is text, not a number)."""
    return f"the string {raw!r}" if isinstance(raw, str) else repr(raw)


class UndeclaredOption(LookupError):
    """A builder read an option its protocol's record does not declare (a bug of the record, not of the request)."""


def _number(option: OptionSpec, raw: object) -> float:
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
        raise invalid(f"option {option.name} must be a number, got {_shown(raw)}")
    value = float(raw)
    positive = option.low == 0 and option.low_open
    if not np.isfinite(value) or (positive and value <= 0):
        raise invalid(f"option {option.name} must be a finite{' positive' if positive else ''} number, got {raw!r}")
    if not positive and option.low != -math.inf and (value <= option.low if option.low_open else value < option.low):
        raise invalid(f"option {option.name} must be a number {'>' if option.low_open else '>='} {option.low:g}, "
                      f"got {raw!r}")
    if option.high is not None and value > option.high:
        raise invalid(f"option {option.name} must be in ({option.low:g}, {option.high:g}], got {raw!r}")
    return value


def _count(option: OptionSpec, raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | np.integer) or raw < 1:
        raise invalid(f"option {option.name} must be a positive integer, got {_shown(raw)}")
    if raw > MAX_COUNT:  # a typo such as 1e30: it would overflow the database's integer columns
        raise invalid(f"option {option.name} must be at most 2^53 = {MAX_COUNT:,}, got {raw!r}")
    return int(raw)


def read_option(option: OptionSpec, raw: object) -> object:
    """The checked value of ``option`` given ``raw`` (not None), by its declared kind."""
    if option.kind is float:
        return _number(option, raw)
    if option.kind is int:
        return _count(option, raw)
    if option.kind is bool:
        if not isinstance(raw, bool):
            raise invalid(f"option {option.name} must be true or false, got {_shown(raw)}")
        return raw
    if option.kind is str:
        if raw not in option.choices:
            raise invalid(f"option {option.name} must be one of {list(option.choices)}, got {raw!r}")
        return str(raw)
    return raw  # a structured option: its reader checks it, naming it


class OptionValues(Mapping[str, object]):
    """A protocol's checked options: every declared name, with its given value or its declared default (``None``
    when a rule of the builder decides); :attr:`given` holds the names the request stated."""

    def __init__(self, protocol: str, values: Mapping[str, object], given: frozenset[str],
                 undeclared: tuple[str, ...] = ()) -> None:
        self.protocol = protocol
        self._values = dict(values)
        self.given = given
        self.undeclared = undeclared

    def refuse_undeclared(self) -> None:
        """The 400 for a request naming an option the protocol does not declare (refused after the builder ran, so
        that a request's first error is the one about what the builder needs)."""
        if self.undeclared:
            raise invalid(f"option {self.undeclared[0]!r} is not an option of protocol {self.protocol!r} (options: "
                          f"{sorted(self._values)})")

    def __getitem__(self, name: str) -> object:
        if name not in self._values:
            raise UndeclaredOption(f"protocol {self.protocol!r} read option {name!r}, which its record does not "
                                   f"declare (declared: {sorted(self._values)}): add an OptionSpec to its options")
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"OptionValues({self.protocol!r}, {self._values!r})"


def check_options(protocol: str, declared: Sequence[OptionSpec], given: Mapping[str, object] | None) -> OptionValues:
    """``given`` checked against ``declared`` (module docstring): a value of the wrong type or out of bounds is the 400
    ``invalid_parameter`` naming the option; an undeclared name is kept for :meth:`OptionValues.refuse_undeclared`."""
    known = {option.name: option for option in declared}
    stated = {name: value for name, value in (given or {}).items() if value is not None and name in known}
    values = {name: read_option(option, stated[name]) if name in stated else option.default
              for name, option in known.items()}
    return OptionValues(protocol, values, frozenset(stated), tuple(sorted(set(given or {}) - set(known))))
