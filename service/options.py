"""The declaration of a named option, shared by the three catalogs that take options: the mechanisms
(:mod:`service.mechanisms.registry`), the regression methods (:mod:`service.regression.methods`) and the campaign
protocols (:mod:`service.campaigns.protocols`).

An option is declared once, as an :class:`OptionSpec` on its owner's record, and everything else reads the
declaration: the owner's check of a request, the API's request schema (:mod:`service.api.declared`), the command
line's flags (:mod:`service.cli.options`), the client and the docs' tables of options. :func:`declarations` groups
the public options of several owners by name, the one view the API, the command line and the docs tables share.

It imports nothing numerical, so the command line and the API schema can list options without loading what takes
them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.errors import InvalidInput


@dataclass(frozen=True)
class OptionSpec:
    """One option, declared once: the API's request schema (:mod:`service.api.schemas`), the command line's options
    (:mod:`service.cli.options`), the client and the docs' tables of options all read it.

    * ``kind``: ``int`` or ``float`` (a finite number of that type in the bounds), ``bool`` (true or false), ``str``
      (one of ``choices``), or None: any value (structured options such as AIM's ``initial_cliques`` or a campaign's
      ``feature_bounds``, which the owner validates itself);
    * ``low`` / ``low_open`` / ``high``: the bounds of a number: ``low < value`` (``low_open``) or ``low <= value``,
      and ``value <= high`` when ``high`` is given; the default bound, ``0 < value``, makes the option positive;
      ``low=-math.inf`` admits any finite number;
    * ``default``: the value the owner uses when the option is omitted, when that is one constant; None when a
      rule decides, which ``help`` then states;
    * ``help``: one line for the API's schema, the command line's ``--help`` and the docs;
    * ``internal``: set by the service itself or by in-process callers (tests, benchmarks) only, and offered by
      neither the API nor the command line (the regression's design of the residual plan, AIM's solver iterations).
    """

    name: str
    kind: type | None = None
    help: str = ""
    default: object = None
    low: float = 0
    low_open: bool = True
    high: float | None = None
    choices: tuple[str, ...] = ()
    internal: bool = False

    @property
    def flag(self) -> str:
        """The command line's spelling: ``--max-model-size``."""
        return "--" + self.name.replace("_", "-")

    @property
    def bounds(self) -> str:
        """The allowed values in words (``a positive int``, ``a float >= 0``, ``one of ['sum_var', 'max_var']``)."""
        if self.kind is str:
            return f"one of {list(self.choices)}"
        if self.kind is bool:
            return "true or false"
        if self.kind is None:
            return "a value the mechanism checks"
        joiner = " "
        if self.low == 0 and self.low_open:
            text = f"a positive {self.kind.__name__}"
        elif self.low == -math.inf:
            text = "a finite number"
        else:
            text, joiner = f"a finite number {'>' if self.low_open else '>='} {_number(self.low)}", " and "
        return text if self.high is None else f"{text}{joiner}<= {_number(self.high)}"

    def describe(self, owners: Sequence[str]) -> str:
        """The help of the API's field and the command line's option: ``residual: the plan's loss ... (one of
        sum_var, max_var; default sum_var).``"""
        extras = [*([f"one of {', '.join(self.choices)}"] if self.choices else []),
                  *([f"default {_shown_default(self.default)}"] if self.default is not None else [])]
        return f"{', '.join(owners)}: {self.help}" + (f" ({'; '.join(extras)})" if extras else "") + "."

    def check(self, mechanism: str, value: object) -> None:  # noqa: ARG002
        """Refuse a value outside the declaration, naming the option (:attr:`bounds`)."""
        if self.kind is None:
            return
        if self.kind is str:
            if value not in self.choices:
                raise InvalidInput(f"option {self.name} must be {self.bounds}, got {value!r}", code="invalid_parameter")
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise InvalidInput(f"option {self.name} must be {self.bounds}, got {value!r}", code="invalid_parameter")
            return
        if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                or (self.kind is int and int(value) != value)
                or (value <= self.low if self.low_open else value < self.low)
                or (self.high is not None and value > self.high)):
            raise InvalidInput(f"option {self.name} must be {self.bounds}, got {value!r}", code="invalid_parameter")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shown_default(value: object) -> str:
    """A default as the help shows it: JSON's spelling for a flag (``true``), the value itself otherwise."""
    return str(value).lower() if isinstance(value, bool) else str(value)


#: ``{name: [(declaration, owners declaring it), ...]}``: each distinct declaration of a name with its owners
Declarations = dict[str, list[tuple[OptionSpec, list[str]]]]


def declarations(owners: Mapping[str, Sequence[OptionSpec]]) -> Declarations:
    """The public options of ``owners`` (``{owner: its options}``) by name, in order of first appearance. An option
    several owners share is one ``OptionSpec`` object, listed once with all of them; owners that mean different things
    by one name (a protocol's ``randomizer`` choices) each keep their own declaration. A name is one JSON type
    everywhere (a ``ValueError`` otherwise), so one command-line flag and one API field can carry it."""
    found: Declarations = {}
    for owner, options in owners.items():
        for option in options:
            if option.internal:
                continue
            entries = found.setdefault(option.name, [])
            for declared, takers in entries:
                if declared == option:
                    takers.append(owner)
                    break
            else:
                if entries and entries[0][0].kind is not option.kind:
                    raise ValueError(f"option {option.name} is declared differently by {owner} (kind "
                                     f"{option.kind}) and {entries[0][1]} (kind {entries[0][0].kind})")
                entries.append((option, [owner]))
    return found


def describe(entries: Sequence[tuple[OptionSpec, Sequence[str]]]) -> str:
    """The help of one name: each declaration's :meth:`OptionSpec.describe` with its owners, in order."""
    return " ".join(option.describe(takers) for option, takers in entries)
