"""The error measures of both local families' experiments (one implementation, estimators.local.accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.base import EstimatorError
from estimators.local.accuracy import relative_error, squared_relative_error


def test_relative_errors_in_both_norms() -> None:
    truth = np.array([3.0, 4.0])
    assert relative_error([3.0, 4.0], truth) == 0.0
    assert relative_error([0.0, 0.0], truth) == pytest.approx(1.0)
    assert relative_error([3.0, 8.0], truth, "linf") == pytest.approx(1.0)
    truth = np.array([1.0, 1.0])
    assert squared_relative_error([1.0, 2.0], truth) == pytest.approx(0.5)
    assert squared_relative_error([1.0, 3.0], truth, "linf") == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("estimate", "truth", "norm", "words"),
    [([1.0, 1.0], [1.0, 1.0], "l1", "norm"), ([1.0], [1.0, 1.0], "l2", "shape"),
     ([1.0, 1.0], [0.0, 0.0], "l2", "zero")],
)
def test_bad_inputs_are_named(estimate: list, truth: list, norm: str, words: str) -> None:
    with pytest.raises(EstimatorError, match=words):
        relative_error(estimate, truth, norm)
