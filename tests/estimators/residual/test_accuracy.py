"""The closed-form error of an answer from noisy residuals (issue 29, section 2; estimators/residual/accuracy.py).

The variance and the excess kurtosis of a direct release's cell are checked against the linear map itself (every
unit noise pushed through the least-squares reconstruction); the mean absolute error against its exact values for a
Gaussian and a Laplace law and against the Hölder bound. The statistical comparison with measured errors is the
benchmark's (benchmarks/accuracy_forecast.py), not a test's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.residual.accuracy import CellError, MeasuredNoise, direct_cell_error, direct_forecast
from estimators.residual.basis import ResidualError, cell_variance
from estimators.residual.reconstruct import NoisyMarginal, residual_scales, residuals_from_marginals
from workloads.domain import Domain

DOMAIN = Domain.from_sizes({"a": 3, "b": 2, "c": 4, "d": 1})
#: (attributes, per-cell variance, excess kurtosis) of each measured marginal: overlapping, with an attribute of size 1
#: and the total measured on its own.
MEASURED = [(("a", "b"), 2.0, 3.0), (("b", "c"), 5.0, 1.0), (("a",), 1.5, 3.0), (("c", "d"), 0.7, 2.0), ((), 3.0, 0.5)]


def _coefficients(target: tuple[str, ...]) -> list[tuple[float, float, float]]:
    """(coefficient, variance, kurtosis) of every measured cell's noise in cell 0 of ``target``: the reconstruction
    applied to one unit noise at a time."""
    out = []
    for j, (attributes, variance, kurtosis) in enumerate(MEASURED):
        shape = DOMAIN.shape(list(attributes))
        for index in (np.ndindex(*shape) if shape else [()]):
            noisy = []
            for k, (other, other_variance, _) in enumerate(MEASURED):
                values = np.zeros(DOMAIN.shape(list(other)))
                if k == j:
                    values[index] = 1.0
                noisy.append(NoisyMarginal(other, values, other_variance))
            answer = residuals_from_marginals(DOMAIN, noisy).marginal(target)
            out.append((float(answer[(0,) * len(target)]), variance, kurtosis))
    return out


@pytest.mark.parametrize("target", [("a", "b"), ("b", "c"), ("a",), ("c", "d"), ("b",), ()])
def test_the_cell_law_is_the_reconstructions(target: tuple[str, ...]) -> None:
    error = direct_cell_error(DOMAIN, [MeasuredNoise(*m) for m in MEASURED], target)
    coefficients = _coefficients(target)
    variance = sum(c * c * v for c, v, _ in coefficients)
    fourth = sum(c ** 4 * k * v * v for c, v, k in coefficients)
    assert error.variance == pytest.approx(variance, rel=1e-12)
    assert error.excess_kurtosis == pytest.approx(fourth / variance ** 2, rel=1e-9)
    assert error.cells == DOMAIN.cells(target)


def test_the_scales_are_those_of_the_release() -> None:
    noisy = [NoisyMarginal(a, np.zeros(DOMAIN.shape(list(a))), v) for a, v, _ in MEASURED]
    assert residual_scales(DOMAIN, [(a, v) for a, v, _ in MEASURED]) == dict(
        residuals_from_marginals(DOMAIN, noisy).scales)
    with pytest.raises(ResidualError, match="variance must be a positive"):
        residual_scales(DOMAIN, [(("a",), 0.0)])


def test_a_forecast_gives_every_workload_marginal_and_the_total() -> None:
    forecast = direct_forecast(DOMAIN, [MeasuredNoise(*m) for m in MEASURED], [("b", "a"), ("c",)], "basis")
    assert [e.attributes for e in forecast.errors] == [("a", "b"), ("c",)]  # domain order
    scales = residual_scales(DOMAIN, [(a, v) for a, v, _ in MEASURED])
    assert forecast.total_variance == pytest.approx(cell_variance(DOMAIN, (), scales))
    with pytest.raises(ResidualError, match="not measured"):
        direct_forecast(DOMAIN, [MeasuredNoise(*m) for m in MEASURED], [("a", "c")], "basis")


def test_the_mean_absolute_error_is_exact_for_gaussian_noise_and_close_for_laplace() -> None:
    gaussian = CellError(("a",), 3, 4.0)
    assert gaussian.mean_absolute_error == pytest.approx(2.0 * math.sqrt(2 / math.pi), rel=1e-15)
    assert gaussian.expected_l1 == pytest.approx(3 * gaussian.mean_absolute_error)
    assert gaussian.expected_l1_normalised(100) == pytest.approx(gaussian.expected_l1 / 100)
    b = 7.0  # a lone continuous Laplace draw: sd b sqrt(2), E|X| = b, excess kurtosis 3
    laplace = CellError(("a",), 1, 2 * b * b, 3.0)
    assert laplace.mean_absolute_error == pytest.approx(b, rel=0.015) and laplace.mean_absolute_error < b
    spiky = CellError(("a",), 1, 1.0, 1e6)  # almost always 0: the Hölder bound holds it up
    assert spiky.mean_absolute_error == pytest.approx(1 / math.sqrt(1e6 + 3))
    with pytest.raises(ResidualError, match="rows"):
        gaussian.expected_l1_normalised(0)
