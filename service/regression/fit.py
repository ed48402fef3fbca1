"""Private regressions answered from releases: DD-SSP, AdaSSP, ObjPert and AIM-Synth as a service (Ferrando &
Sheldon 2024, "Private Regression via Data-Dependent Sufficient Statistic Perturbation").

:func:`fit` answers "regress ``target`` on ``features`` of dataset ``name`` with ``method``":

1. the design (which columns, how encoded, intercept or not) is built and checked, before anything else
   (:mod:`service.regression.design`);
2. with ``release_id`` that release must be able to answer; without it, a stored *complete* release that can
   answer is looked for (free, :mod:`service.regression.matching`); only when none exists is a new release made,
   through the release engine and the accountant (:mod:`service.releases.engine`), and charged;
3. the answer is post-processing of the release (no rows are read, no privacy is spent), by the method's answer
   function (the methods' registry, :mod:`service.regression.methods`; :mod:`service.regression.answering`):

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
   dp-iht     a model release (:mod:`service.mechanisms.dp_iht`)  the released sparse model itself
              of exactly this design, epsilon, delta and settings
   ========== ==================================================== =============================================

New releases: dd-ssp / aim-synth measure all pairs among target and features with ``mechanism`` when the caller
names one (any registered zCDP marginal mechanism), else with the one :func:`service.regression.choice.
marginal_mechanism_for` picks from public quantities (a linear DD-SSP on a narrow design: the residual plan weighted
toward its ``Z^T Z``; otherwise AIM), charged the rho that (epsilon, delta) converts to;
adassp releases the whole noisy ``Z^T Z`` of the encoded target and features, charged the same converted rho
(the zCDP calibration: the paper's printed (eps, delta) calibration is not used, see docs/privacy.md, section 8.5);
objpert is charged (epsilon, delta) itself; dp-iht the converted rho, which its calibration splits exactly among the
private row count and its iterations (docs/privacy.md, section 8.9 (e)).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from sqlalchemy import Engine

from estimators.base import EstimatorError, LinearScoreModel
from estimators.residual.basis import ResidualError
from service.accounting import accountant
from service.accounting.accountant import release_costs
from service.data.datasets import StoredDataset, get_dataset
from service.errors import InvalidInput, ServiceError
from service.mechanisms import registry
from service.mechanisms.base import MechanismError
from service.mechanisms.progress import Progress, no_progress
from service.mechanisms.registry import PrivacyNotion, ReleaseKind, RunRequest
from service.privacy.cost import PrivacyCost
from service.regression import methods
from service.regression.choice import AUTO_METHOD, MethodChoice, marginal_mechanism_for, method_for
from service.regression.design import (
    DEFAULT_MARGINAL_MECHANISM,
    RegressionInputError,
    ReleaseCannotAnswer,
    build_design,
    check_budget,
)
from service.regression.matching import cannot_answer, find_release, mechanisms_answering
from service.regression.methods import MethodSpec
from service.regression.uncertainty import CoefficientErrors, take_errors
from service.releases import answers, planning
from service.releases import engine as release_engine
from service.releases.answers import StoredRelease
from workloads import data_scale
from workloads.encodings import INTERCEPT_NAME, TASKS, DesignEncoding
from workloads.marginals import canonical


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
    errors: CoefficientErrors = field(default_factory=CoefficientErrors.none)  # service/regression/uncertainty.py
    auto: MethodChoice | None = None  # what method="auto" chose (service/regression/choice.py)

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

    @property
    def coefficients_per_code(self) -> dict[str, float]:
        """The same model read on the columns' codes (:mod:`workloads.data_scale`): per code of an ordinal feature,
        per level (against level 0) of a categorical one, a linear target in its codes; the intercept is the
        prediction at every code 0."""
        coef, intercept = data_scale.per_code(self.design, self.model.coef_, self.model.intercept_)
        return {INTERCEPT_NAME: intercept, **dict(zip(self.feature_names, coef.tolist(), strict=True))}

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
            "coefficients_per_code": self.coefficients_per_code,
            **self.errors.to_json(self.coefficients),
            "encodings": self.design.to_dict()["encodings"],
            "details": self.details,
            "notes": list(self.notes),
            **({"budget": self.budget.to_json()} if self.budget is not None else {}),
            **({"auto": self.auto.to_json()} if self.auto is not None else {}),
        }


def answer(
    engine: Engine, release: StoredRelease, design: DesignEncoding, method: str, seed: int | None = None
) -> tuple[LinearScoreModel, dict[str, object]]:
    """Fit ``method`` on ``design`` from a release that can answer it (post-processing: no privacy spent), by the
    method's answer function (:mod:`service.regression.methods`)."""
    try:
        return _method(method).answer(engine, release, design, seed)
    except (EstimatorError, ResidualError, KeyError) as exc:
        raise ServiceError(f"release {release.id} could not answer {method}: {exc}", code="answer_failed",
                           status=422) from None


