"""Fitted regressions as the client receives them: coefficients plus the design's encoding.

Numpy only (plus :mod:`workloads` and :mod:`estimators.base`), so an analyst's notebook can predict without the
server's stack. ``predict``/``predict_proba`` take either a DataFrame of integer codes with the dataset's
columns (encoded exactly as the fit encoded them) or an already-encoded feature matrix.

:class:`FittedRegression` is an :class:`estimators.base.LinearScoreModel`: its score, labels and probabilities are
the server estimators' own (:func:`estimators.base.sign_labels`, :func:`estimators.base.logistic_probabilities`), so
the client predicts exactly what the server's model would on the same coefficients."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from estimators.base import BinaryClassifier, LinearScoreModel, logistic_probabilities, sign_labels
from workloads.domain import Domain
from workloads.encodings import INTERCEPT_NAME, DesignEncoding


class ExtrapolationWarning(UserWarning):
    """An answer rests in part on a release's model, not on what the release measured."""


class FittedRegression(LinearScoreModel):
    """A private linear or logistic regression answered by the server (scikit-learn style).

    ``coef_`` (in the order of ``feature_names_``), ``intercept_``, ``release_id`` (the release that
    answered), ``cost`` (what this call was charged: zero when a stored release answered) and ``budget``
    (when a new release was made: the budget's composed epsilon spent before and after it, and why; else None).
    ``notes`` are the server's remarks (a reused release, extrapolated pairs) and ``coverage`` what the
    release measured of the regression's columns; an extrapolated fit raises an ExtrapolationWarning."""

    def __init__(self, answer: Mapping[str, Any], domain: Mapping[str, Mapping[str, object]]) -> None:
        self.answer = dict(answer)
        self.task: str = answer["task"]
        self.method: str = answer["method"]
        self.release_id: int = answer["release_id"]
        self.reused: bool = answer["reused"]
        self.cost: dict[str, float] = dict(answer["cost"])
        self.budget: dict[str, object] | None = answer.get("budget")
        self.feature_names_: tuple[str, ...] = tuple(answer["feature_names"])
        coefficients = answer["coefficients"]
        self.coef_ = np.array([coefficients[name] for name in self.feature_names_], dtype=float)
        self.intercept_ = float(coefficients.get(INTERCEPT_NAME, 0.0))
        self.n_features_in_ = self.coef_.size
        self.design_ = DesignEncoding.from_dict(Domain.from_dict(domain), answer["design"])
        if self.task == "logistic":
            self.classes_ = BinaryClassifier.classes_.copy()
        self.notes: list[str] = list(answer.get("notes") or [])
        self.coverage: dict[str, Any] | None = (answer.get("details") or {}).get("coverage")
        if self.coverage is not None and (self.coverage.get("unmeasured_pairs")
                                          or self.coverage.get("unmeasured_attributes")):
            warnings.warn(self.coverage.get("warning") or "extrapolated", ExtrapolationWarning, stacklevel=3)

    def _features(self, rows: Any) -> np.ndarray:
        if hasattr(rows, "columns"):
            return self.design_.encode_features(rows)
        features = np.asarray(rows, dtype=float)
        if features.ndim != 2 or features.shape[1] != len(self.coef_):
            raise ValueError(f"expected a DataFrame of codes or an (n, {len(self.coef_)}) encoded matrix, "
                             f"got shape {features.shape}")
        return features

    def predict(self, rows: Any) -> np.ndarray:
        """Linear: the prediction on the target's encoded scale. Logistic: labels in {-1, +1} (+1 only where the
        score is > 0)."""
        scores = self.decision_function(rows)
        return scores if self.task == "linear" else sign_labels(scores)

    def predict_proba(self, rows: Any) -> np.ndarray:
        """Logistic only: columns P(-1), P(+1)."""
        if self.task != "logistic":
            raise AttributeError("predict_proba is only defined for logistic regressions")
        return logistic_probabilities(self.decision_function(rows))

    def __repr__(self) -> str:
        return (f"FittedRegression(task={self.task!r}, method={self.method!r}, release_id={self.release_id}, "
                f"features={len(self.coef_)}, cost={self.cost})")
