"""What every regression estimator here shares: input errors, parameter checks, and THE fitted linear model.

Fitted estimators hold ``coef_`` (one entry per column of ``X``, no intercept), ``intercept_`` (0.0 when fit
without one), ``feature_names_`` and ``n_features_in_`` (scikit-learn conventions). :class:`LinearScoreModel`,
:class:`LinearRegressor` and :class:`BinaryClassifier` are the only implementation of a linear model's score,
prediction and probability in the project: the server's estimators and the client's
:class:`service.client.fitted.FittedRegression` (its ``encoded_model_``, which it reads on the data's scale) both
use them (:func:`logistic_probabilities`, :func:`sign_labels`), so a model predicts the same wherever it is
evaluated.

numpy and :mod:`workloads` only: the client (an analyst's notebook, a participant's device) imports this module, so
it must never pull scipy or anything of the server.
"""

from __future__ import annotations

import functools

import numpy as np

from workloads import parameters
from workloads.encodings import INTERCEPT_NAME


class EstimatorError(ValueError):
    """Bad input to an estimator or a calibration function; the message names the parameter."""


class NotFittedError(EstimatorError):
    """``predict`` called before ``fit``."""


#: The checks of :mod:`workloads.parameters` (the project's one set), raising :class:`EstimatorError`:
#: ``check_positive(name, value)`` (a finite number > 0: epsilon, rho, a norm bound), ``check_non_negative``,
#: ``check_probability`` (in (0, 1): delta, a failure probability), ``check_count`` (an integer >= ``minimum``),
#: ``check_sparsity(s, p)`` (1 <= s <= p), ``check_vector(name, value, size)`` and ``check_generator``.
check_positive = functools.partial(parameters.check_positive, error=EstimatorError)
check_non_negative = functools.partial(parameters.check_non_negative, error=EstimatorError)
check_probability = functools.partial(parameters.check_probability, error=EstimatorError)
check_count = functools.partial(parameters.check_count, error=EstimatorError)
check_sparsity = functools.partial(parameters.check_sparsity, error=EstimatorError)
check_vector = functools.partial(parameters.check_vector, error=EstimatorError)
check_generator = functools.partial(parameters.check_generator, error=EstimatorError)


def feature_names_for(names: object, p: int) -> tuple[str, ...]:
    """``names`` as a tuple of ``p`` strings, or ``x0 .. x{p-1}`` when ``None``."""
    if names is None:
        return tuple(f"x{j}" for j in range(p))
    if isinstance(names, str):
        raise EstimatorError("feature_names must be a sequence of names, not one string")
    out = tuple(str(name) for name in names)  # type: ignore[union-attr]
    if len(out) != p:
        raise EstimatorError(f"feature_names must have {p} names, got {len(out)}")
    return out


def as_matrix(name: str, X: object, n_columns: int | None = None) -> np.ndarray:
    array = np.asarray(X, dtype=float)
    if array.ndim != 2:
        raise EstimatorError(f"{name} must be a 2-d array, got shape {array.shape}")
    if n_columns is not None and array.shape[1] != n_columns:
        raise EstimatorError(f"{name} must have {n_columns} columns, got {array.shape[1]}")
    if not np.all(np.isfinite(array)):
        raise EstimatorError(f"{name} must be finite")
    return array


def logistic_probabilities(score: np.ndarray) -> np.ndarray:
    """Columns ``P(-1), P(+1)`` of the logistic model at ``score``: ``P(+1) = 1 / (1 + e^-score)``, computed as
    ``(1 + tanh(score / 2)) / 2``, which never overflows (a huge score gives exactly 0 or 1)."""
    positive = 0.5 * (1.0 + np.tanh(0.5 * np.asarray(score, dtype=float)))
    return np.column_stack([1.0 - positive, positive])


def sign_labels(score: np.ndarray) -> np.ndarray:
    """Labels in ``{-1, +1}``: +1 only where ``score > 0`` (a score of exactly 0 is -1, as in scikit-learn)."""
    return np.where(np.asarray(score) > 0, 1, -1)


class LinearScoreModel:
    """Shared fitted state and the linear score ``X coef_ + intercept_``.

    Subclasses that accept other inputs than an encoded matrix (the client's model takes a DataFrame of codes too)
    override :meth:`_features`, which turns an input into the ``(n, n_features_in_)`` matrix the score needs.
    """

    coef_: np.ndarray
    intercept_: float
    feature_names_: tuple[str, ...]
    n_features_in_: int

    @classmethod
    def from_coefficients(cls, coef: object, intercept: float, feature_names: tuple[str, ...]) -> LinearScoreModel:
        """A fitted model of this type with these coefficients (as a fit's answer states them)."""
        model = cls()
        model._store(np.concatenate([[float(intercept)], np.asarray(coef, dtype=float)]), feature_names, True)
        return model

    def _store(self, theta: np.ndarray, feature_names: tuple[str, ...], intercept: bool) -> None:
        """Split a parameter vector laid out as ``[intercept?, features...]`` into ``intercept_`` and ``coef_``."""
        theta = np.asarray(theta, dtype=float)
        if intercept:
            self.intercept_, self.coef_ = float(theta[0]), theta[1:].copy()
        else:
            self.intercept_, self.coef_ = 0.0, theta.copy()
        self.feature_names_ = tuple(feature_names)
        self.n_features_in_ = self.coef_.size

    def _features(self, X: object) -> np.ndarray:
        return as_matrix("X", X, self.n_features_in_)

    def decision_function(self, X: object) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first")
        return self._features(X) @ self.coef_ + self.intercept_

    def coefficients(self) -> dict[str, float]:
        """``{feature name: coefficient}`` (the intercept under :data:`INTERCEPT_NAME`)."""
        out = {INTERCEPT_NAME: self.intercept_}
        out.update(zip(self.feature_names_, self.coef_.tolist(), strict=True))
        return out


class LinearRegressor(LinearScoreModel):
    def predict(self, X: object) -> np.ndarray:
        """Predicted target values on the encoded scale (``[-1, 1]`` for the default scalar target)."""
        return self.decision_function(X)


class BinaryClassifier(LinearScoreModel):
    """Labels are ``{-1, +1}``; ``predict_proba`` columns follow ``classes_``."""

    classes_ = np.array([-1, 1])

    def predict_proba(self, X: object) -> np.ndarray:
        return logistic_probabilities(self.decision_function(X))

    def predict(self, X: object) -> np.ndarray:
        return sign_labels(self.decision_function(X))
