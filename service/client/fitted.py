"""Fitted regressions as the client receives them, predicting on the data's own scale (scikit-learn style).

The server fits on the design's encoding (an ordinal column in [-1, 1], a categorical one as indicators, a linear
target in [-1, 1], a logistic one in -1 / +1: :mod:`workloads.encodings`). The encoding and the table's labels are
public, so reading the model on the data's scale is free post-processing, done here:

* ``predict`` answers a linear target in its own units: a bin's midpoint for a table binned by a spec, the number a
  label names, otherwise its code (:mod:`workloads.code_values`); a logistic target as the table's labels
  (``classes_``: the labels of codes 0 and 1, or the codes themselves for a table without labels);
* ``predict_proba`` has one column per class, in the order of ``classes_``, named by them (a DataFrame) when the rows
  are a DataFrame; ``decision_function`` is the log-odds of ``classes_[1]``; ``score`` is R^2 (linear, in the
  target's units) or the accuracy (logistic), as scikit-learn's;
* ``coef_`` and ``intercept_`` are on the codes (:mod:`workloads.data_scale`): per code of an ordinal feature, per
  level (against level 0) of a categorical one, and for a linear target in its codes; ``feature_names_`` names them.
  The model the server fitted, on the encoded scale, is ``encoded_model_``: an :mod:`estimators.base` model whose
  score, labels and probabilities are the server estimators' own functions, so the client predicts exactly what the
  server's model would, and every prediction here is that model's, decoded.

Rows are a DataFrame holding the features (``feature_names_in_``; other columns are ignored, a missing one is an
error naming it) as codes or as the table's labels (a synthetic answer's frame as it comes), or a 2-d array of codes
with ``n_features_in_`` columns in the order of ``feature_names_in_``.

Numpy and pandas only (plus :mod:`workloads`, :mod:`estimators.base` and the client), so an analyst's notebook can
predict without the server's stack.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from estimators.base import BinaryClassifier, LinearRegressor, LinearScoreModel
from service.client.labels import codes_of
from workloads import data_scale
from workloads.code_values import code_values, values_of_codes
from workloads.domain import Domain
from workloads.encodings import INTERCEPT_NAME, DesignEncoding


class ExtrapolationWarning(UserWarning):
    """An answer rests in part on a release's model, not on what the release measured."""


