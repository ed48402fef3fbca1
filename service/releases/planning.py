"""Dry runs: what a release would charge and how accurate it would be, before anything is spent (docs/privacy.md 6.6).

A plan goes through step 1 of a release (:func:`service.releases.engine.prepare_marginals`, or a fit's
:func:`service.regression.fit.prepare_release`) and stops before step 2: the runner is built (so the mechanism refuses
what it would refuse), the kind is checked, and the accountant quotes the charge with the very function the charge
uses (:func:`service.accounting.accountant.preview_charge`). Nothing is reserved, no row is read, no noise is drawn
and nothing is written: not the ledger, not the releases, not a job. A plan is a quote, not a reservation: a release
made in between changes it.

For the mechanisms whose error does not depend on the data (those with a registry ``forecast``: laplace, gaussian,
residual) the plan carries each workload marginal's expected error in closed form (:mod:`estimators.residual.
accuracy`): the per-cell standard error and the expected L1 error in counts, and the expected L1 error of the
normalised marginal, for which the formula divides by the dataset's row count (the one figure of a plan that reads
something of the data: the exact count stored with the dataset, which only stewards, who alone release marginals,
see; docs/privacy.md 1.2). With ``target_error`` :func:`plan_marginals` solves for the smallest epsilon at which every
workload marginal's expected normalised L1 error is at most the target, and plans at that epsilon. MST and AIM choose
what they measure from the data: no closed form exists for their error, so their plan estimates it by simulating the
mechanism on the synthetic rows of a stored release of the dataset (:mod:`service.releases.simulated_accuracy`: free
post-processing, never the table), or says plainly that no estimate is possible (``accuracy_note``);
``accuracy_basis`` names which (``closed_form``, ``simulation`` or ``none``). A target error is not solved for by
simulation (each point is a run of the mechanism, and random): it is refused for them, naming ``target_error``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

from sqlalchemy import Engine

from estimators.residual.accuracy import CellError
from service.accounting import accountant
from service.accounting.accountant import ChargeQuote, describe_cost
from service.errors import InvalidInput
from service.mechanisms import auto
from service.mechanisms.auto import AutoChoice
from service.mechanisms.base import MechanismError
from service.mechanisms.registry import MechanismSpec, PrivacyNotion
from service.privacy.cost import MAX_AMOUNT, exact
from service.releases import engine as release_engine
from service.releases import simulated_accuracy
from service.releases.engine import PreparedRelease
from service.releases.simulated_accuracy import SimulatedAccuracy
from workloads import parameters
from workloads.marginals import Query

#: The solved epsilon has this many significant digits (rounded up, so that it meets the target).
TARGET_DIGITS = 4
#: The smallest epsilon a target is solved down to: below it every answer is noise.
SMALLEST_TARGET_EPSILON = Decimal("1e-6")
#: The error :func:`solve_epsilon` gives an epsilon too small to be charged or released (finite, so that the solver's
#: logarithm is).
UNCHARGEABLE_ERROR = 1e300
#: How a release's error is normalised in a plan, in words.
NORMALISED_BY = ("the L1 distance between the answer and the true marginal, divided by the dataset's row count N; an "
                 "answer divided by its own noisy total instead differs by about total_standard_error / N")


@dataclass(frozen=True)
class AccuracyForecast:
    """The closed-form expected errors of a release's workload marginals (module docstring) and their basis."""

    basis: str
    rows: int
    errors: tuple[CellError, ...]
    total_standard_error: float

    def worst(self) -> CellError:
        """The workload marginal with the largest expected normalised L1 error (the one a target must meet)."""
        return max(self.errors, key=lambda e: e.expected_l1)

    def to_json(self) -> dict[str, object]:
        worst = self.worst()
        return {"basis": self.basis, "rows": self.rows, "normalised_by": NORMALISED_BY,
                "total_standard_error": self.total_standard_error,
                "worst": worst.to_json(self.rows), "marginals": [e.to_json(self.rows) for e in self.errors]}


