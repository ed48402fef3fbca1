"""``campaign plan``: a campaign's expected error before any report, spending nothing (docs/campaigns.md, "Planning a
campaign").

The request is a campaign's (protocol, features, target, public table, epsilon, delta, options), validated and built
exactly as :func:`service.campaigns.campaigns.prepare_campaign` builds it for ``campaign create``; nothing is stored.
The protocol's planner (the ``plan`` of its :class:`~service.campaigns.protocols.base.CampaignProtocol`) gives its
closed-form error model (:mod:`estimators.local.planning`) from the spec and the public table alone; from it the plan
predicts the error at ``participants``, the participants needed for ``target_error``, or both, and for a binary target
the public table holds, the AUC range on its rows. Only public tables are read: it costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine

from estimators.base import EstimatorError
from estimators.local.marginals_planning import MAX_SIMULATED
from estimators.local.planning import (
    ABSOLUTE_ERROR,
    AUC_QUANTILES,
    AUC_ROWS,
    RELATIVE_ERROR,
    ErrorModel,
    auc_range,
    binary_labels,
    expected_error,
    participants_for,
)
from service.campaigns.campaigns import PreparedCampaign, get_campaign, prepare_campaign
from service.campaigns.protocols import CAMPAIGN_PROTOCOLS, get_protocol
from service.campaigns.public_tables import get_public_table, public_matrix
from service.campaigns.types import ZERO_COST
from service.errors import InvalidInput
from workloads.local.protocols import ProtocolError


@dataclass(frozen=True)
class CampaignPlan:
    """The answer of ``campaign plan`` (:meth:`to_json`)."""

    protocol: str
    features: tuple[str, ...]
    target: str | None
    epsilon: float
    delta: float
    metric: str
    reference: str
    participants: int | None
    expected_error: float | None
    expected_relative_error: float | None
    standard_errors: dict[str, float] | None
    target_error: float | None
    participants_needed: int | None
    auc: dict[str, float] | None
    auc_note: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: whether the model has reference coefficients: errors relative to them are predicted, and ``target_error`` is
    #: one (absolute otherwise)
    relative_target: bool = False
    #: a marginals campaign: per attribute set, the model's expected L1 error (simulated) and the closed-form error of
    #: the set's own estimate (:mod:`estimators.local.marginals_planning`)
    marginal_errors: dict[str, float] | None = None
    raw_errors: dict[str, float] | None = None
    #: what ``expected_error`` is, in words
    error_formula: str = ABSOLUTE_ERROR

    @property
    def formulas(self) -> dict[str, str | None]:
        """What ``expected_error`` (always absolute) and ``expected_relative_error`` (None without a reference) are."""
        relative = RELATIVE_ERROR if self.relative_target else None
        return {"expected_error": self.error_formula, "expected_relative_error": relative}

    def to_json(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "features": list(self.features), "target": self.target,
                "epsilon": self.epsilon, "delta": self.delta, "metric": self.metric, "formulas": self.formulas,
                "target_error_is": None if self.target_error is None else
                ("relative" if self.relative_target else "absolute"), "reference": self.reference,
                "participants": self.participants, "expected_error": self.expected_error,
                "expected_relative_error": self.expected_relative_error, "standard_errors": self.standard_errors,
                "target_error": self.target_error, "participants_needed": self.participants_needed,
                "auc": self.auc, "auc_note": self.auc_note, "notes": list(self.notes), "cost": dict(ZERO_COST),
                "marginal_errors": self.marginal_errors, "raw_errors": self.raw_errors}


def _planner(protocol: str) -> Any:
    record = get_protocol(protocol)
    if record.plan is None:
        planned = sorted(name for name, r in CAMPAIGN_PROTOCOLS.items() if r.plan is not None)
        raise InvalidInput(f"no planner for protocol {protocol!r} (protocols with one: {planned})", code="no_planner")
    return record.plan


def _count(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be a whole number >= 1, got {value!r}", code="invalid_parameter")
    return value


def _participants(participants: object, options: Mapping[str, object] | None) -> int | None:
    """The n to predict at: ``participants``, or the option ``participants`` (one number; the two differing is a 400
    naming both)."""
    n = _count("participants", participants)
    stated = _count("option participants", (options or {}).get("participants"))
    if n is not None and stated is not None and n != stated:
        raise InvalidInput(f"participants={n} and option participants={stated} differ: they are one number, the "
                           "participants the campaign plans for and the plan predicts at; give it once",
                           code="invalid_parameter")
    return n if n is not None else stated


def _target_error(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InvalidInput(f"target_error must be a positive number, got {value!r}", code="invalid_parameter")
    return float(value)


def _auc(model: ErrorModel, n: int | None, rows: np.ndarray | None, labels: np.ndarray | None,
         target: str | None, table: str | None) -> tuple[dict[str, float] | None, str | None]:
    """The AUC range at ``n`` on the public rows, or why there is none."""
    if target is None:
        return None, "no AUC: the campaign has no target"
    if rows is None or labels is None:
        missing = ("the campaign has no public table" if table is None
                   else f"public table {table!r} has no column {target!r}")
        return None, (f"no AUC: the AUC is evaluated on public rows that hold the target {target!r}, but {missing}; "
                      f"load a public sample with a column {target!r} to predict it")
    if binary_labels(labels) is None:
        return None, f"no AUC: the target {target!r} is not binary in the public table"
    if n is None:
        return None, "no AUC: give the participants to predict it at"
    low, high = AUC_QUANTILES
    return auc_range(model, n, rows, labels), (f"the AUC on {min(rows.shape[0], AUC_ROWS):,} of the public table's "
                                               f"{rows.shape[0]:,} rows, of coefficient "
                                               f"vectors drawn from the predicted error distribution: mean, and "
                                               f"{low:.0%} to {high:.0%} quantiles (low, high); reference: the "
                                               "reference coefficients' own AUC there")


def _in_own_units(prepared: PreparedCampaign, errors: np.ndarray) -> dict[str, float]:
    """Per-coefficient standard errors in the features' own units, as the campaign's fit reports them: a
    coefficient on the transformed feature ``(x - center) / scale`` is ``scale`` times the feature's own."""
    scale = np.asarray(prepared.transform.scale, dtype=float)
    own = errors / scale if scale.shape == errors.shape else errors
    return dict(zip(prepared.names, own.tolist(), strict=True))


