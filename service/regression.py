"""Private regressions answered from releases: DD-SSP, AdaSSP, ObjPert and AIM-Synth (paper 002) as a service.

:func:`fit` answers "regress ``target`` on ``features`` of dataset ``name`` with ``method``":

1. the design (which columns, how encoded, intercept or not) is built and checked, before anything else;
2. with ``release_id`` that release must be able to answer; without it, a stored *complete* release that can
   answer is looked for (free); only when none exists is a new release made, through the release engine and
   the accountant (:mod:`service.releases`), and charged;
3. the answer is post-processing of the release (no rows are read, no privacy is spent):

   ========== ==================================================== =============================================
   method     release that answers                                 answer
   ========== ==================================================== =============================================
   dd-ssp     any complete marginal release (its graphical model   ``Z^T Z`` from the model's 1- and 2-way
              answers every marginal); preferred: one whose         marginals (Prop. 3.2), then Alg. 1 (linear) or
              workload covers all pairs among target and features   Prop. 3.4 (logistic)
   aim-synth  the same                                             the non-private fit on synthetic rows drawn
                                                                   from the model (Sec. 3.4 / 4)
   adassp     a Gram release (:mod:`service.mechanisms.gram`)      Alg. 2 from a principal submatrix: one release
              whose columns cover target and features, encoded     answers every linear regression among its
              the same way                                         columns, any target
   objpert    a model release (:mod:`service.mechanisms.objpert`) the released model itself
              of exactly this design, epsilon and delta
   ========== ==================================================== =============================================

New releases: dd-ssp / aim-synth measure all pairs among target and features with AIM (``mechanism``; MST and the
Gaussian mechanism are accepted for tests and small tables), charged the rho that (epsilon, delta) converts to;
adassp releases the whole noisy ``Z^T Z`` of the encoded target and features, charged the same converted rho
(the zCDP calibration: the paper's printed (eps, delta) calibration is not used, see docs/privacy.md, section 8.5);
objpert is charged (epsilon, delta) itself.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from sqlalchemy import Engine, select

from db.engine import transaction
from db.models import Release
from estimators.base import BinaryClassifier, EstimatorError, LinearScoreModel
from estimators.central.linear import AdaSSPLinearRegression, DDSSPLinearRegression
from estimators.central.logistic import DDSSPLogisticRegression
from estimators.central.reference import fit_on_rows
from estimators.central.sufficient_stats import gram_from_marginals
from estimators.graphical import mbi_adapter
from estimators.graphical.mbi_adapter import Model
from service import accountant, releases
from service.coverage import Coverage, coverage, measured_cliques
from service.datasets import StoredDataset, get_dataset
from service.errors import InvalidInput, ServiceError
from service.mechanisms import gram
from service.mechanisms.base import MechanismError, Progress, no_progress
from service.mechanisms.objpert import ModelPayload, ObjPertRelease
from service.privacy.cost import PrivacyCost, check_amount, exact
from service.recovery import release_costs
from workloads import parameters
from workloads.domain import Domain
from workloads.encodings import TASKS, DesignEncoding, EncodingError
from workloads.marginals import canonical

METHODS = ("dd-ssp", "adassp", "objpert", "aim-synth")
METHOD_TASKS = {"dd-ssp": TASKS, "aim-synth": TASKS, "adassp": ("linear",), "objpert": ("logistic",)}
MARGINAL_METHODS = ("dd-ssp", "aim-synth")
MARGINAL_MECHANISMS = ("aim", "mst", "gaussian")
DEFAULT_MARGINAL_MECHANISM = "aim"
#: What a fit answered by an objective-perturbation model reports: public calibration constants only (no solver
#: diagnostics: whether and how fast the solver converged depends on the data).
PUBLIC_OBJPERT_DETAILS = ("regularization", "noise_std", "output_noise_std", "gradient_tolerance")


class RegressionInputError(InvalidInput, ValueError):
    """A fit request that cannot be served as asked; the message names the parameter."""

    code = "invalid_parameter"


class ReleaseCannotAnswer(RegressionInputError):
    code = "release_cannot_answer"


# the answer ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FitOutcome:
    """A fitted model, the release that answered it, and what this call cost (zero when a release was reused)."""

    model: LinearScoreModel
    method: str
    dataset: str
    design: DesignEncoding
    release_id: int
    release_kind: str
    release_mechanism: str
    reused: bool
    cost: PrivacyCost
    release_cost: PrivacyCost
    details: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    budget: accountant.BudgetEffect | None = None  # what a new release cost in the budget's epsilon (None: reused)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(self.model.feature_names_)

    @property
    def coefficients(self) -> dict[str, float]:
        """``{column: coefficient}``, the intercept (when fitted) under ``"(intercept)"``, on the encoded scale."""
        values = self.model.coefficients()
        if not self.design.intercept:
            values = {k: v for k, v in values.items() if k in self.feature_names}
        return values

    def to_json(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "task": self.design.task,
            "method": self.method,
            "target": self.design.target,
            "features": list(self.design.features),
            "intercept": self.design.intercept,
            "release_id": self.release_id,
            "reused": self.reused,
            "cost": self.cost.to_json(),
            "release": {"kind": self.release_kind, "mechanism": self.release_mechanism,
                        "cost": self.release_cost.to_json()},
            "feature_names": list(self.feature_names),
            "coefficients": self.coefficients,
            "encodings": self.design.to_dict()["encodings"],
            "details": self.details,
            "notes": list(self.notes),
            **({"budget": self.budget.to_json()} if self.budget is not None else {}),
        }


class ReleasedLogisticModel(BinaryClassifier):
    """A logistic model read back from a model release (the payload of an objective-perturbation release)."""

    def __init__(self, payload: ModelPayload, design: DesignEncoding) -> None:
        weights = dict(zip(payload.feature_names, payload.coef, strict=True))
        theta = [weights[name] for name in design.feature_names]
        if design.intercept:
            theta = [float(payload.intercept or 0.0), *theta]
        self._store(np.asarray(theta, dtype=float), design.feature_names, design.intercept)


# the design ---------------------------------------------------------------------------------------
def build_design(
    domain: Domain,
    task: str,
    target: str,
    features: Sequence[str] | None = None,
    categorical: Sequence[str] | None = None,
    intercept: bool = True,
) -> DesignEncoding:
    """The encoded design of a request. ``features`` default to every other column; ``categorical`` (when given)
    names the features encoded as reduced one-hot, all other features scalar; without it the dataset's column
    kinds decide (categorical -> reduced one-hot, ordinal -> scalar). The target is scalar in [-1, 1] (linear)
    or {-1, +1} (logistic, 2 levels only)."""
    if task not in TASKS:
        raise RegressionInputError(f"task must be one of {list(TASKS)}, got {task!r}")
    if not isinstance(target, str) or target not in domain:
        raise RegressionInputError(f"target {target!r} is not a column of the dataset; columns: {list(domain.names)}")
    if features is not None:
        if isinstance(features, str):
            raise RegressionInputError(f"features must be a list of columns, got the string {features!r}")
        features = list(features)
        unknown = [f for f in features if f not in domain]
        if unknown:
            raise RegressionInputError(
                f"features {unknown} are not columns of the dataset; columns: {list(domain.names)}"
            )
        if target in features:
            raise RegressionInputError(f"features must not contain the target {target!r}")
    if categorical is not None:
        unknown = [c for c in categorical if c not in domain]
        if unknown:
            raise RegressionInputError(f"categorical names {unknown}, which are not columns of the dataset")
    if task == "logistic" and domain.size(target) != 2:
        raise RegressionInputError(
            f"target {target!r} has {domain.size(target)} levels; logistic regression needs a binary target (2 levels)"
        )
    names = features if features is not None else [n for n in domain.names if n != target]
    overrides = None
    if categorical is not None:
        chosen = set(categorical)
        overrides = {f: ("reduced_one_hot" if f in chosen else "scalar") for f in names}
    try:
        return DesignEncoding(domain, names, target, task, intercept, overrides=overrides)
    except EncodingError as exc:
        raise RegressionInputError(str(exc)) from None


def _budget(epsilon: object, delta: object) -> tuple[Fraction, Fraction]:
    if epsilon is None or delta is None:
        raise RegressionInputError("give epsilon and delta for a new release (or the id of a release to answer from)")
    try:
        check_amount(exact(parameters.validate_epsilon(epsilon, "epsilon")), "epsilon")
        if parameters.validate_delta(delta, "delta") == 0:
            raise parameters.PrivacyParameterError(
                "delta must be > 0: every regression release here adds Gaussian noise")
        return exact(epsilon), exact(delta)
    except (parameters.PrivacyParameterError, TypeError, ValueError) as exc:
        raise RegressionInputError(str(exc)) from None


# which release can answer -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Candidate:
    id: int
    kind: str
    mechanism: str
    status: str
    params: dict[str, object]
    details: dict[str, object]


def _cannot_answer(candidate: _Candidate, domain: Domain, design: DesignEncoding, method: str,
                   allow_unmeasured: bool = False) -> str | None:
    """Why ``candidate`` cannot answer ``method`` on ``design`` (None when it can). A marginal release
    that did not measure every column and pair the regression reads cannot, unless ``allow_unmeasured``."""
    if candidate.status != "complete":
        return f"it is {candidate.status}"
    if method in MARGINAL_METHODS:
        if candidate.kind != "marginals":
            return f"it is a {candidate.kind} release, not a marginal release"
        gaps = _coverage(candidate, domain, design)
        if gaps.complete_pairs or allow_unmeasured:
            return None
        return (f"{gaps.warning()}; the regression reads every column and pair among target and features, so its "
                "answer would be the model's extrapolation. Fit anyway with --allow-unmeasured "
                "(allow_unmeasured=True), or let a new release measure them")
    if method == "adassp":
        if candidate.kind != "gram":
            return f"it is a {candidate.kind} release, not a Gram (AdaSSP) release"
        return _gram_mismatch(candidate.params, domain, design)
    if candidate.kind != "model" or candidate.mechanism != "objpert":
        return f"it is a {candidate.kind} release by {candidate.mechanism}, not an objective-perturbation model"
    return _model_mismatch(candidate.params, design)


def _gram_mismatch(params: dict[str, object], domain: Domain, design: DesignEncoding) -> str | None:
    try:
        released = gram.column_design(domain, params["columns"])  # type: ignore[arg-type]
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


def _model_mismatch(params: dict[str, object], design: DesignEncoding) -> str | None:
    stored = params.get("design")
    wanted = design.to_dict()
    if not isinstance(stored, dict):
        return "it has no design description"
    for key in ("target", "task", "intercept", "encodings", "positive_level"):
        if stored.get(key) != wanted[key]:
            return f"it was fitted with {key}={stored.get(key)!r}, the request has {wanted[key]!r}"
    if sorted(stored.get("features") or []) != sorted(wanted["features"]):  # type: ignore[arg-type]
        return f"it was fitted on features {stored.get('features')}, the request has {wanted['features']}"
    return None


def _candidates(engine: Engine, dataset: StoredDataset, kind: str) -> list[_Candidate]:
    with transaction(engine) as session:
        rows = session.execute(
            select(Release.id, Release.kind, Release.mechanism, Release.status, Release.params_json,
                   Release.details_json)
            .where(Release.dataset_id == dataset.id, Release.kind == kind, Release.status == "complete",
                   Release.seeded.is_(False))
            .order_by(Release.id)
        ).all()
    return [_Candidate(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5])) for r in rows]


def _strength(cost: PrivacyCost) -> Fraction:
    """A release's budget in zCDP terms (pure epsilon counts as epsilon^2/2, Bun & Steinke 2016 Prop. 1.4): more
    budget, less noise, a better answer."""
    return cost.rho + cost.epsilon * cost.epsilon / 2


def _coverage(candidate: _Candidate, domain: Domain, design: DesignEncoding) -> Coverage:
    """What ``candidate`` (a marginal release) measured of the regression's target and features."""
    cliques = measured_cliques(candidate.mechanism, candidate.params, candidate.details, domain.names)
    return coverage(candidate.id, cliques, [*design.features, design.target])


