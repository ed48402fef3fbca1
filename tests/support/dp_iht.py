"""DP-IHT's test design: its eight features, the sparse truth, and how far a coefficient's accumulated noise may
take it (:func:`noise_tolerance`); shared by the mechanism's and the API's tests.
"""

from __future__ import annotations

import math

import numpy as np

FEATURES = [f"x{j}" for j in range(8)]


TRUTH = np.array([0.5, 0.5, 0, 0, 0, 0, 0, 0])


def noise_tolerance(sigma: float, step: float, n: float, curvature: float) -> float:
    """Six standard deviations of a coefficient's accumulated noise once the support is found. On the support the
    iteration is ``theta <- theta - step (H (theta - theta*) + z_t / n_hat)``, ``z_t ~ N(0, sigma^2 I)``, a linear map
    contracting by ``1 - step * curvature`` at least (``curvature`` the smallest eigenvalue of ``H = X_S^T X_S / n``),
    so each coordinate's noise has sd at most ``step sigma / n / sqrt(1 - (1 - step curvature)^2)``. (``n_hat`` differs
    from ``n`` by a ``N(0, sigma_n^2)`` draw, ``sigma_n`` about 2 here against ``n = 2000``: it rescales the step by
    0.1 % at most and moves no fixed point, since the gradient vanishes at ``theta*``.)"""
    contraction = 1.0 - step * curvature
    return 6.0 * step * sigma / n / math.sqrt(1.0 - contraction**2)
