"""Which stored release can answer a regression: its mechanism must answer the method, its kind fit the request.

A marginal release must have measured every column and pair among target and features (or the caller allows the
model's extrapolation); a Gram release must hold the request's columns, encoded the same way; a model release
must be of exactly the request's design, epsilon and delta (and settings, for DP-IHT's sparsity, iterations...).
Among the releases that can answer, the best is picked (:func:`find_release`): free, since answering is
post-processing.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import Release
from service.accounting.accountant import release_costs
from service.data.datasets import StoredDataset
from service.mechanisms import gram, registry
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import PrivacyCost
from service.releases.answers import StoredRelease
from service.releases.coverage import Coverage, coverage, measured_cliques
from workloads.domain import Domain
from workloads.encodings import DesignEncoding, EncodingError


def cannot_answer(candidate: StoredRelease, domain: Domain, design: DesignEncoding, method: str,
                  allow_unmeasured: bool = False) -> str | None:
    """Why ``candidate`` cannot answer ``method`` on ``design`` (None when it can). Whether its mechanism's releases
    answer ``method`` at all is the registry's (``MechanismSpec.answers``); whether this one fits the request is its
    kind's check. A marginal release that did not measure every column and pair the regression reads cannot,
    unless ``allow_unmeasured``."""
    if candidate.status != "complete":
        return f"it is {candidate.status}"
    spec = registry.find(candidate.mechanism)
    if spec is None or method not in spec.answers:
        return (f"it is a {candidate.kind} release by {candidate.mechanism}, which cannot answer {method} (releases "
                f"by {', '.join(mechanisms_answering(method))} can)")
    check = _KIND_CHECKS.get(candidate.kind)
    return None if check is None else check(candidate, domain, design, allow_unmeasured)


def mechanisms_answering(method: str) -> list[str]:
    """The registered mechanisms whose releases answer ``method``."""
    return [spec.name for spec in registry.specs() if method in spec.answers]


def _unmeasured(candidate: StoredRelease, domain: Domain, design: DesignEncoding, allow_unmeasured: bool) -> str | None:
    gaps = _coverage(candidate, domain, design)
    if gaps.complete_pairs or allow_unmeasured:
        return None
    return (f"{gaps.warning()}; the regression reads every column and pair among target and features, so its "
            "answer would be the model's extrapolation. Fit anyway with allow_unmeasured, or let a new release measure "
            "them")


def _gram_mismatch(candidate: StoredRelease, domain: Domain, design: DesignEncoding,
                   allow_unmeasured: bool) -> str | None:  # noqa: ARG001
    try:
        released = gram.column_design(domain, candidate.params["columns"])  # type: ignore[arg-type]
    except (EncodingError, KeyError, TypeError) as exc:
        return f"its column description cannot be read ({exc})"
    encodings = {enc.attribute: enc for enc in released.attribute_encodings}
    for enc in design.attribute_encodings:
        other = encodings.get(enc.attribute)
        if other is None:
            return f"it has no column {enc.attribute!r}"
        if other.kind != enc.kind or other.matrix.shape != enc.matrix.shape or not np.array_equal(other.matrix,
                                                                                                 enc.matrix):
            return f"its column {enc.attribute!r} is encoded {other.kind}, the request needs {enc.kind}"
    if design.intercept and not released.intercept:
        return "it has no constant column (it was made for a fit without intercept)"
    return None


def _model_mismatch(candidate: StoredRelease, domain: Domain, design: DesignEncoding,  # noqa: ARG001
                    allow_unmeasured: bool) -> str | None:  # noqa: ARG001
    stored = candidate.params.get("design")
    wanted = design.to_dict()
    if not isinstance(stored, dict):
        return "it has no design description"
    for key in ("target", "task", "intercept", "encodings", "positive_level"):
        if stored.get(key) != wanted[key]:
            return f"it was fitted with {key}={stored.get(key)!r}, the request has {wanted[key]!r}"
    if sorted(stored.get("features") or []) != sorted(wanted["features"]):  # type: ignore[arg-type]
        return f"it was fitted on features {stored.get('features')}, the request has {wanted['features']}"
    return None


def _candidates(engine: Engine, dataset: StoredDataset, kinds: set[str]) -> list[StoredRelease]:
    with transaction(engine) as session:
        rows = session.execute(
            select(Release.id, Release.kind, Release.mechanism, Release.status, Release.params_json,
                   Release.details_json)
            .where(Release.dataset_id == dataset.id, Release.kind.in_(kinds), Release.status == "complete",
                   Release.seeded.is_(False))
            .order_by(Release.id)
        ).all()
    # what matching reads of a release: no payload (it is read only for the release that answers)
    return [StoredRelease(r[0], dataset, r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), None) for r in rows]


def _strength(cost: PrivacyCost) -> Fraction:
    """A release's budget in zCDP terms (pure epsilon counts as epsilon^2/2, Bun & Steinke 2016 Prop. 1.4): more
    budget, less noise, a better answer."""
    return cost.rho + cost.epsilon * cost.epsilon / 2


def _coverage(candidate: StoredRelease, domain: Domain, design: DesignEncoding) -> Coverage:
    """What ``candidate`` (a marginal release) measured of the regression's target and features."""
    cliques = measured_cliques(candidate.mechanism, candidate.params, candidate.details, domain.names)
    return coverage(candidate.id, cliques, [*design.features, design.target])


def find_release(engine: Engine, dataset: StoredDataset, design: DesignEncoding, method: str,
                 epsilon: Fraction | None = None, delta: Fraction | None = None,
                 allow_unmeasured: bool = False, settings: dict[str, object] | None = None) -> int | None:
    """The stored complete release that answers ``method`` on ``design`` best, or None. Seeded releases (made with
    a known seed for tests and benchmarks, no privacy) are never picked.

    Marginal methods: releases that measured every column and pair among target and features (with
    ``allow_unmeasured`` any marginal release, those that did first), then the one with the largest
    budget, then the newest. AdaSSP: the Gram release with the largest budget, then the newest.
    ObjPert, DP-IHT: the newest model release of this design at exactly ``epsilon`` and ``delta`` and with
    exactly these (resolved) ``settings`` (the model *is* the answer, so its privacy parameters and its settings are
    part of the question)."""
    kinds = {spec.kind for spec in registry.specs() if method in spec.answers}
    found = [c for c in _candidates(engine, dataset, kinds)
             if cannot_answer(c, dataset.domain, design, method, allow_unmeasured) is None]
    # a released model *is* the answer, so its privacy parameters are part of the question
    found = [c for c in found if c.kind != ReleaseKind.MODEL or _same_request(c, epsilon, delta, settings or {})]
    if not found:
        return None
    costs = release_costs(engine, [c.id for c in found])

    def rank(c: StoredRelease) -> tuple[bool, Fraction, int]:
        covers = c.kind == ReleaseKind.MARGINALS and _coverage(c, dataset.domain, design).complete_pairs
        return covers, _strength(costs[c.id]), c.id

    return max(found, key=rank).id


_KIND_CHECKS = {ReleaseKind.MARGINALS: _unmeasured, ReleaseKind.GRAM: _gram_mismatch,
                ReleaseKind.MODEL: _model_mismatch}


def _same_request(candidate: StoredRelease, epsilon: Fraction | None, delta: Fraction | None,
                  settings: dict[str, object]) -> bool:
    requested = candidate.params.get("requested") or {}
    return (epsilon is not None and delta is not None and isinstance(requested, dict)
            and requested.get("epsilon") == float(epsilon) and requested.get("delta") == float(delta)
            and (candidate.params.get("settings") or {}) == settings)
