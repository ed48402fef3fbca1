"""Canaries: unique values planted in the private cells of a sensitive table, and the search for them in whatever the
service says (issue 27, finding 1: no engine's message, hence no cell value, ever reaches a caller or a log line).

A canary is a value nobody else writes: a string holding a token ``CANARY-<hex>`` (one plain, one with a comma and
quotes as a cast error would quote it, one with a single quote, one non-ASCII), a number with many digits (inside a
bin of a numeric column, outside a spec's range, in a column the spec does not name), and SSN-like privacy-unit
values. :func:`find` looks for every canary in a text in several spellings: a string as is, JSON-escaped (ASCII or
not), ``repr``-quoted and with SQL's doubled quotes, and its token alone (which survives any quoting and truncation
after it); a number as its ``repr``, ``str``, ``%g``, integer and thousands-separated forms, never inside a longer
number (a noisy count ``37.12351`` is not the canary ``37.1235``).

A *location* canary is a token in the names of the folders and databases the tables live in: where a table lives is
the steward's business, so no HTTP answer or job record may show it (the command line, run by the operator, may).

:class:`LogCapture` keeps every log record of every logger, formatted with its traceback, for the same search.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: How many characters of context a finding shows on each side of the canary.
EXCERPT = 70


@dataclass(frozen=True)
class Canary:
    """One planted value: ``label`` says where it was planted (for the report), ``kind`` is ``cell`` (a private
    cell: never shown to anyone, in any channel) or ``location`` (where a table lives: never shown over HTTP)."""

    label: str
    value: str | float | int
    kind: str = "cell"

    def spellings(self) -> list[str]:
        """The texts that betray this canary, longest first (:func:`find` reports the longest that matched)."""
        value = self.value
        if isinstance(value, str):
            forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1],
                     value.replace("'", "''"), value.replace('"', '""'), token(value)}
        elif isinstance(value, int):
            forms = {str(value), f"{value:,}", f"{value:g}", f"{float(value)!r}", f"{value:.6e}"}
        else:
            forms = {repr(value), str(value), f"{value:g}", f"{value:.6g}", f"{value:.10g}"}
            if float(value).is_integer():
                forms.add(str(int(value)))
        return sorted(forms, key=len, reverse=True)

    def patterns(self) -> list[tuple[str, re.Pattern[str]]]:
        if isinstance(self.value, str):
            return [(s, re.compile(re.escape(s))) for s in self.spellings()]
        # a number is found only where it is not part of a longer number
        return [(s, re.compile(rf"(?<![\d.]){re.escape(s)}(?![\d])")) for s in self.spellings()]


def token(text: str) -> str:
    """The ``CANARY-<hex>`` or ``LOCATION<hex>`` token a canary string starts with (the whole text if none)."""
    found = re.search(r"(CANARY-|LOCATION)[0-9a-f]{10}", text)
    return found.group(0) if found else text


@dataclass(frozen=True)
class Leak:
    """A canary found in one channel's text."""

    canary: Canary
    spelling: str
    excerpt: str


