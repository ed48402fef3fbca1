"""Which parts of an answer a marginal release measured, and which are its model's extrapolation.

A release's graphical model answers *any* marginal, but it only learned from the marginals the
release measured. Asked about attributes the release never measured together, the model answers
from its structure alone: independence (a table that is the product of its margins) or a
conditional independence through the cliques it has. Such an answer looks like data and is not, so
every answer says what backs it (:class:`Coverage`), and a regression that needs pairs the release
did not measure is refused unless the caller asks for it (service/regression/fit.py).

What a release measured is its mechanism's rule (``MechanismSpec.measured_cliques``; the rules, one per mechanism,
live beside the mechanisms in :mod:`service.mechanisms.cliques`); :func:`measured_cliques` applies it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from service.mechanisms import registry
from service.mechanisms.cliques import Clique, workload_cliques


def measured_cliques(mechanism: str, params: Mapping[str, object], details: Mapping[str, object],
                     attributes: Sequence[str]) -> list[Clique]:
    """The cliques behind a marginal release's model (module docstring); ``attributes`` are the
    dataset's columns (MST measures every 1-way marginal). Which rule applies is the mechanism's
    (``MechanismSpec.measured_cliques``); a mechanism no longer registered is read by its workload."""
    spec = registry.find(mechanism)
    rule = spec.measured_cliques if spec is not None else workload_cliques
    return sorted({tuple(c) for c in rule(params, details, attributes) if c})


@dataclass(frozen=True)
class Coverage:
    """What backs an answer about ``attributes``: ``measured`` when one measured clique holds them all;
    otherwise the attributes no measurement touched and the pairs no measurement held together (their
    dependence in the answer is the model's assumption, not data)."""

    release_id: int | str  # a release's id, or what else measured (``campaign 'survey'``)
    attributes: tuple[str, ...]
    measured: bool
    measured_cliques: tuple[Clique, ...]  # measured cliques holding two of the attributes (one, for a 1-way)
    unmeasured_attributes: tuple[str, ...]
    unmeasured_pairs: tuple[tuple[str, str], ...]

    @property
    def complete_pairs(self) -> bool:
        """Every attribute and every pair measured (what a regression on second moments needs)."""
        return not self.unmeasured_attributes and not self.unmeasured_pairs

    def warning(self) -> str | None:
        if self.measured:
            return None
        parts = []
        if self.unmeasured_attributes:
            parts.append(f"attribute(s) {list(self.unmeasured_attributes)} were never measured (the model knows "
                         "nothing of them)")
        if self.unmeasured_pairs:
            parts.append(f"pair(s) {[list(p) for p in self.unmeasured_pairs]} were never measured together (their "
                         "dependence is the model's extrapolation, often plain independence)")
        if not parts:
            parts.append("every pair was measured, but never all of them together (their joint dependence is "
                         "the model's extrapolation)")
        source = f"release {self.release_id}" if isinstance(self.release_id, int) else self.release_id
        return f"{source} did not measure {list(self.attributes)}: " + "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"measured": self.measured, "measured_cliques": [list(c) for c in self.measured_cliques],
                "unmeasured_attributes": list(self.unmeasured_attributes),
                "unmeasured_pairs": [list(p) for p in self.unmeasured_pairs], "warning": self.warning()}


def coverage(release_id: int | str, cliques: Iterable[Clique], attributes: Sequence[str]) -> Coverage:
    """What of ``attributes`` (in the order asked) the measured ``cliques`` cover (``release_id``: the release's id,
    or the words naming what else measured them, as a warning says it)."""
    cliques = [tuple(c) for c in cliques]
    sets = [set(c) for c in cliques]
    wanted = set(attributes)
    unmeasured = tuple(a for a in attributes if not any(a in s for s in sets))
    pairs = tuple((a, b) for a, b in itertools.combinations(attributes, 2) if not any({a, b} <= s for s in sets))
    return Coverage(
        release_id=release_id,
        attributes=tuple(attributes),
        measured=any(wanted <= s for s in sets),
        measured_cliques=tuple(c for c, s in zip(cliques, sets, strict=True) if len(s & wanted) >= min(2, len(wanted))),
        unmeasured_attributes=unmeasured,
        unmeasured_pairs=pairs,
    )