class FittedRegression:
    """A private linear or logistic regression answered by the server, on the data's own scale (module docstring).

    ``release_id`` (the release that answered), ``cost`` (what this call was charged: zero when a stored release
    answered) and ``budget`` (when a new release was made: the budget's composed epsilon spent before and after it,
    and why; else None). ``notes`` are the server's remarks (a reused release, extrapolated pairs) and ``coverage``
    what the release measured of the regression's columns; an extrapolated fit raises an ExtrapolationWarning.
    ``standard_errors_`` and ``confidence_intervals_`` (95 %) are the encoded coefficients' error bars by name, as
    ``error_basis_`` says they were computed (None and ``"none"`` for a method that gives none).
    ``target_values_`` (linear) is the value of each code of the target, what ``predict`` answers in."""

    def __init__(self, answer: Mapping[str, Any], domain: Mapping[str, Mapping[str, object]],
                 labels: Mapping[str, Sequence[str]] | None = None) -> None:
        self.answer = dict(answer)
        self.task: str = answer["task"]
        self.method: str = answer["method"]
        self.release_id: int = answer["release_id"]
        self.reused: bool = answer["reused"]
        self.cost: dict[str, float] = dict(answer["cost"])
        self.budget: dict[str, object] | None = answer.get("budget")
        self.auto: dict[str, object] | None = answer.get("auto")  # method="auto": what it chose and why
        self.labels_ = {name: list(values) for name, values in (labels or {}).items()}
        self.design_ = DesignEncoding.from_dict(Domain.from_dict(domain), answer["design"])
        self.target_ = self.design_.target
        self.feature_names_in_ = np.array(self.design_.features, dtype=object)
        self.n_features_in_ = len(self.design_.features)
        self.feature_names_: tuple[str, ...] = tuple(answer["feature_names"])
        coefficients = answer["coefficients"]
        encoded = np.array([coefficients[name] for name in self.feature_names_], dtype=float)
        kind = BinaryClassifier if self.task == "logistic" else LinearRegressor
        self.encoded_model_: LinearScoreModel = kind.from_coefficients(
            encoded, float(coefficients.get(INTERCEPT_NAME, 0.0)), self.feature_names_)
        self.coef_, self.intercept_ = data_scale.per_code(self.design_, self.encoded_model_.coef_,
                                                          self.encoded_model_.intercept_)
        target_labels = self.labels_.get(self.target_)
        size = self.design_.domain.size(self.target_)
        if self.task == "logistic":
            self._positive = int(np.argmax(self.design_.target_encoding.matrix[0]))
            self.classes_ = np.array(target_labels, dtype=object) if target_labels else np.arange(size)
        else:
            values = code_values(target_labels, size)
            self.target_values_ = np.arange(size, dtype=float) if values is None else values
        # the coefficients' error bars on the encoded scale, by name (service/regression/uncertainty.py); None: none
        self.standard_errors_: dict[str, float] | None = answer.get("standard_errors")
        self.confidence_intervals_: dict[str, list[float]] | None = answer.get("confidence_intervals")
        self.error_basis_: str = answer.get("error_basis", "none")
        self.notes: list[str] = list(answer.get("notes") or [])
        self.coverage: dict[str, Any] | None = (answer.get("details") or {}).get("coverage")
        if self.coverage is not None and (self.coverage.get("unmeasured_pairs")
                                          or self.coverage.get("unmeasured_attributes")):
            warnings.warn(self.coverage.get("warning") or "extrapolated", ExtrapolationWarning, stacklevel=3)

    # reading rows ---------------------------------------------------------------------------------
    def _codes(self, rows: Any) -> dict[str, np.ndarray]:
        """``{feature: codes}`` of ``rows`` (module docstring), checked."""
        names = list(self.design_.features)
        if hasattr(rows, "columns"):
            missing = [name for name in names if name not in rows.columns]
            if missing:
                raise ValueError(f"the rows lack the feature column(s) {missing}; this model reads {names}")
            columns = {name: rows[name] for name in names}
        else:
            array = np.asarray(rows)
            if array.ndim != 2 or array.shape[1] != self.n_features_in_:
                raise ValueError(f"expected a DataFrame with the columns {names} or an (n, {self.n_features_in_}) "
                                 f"array of their codes, got shape {array.shape}")
            columns = {name: array[:, j] for j, name in enumerate(names)}
        return {name: codes_of(name, values, self.labels_.get(name), self.design_.domain.size(name))
                for name, values in columns.items()}

    def _encoded(self, rows: Any) -> np.ndarray:
        return self.design_.encode_features(self._codes(rows))

    # predictions ----------------------------------------------------------------------------------
    def predict(self, rows: Any) -> np.ndarray:
        """Linear: the target in its own units (``target_values_``). Logistic: its labels (``classes_``), the
        positive one only where the log-odds are > 0."""
        if self.task == "linear":
            codes = data_scale.target_codes(self.design_, self.encoded_model_.predict(self._encoded(rows)))
            return values_of_codes(self.target_values_, codes)
        positive = self.encoded_model_.predict(self._encoded(rows)) > 0
        return np.where(positive, self.classes_[self._positive], self.classes_[1 - self._positive])

    def decision_function(self, rows: Any) -> np.ndarray:
        """Logistic only: the log-odds of ``classes_[1]``."""
        self._logistic("decision_function")
        score = self.encoded_model_.decision_function(self._encoded(rows))
        return score if self._positive == 1 else -score

    def predict_proba(self, rows: Any) -> np.ndarray | pd.DataFrame:
        """Logistic only: one column per class in the order of ``classes_`` (a DataFrame with those column names and
        the rows' index when ``rows`` is a DataFrame)."""
        self._logistic("predict_proba")
        proba = self.encoded_model_.predict_proba(self._encoded(rows))  # columns P(-1), P(+1)
        if self._positive == 0:
            proba = proba[:, ::-1]
        if isinstance(rows, pd.DataFrame):
            return pd.DataFrame(proba, columns=list(self.classes_), index=rows.index)
        return proba

    def score(self, rows: Any, y: Any = None) -> float:
        """R^2 of the predictions in the target's units (linear) or their accuracy (logistic), as scikit-learn's
        ``score``. ``y`` holds the target as the table does (codes or labels); by default the rows' target column."""
        if y is None:
            if not hasattr(rows, "columns") or self.target_ not in rows.columns:
                raise ValueError(f"give y, or rows with the target column {self.target_!r}")
            y = rows[self.target_]
        truth = codes_of(self.target_, y, self.labels_.get(self.target_), self.design_.domain.size(self.target_))
        predicted = self.predict(rows)
        if self.task == "logistic":
            return float(np.mean(predicted == self.classes_[truth]))
        actual = self.target_values_[truth]
        total = float(np.sum((actual - actual.mean()) ** 2))
        residual = float(np.sum((actual - predicted) ** 2))
        return 1.0 - residual / total if total > 0 else (1.0 if residual == 0 else 0.0)

    def coefficients(self) -> dict[str, float]:
        """``{feature name: coefficient}`` on the codes (the intercept under :data:`INTERCEPT_NAME`); the encoded
        ones are ``encoded_model_.coefficients()``."""
        return {INTERCEPT_NAME: float(self.intercept_), **dict(zip(self.feature_names_, self.coef_.tolist(),
                                                                       strict=True))}

    def _logistic(self, what: str) -> None:
        if self.task != "logistic":
            raise AttributeError(f"{what} is only defined for logistic regressions")

    def __repr__(self) -> str:
        return (f"FittedRegression(task={self.task!r}, method={self.method!r}, release_id={self.release_id}, "
                f"features={self.n_features_in_}, cost={self.cost})")
