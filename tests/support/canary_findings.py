"""What the canary suite found: each canary seen, or 5xx answered, in one channel (an answer's status, body or
headers, a job record, a stored row, a log line, a command's output), with where it was (route or command, caller,
engine variant) and an excerpt, and the report that groups them by engine, channel and route or command.

Every 5xx is a finding: the canary world changes tables where they live (values that break a cast, files of
another schema), which is the table's state and answers a 409 (``value_refused``, ``table_changed``); only an engine
that cannot answer now (a server down) is a ``503 engine_error`` (service/data/engines/base.py ``EngineError``), and
no engine of this world is down.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.canaries import Canaries, Leak

#: At most this many groups are shown in full in an assertion message (all are counted).
SHOWN_GROUPS = 80


@dataclass(frozen=True)
class Finding:
    engine: str  # the engine variant's name ("duckdb glob retyped"), or "-" for none
    channel: str  # "status", "body", "headers", "job record", "stored row", "log", "cli output"
    where: str  # "POST /datasets/{name}/fit/logistic" or "cli: fit logistic"
    caller: str  # the API caller, "operator" for the command line, "-" for a stored record
    what: str  # the request's label
    excerpt: str
    canary: str = ""  # which canary (its label), "" for a finding that is no canary (a 5xx, a crash)
    kind: str = ""  # the canary's kind: "cell" or "location"


@dataclass
class Findings:
    canaries: Canaries
    engines: Mapping[str, str]  # variant (dataset) name -> engine name, for the report
    items: list[Finding] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def engine_of(self, variant: str | None) -> str:
        if variant is None:
            return "-"
        return f"{self.engines.get(variant, '?')}: {variant}"

    def leaks(self, text: str, channel: str, where: str, caller: str, variant: str | None, what: str, *,
              kinds: Iterable[str] = ("cell",)) -> None:
        """Every canary of ``kinds`` in ``text`` (also with line breaks removed: a console wraps long lines)."""
        self.checked[channel] += 1
        seen: set[str] = set()
        candidates = [text, "".join(part.strip() for part in text.splitlines())] if "\n" in text else [text]
        for candidate in candidates:
            for leak in self.canaries.find(candidate, kinds=kinds):
                if leak.canary.label not in seen:
                    seen.add(leak.canary.label)
                    self.items.append(self._finding(leak, channel, where, caller, variant, what))

    def failure(self, channel: str, where: str, variant: str | None, what: str, excerpt: str,
                caller: str = "operator") -> None:
        """Something that is no canary but must not happen (a crash, an undocumented 5xx)."""
        self.items.append(Finding(self.engine_of(variant), channel, where, caller, what, excerpt))

    def _finding(self, leak: Leak, channel: str, where: str, caller: str, variant: str | None,
                 what: str) -> Finding:
        return Finding(self.engine_of(variant), channel, where, caller, f"{what} [spelled {leak.spelling!r}]",
                       leak.excerpt, leak.canary.label, leak.canary.kind)

    def response(self, response: Any, where: str, caller: str, variant: str | None, what: str) -> None:
        """An HTTP answer: its status (no undocumented 5xx), body and headers (no canary, no location)."""
        self.checked["status"] += 1
        status = response.status_code
        if status >= 500:
            self.failure("status", where, variant, what, f"{status} {response.text[:300]}", caller)
        body = response.text
        try:  # the JSON decoded too: an escaped non-ASCII canary is found as itself
            body += "\n" + json.dumps(response.json(), ensure_ascii=False)
        except ValueError:
            pass
        self.leaks(body, "body", where, caller, variant, what, kinds=("cell", "location"))
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        self.leaks(headers, "headers", where, caller, variant, what, kinds=("cell", "location"))

    def report(self) -> str:
        """The findings grouped by (engine, channel, route or command), one example each, largest groups first."""
        groups: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
        for finding in self.items:
            groups[(finding.engine, finding.channel, finding.where)].append(finding)
        lines = [f"{len(self.items)} findings in {len(groups)} groups (engine | channel | route or command); "
                 f"checked {dict(self.checked)}"]
        for (engine, channel, where), found in sorted(groups.items())[:SHOWN_GROUPS]:
            callers = sorted({f.caller for f in found})
            canaries = sorted({f.canary for f in found if f.canary})
            example = next((f for f in found if f.kind == "cell"), found[0])  # a cell's value, where one leaked
            lines.append(f"- {engine} | {channel} | {where}: {len(found)} x, callers {callers}"
                         + (f", canaries {canaries}" if canaries else "")
                         + f"\n    e.g. {example.what}\n    {example.excerpt}")
        if len(groups) > SHOWN_GROUPS:
            lines.append(f"... and {len(groups) - SHOWN_GROUPS} more groups")
        return "\n".join(lines)
