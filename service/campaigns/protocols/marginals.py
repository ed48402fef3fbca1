"""``marginals``: each participant reports one attribute set's cell of her record through a frequency oracle; the
campaign answers every marginal and synthetic rows (issue 33; docs/campaigns.md, docs/privacy.md 8.10).

Build: the features are the attributes (categorical codes); their sizes come from option ``domain`` or, for the
columns it leaves out, from the ``--public`` table's coded columns (a table loaded with ``--bins`` or ``--domain``);
the attribute sets are option ``sets``, every ``way``-subset, or by default the planned split for the ``participants``
(:func:`workloads.local.protocols.marginals.planned_sets`: every attribute, and the pairs few enough cells to be
measured); the oracle is option ``oracle`` (``auto``: the least
variance per set). Pure epsilon (``delta`` 0), no target, no transform (codes are not centred). Answers: not a fit but
marginals and synthetic rows, from one graphical model (:mod:`service.campaigns.marginal_answers`). Plan:
:func:`estimators.local.marginals_planning.marginals_error_model`.

Its record and options: :mod:`service.campaigns.protocols.catalog`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.campaigns.options import invalid
from service.campaigns.types import CampaignRequest
from workloads.local.protocols import ProtocolSpec
from workloads.local.protocols.marginals import MarginalsSpec, all_sets, planned_sets


def _domain_option(raw: object, features: tuple[str, ...]) -> dict[str, int]:
    """Option ``domain``: ``{"A": 16, ...}`` (API) or ``A=16;B=32`` (command line), sizes of named features."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        pairs = [part.split("=", 1) for part in raw.split(";") if part.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise invalid(f"option domain must read A=size;B=size, got {raw!r}")
        raw = {name.strip(): value.strip() for name, value in pairs}
    if not isinstance(raw, Mapping):
        raise invalid(f"option domain must map attributes to their sizes, got {type(raw).__name__}")
    sizes = {}
    for name, value in raw.items():
        if name not in features:
            raise invalid(f"option domain names {name!r}, which is not among the features {list(features)}")
        try:
            size = int(value)
        except (TypeError, ValueError):
            size = 0
        if isinstance(value, bool) or size < 1 or str(size) != str(value).strip():
            raise invalid(f"option domain: the size of {name!r} must be a positive whole number, got {value!r}")
        sizes[str(name)] = size
    return sizes


def _sets_option(raw: object, features: tuple[str, ...]) -> tuple[tuple[int, ...], ...] | None:
    """Option ``sets``: ``[["A", "B"], ["C"]]`` (API) or ``A,B;C`` (command line), as attribute indices."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [[name.strip() for name in part.split(",") if name.strip()] for part in raw.split(";") if part.strip()]
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes) or not raw:
        raise invalid("option sets must list attribute sets, e.g. [[\"A\", \"B\"], [\"C\"]] or A,B;C")
    sets = []
    for group in raw:
        if not isinstance(group, Sequence) or isinstance(group, str | bytes) or not group:
            raise invalid(f"option sets: each set must list attributes, got {group!r}")
        unknown = [name for name in group if name not in features]
        if unknown:
            raise invalid(f"option sets names {unknown[0]!r}, which is not among the features {list(features)}")
        sets.append(tuple(sorted(features.index(name) for name in group)))
    return tuple(sets)


def build(request: CampaignRequest) -> ProtocolSpec:
    features, options = request.features, request.options
    sizes = {**(request.public_sizes or {}), **_domain_option(options["domain"], features)}
    missing = [name for name in features if name not in sizes]
    if missing:
        raise invalid(f"marginals needs every attribute's number of codes: {missing} have none (option domain, "
                      "A=size;B=size, or a public table whose columns are coded, parameter public)")
    sets = _sets_option(options["sets"], features)
    if sets is not None and options["way"] is not None:
        raise invalid("options sets and way exclude each other: give the attribute sets, or their size")
    shape = tuple(sizes[name] for name in features)
    if sets is None and options["way"] is not None:
        sets = all_sets(len(features), options["way"])
    if sets is None:
        if options["participants"] is None:
            raise invalid("marginals chooses its attribute sets for the participants it plans for: give option "
                          "participants (or choose the sets yourself: option way, or option sets)")
        sets = planned_sets(shape, request.epsilon, options["participants"], options["oracle"])
    return MarginalsSpec(attributes=features, sizes=shape, sets=sets, epsilon=request.epsilon,
                         oracle=options["oracle"], participants=options["participants"])