def plan_campaign(engine: Engine, protocol: str, features: Sequence[str] | str, target: str | None = None,
                  public: str | None = None, epsilon: object = None, delta: object = None,
                  options: Mapping[str, object] | None = None, participants: object = None,
                  target_error: object = None) -> CampaignPlan:
    """The plan of the campaign this request would create (module docstring); ``participants`` and/or
    ``target_error`` say what to predict.

    ``participants`` is the campaign's own option of that name (every protocol with a planner declares it: the
    participants the campaign plans for), given here or in ``options``: the plan predicts at it and builds the spec
    with it, as ``campaign create`` does, so a default that grows with ``n`` (Alg. 1's norm bound, IHT's iterations) is
    the created campaign's. Both given and different is refused."""
    plan = _planner(protocol)
    n, wanted = _participants(participants, options), _target_error(target_error)
    if n is None and wanted is None:
        raise InvalidInput("give participants (the error expected at N) or target_error (the N needed)",
                           code="invalid_parameter")
    if n is not None:
        options = {**(options or {}), "participants": n}
    prepared = prepare_campaign(engine, protocol, features, target, public, epsilon, delta, options)
    return _plan_prepared(engine, protocol, plan, prepared, public, float(epsilon), float(delta or 0.0), n, wanted)


def plan_stored(engine: Engine, name: str, participants: int) -> CampaignPlan:
    """The plan of the stored campaign ``name`` at ``participants``: its own spec, transform and public table (what
    ``campaign plan`` predicted for it, read again; the console's campaign page). Reads only the public table."""
    campaign = get_campaign(engine, name)
    plan = _planner(campaign.protocol)
    n = _participants(participants, None)
    table = None if campaign.public_table is None else get_public_table(engine, campaign.public_table)
    public_rows = None if table is None else campaign.transform.apply(public_matrix(engine, table, campaign.features))
    prepared = PreparedCampaign(campaign.features, campaign.target, table, campaign.transform, public_rows,
                                campaign.spec)
    return _plan_prepared(engine, campaign.protocol, plan, prepared, campaign.public_table, campaign.epsilon,
                          campaign.delta, n, None)


