"""The server's side of DR-ERM-LDP: low-dimensional private ERM on projected data, then sparse recovery with cvxpy.

Source: Wang, Gaboardi & Xu, "Empirical risk minimization in non-interactive local differential privacy revisited"
(NeurIPS 2018), Alg. 4, for a generalized linear loss ``f(<w, x>, y)`` over a convex set ``C`` with
``||C||_2 <= 1`` (an l1 ball or the probability simplex in Cor. 3), ``||x|| <= 1``, ``|y| <= 1``:

* step 2: a public random matrix ``Phi`` (``m x p``,
  :func:`workloads.local.randomizers.random_projection_statistics.random_projection`);
* step 5: an eps-LDP ERM on the projected data ``(Phi x_i, y_i)`` over ``Phi C``, giving ``w_bar`` in ``R^m``. The
  paper's choice ("the modified algorithm of Smith et al. 2017", in a supplementary we do not have) is replaced by a
  non-interactive sufficient-statistics protocol for the **squared loss** ``f(a, y) = (a - y)^2 / 2``: each
  participant reports ``[y u, vech(u u^T)]``, ``u = Phi x``, once through the l2-ball randomizer
  (:func:`workloads.local.randomizers.random_projection_statistics.projected_statistics_report`); the server
  averages the reports into
  ``hat b ~ (1/n) sum y_i u_i`` and ``hat S ~ (1/n) sum u_i u_i^T``, projects ``hat S`` onto the PSD cone (Higham
  1988, :func:`estimators.psd.project_psd`) and solves the convex problem
  ``min_{z in C} (1/2) (Phi z)^T hat S (Phi z) - hat b^T Phi z`` (:func:`projected_least_squares`), the projected
  empirical risk up to a constant, with ``w_bar = Phi z*`` in ``Phi C``;
* step 7: ``w_priv = argmin_w ||w||_C  s.t.  Phi w = w_bar`` (:func:`recover_from_projection`; Vershynin 2015). For
  the l1 ball of radius ``R`` the gauge is ``||w||_1 / R``; for the simplex it is ``sum_j w_j`` on ``w >= 0`` (and
  infinite elsewhere), so the problem is ``min sum w s.t. Phi w = w_bar, w >= 0``, which can be infeasible: that is
  reported as a :class:`~estimators.local.sparse.convex.ConvexSolverError` naming the status, never as an answer. Since
  ``w_bar = Phi z*`` with ``z*`` in ``C``, the minimum gauge is at most 1 and ``w_priv`` lies in ``C``.

Both problems go through :func:`estimators.local.sparse.convex.solve_convex`. Everything here is post-processing of the
reports.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from estimators.base import EstimatorError, LinearRegressor, as_matrix, check_positive, check_vector, feature_names_for
from estimators.local.sparse.convex import LP_SOLVERS, solve_convex
from estimators.psd import project_psd
from workloads.local.randomizers.random_projection_statistics import unpack_projected_statistics

CONSTRAINTS = ("l1", "simplex")


def check_constraint(constraint: object) -> str:
    if constraint not in CONSTRAINTS:
        raise EstimatorError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    return str(constraint)


def _membership(z: cp.Variable, constraint: str, radius: float) -> list[cp.Constraint]:
    if constraint == "l1":
        return [cp.norm1(z) <= radius]
    return [z >= 0, cp.sum(z) == 1]


def projected_least_squares(
    cross: object, gram: object, projection: object, constraint: str = "l1", radius: float = 1.0
) -> np.ndarray:
    """Step 5 on released statistics: ``w_bar = Phi z*``, ``z* = argmin_{z in C} 1/2 z^T Phi^T S Phi z - b^T Phi z``."""
    phi = as_matrix("projection", projection)
    m, p = phi.shape
    b = check_vector("cross", cross, m)
    s = as_matrix("gram", gram, m)
    if s.shape != (m, m):
        raise EstimatorError(f"gram must be {m} x {m}, got shape {s.shape}")
    kind = check_constraint(constraint)
    r = check_positive("radius", radius)
    values, vectors = np.linalg.eigh(project_psd(s))
    half = (vectors * np.sqrt(np.clip(values, 0.0, None))).T @ phi  # ||half z||^2 = z^T Phi^T S_psd Phi z
    z = cp.Variable(p)
    objective = 0.5 * cp.sum_squares(half @ z) - (phi.T @ b) @ z
    solve_convex(cp.Problem(cp.Minimize(objective), _membership(z, kind, r)), "DR-ERM projected least squares")
    return phi @ np.asarray(z.value, dtype=float)


def recover_from_projection(
    projection: object, w_bar: object, constraint: str = "l1", radius: float = 1.0
) -> np.ndarray:
    """Step 7: ``argmin ||w||_C s.t. Phi w = w_bar`` (l1 ball of radius ``radius``, or the probability simplex)."""
    phi = as_matrix("projection", projection)
    m, p = phi.shape
    target = check_vector("w_bar", w_bar, m)
    kind = check_constraint(constraint)
    check_positive("radius", radius)
    w = cp.Variable(p)
    if kind == "l1":
        problem = cp.Problem(cp.Minimize(cp.norm1(w)), [phi @ w == target])
    else:
        problem = cp.Problem(cp.Minimize(cp.sum(w)), [phi @ w == target, w >= 0])
    solve_convex(problem, f"DR-ERM recovery ({kind})", LP_SOLVERS)
    return np.asarray(w.value, dtype=float)


class DRERMLinearRegression(LinearRegressor):
    """DR-ERM-LDP (Alg. 4) with the squared loss: ``fit(reports, projection)``; no intercept.

    ``reports`` are the participants' rows (or their mean, a single row) of
    :func:`~workloads.local.randomizers.random_projection_statistics.projected_statistics_report` for the public
    ``projection``.
    Fitted: ``coef_`` (``w_priv``), ``w_bar_`` (the low-dimensional solution).
    """

    def __init__(self, constraint: str = "l1", radius: float = 1.0) -> None:
        self.constraint = constraint
        self.radius = radius

    def check_settings(self) -> None:
        """The settings' errors, for a caller that validates before collecting any report."""
        check_constraint(self.constraint)
        check_positive("radius", self.radius)

    def fit(self, reports: object, projection: object, feature_names: object = None) -> DRERMLinearRegression:
        self.check_settings()
        phi = as_matrix("projection", projection)
        m, p = phi.shape
        rows = np.atleast_2d(np.asarray(reports, dtype=float))
        width = m + m * (m + 1) // 2
        if rows.ndim != 2 or rows.shape[1] != width or rows.shape[0] == 0:
            raise EstimatorError(f"reports must be rows of {width} entries for m={m}, got shape {rows.shape}")
        cross, gram = unpack_projected_statistics(rows.mean(axis=0), m)
        names = feature_names_for(feature_names, p)
        self.w_bar_ = projected_least_squares(cross, gram, phi, self.constraint, self.radius)
        self._store(recover_from_projection(phi, self.w_bar_, self.constraint, self.radius), names, intercept=False)
        return self