@dataclass(frozen=True)
class TargetSolution:
    """The smallest epsilon (of :data:`TARGET_DIGITS` significant digits, rounded up) whose worst workload marginal's
    expected normalised L1 error is at most ``target_error``, and that error."""

    target_error: float
    epsilon: Fraction
    delta: Fraction | None
    expected_error: float
    note: str = ""

    def to_json(self) -> dict[str, object]:
        return {"target_error": self.target_error, "epsilon": float(self.epsilon),
                "delta": None if self.delta is None else float(self.delta), "expected_error": self.expected_error,
                "note": self.note}


@dataclass(frozen=True)
class ReleasePlan:
    """What a release would do: its charge as the accountant quotes it (:class:`~service.accounting.accountant.
    ChargeQuote`, which holds whether it fits and, if not, the refusal the release would meet), its accuracy in
    closed form or estimated by simulation where either is possible (or why neither is), and the epsilon solved for a
    target error when one was asked."""

    dataset: str
    mechanism: str
    kind: str
    quote: ChargeQuote
    accuracy: AccuracyForecast | SimulatedAccuracy | None
    accuracy_note: str = ""
    target: TargetSolution | None = None
    auto: AutoChoice | None = None

    @property
    def fits(self) -> bool:
        return self.quote.fits

    @property
    def accuracy_basis(self) -> str:
        """``closed_form`` (laplace, gaussian, residual), ``simulation`` (MST, AIM on a stored release's synthetic
        rows) or ``none`` (``accuracy_note`` says why)."""
        if self.accuracy is None:
            return "none"
        return "simulation" if isinstance(self.accuracy, SimulatedAccuracy) else "closed_form"

    def to_json(self) -> dict[str, object]:
        return {"dry_run": True, "dataset": self.dataset, "mechanism": self.mechanism, "kind": self.kind,
                **self.quote.to_json(),
                "accuracy": None if self.accuracy is None else {"normalised_by": NORMALISED_BY,
                                                                **self.accuracy.to_json()},
                "accuracy_basis": self.accuracy_basis, "accuracy_note": self.accuracy_note,
                "target": None if self.target is None else self.target.to_json(),
                "auto": None if self.auto is None else self.auto.to_json()}

    def describe(self, shown: int = 8) -> str:
        """The plan in a few lines (the command line's ``--dry-run``)."""
        lines = [f"dry run (nothing was spent): a {self.mechanism} release of {self.dataset} would charge "
                 f"{describe_cost(self.quote.cost)}"]
        if self.auto is not None:
            lines.append(f"auto chose {self.auto.mechanism} (rule {self.auto.rule}): {self.auto.reason}")
        if self.target is not None:
            delta = "" if self.target.delta is None else f" with delta={float(self.target.delta):g}"
            lines.append(f"target: expected L1 error of every normalised workload marginal <= "
                         f"{self.target.target_error:g}: the smallest epsilon is {float(self.target.epsilon):g}{delta} "
                         f"(worst expected error {self.target.expected_error:.4g})"
                         + (f"; {self.target.note}" if self.target.note else ""))
        effect = self.quote.effect()
        if effect is not None:
            lines.append(f"{effect.describe().splitlines()[0]} (this release: {float(effect.epsilon_charged):.6g})")
            if effect.note:
                lines.append(effect.note)
        lines.append("it fits the budget" if self.fits else
                     f"it does not fit ({self.quote.refusal.code}): {self.quote.refusal.message}")
        accuracy = self.accuracy
        if accuracy is None:
            lines.append(f"accuracy: {self.accuracy_note}")
            return "\n".join(lines)
        worst = accuracy.worst()
        if isinstance(accuracy, SimulatedAccuracy):
            lines.append(f"estimated accuracy over N = {accuracy.rows:,} rows, by simulation (root mean square cell "
                         f"error, L1 error of the marginal / of the normalised marginal): mean over the workload "
                         f"{accuracy.mean_l1_normalised():.4g}; worst: {_line(worst, accuracy.rows)}")
        else:
            lines.append(f"expected accuracy over N = {accuracy.rows:,} rows (per-cell standard error, expected L1 "
                         f"error of the marginal / of the normalised marginal); worst: {_line(worst, accuracy.rows)}")
        for error in sorted(accuracy.errors, key=lambda e: -e.expected_l1)[:shown]:
            lines.append(f"  {_line(error, accuracy.rows)}")
        if len(accuracy.errors) > shown:
            lines.append(f"  ... {len(accuracy.errors) - shown} more marginals (--json lists them all)")
        if isinstance(accuracy, SimulatedAccuracy):
            lines.append(f"the simulation took {accuracy.seconds:.1f} s")
        else:
            lines.append(f"the answers' total has standard error {accuracy.total_standard_error:.4g} "
                         f"({accuracy.total_standard_error / accuracy.rows:.2%} of N): a marginal divided by its own "
                         "total strays from these figures by about that fraction")
        lines.append(f"basis ({self.accuracy_basis.replace('_', ' ')}): {accuracy.basis}")
        return "\n".join(lines)