@dataclass(eq=False)
class Canaries:
    """The canaries of one test world, unique per world (``seed``), reproducible."""

    seed: int = 27
    values: list[Canary] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        hexes = iter(lambda: f"{rng.getrandbits(40):010x}", None)
        self.note = self._add("a string in a column the spec does not name", f"CANARY-{next(hexes)}")
        self.diagnosis = self._add("a string with a comma and quotes in a binned number (after attach; an upload's "
                                   "bad cell)", f'CANARY-{next(hexes)} Jane Doe, "HIV+"')
        self.surname = self._add("a string with a single quote in a binned number (after attach)",
                                 f"CANARY-{next(hexes)} O'Brien")
        self.accented = self._add("a non-ASCII string in a column the spec does not name",
                                  f"CANARY-{next(hexes)} Zoë Łódź 東京")
        self.category = self._add("a string where the spec lists the categories (an upload's bad cell)",
                                  f"CANARY-{next(hexes)} unlisted")
        self.unit_text = self._add("a privacy-unit value", f"CANARY-{next(hexes)}-unit")
        self.in_bin = self._add("a raw number inside a bin of a numeric column", 37.1234567)
        self.outside = self._add("an integer outside the spec's range (after attach; an upload's bad cell)",
                                 123456789)
        self.unspecified = self._add("an integer in a column the spec does not name", 987654321)
        self.ssn = self._add("an SSN-like privacy-unit value", f"9{rng.randrange(10, 99)}-{rng.randrange(10, 99)}-"
                                                                f"{rng.randrange(1000, 9999)}")
        self.location = self._add("the folder and database names the tables live in", f"LOCATION{next(hexes)}",
                                  kind="location")

    def _add(self, label: str, value: str | float | int, kind: str = "cell") -> Canary:
        canary = Canary(label, value, kind)
        self.values.append(canary)
        return canary

    def cells(self) -> list[Canary]:
        return [c for c in self.values if c.kind == "cell"]

    def find(self, text: str, *, kinds: Iterable[str] = ("cell",)) -> list[Leak]:
        """Every canary of ``kinds`` in ``text``, once each, with the longest spelling found and its context."""
        pattern, owners = self._pattern(frozenset(kinds))
        if not any(spelling in text for _, spelling in owners.values()):  # most texts: no regex at all
            return []
        found: dict[Canary, tuple[str, re.Match[str]]] = {}
        for match in pattern.finditer(text):
            canary, spelling = owners[match.lastgroup]
            if canary not in found or len(spelling) > len(found[canary][0]):
                found[canary] = (spelling, match)
        leaks = []
        for canary, (spelling, match) in found.items():
            start, end = max(0, match.start() - EXCERPT), match.end() + EXCERPT
            leaks.append(Leak(canary, spelling, text[start:end].replace("\n", "\\n")))
        return leaks

    @functools.cache  # noqa: B019 - one world's canaries, kept as long as the world
    def _pattern(self, kinds: frozenset[str]) -> tuple[re.Pattern[str], dict[str, tuple[Canary, str]]]:
        """One alternation of every spelling of every canary of ``kinds`` (one scan of a text finds them all)."""
        owners: dict[str, tuple[Canary, str]] = {}
        parts = []
        for canary in self.values:
            if canary.kind in kinds:
                for spelling, pattern in canary.patterns():
                    group = f"g{len(owners)}"
                    owners[group] = (canary, spelling)
                    parts.append(f"(?P<{group}>{pattern.pattern})")
        return re.compile("|".join(parts) or "(?!)"), owners


@dataclass(frozen=True)
class LogContext:
    """What was running when a record was emitted: the route or command, the caller, the canary dataset, the call."""

    where: str = "setting up the world"
    caller: str = "-"
    variant: str | None = None
    label: str = ""


class LogCapture(logging.Handler):
    """Every record of every logger, formatted with its traceback, with the :class:`LogContext` it was emitted in
    (:meth:`during`)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.records: list[tuple[LogContext, str]] = []
        self.context = LogContext()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.records.append((self.context, self.format(record)))
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is kept as its raw message
            self.records.append((self.context, f"{record.name}: {record.msg!r} {record.args!r}"))

    @contextmanager
    def during(self, context: LogContext) -> Iterator[None]:
        previous, self.context = self.context, context
        try:
            yield
        finally:
            self.context = previous


class _WarningsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


WARNINGS_ONLY = _WarningsOnly()


def quiet_other_handlers() -> None:
    """The root logger's other handlers (pytest's, which keep a failing test's records to print them) keep only
    warnings and above: at DEBUG, with Spark's py4j, a failure would print megabytes. :class:`LogCapture` still gets
    every record. pytest installs new handlers for each phase of a test: call this again in each."""
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, LogCapture) and WARNINGS_ONLY not in handler.filters:
            handler.addFilter(WARNINGS_ONLY)


@contextmanager
def capturing_logs() -> Iterator[LogCapture]:
    """A :class:`LogCapture` on the root logger at DEBUG for the duration of the block."""
    capture = LogCapture()
    root = logging.getLogger()
    level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    quiet_other_handlers()
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        root.setLevel(level)
