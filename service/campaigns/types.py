"""The campaign value types: what a campaign is (:class:`CampaignInfo`, its :class:`RoundInfo` and public
:class:`Transform`), what a protocol's builder sees (:class:`CampaignRequest`) and what a fit answers
(:class:`CampaignFit`). Plain frozen dataclasses with their JSON forms; no database, no HTTP."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from estimators.local.influence import Influence
from estimators.local.quality import PredictionCheck, Quality
from service.campaigns.options import OptionValues
from service.errors import Conflict
from workloads.local.protocols import ProtocolSpec, RoundState

#: what a fit from a campaign costs: nothing (post-processing of the stored aggregates)
ZERO_COST = {"epsilon": 0.0, "delta": 0.0, "rho": 0.0}


@dataclass(frozen=True)
class Transform:
    """``x' = (x - center) / scale`` per feature: public, applied on the device before randomizing."""

    center: tuple[float, ...]
    scale: tuple[float, ...]
    source: str  # "identity", "public table NAME", "stated bounds"

    def apply(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=float) - np.asarray(self.center)) / np.asarray(self.scale)

    def to_json(self) -> dict[str, Any]:
        return {"center": list(self.center), "scale": list(self.scale), "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transform:
        return cls(tuple(data["center"]), tuple(data["scale"]), data["source"])

    @classmethod
    def identity(cls, dimension: int) -> Transform:
        return cls((0.0,) * dimension, (1.0,) * dimension, "identity")


@dataclass(frozen=True)
class RoundInfo:
    index: int
    group: str
    epsilon: float
    delta: float
    expected: int | None
    status: str
    reports: int
    state: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"round": self.index, "group": self.group, "epsilon": self.epsilon, "delta": self.delta,
                "expected_reports": self.expected, "status": self.status, "reports": self.reports,
                "state": self.state}


@dataclass(frozen=True)
class CampaignInfo:
    id: int
    name: str
    protocol: str
    spec: ProtocolSpec
    features: tuple[str, ...]
    target: str | None
    public_table: str | None
    transform: Transform
    epsilon: float
    delta: float
    status: str
    rounds: tuple[RoundInfo, ...]
    created_at: datetime
    closed_at: datetime | None
    seeded: bool = False  # it received reports of a seeded simulation: it answers nothing over HTTP

    @property
    def open_round(self) -> RoundInfo | None:
        return next((r for r in self.rounds if r.status == "open"), None)

    def round_state(self, index: int) -> RoundState:
        state = self.rounds[index].state
        if state is None:
            raise Conflict(f"round {index} of campaign {self.name!r} has no public state yet (an earlier round is "
                           "still open)", code="round_pending")
        return RoundState.from_json(state)

    def _round_json(self, info: RoundInfo) -> dict[str, Any]:
        """A round as JSON, with the report schema of a round whose state is published: the grid step, range and
        norm every report must meet (``docs/privacy.md`` 8.7), the same the device derives from the spec."""
        out = info.to_json()
        if info.state is not None:
            out["report_schema"] = self.spec.report_schema(info.index, self.round_state(info.index)).to_json()
        return out

    def to_json(self, hide_seeded: bool = False) -> dict[str, Any]:
        """The campaign; with ``hide_seeded`` (HTTP), a seeded campaign's published states and the report schemas
        derived from them are left out (they are computed from reports whose noise its seed reproduces)."""
        rounds = [self._round_json(r) for r in self.rounds]
        if self.seeded and hide_seeded:
            rounds = [{**{k: v for k, v in r.items() if k != "report_schema"}, "state": None} for r in rounds]
        body = {"id": self.id, "name": self.name, "protocol": self.protocol, "status": self.status,
                "features": list(self.features), "target": self.target, "public_table": self.public_table,
                "epsilon": self.epsilon, "delta": self.delta, "spec": self.spec.to_json(),
                "transform": self.transform.to_json(), "rounds": rounds,
                "reports": sum(r.reports for r in self.rounds), "created_at": self.created_at.isoformat(),
                "closed_at": None if self.closed_at is None else self.closed_at.isoformat()}
        if self.seeded:
            body["seeded"] = True
        return body

    def refuse_if_seeded(self) -> None:
        """409 ``seeded_campaign``: what the HTTP API answers for a seeded campaign's state, reports and fits."""
        if self.seeded:
            raise Conflict(f"campaign {self.name!r} received reports of a seeded simulation (tests and benchmarks): "
                           "whoever knows the seed can remove their noise, so it answers nothing through the API",
                           code="seeded_campaign")


@dataclass(frozen=True)
class CampaignRequest:
    """What a builder sees. ``options``: the protocol's options, checked against its declaration with the defaults
    filled in; ``public_rows``: the public table's feature columns, already transformed (centred and scaled as
    participants' features will be), or ``None`` without a public table; ``public_sizes``: the sizes of its coded
    columns among the features (a ``marginals`` campaign's domain)."""

    features: tuple[str, ...]
    target: str | None
    epsilon: float
    delta: float
    options: OptionValues
    public_rows: np.ndarray | None
    #: the public table's coded columns among the features and their sizes (``{}`` for none; ``None`` without a table)
    public_sizes: Mapping[str, int] | None = None


@dataclass(frozen=True)
class CampaignFit:
    """A fit's answer; ``to_json`` has the shape of ``marginalia fit``'s (``coefficients`` with ``(intercept)``,
    ``cost``) plus the campaign that answered."""

    campaign: str
    protocol: str
    model: str
    kind: str  # "regressor", "classifier" or "mean"
    target: str | None
    feature_names: tuple[str, ...]
    coefficients: dict[str, float]
    reports: int
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: the signal-to-noise verdict from ``coefficients`` and ``standard_errors`` (``estimators.local.quality``); set
    #: by ``service.campaigns.estimates.fit_campaign``
    quality: Quality | None = field(default=None, kw_only=True)
    #: how far one more accepted report can move the estimate (``estimators.local.influence.Influence``), in the
    #: units of ``coefficients``
    influence: Influence | None = None
    standard_errors: dict[str, float] | None = None
    #: the fitted predictor over the public rows (AUC on public labels, the reports' dependence test, Wald test): set
    #: by a protocol whose fit has a covariance and either a public binary target or a dependence test (``glm``); the
    #: verdict then judges the predictions
    predictions: PredictionCheck | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "protocol": self.protocol, "model": self.model, "task": self.model,
                "kind": self.kind, "method": f"{self.protocol} (local DP)", "target": self.target,
                "quality": None if self.quality is None else self.quality.to_json(),
                "feature_names": list(self.feature_names), "coefficients": dict(self.coefficients),
                "cost": dict(ZERO_COST), "reports": self.reports, "details": self.details, "notes": list(self.notes),
                "influence": None if self.influence is None else self.influence.to_json(),
                "standard_errors": None if self.standard_errors is None else dict(self.standard_errors)}