def _method(method: object) -> MethodSpec:
    spec = methods.find(method)
    if spec is None:
        raise RegressionInputError(f"method must be one of {[*methods.names(), AUTO_METHOD]}, got {method!r}")
    return spec


# new releases (charged) ---------------------------------------------------------------------------
def prepare_release(
    engine: Engine,
    dataset: StoredDataset,
    design: DesignEncoding,
    method: str,
    epsilon: Fraction,
    delta: Fraction,
    *,
    mechanism: str = DEFAULT_MARGINAL_MECHANISM,
    options: dict[str, object] | None = None,
    settings: dict[str, object] | None = None,
) -> release_engine.PreparedRelease:
    """Step 1 of a new release that can answer ``method`` on ``design`` (checked, nothing written): what
    :func:`make_release` makes and :func:`plan_fit` quotes. dd-ssp and aim-synth: a marginal release of every pair
    among target and features by ``mechanism`` (a registered zCDP marginal mechanism) with ``options`` (and the options
    the mechanism's spec sets for a regression, ``regression_options``, unless given); the other methods: a release by
    the one mechanism whose releases answer them, with its ``settings`` (:func:`model_settings`, once: computed from
    ``options`` when not given) and the parameters its spec stores with such a release (``release_params``)."""
    requested = {"epsilon": float(epsilon), "delta": float(delta)}
    if _method(method).reads_marginals:
        choices = marginal_mechanisms()
        if mechanism not in choices:
            raise RegressionInputError(f"mechanism must be one of {choices}, got {mechanism!r}")
        attributes = canonical(dataset.domain, design.features + (design.target,))
        workload = [list(pair) for pair in itertools.combinations(attributes, 2)]
        options = dict(options or {})
        for option, value in registry.get(mechanism).regression_options(design, attributes).items():
            options.setdefault(option, value)  # the caller's own value wins
        return release_engine.prepare_marginals(engine, dataset.name, mechanism, workload, epsilon=epsilon,
                                                delta=delta, options=options)
    spec = registry.get(mechanisms_answering(method)[0])
    cost = spec.cost(epsilon, delta, None)
    if settings is None:
        settings = model_settings(method, design, options)
    params = {**spec.release_params(design, delta), "requested": requested}
    if settings:
        params["settings"] = settings
    request = RunRequest(cost, options=settings, design=design, epsilon=epsilon, delta=delta)
    return release_engine.PreparedRelease(dataset, spec, request, params)


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
    settings: dict[str, object] | None = None,
    progress: Progress = no_progress,
) -> release_engine.ReleaseOutcome:
    """A new release that can answer ``method`` on ``design`` (:func:`prepare_release`), checked and charged by the
    accountant."""
    prepared = prepare_release(engine, dataset, design, method, epsilon, delta, mechanism=mechanism, options=options,
                               settings=settings)
    return release_engine.release_prepared(engine, prepared, seed=seed, principal=principal, progress=progress)


