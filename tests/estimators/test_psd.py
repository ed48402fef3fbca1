"""Positive semi-definite helpers: projection onto the PSD cone and minimum-norm solves."""

from __future__ import annotations

import numpy as np

from estimators.psd import project_psd, smallest_eigenvalue, solve_psd


# --- PSD helpers ----------------------------------------------------------------------------------
def test_psd_projection_and_min_norm_solve():
    matrix = np.array([[2.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    assert np.allclose(project_psd(matrix), np.diag([2.0, 0.0, 0.0]))
    assert smallest_eigenvalue(matrix) == -1.0
    assert np.allclose(solve_psd(matrix, [4.0, 5.0, 6.0]), [2.0, 0.0, 0.0])
    assert np.allclose(solve_psd(matrix, [4.0, 5.0, 6.0], ridge=1.0), [4.0 / 3.0, 5.0, 6.0])