def find_release(engine: Engine, dataset: StoredDataset, design: DesignEncoding, method: str,
                 epsilon: Fraction | None = None, delta: Fraction | None = None,
                 allow_unmeasured: bool = False) -> int | None:
    """The stored complete release that answers ``method`` on ``design`` best, or None. Seeded releases (made with
    a known seed for tests and benchmarks, no privacy) are never picked.

    Marginal methods: releases that measured every column and pair among target and features (with
    ``allow_unmeasured`` any marginal release, those that did first), then the one with the largest
    budget, then the newest. AdaSSP: the Gram release with the largest budget, then the newest.
    ObjPert: the newest model release of this design at exactly ``epsilon`` and ``delta`` (the model
    *is* the answer, so its privacy parameters are part of the question)."""
    kind = {"adassp": "gram", "objpert": "model"}.get(method, "marginals")
    found = [c for c in _candidates(engine, dataset, kind)
             if _cannot_answer(c, dataset.domain, design, method, allow_unmeasured) is None]
    if method == "objpert":
        found = [c for c in found if _same_request(c, epsilon, delta)]
    if not found:
        return None
    costs = release_costs(engine, [c.id for c in found])

    def rank(c: _Candidate) -> tuple[bool, Fraction, int]:
        covers = method in MARGINAL_METHODS and _coverage(c, dataset.domain, design).complete_pairs
        return covers, _strength(costs[c.id]), c.id

    return max(found, key=rank).id