def _line(error: CellError | simulated_accuracy.SimulatedError, rows: int) -> str:
    return (f"{' × '.join(error.attributes) or 'total'}: {error.standard_error:.4g} per cell, "
            f"L1 {error.expected_l1:.4g} / {error.expected_l1_normalised(rows):.4g}")


def plan_prepared(engine: Engine, prepared: PreparedRelease, *, target: TargetSolution | None = None,
                  without_forecast: str | None = None, evaluated: tuple[Query, ...] | None = None) -> ReleasePlan:
    """The plan of a :class:`~service.releases.engine.PreparedRelease` (module docstring), with the closed-form
    accuracy of a marginal release whose mechanism has a registry ``forecast``, or its estimate by simulation when
    its mechanism has ``simulation_trials`` and a stored release can stand in for the table, over the workload
    ``evaluated`` (default: the request's; MST takes none), unless ``without_forecast`` says why none is given (a
    fit's plan)."""
    spec, request = prepared.spec, prepared.request
    release_engine.checked_runner(spec, request)  # the mechanism's own refusals, before anything would be reserved
    release_engine.check_charged_kind(spec.kind)
    quote = accountant.preview_charge(engine, prepared.dataset.name, request.cost)
    accuracy: AccuracyForecast | SimulatedAccuracy | None = None
    note = without_forecast or _no_forecast(spec)
    queries = request.queries if evaluated is None else evaluated
    if without_forecast is None and spec.forecast is not None and request.queries:
        result = spec.forecast(prepared.dataset.domain, request.queries, request.cost, request.options)
        accuracy = AccuracyForecast(result.basis, prepared.dataset.rows, result.errors,
                                    math.sqrt(result.total_variance))
        note = ""
    elif without_forecast is None and spec.simulation_trials and queries:
        dataset = prepared.dataset
        proxy = simulated_accuracy.choose_proxy(engine, dataset.name, dataset.domain, queries)
        if proxy is not None:
            try:
                accuracy = simulated_accuracy.simulate(spec, request, dataset.domain, queries, dataset.rows, proxy)
                note = ""
            except MechanismError as exc:  # a refusal of the settings (before any noise), not of the stand-in's data
                note = (f"no estimate is possible: the simulated {spec.name} run stopped before drawing any noise: "
                        f"{exc}; a release with these settings is refused the same way once it runs (and refunded, "
                        "but a first zCDP charge's anchor stays: docs/privacy.md 6.6)")
    return ReleasePlan(prepared.dataset.name, spec.name, spec.kind, quote, accuracy, note, target, prepared.auto)


def _no_forecast(spec: MechanismSpec) -> str:
    if spec.forecast is not None:
        return ""
    if spec.simulation_trials:
        return (f"no estimate is possible: {spec.name} chooses what to measure from the data, so its error depends on "
                "the data and has no closed form, and its estimate simulates it on the synthetic rows of a stored "
                "release of this dataset, of which there is none to use (one complete and unseeded, with a model: an "
                "mst or aim release, or a release whose model an earlier answer fitted); plan again after one")
    if spec.kind == "marginals":
        return (f"{spec.name} has no closed form for its error and no estimate by simulation: its error depends on the "
                "data")
    return (f"a {spec.kind} release has no closed-form accuracy here (the closed forms cover laplace, gaussian and "
            "residual)")


