"""DP-IHT's clipped gradient sums and curvature of a data engine against the in-memory ones (``ArrayGradients``,
``rows_curvature``): the check the gradient-sum tests and the engine contract
(tests/service/data/test_engine_contract.py) share."""

from __future__ import annotations

import numpy as np
import pandas as pd

from estimators.central.dp_iht import ArrayGradients, loss_slopes
from service.data.oracle import TableCountOracle
from service.mechanisms import curvature
from service.mechanisms.dp_iht import EngineGradients, rows_curvature
from workloads.encodings import DesignEncoding


def designs(domain, features, target, overrides, positive):  # noqa: ANN001, ANN201
    """A linear design with an intercept and a logistic one without, over the same columns."""
    return [DesignEncoding(domain, features, target, "linear", intercept=True, overrides=overrides),
            DesignEncoding(domain, features, target, "logistic", intercept=False, overrides=overrides,
                           positive_level=positive)]


def assert_sums_as_numpy(oracle: TableCountOracle, design: DesignEncoding, codes: pd.DataFrame) -> None:
    """For theta at random, the engine's sum equals numpy's on the encoded rows (clipping active: G small; inactive:
    G above every row's gradient norm), within 1e-9 relative (float64 summation order)."""
    X, y = design.encode(codes)
    if design.intercept:
        X = np.column_stack([np.ones(len(X)), X])
    in_memory = ArrayGradients(X, y, design.task)
    in_engine = EngineGradients(oracle, design, design.task)
    rng = np.random.default_rng(11)
    for _ in range(2):
        theta = rng.normal(0.0, 1.0, X.shape[1])
        norms = np.abs(loss_slopes(design.task, X @ theta, y)) * np.linalg.norm(X, axis=1)
        for bound, clipped in ((0.2 * float(np.median(norms)), True), (2.0 * float(norms.max()), False)):
            assert bool(np.any(norms > bound)) is clipped
            expected = in_memory(theta, bound)
            scale = float(np.sum(np.minimum(norms, bound)))  # sum of the clipped gradients' norms
            np.testing.assert_allclose(in_engine(theta, bound), expected, rtol=1e-9, atol=1e-9 * scale)
            assert_curvature_as_numpy(in_engine, X, y, theta, design, bound, rng, nonzero=not clipped)
    assert oracle.distinct_rows_read == 0


def assert_curvature_as_numpy(in_engine: EngineGradients, X: np.ndarray, y: np.ndarray, theta: np.ndarray,
                              design: DesignEncoding, bound: float, rng: np.random.Generator, *, nonzero: bool) -> None:
    """The engine's integer curvature over a random support (some coordinates of ``theta`` zeroed, as a sparse model
    has them; the intercept kept when there is one, so its row is checked) equals numpy's over the rows, exactly:
    both sum the same integers. With ``nonzero`` (nothing clipped) not all zero, so that the check can fail; with
    clipping most rows weigh 0."""
    sparse = np.where(rng.random(theta.size) < 0.5, 0.0, theta)
    if design.intercept:
        sparse[0] = theta[0]
    support = [int(i) for i in np.flatnonzero(sparse)] or [int(np.argmax(np.abs(theta)))]
    scales, _ = curvature.support_scales(design, support)
    expected = rows_curvature(X, y, np.ones(len(X), dtype=np.int64), sparse, design.task, bound, support, scales)
    got = in_engine.curvature(sparse, bound, support)
    assert got.shape == expected.shape and (not nonzero or any(v != 0 for v in expected.ravel()))
    assert (got == expected).all(), (got, expected)