def _plan_prepared(engine: Engine, protocol: str, plan: Any, prepared: PreparedCampaign, public: str | None,
                   epsilon: float, delta: float, n: int | None, wanted: float | None) -> CampaignPlan:
    """The plan of a prepared campaign: the error model of its protocol's planner ``plan`` at ``n`` and for ``wanted``
    (module docstring)."""
    if get_protocol(protocol).marginals:
        return _plan_marginals(plan, prepared, epsilon, n, wanted)
    target = prepared.target
    labels = None
    if prepared.table is not None and target is not None and target in prepared.table.column_names:
        labels = public_matrix(engine, prepared.table, [target])[:, 0]
    try:
        model = plan(prepared.spec, prepared.public_rows, labels)
        predicted = None if n is None else expected_error(model, n)
        needed = None if wanted is None else participants_for(model, wanted)
        auc, auc_note = _auc(model, n, prepared.public_rows, labels, target, public)
    except (EstimatorError, ProtocolError) as error:
        raise InvalidInput(f"protocol {protocol!r}: {error}", code="invalid_parameter") from None
    notes = list(model.notes)
    if wanted is not None:
        measured = "relative" if model.reference is not None else "absolute (no reference coefficients)"
        notes.append(f"target_error is the {measured} error" + ("" if needed is not None else
                     ": not reached at any participant count (a bias the noise does not cause)"))
    return CampaignPlan(
        protocol, prepared.names, target, epsilon, delta, model.metric, model.reference_source,
        n, None if predicted is None else predicted.error, None if predicted is None else predicted.relative,
        None if predicted is None else _in_own_units(prepared, predicted.standard_errors),
        wanted, needed, auc, auc_note, tuple(notes), relative_target=model.reference is not None)


def _plan_marginals(plan: Any, prepared: PreparedCampaign, epsilon: float, n: int | None,
                    wanted: float | None) -> CampaignPlan:
    """A marginals campaign's plan (:mod:`estimators.local.marginals_planning`): per set, the model's simulated error
    and the closed form of the set's own estimate at ``n``; for ``wanted``, the participants the model needs."""
    try:
        model = plan(prepared.spec, prepared.public_rows, None)
        start = model.curve_start(n or (prepared.public_rows.shape[0] if prepared.public_rows is not None else 10_000))
        errors = None if n is None else model.model_errors(n)
        expected = None if n is None else model.mean_model_error(n)
        raw = None if n is None else model.raw_errors(n)
        needed = None if wanted is None else model.participants_for(wanted, start)
    except (EstimatorError, ProtocolError) as error:
        raise InvalidInput(f"protocol 'marginals': {error}", code="invalid_parameter") from None
    notes = list(model.notes)
    if n is not None and n > MAX_SIMULATED:
        notes.append(f"{n:,} participants is past the {MAX_SIMULATED:,} a plan simulates: the per-set errors are at "
                     f"{MAX_SIMULATED:,}, the mean is extrapolated by a + b / sqrt(n)")
    if raw is not None:
        notes.append(f"each set on its own, without the model (closed form): mean L1 error "
                     f"{float(np.mean(list(raw.values()))):.3g}")
    if wanted is not None:
        notes.append("target_error is the model's mean L1 error over the sets; fitted as a + b / sqrt(n) through "
                     f"simulations at {start:,} and {4 * start:,} participants" + (
                         "" if needed is not None else ": not reached at any participant count (the model's floor)"))
    return CampaignPlan(
        "marginals", prepared.names, None, epsilon, 0.0, "mean L1 error of the attribute sets' normalised "
        "marginals (0 to 2), from the campaign's model", model.basis, n,
        expected, None, None, wanted, needed, None,
        "no AUC: a marginals campaign has no target", tuple(notes), marginal_errors=errors, raw_errors=raw,
        error_formula="the mean over the attribute sets of E ||model's normalised marginal - true proportions||_1")
