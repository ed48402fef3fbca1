"""Evaluation metrics of the experiments of Ferrando & Sheldon 2024, "Private Regression via Data-Dependent Sufficient
Statistic Perturbation" (Sec. 4): mean squared error and ROC AUC."""

from __future__ import annotations

import numpy as np

from estimators.base import EstimatorError


def _pair(y_true: object, y_other: object, name: str) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(y_true, dtype=float)
    b = np.asarray(y_other, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise EstimatorError(f"y_true and {name} must be non-empty vectors of one length, got {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise EstimatorError(f"y_true and {name} must be finite")
    return a, b


def mse(y_true: object, y_pred: object) -> float:
    """Mean squared error ``mean (y - y_hat)^2``."""
    a, b = _pair(y_true, y_pred, "y_pred")
    return float(np.mean((a - b) ** 2))


def auc(y_true: object, scores: object) -> float:
    """Area under the ROC curve; labels in ``{-1, +1}`` or ``{0, 1}`` (positive = the larger), scores any monotone."""
    from sklearn.metrics import roc_auc_score

    a, b = _pair(y_true, scores, "scores")
    levels = np.unique(a)
    if levels.size != 2:
        raise EstimatorError(f"y_true must hold exactly two classes, got {levels.tolist()}")
    return float(roc_auc_score(a == levels[1], b))