def plan_marginals(
    engine: Engine,
    name: str,
    mechanism: str,
    workload: str | list[object],
    *,
    epsilon: object = None,
    delta: object = None,
    rho: object = None,
    options: dict[str, object] | None = None,
    target_error: object = None,
) -> ReleasePlan:
    """The dry run of :func:`service.releases.engine.release_marginals` with the same arguments: the same checks, the
    accountant's quote of its charge, its closed-form accuracy where one exists. With ``target_error`` (the expected
    L1 error of the normalised marginal that every workload marginal must meet) epsilon is solved for instead of
    given: omit ``epsilon`` and ``rho``, and give ``delta`` for a zCDP mechanism (its (epsilon, delta) converts to
    rho as a release's does)."""
    if target_error is None:
        prepared = release_engine.prepare_marginals(engine, name, mechanism, workload, epsilon=epsilon, delta=delta,
                                                    rho=rho, options=options)
        evaluated = None
        if not prepared.spec.uses_workload and prepared.spec.simulation_trials:
            evaluated = release_engine.resolve_workload(prepared.dataset, workload)
        return plan_prepared(engine, prepared, evaluated=evaluated)
    target = _checked_target(target_error)
    if epsilon is not None or rho is not None:
        raise InvalidInput("target_error solves for epsilon: omit epsilon and rho", code="invalid_parameter")
    if mechanism == auto.AUTO:
        raise InvalidInput("target_error solves for one mechanism's epsilon, and auto's choice depends on epsilon: "
                           "name the mechanism (gaussian or residual have closed forms; plan auto at a few epsilons "
                           "to see what it picks)", code="invalid_parameter")
    spec = release_engine.marginal_spec(mechanism)
    if spec.notion is PrivacyNotion.ZCDP and delta is None:
        raise InvalidInput(f"target_error solves for epsilon: {spec.name} is a zCDP mechanism, give delta too (its "
                           "(epsilon, delta) converts to rho as a release's does)", code="invalid_parameter")
    trial = release_engine.prepare_marginals(engine, name, mechanism, workload, epsilon=1, delta=delta,
                                             options=options)  # every other check, at a placeholder epsilon
    solution = solve_epsilon(trial, target, delta)
    prepared = release_engine.prepare_marginals(engine, name, mechanism, workload, epsilon=solution.epsilon,
                                                delta=delta, options=options)
    return plan_prepared(engine, prepared, target=solution)


def _checked_target(target_error: object) -> float:
    if isinstance(target_error, bool) or not isinstance(target_error, int | float | str | Decimal | Fraction):
        raise InvalidInput(f"target_error must be a positive number, got {target_error!r}", code="invalid_parameter")
    try:
        value = float(exact(target_error))
    except (ValueError, ArithmeticError, TypeError):
        raise InvalidInput(f"target_error must be a positive number, got {target_error!r}",
                           code="invalid_parameter") from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidInput(f"target_error must be a positive number, got {target_error!r}", code="invalid_parameter")
    return value


def solve_epsilon(trial: PreparedRelease, target: float, delta: object) -> TargetSolution:
    """The smallest epsilon (:data:`TARGET_DIGITS` significant digits, rounded up) at which the worst workload
    marginal's expected normalised L1 error of ``trial``'s mechanism, workload and options is at most ``target``.

    The error falls as epsilon grows (more budget, less noise, for every mechanism with a forecast), so the root of
    ``log(error(epsilon)) - log(target)`` in ``log(epsilon)`` is bracketed by powers of ten from 1 and found by
    Brent's method (``scipy.optimize.brentq``); the rounded-up epsilon is then checked to meet the target. An epsilon
    at which the release itself would be refused (the direct mechanisms refuse a share whose noise vanishes) ends the
    search with that refusal."""
    spec = trial.spec
    if spec.forecast is None and spec.simulation_trials:
        raise InvalidInput(f"target_error needs a closed-form accuracy, and {spec.name} has none: its plan estimates "
                           "its error by simulation (each epsilon a run of the mechanism, seconds to minutes, and "
                           "random), which is not solved for; plan at a few epsilons instead and pick one",
                           code="invalid_parameter")
    if spec.forecast is None or not trial.request.queries:
        raise InvalidInput(f"target_error needs a closed-form accuracy, and {_no_forecast(spec)}",
                           code="invalid_parameter")
    delta_exact = None if delta is None else exact(parameters.validate_delta(delta, "delta"))
    try:
        return _solve(_worst_error(trial, delta), target, delta_exact)
    except _Refused as refused:
        raise InvalidInput(f"the search for target_error={target:g} stopped: at epsilon "
                           f"{float(refused.epsilon) / 10:g} the expected error is still above it, and a release at "
                           f"epsilon {float(refused.epsilon):g} is refused: {refused.reason}",
                           code="invalid_parameter") from None


