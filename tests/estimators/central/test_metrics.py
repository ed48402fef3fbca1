"""Evaluation metrics (MSE, ROC AUC) by hand."""

from __future__ import annotations

import pytest

from estimators.base import EstimatorError
from estimators.central.metrics import auc, mse


def test_metrics_by_hand():
    assert mse([1.0, 2.0, 3.0], [1.0, 0.0, 4.0]) == pytest.approx(5.0 / 3.0)
    assert auc([-1, -1, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert auc([0, 0, 1, 1], [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert auc([-1, 1, -1, 1], [0.1, 0.2, 0.3, 0.4]) == 0.75
    with pytest.raises(EstimatorError, match="two classes"):
        auc([1, 1], [0.1, 0.2])
    with pytest.raises(EstimatorError, match="y_pred"):
        mse([1.0], [1.0, 2.0])
