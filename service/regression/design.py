"""The design of a regression request: its method, task, target, features and their encodings, checked first.

Methods (Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient Statistic Perturbation"):
``dd-ssp`` (Alg. 1, Prop. 3.4), ``aim-synth`` (Sec. 3.4), ``adassp`` (App. B, Alg. 2, linear only) and ``objpert``
(App. C, Alg. 3, logistic only); and ``dp-iht`` (Wang & Xu 2019, "On sparse linear regression in the local
differential privacy model", Alg. 3: a sparse linear or logistic model, :mod:`service.mechanisms.dp_iht`). Which stored
release can answer a method is the registry's (:mod:`service.mechanisms.registry`, ``MechanismSpec.answers``;
:mod:`service.regression.matching`); what each method is, the methods' registry (:mod:`service.regression.methods`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from service.errors import InvalidInput
from service.privacy.cost import check_amount, exact
from workloads import parameters
from workloads.domain import Domain
from workloads.encodings import TASKS, DesignEncoding, EncodingError

DEFAULT_MARGINAL_MECHANISM = "aim"


class RegressionInputError(InvalidInput, ValueError):
    """A fit request that cannot be served as asked; the message names the parameter."""

    code = "invalid_parameter"


class ReleaseCannotAnswer(RegressionInputError):
    code = "release_cannot_answer"



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


def check_budget(epsilon: object, delta: object) -> tuple[Fraction, Fraction]:
    """The exact (epsilon, delta) a new release may spend, checked (every regression release adds Gaussian noise,
    so delta > 0)."""
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