def _same_request(candidate: _Candidate, epsilon: Fraction | None, delta: Fraction | None) -> bool:
    requested = candidate.params.get("requested") or {}
    return (epsilon is not None and delta is not None and isinstance(requested, dict)
            and requested.get("epsilon") == float(epsilon) and requested.get("delta") == float(delta))


# answering (free) ---------------------------------------------------------------------------------
def _marginal_reader(domain: Domain, model: Model):  # noqa: ANN202
    def read(attributes: tuple[str, ...]) -> np.ndarray:
        ordered = canonical(domain, attributes)
        values = mbi_adapter.marginal(model, ordered)
        return np.moveaxis(values, [ordered.index(a) for a in attributes], range(len(attributes)))

    return read


def answer(
    engine: Engine, release: releases.StoredRelease, design: DesignEncoding, method: str, seed: int | None = None
) -> tuple[LinearScoreModel, dict[str, object]]:
    """Fit ``method`` on ``design`` from a release that can answer it (post-processing: no privacy spent)."""
    try:
        if method in MARGINAL_METHODS:
            _, model = releases.release_model(engine, release.id)
            total = float(model.total)
            if method == "dd-ssp":
                stats = gram_from_marginals(design, _marginal_reader(release.dataset.domain, model), total=total)
                estimator = DDSSPLinearRegression() if design.task == "linear" else DDSSPLogisticRegression()
                return estimator.fit(stats), {"total": total}
            rows = min(max(1, round(total)), releases.MAX_SYNTHETIC_ROWS)
            # fit() decided whether this release may answer (a seeded one only for an in-process caller who allows it)
            frame = releases.synthetic_frame(engine, release.id, rows, seed, allow_seeded=True)
            return fit_on_rows(frame, design), {"synthetic_rows": rows}
        if method == "adassp":
            payload = gram.GramPayload.from_bytes(release.payload or b"")
            stats = gram.sub_statistics(payload, design)
            scales = gram.adassp_scales(release.details, stats.dimension, float(release.params["confidence_delta"]),
                                        float(release.params["failure_prob"]))
            estimator = AdaSSPLinearRegression().fit(stats, payload.lambda_min_noisy, scales)
            return estimator, {"ridge": estimator.ridge_, "lambda_min_tilde": estimator.lambda_min_tilde_}
        payload = ModelPayload.from_bytes(release.payload or b"")
        return ReleasedLogisticModel(payload, design), {
            k: release.details[k] for k in PUBLIC_OBJPERT_DETAILS if k in release.details
        }
    except (EstimatorError, KeyError) as exc:
        raise ServiceError(f"release {release.id} could not answer {method}: {exc}", code="answer_failed",
                           status=422) from None


