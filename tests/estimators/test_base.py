"""What every estimator shares: predict before fit, inputs of the wrong width."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError, NotFittedError
from estimators.central.linear import DDSSPLinearRegression
from estimators.central.logistic import DDSSPLogisticRegression
from estimators.central.sufficient_stats import (
    statistics_from_rows,
)
from workloads.encodings import DesignEncoding


def test_predict_before_fit_and_wrong_width(adult_domain, adult_train):
    with pytest.raises(NotFittedError):
        DDSSPLinearRegression().predict(np.zeros((1, 3)))
    with pytest.raises(EstimatorError, match="stats"):
        DDSSPLinearRegression().fit(np.eye(3))
    design = DesignEncoding(adult_domain, ["age", "sex"], "income>50K", "logistic")
    model = DDSSPLogisticRegression().fit(statistics_from_rows(design, adult_train))
    with pytest.raises(EstimatorError, match="2 columns"):
        model.predict_proba(np.zeros((1, 3)))
    assert list(model.coefficients()) == ["(intercept)", "age", "sex=1"]