def model_settings(method: str, design: DesignEncoding, options: dict[str, object] | None) -> dict[str, object]:
    """The complete, checked settings of a new release for ``method`` (DP-IHT's sparsity, iterations...: its
    mechanism's :meth:`~service.mechanisms.registry.MechanismSpec.settings`), empty for methods without settings; a
    :class:`RegressionInputError` naming the setting when one is wrong."""
    if _method(method).reads_marginals:
        return {}
    spec = registry.get(mechanisms_answering(method)[0])
    if not spec.options and options:
        raise RegressionInputError(f"method {method!r} takes no settings, got {sorted(options)}")
    try:
        return spec.settings(design, options)
    except (MechanismError, InvalidInput) as exc:
        raise RegressionInputError(str(exc)) from None


def marginal_mechanisms() -> list[str]:
    """The registered marginal mechanisms a regression's (epsilon, delta) can pay for (the zCDP ones)."""
    return [name for name in registry.names(ReleaseKind.MARGINALS)
            if registry.get(name).notion is PrivacyNotion.ZCDP]


@dataclass(frozen=True)
class _Question:
    """A fit's request checked (:func:`_question`): the design, the method, the new release's settings, and either
    the stored release that answers (free) or the (epsilon, delta) and mechanism of the new release it needs."""

    dataset: StoredDataset
    design: DesignEncoding
    spec: MethodSpec
    settings: dict[str, object]
    release: StoredRelease | None
    epsilon: Fraction | None = None
    delta: Fraction | None = None
    mechanism: str | None = None
    auto: MethodChoice | None = None  # what method="auto" chose (None: the method was named)

    @property
    def method(self) -> str:
        return self.spec.name


def _question(engine: Engine, name: str, task: str, target: str, features: Sequence[str] | None,
              categorical: Sequence[str] | None, method: str, epsilon: object, delta: object, release_id: int | None,
              intercept: bool, *, reuse: bool, mechanism: str | None, options: dict[str, object] | None,
              allow_unmeasured: bool, allow_seeded: bool) -> _Question:
    """Every check of a fit, and the decision a fit and its dry run share: which stored release answers, or what new
    release is needed (nothing written)."""
    if not isinstance(allow_unmeasured, bool):
        raise RegressionInputError(f"allow_unmeasured must be True or False, got {allow_unmeasured!r}")
    if method == AUTO_METHOD:
        return _auto_question(engine, name, task, target, features, categorical, epsilon, delta, release_id,
                              intercept, reuse=reuse, mechanism=mechanism, options=options,
                              allow_unmeasured=allow_unmeasured, allow_seeded=allow_seeded)
    spec = _method(method)
    if task in TASKS and task not in spec.tasks:
        raise RegressionInputError(f"method {method!r} fits {' or '.join(spec.tasks)} regression, not {task}")
    if not isinstance(intercept, bool):
        raise RegressionInputError(f"intercept must be True or False, got {intercept!r}")
    dataset = get_dataset(engine, name)
    design = build_design(dataset.domain, task, target, features, categorical, intercept)
    if release_id is not None and options and not spec.reads_marginals:
        raise RegressionInputError(f"give either a release id or the settings of a new {method} release, not both")
    settings = model_settings(method, design, options) if release_id is None else {}
    if release_id is not None:
        if epsilon is not None or delta is not None:
            raise RegressionInputError("give either a release id or epsilon and delta, not both")
        release = answers.get_release(engine, int(release_id))
        if release.dataset.name != dataset.name:
            raise ReleaseCannotAnswer(f"release {release_id} is a release of {release.dataset.name!r}, not of {name!r}")
        release.check_answerable(allow_seeded)
        reason = cannot_answer(release, dataset.domain, design, method, allow_unmeasured)
        if reason is not None:
            raise ReleaseCannotAnswer(f"release {release_id} cannot answer {method}: {reason}")
        return _Question(dataset, design, spec, settings, release)
    eps, dlt = check_budget(epsilon, delta)
    found = find_release(engine, dataset, design, method, eps, dlt, allow_unmeasured, settings) if reuse else None
    if found is not None:
        return _Question(dataset, design, spec, settings, answers.get_release(engine, found), eps, dlt)
    chosen = mechanism or marginal_mechanism_for(design, method, eps, dlt)
    return _Question(dataset, design, spec, settings, None, eps, dlt, chosen)