# new releases (charged) ---------------------------------------------------------------------------
def make_release(
    engine: Engine,
    dataset: StoredDataset,
    design: DesignEncoding,
    method: str,
    epsilon: Fraction,
    delta: Fraction,
    *,
    seed: int | None = None,
    principal: str = "cli",
    mechanism: str = DEFAULT_MARGINAL_MECHANISM,
    options: dict[str, object] | None = None,
    progress: Progress = no_progress,
) -> releases.ReleaseOutcome:
    """A new release that can answer ``method`` on ``design``, checked and charged by the accountant."""
    requested = {"epsilon": float(epsilon), "delta": float(delta)}
    if method in MARGINAL_METHODS:
        if mechanism not in MARGINAL_MECHANISMS:
            raise RegressionInputError(f"mechanism must be one of {list(MARGINAL_MECHANISMS)}, got {mechanism!r}")
        attributes = canonical(dataset.domain, design.features + (design.target,))
        workload = [list(pair) for pair in itertools.combinations(attributes, 2)]
        options = dict(options or {})
        if mechanism == "aim":  # spend nothing on the 1-way marginals of columns the regression does not use
            options.setdefault("initial_cliques", [[a] for a in attributes])
        return releases.release_marginals(engine, dataset.name, mechanism, workload, epsilon=epsilon, delta=delta,
                                          seed=seed, options=options, principal=principal, progress=progress)
    if method == "adassp":
        # The Gaussian mechanism's conversion of (epsilon, delta) to rho (CKS 2020), rounded down to the grid.
        cost = releases.marginal_cost("gaussian", epsilon, delta, None)
        try:
            runner = gram.GramRelease(design, cost.rho)
        except MechanismError as exc:
            raise RegressionInputError(str(exc)) from None
        params = {"columns": gram.column_spec(design), "confidence_delta": float(delta),
                  "failure_prob": gram.DEFAULT_FAILURE_PROB, "lambda_share": str(gram.DEFAULT_LAMBDA_SHARE),
                  "requested": requested}
        return releases.run_release(engine, dataset, kind="gram", mechanism="adassp", cost=cost, params=params,
                                    runner=runner, seed=seed, principal=principal, progress=progress,
                                    encode_payload=runner.encode)
    try:
        model_runner = ObjPertRelease(design, epsilon, delta)
    except MechanismError as exc:
        raise RegressionInputError(str(exc)) from None
    params = {"design": design.to_dict(), "requested": requested}
    return releases.run_release(engine, dataset, kind="model", mechanism="objpert", cost=model_runner.cost,
                                params=params, runner=model_runner, seed=seed, principal=principal, progress=progress,
                                encode_payload=model_runner.encode)