def _solve(worst: Callable[[Decimal], float], target: float, delta_exact: Fraction | None) -> TargetSolution:
    """:func:`solve_epsilon`'s bracket and root, over ``worst`` (which raises :class:`_Refused` where a release would
    be refused)."""
    from scipy.optimize import brentq

    high = Decimal(1)
    while worst(high) > target:
        if high >= MAX_AMOUNT:
            raise InvalidInput(f"no epsilon up to {MAX_AMOUNT:g} meets target_error={target:g}: the expected error is "
                               f"{worst(high):.4g} there", code="invalid_parameter")
        high *= 10
    low = high / 10
    note = ""
    while worst(low) <= target:
        if low <= SMALLEST_TARGET_EPSILON:
            note = f"every epsilon down to {SMALLEST_TARGET_EPSILON} meets it"
            return TargetSolution(target, Fraction(low), delta_exact, worst(low), note)
        high, low = low, low / 10
    root = brentq(lambda x: math.log(worst(Decimal(math.exp(x)))) - math.log(target), math.log(low), math.log(high),
                  xtol=1e-9, rtol=1e-9)
    epsilon = _round_up(Decimal(math.exp(root)))
    while worst(epsilon) > target:  # the root's tolerance: step up one unit of the last digit
        epsilon = _round_up(epsilon + _unit(epsilon))
    return TargetSolution(target, Fraction(epsilon), delta_exact, worst(epsilon), note)


def _worst_error(trial: PreparedRelease, delta: object) -> Callable[[Decimal], float]:
    """``epsilon -> the worst workload marginal's expected normalised L1 error`` of a release like ``trial`` at that
    epsilon (and ``delta``), its cost computed as a release's is (:meth:`MechanismSpec.cost`)."""
    spec, request, dataset = trial.spec, trial.request, trial.dataset

    def worst(epsilon: Decimal) -> float:
        try:
            cost = spec.cost(epsilon, delta, None)
        except InvalidInput:  # too small to charge (a rho below the ledger's unit): as if infinitely noisy
            return UNCHARGEABLE_ERROR
        at = replace(request, cost=cost, epsilon=epsilon, delta=delta)
        try:
            release_engine.checked_runner(spec, at)  # the release's own refusals at this epsilon
        except InvalidInput as exc:
            # below epsilon 1 only too much noise is refused (a Laplace scale above what a release stores): as if
            # infinitely noisy; above it only too little (a share whose noise vanishes), which ends the search
            if epsilon < 1:
                return UNCHARGEABLE_ERROR
            raise _Refused(epsilon, exc.message) from None
        forecast = spec.forecast(dataset.domain, request.queries, cost, request.options)  # type: ignore[misc]
        return max(e.expected_l1_normalised(dataset.rows) for e in forecast.errors)

    return worst


class _Refused(Exception):
    """The release would be refused at this epsilon (:func:`solve_epsilon` says so, naming it)."""

    def __init__(self, epsilon: Decimal, reason: str) -> None:
        super().__init__(reason)
        self.epsilon, self.reason = epsilon, reason


def _unit(value: Decimal) -> Decimal:
    """One unit of the last of :data:`TARGET_DIGITS` significant digits of ``value``."""
    return Decimal(1).scaleb(value.adjusted() - TARGET_DIGITS + 1)


def _round_up(value: Decimal) -> Decimal:
    return value.quantize(_unit(value), rounding=ROUND_CEILING).normalize()
