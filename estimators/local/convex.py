"""The one home of cvxpy calls: solve a convex problem and refuse anything but a certified optimum.

Every constrained or sparse problem of the sparse-regression estimators (the label-private Lasso, DR-ERM's
low-dimensional least squares over ``Phi C`` and its recovery ``argmin ||w||_C s.t. Phi w = w_bar``) goes through
:func:`solve_convex`. A status other than ``optimal`` -- ``infeasible``, ``unbounded``, their ``_inaccurate``
variants, ``optimal_inaccurate``, ``user_limit``, or a solver that raised -- becomes a :class:`ConvexSolverError`
naming the problem and the status, so a failed solve is never reported as an answer. ``optimal_inaccurate`` is
refused too: the solvers we use (Clarabel, an interior-point method, by default) reach ``optimal`` on these
well-scaled problems, and an inaccurate point of a recovery problem can violate ``Phi w = w_bar`` visibly.
"""

from __future__ import annotations

import cvxpy as cp

from estimators.base import EstimatorError

ACCEPTED_STATUSES = frozenset({cp.OPTIMAL})
DEFAULT_SOLVER = cp.CLARABEL


class ConvexSolverError(EstimatorError):
    """The solver did not certify an optimum; ``status`` is cvxpy's status (or ``"solver_error"``)."""

    def __init__(self, problem_name: str, status: str, detail: str = "") -> None:
        self.problem_name = problem_name
        self.status = status
        message = f"{problem_name}: the convex solver returned status {status!r}, not 'optimal'"
        super().__init__(f"{message} ({detail})" if detail else message)


def solve_convex(problem: cp.Problem, problem_name: str, solver: str = DEFAULT_SOLVER) -> float:
    """Solve ``problem`` with ``solver`` and return its optimal value, or raise :class:`ConvexSolverError`."""
    if not isinstance(problem, cp.Problem):
        raise EstimatorError(f"problem must be a cvxpy.Problem, got {type(problem).__name__}")
    if not problem.is_dcp():
        raise EstimatorError(f"{problem_name}: the problem is not convex in cvxpy's DCP rules")
    try:
        problem.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise ConvexSolverError(problem_name, "solver_error", str(exc).splitlines()[0] if str(exc) else "") from None
    if problem.status not in ACCEPTED_STATUSES:
        raise ConvexSolverError(problem_name, str(problem.status))
    return float(problem.value)