def fit(
    engine: Engine,
    name: str,
    task: str,
    target: str,
    features: Sequence[str] | None = None,
    categorical: Sequence[str] | None = None,
    method: str = "dd-ssp",
    epsilon: object = None,
    delta: object = None,
    release_id: int | None = None,
    intercept: bool = True,
    seed: int | None = None,
    principal: str = "cli",
    *,
    reuse: bool = True,
    mechanism: str | None = None,
    options: dict[str, object] | None = None,
    progress: Progress = no_progress,
    allow_unmeasured: bool = False,
    allow_seeded: bool = False,
) -> FitOutcome:
    """Fit a private regression of ``target`` on ``features`` of dataset ``name`` (module docstring).

    ``release_id`` answers from that release (free; ``epsilon`` / ``delta`` must then be omitted). Otherwise
    ``epsilon`` and ``delta`` are what a new release would cost; a stored release that can answer is used instead
    when there is one (``reuse=False`` always makes a new release, as benchmarks need). ``mechanism`` (default
    AIM) and ``options`` configure a new marginal release (dd-ssp, aim-synth); the answer's notes say so when a
    stored release answered instead. ``seed`` makes the new release and the synthetic rows of aim-synth
    reproducible (in-process tests and benchmarks only: a seeded release carries no privacy); ``allow_seeded`` lets
    ``release_id`` name a seeded release (refused otherwise, 409).

    A marginal release answers dd-ssp and aim-synth only if it measured every column and pair among target and
    features (service/coverage.py); ``allow_unmeasured=True`` lets one that did not answer anyway (the model then
    extrapolates the missing parts, and the answer's ``details["coverage"]`` says which)."""
    if not isinstance(allow_unmeasured, bool):
        raise RegressionInputError(f"allow_unmeasured must be True or False, got {allow_unmeasured!r}")
    if method not in METHODS:
        raise RegressionInputError(f"method must be one of {list(METHODS)}, got {method!r}")
    if task in TASKS and task not in METHOD_TASKS[method]:
        raise RegressionInputError(f"method {method!r} fits {' or '.join(METHOD_TASKS[method])} regression, not {task}")
    if not isinstance(intercept, bool):
        raise RegressionInputError(f"intercept must be True or False, got {intercept!r}")
    dataset = get_dataset(engine, name)
    design = build_design(dataset.domain, task, target, features, categorical, intercept)
    cost = PrivacyCost()
    effect = None
    if release_id is not None:
        if epsilon is not None or delta is not None:
            raise RegressionInputError("give either a release id or epsilon and delta, not both")
        release = releases.get_release(engine, int(release_id))
        if release.dataset.name != dataset.name:
            raise ReleaseCannotAnswer(f"release {release_id} is a release of {release.dataset.name!r}, not of {name!r}")
        release.check_answerable(allow_seeded)
        candidate = _Candidate(release.id, release.kind, release.mechanism, release.status, release.params,
                               release.details)
        reason = _cannot_answer(candidate, dataset.domain, design, method, allow_unmeasured)
        if reason is not None:
            raise ReleaseCannotAnswer(f"release {release_id} cannot answer {method}: {reason}")
        reused = True
    else:
        eps, dlt = _budget(epsilon, delta)
        found = find_release(engine, dataset, design, method, eps, dlt, allow_unmeasured) if reuse else None
        reused = found is not None
        if found is None:
            outcome = make_release(engine, dataset, design, method, eps, dlt, seed=seed, principal=principal,
                                   mechanism=mechanism or DEFAULT_MARGINAL_MECHANISM, options=options,
                                   progress=progress)
            found, cost, effect = outcome.release_id, outcome.cost, outcome.budget
        release = releases.get_release(engine, found)
    model, details = answer(engine, release, design, method, seed)
    notes = []
    if method in MARGINAL_METHODS:
        gaps = release.coverage([*design.features, design.target])
        details = {**details, "coverage": gaps.to_json()}
        if not gaps.complete_pairs:
            notes.append(f"{gaps.warning()}: those parts of the fit are the model's extrapolation")
    if reused and release_id is None:
        notes.append(f"release {release.id} ({release.mechanism}) already answers this question, so this call spent "
                     "nothing" + (f"; --mechanism {mechanism} applies only to a new release" if mechanism
                                  and mechanism != release.mechanism and method in MARGINAL_METHODS else ""))
    release_cost = release_costs(engine, [release.id])[release.id]
    return FitOutcome(model, method, dataset.name, design, release.id, release.kind, release.mechanism, reused, cost,
                      release_cost, details, tuple(notes), effect)
