"""DP-IHT's clipped gradient sums of a data engine against the in-memory ones (``ArrayGradients``): the check the
gradient-sum tests and the engine contract (tests/service/data/test_engine_contract.py) share."""

from __future__ import annotations

import numpy as np
import pandas as pd

from estimators.central.dp_iht import ArrayGradients, loss_slopes
from service.data.oracle import TableCountOracle
from service.mechanisms.dp_iht import EngineGradients
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
    assert oracle.distinct_rows_read == 0
