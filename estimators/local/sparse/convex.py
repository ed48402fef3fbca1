"""The one home of cvxpy calls: solve a convex problem and refuse anything but a certified optimum.

Every constrained or sparse problem of the sparse-regression estimators (the label-private Lasso, DR-ERM's
low-dimensional least squares over ``Phi C`` and its recovery ``argmin ||w||_C s.t. Phi w = w_bar``) goes through
:func:`solve_convex`. A status other than ``optimal`` -- ``infeasible``, ``unbounded``, their ``_inaccurate``
variants, ``optimal_inaccurate``, ``user_limit``, or a solver that raised -- moves on to the next solver of the list,
and when none is left becomes a :class:`ConvexSolverError` naming the problem and every solver's status, so a failed
solve is never reported as an answer. ``optimal_inaccurate`` is refused: an inaccurate point of a recovery problem
can violate ``Phi w = w_bar`` visibly. Quadratic and conic problems use Clarabel (an interior-point method); the
linear programs of DR-ERM's recovery try Clarabel and then HiGHS (:data:`LP_SOLVERS`).
"""

from __future__ import annotations

import warnings

import cvxpy as cp

from estimators.base import EstimatorError

ACCEPTED_STATUSES = frozenset({cp.OPTIMAL})
DEFAULT_SOLVERS: tuple[str, ...] = (cp.CLARABEL,)
#: Linear programs (the l1 and simplex recoveries) fall back to HiGHS, a simplex/IPM LP solver with crossover, when
#: the interior-point Clarabel stops at ``optimal_inaccurate`` on a degenerate LP (seen on DR-ERM recoveries whose
#: target lies on the boundary of ``Phi C``).
LP_SOLVERS: tuple[str, ...] = (cp.CLARABEL, cp.HIGHS)


class ConvexSolverError(EstimatorError):
    """No solver certified an optimum; ``status`` is the last solver's cvxpy status (or ``"solver_error"``)."""

    def __init__(self, problem_name: str, statuses: dict[str, str], detail: str = "") -> None:
        self.problem_name = problem_name
        self.statuses = dict(statuses)
        self.status = list(statuses.values())[-1]
        tried = ", ".join(f"{solver}: {status!r}" for solver, status in statuses.items())
        message = f"{problem_name}: no solver returned status 'optimal' ({tried})"
        super().__init__(f"{message}; {detail}" if detail else message)


def solve_convex(problem: cp.Problem, problem_name: str, solvers: tuple[str, ...] = DEFAULT_SOLVERS) -> float:
    """Solve ``problem`` with the first of ``solvers`` that certifies an optimum and return the optimal value.

    Each solver is tried in turn; if none returns ``optimal``, :class:`ConvexSolverError` names every status.
    """
    if not isinstance(problem, cp.Problem):
        raise EstimatorError(f"problem must be a cvxpy.Problem, got {type(problem).__name__}")
    if not problem.is_dcp():
        raise EstimatorError(f"{problem_name}: the problem is not convex in cvxpy's DCP rules")
    if isinstance(solvers, str) or not solvers:
        raise EstimatorError("solvers must be a non-empty tuple of cvxpy solver names")
    statuses: dict[str, str] = {}
    detail = ""
    for solver in solvers:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "Solution may be inaccurate": we read the status
                problem.solve(solver=solver)
        except cp.error.SolverError as exc:
            statuses[solver] = "solver_error"
            detail = str(exc).splitlines()[0] if str(exc) else ""
            continue
        if problem.status in ACCEPTED_STATUSES:
            return float(problem.value)
        statuses[solver] = str(problem.status)
    raise ConvexSolverError(problem_name, statuses, detail)