def _auto_question(engine: Engine, name: str, task: str, target: str, features: Sequence[str] | None,
                   categorical: Sequence[str] | None, epsilon: object, delta: object, release_id: int | None,
                   intercept: bool, **given: object) -> _Question:
    """``method="auto"``: the method :func:`service.regression.choice.method_for` picks for a new release at
    ``epsilon`` and ``delta`` (public inputs only), then the question of that method."""
    if release_id is not None:
        raise RegressionInputError("method 'auto' chooses the method of a new release; with release_id, name the "
                                   f"method that release answers ({methods.describe_choices()})")
    if given.get("mechanism") is not None or given.get("options"):
        raise RegressionInputError("method 'auto' takes no mechanism or options: it chooses them; name a method "
                                   "to set them")
    dataset = get_dataset(engine, name)
    design = build_design(dataset.domain, task, target, features, categorical, intercept)
    eps, dlt = check_budget(epsilon, delta)
    rho = registry.zcdp_cost(AUTO_METHOD, eps, dlt, None).rho
    choice = method_for(design, eps, rho)
    question = _question(engine, name, task, target, features, categorical, choice.method, epsilon, delta, None,
                         intercept, **given)  # type: ignore[arg-type]
    return dataclasses.replace(question, auto=choice)


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
    when there is one (``reuse=False`` always makes a new release, as benchmarks need). ``mechanism`` (default:
    :func:`service.regression.choice.marginal_mechanism_for`'s rule) and ``options`` configure a new marginal
    release (dd-ssp, aim-synth); the answer's notes say so when a
    stored release answered instead. ``seed`` makes the new release and the synthetic rows of aim-synth
    reproducible (in-process tests and benchmarks only: a seeded release carries no privacy); ``allow_seeded`` lets
    ``release_id`` name a seeded release (refused otherwise, 409).

    A marginal release answers dd-ssp and aim-synth only if it measured every column and pair among target and
    features (:mod:`service.releases.coverage`); ``allow_unmeasured=True`` lets one that did not answer anyway (the
    model then extrapolates the missing parts, and the answer's ``details["coverage"]`` says which)."""
    question = _question(engine, name, task, target, features, categorical, method, epsilon, delta, release_id,
                         intercept, reuse=reuse, mechanism=mechanism, options=options,
                         allow_unmeasured=allow_unmeasured, allow_seeded=allow_seeded)
    dataset, design, spec, method = question.dataset, question.design, question.spec, question.method
    cost = PrivacyCost()
    effect = None
    release = question.release
    reused = release is not None
    if release is None:
        outcome = make_release(engine, dataset, design, method, question.epsilon, question.delta, seed=seed,
                               principal=principal, mechanism=question.mechanism, options=options,
                               settings=question.settings, progress=progress)
        cost, effect = outcome.cost, outcome.budget
        release = answers.get_release(engine, outcome.release_id)
    model, details = answer(engine, release, design, method, seed)
    details, errors = take_errors(details)
    notes = []
    if spec.reads_marginals:
        gaps = release.coverage([*design.features, design.target])
        details = {**details, "coverage": gaps.to_json()}
        if not gaps.complete_pairs:
            notes.append(f"{gaps.warning()}: those parts of the fit are the model's extrapolation")
    if reused and release_id is None:
        notes.append(_reused_note(release, mechanism, spec))
    release_cost = release_costs(engine, [release.id])[release.id]
    return FitOutcome(model, method, dataset.name, design, release.id, release.kind, release.mechanism, reused, cost,
                      release_cost, details, tuple(notes), effect, errors, question.auto)


def _reused_note(release: StoredRelease, mechanism: str | None, spec: MethodSpec,
                 spends: str = "this call spent") -> str:
    return (f"release {release.id} ({release.mechanism}) already answers this question, so {spends} "
            "nothing" + (f"; mechanism {mechanism!r} applies only to a new release" if mechanism
                         and mechanism != release.mechanism and spec.reads_marginals else ""))


#: Why a fit's plan carries no accuracy forecast.
FIT_NO_FORECAST = ("a fit's plan forecasts no accuracy: the closed forms cover marginal releases (laplace, gaussian, "
                   "residual), not a regression's error")


@dataclass(frozen=True)
class FitPlan:
    """The dry run of a fit: the stored release that would answer it (free), or the plan of the new release it would
    make (:class:`~service.releases.planning.ReleasePlan`: its charge as the accountant quotes it, whether it fits)."""

    dataset: str
    method: str
    design: DesignEncoding
    answered_by: int | None
    release: planning.ReleasePlan | None
    note: str = ""
    auto: MethodChoice | None = None  # what method="auto" chose (service/regression/choice.py)

    @property
    def fits(self) -> bool:
        return self.release is None or self.release.fits

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"dry_run": True, "dataset": self.dataset, "task": self.design.task,
                                   "method": self.method, "target": self.design.target,
                                   "features": list(self.design.features), "answered_by": self.answered_by,
                                   "fits": self.fits, "note": self.note,
                                   **({"auto": self.auto.to_json()} if self.auto is not None else {})}
        if self.release is None:
            return {**body, "cost": PrivacyCost().to_json(), "budget": None, "epsilon_charged": 0.0, "refusal": None,
                    "release": None}
        plan = self.release.to_json()
        return {**body, "cost": plan["cost"], "budget": plan["budget"], "epsilon_charged": plan["epsilon_charged"],
                "refusal": plan["refusal"], "release": plan}

    def describe(self) -> str:
        chose = f"auto chose {self.method}: {self.auto.reason}\n" if self.auto is not None else ""
        if self.release is None:
            return f"{chose}dry run (nothing was spent): {self.note}"
        return chose + self.release.describe()


def plan_fit(
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
    *,
    mechanism: str | None = None,
    options: dict[str, object] | None = None,
    allow_unmeasured: bool = False,
    allow_seeded: bool = False,
) -> FitPlan:
    """The dry run of :func:`fit` with the same arguments: the same checks and the same decision (a stored release
    answers, free, or a new one is needed), then the accountant's quote of the new release's charge
    (:func:`service.releases.planning.plan_prepared`). Nothing is reserved, read or written. A fit's plan forecasts no
    accuracy: the closed forms cover marginal releases (laplace, gaussian, residual), not a regression's error."""
    question = _question(engine, name, task, target, features, categorical, method, epsilon, delta, release_id,
                         intercept, reuse=True, mechanism=mechanism, options=options,
                         allow_unmeasured=allow_unmeasured, allow_seeded=allow_seeded)
    method = question.method
    if question.release is not None:
        note = (f"release {question.release.id} answers this fit for free" if release_id is not None
                else _reused_note(question.release, mechanism, question.spec, "this fit would spend"))
        return FitPlan(question.dataset.name, method, question.design, question.release.id, None, note,
                       question.auto)
    prepared = prepare_release(engine, question.dataset, question.design, method, question.epsilon, question.delta,
                               mechanism=question.mechanism, options=options, settings=question.settings)
    plan = planning.plan_prepared(engine, prepared, without_forecast=FIT_NO_FORECAST)
    return FitPlan(question.dataset.name, method, question.design, None, plan,
                   f"a new {prepared.spec.name} release would answer it", question.auto)
