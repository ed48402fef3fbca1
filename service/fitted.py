"""Fitted regressions as the client receives them: coefficients plus the design's encoding.

Numpy only (plus :mod:`workloads`), so an analyst's notebook can predict without the server's
stack. ``predict``/``predict_proba`` take either a DataFrame of integer codes with the dataset's
columns (encoded exactly as the fit encoded them) or an already-encoded feature matrix."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from workloads.domain import Domain
from workloads.encodings import DesignEncoding


class ExtrapolationWarning(UserWarning):
    """An answer rests in part on a release's model, not on what the release measured."""


class FittedRegression:
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
        self.feature_names_: list[str] = list(answer["feature_names"])
        coefficients = answer["coefficients"]
        self.coef_ = np.array([coefficients[name] for name in self.feature_names_], dtype=float)
        self.intercept_ = float(coefficients.get("(intercept)", 0.0))
        self.design_ = DesignEncoding.from_dict(Domain.from_dict(domain), answer["design"])
        if self.task == "logistic":
            self.classes_ = np.array([-1, 1])
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

    def decision_function(self, rows: Any) -> np.ndarray:
        return self._features(rows) @ self.coef_ + self.intercept_

    def predict(self, rows: Any) -> np.ndarray:
        """Linear: the prediction on the target's encoded scale. Logistic: labels in {-1, +1}."""
        scores = self.decision_function(rows)
        return scores if self.task == "linear" else np.where(scores >= 0, 1, -1)

    def predict_proba(self, rows: Any) -> np.ndarray:
        """Logistic only: columns P(-1), P(+1)."""
        if self.task != "logistic":
            raise AttributeError("predict_proba is only defined for logistic regressions")
        positive = 1.0 / (1.0 + np.exp(-self.decision_function(rows)))
        return np.column_stack([1.0 - positive, positive])

    def __repr__(self) -> str:
        return (f"FittedRegression(task={self.task!r}, method={self.method!r}, release_id={self.release_id}, "
                f"features={len(self.coef_)}, cost={self.cost})")
