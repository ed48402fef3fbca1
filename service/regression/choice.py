"""Which marginal mechanism a new release for DD-SSP (or AIM-Synth) uses when the caller names none (issue 9).

The rule reads public quantities only -- the design's columns and their domain sizes (so the number of pairs among
target and features and their cells), epsilon and delta -- never the data, so choosing costs nothing:

* ``residual`` (the ResidualPlanner plan with the regression-weighted loss: the summed variance of ``Z^T Z``'s
  entries, ``X^T y`` weighted up; :mod:`service.mechanisms.residual`) when the regression reads at most
  :data:`RESIDUAL_MAX_PAIRS` pairs holding at most :data:`RESIDUAL_MAX_PAIR_CELLS` cells in all: every pair is then
  measured directly, with noise spread by the plan;
* ``aim`` otherwise -- and always for AIM-Synth (whose synthetic rows need AIM's model) and for logistic DD-SSP
  (Prop. 3.4; the residual plan is unmeasured there, and DD-SSP from AIM already beats ObjPert at small epsilon on
  every logistic table of docs/regression-results.md). With many pairs, or pairs of many cells, a data-independent
  plan spreads rho too thin, and AIM's adaptive selection (measure the strong pairs well, let the model extrapolate
  the rest) wins.

Measured (``benchmarks/ddssp_residual_quick.py``, ``benchmarks/results/ddssp_residual_quick.json`` and
``ddssp_residual_large_eps.json``; 5 trials, epsilon 0.05 to 2): DD-SSP from the residual plan beats DD-SSP from
AIM on adult (14 columns, 91 pairs, 31,066 pair cells) and ACSincome-LIN (9 columns, 36 pairs, 29,050 cells) at every
epsilon; AIM wins on ACSmobility (21 columns, 210 pairs, 38,036 cells) and taxi (10 columns, 45 pairs, 46,734 cells)
at every epsilon. The two thresholds separate those four tables and were chosen on them: read them as a rule of thumb
fitted to four tables, not as a law. Epsilon did not change the winner on any of them, so the rule does not use it.
"""

from __future__ import annotations

import itertools

from workloads.encodings import DesignEncoding

RESIDUAL_MAX_PAIRS = 100
RESIDUAL_MAX_PAIR_CELLS = 40_000


def pair_cells(design: DesignEncoding) -> tuple[int, int]:
    """``(pairs, cells)``: the number of pairs among target and features, and their cells in all."""
    domain = design.domain
    columns = [*design.features, design.target]
    pairs = list(itertools.combinations(columns, 2))
    return len(pairs), sum(domain.size(a) * domain.size(b) for a, b in pairs)


def marginal_mechanism_for(design: DesignEncoding, method: str, epsilon: object, delta: object) -> str:  # noqa: ARG001
    """The mechanism of a new marginal release for ``method`` on ``design`` (module docstring). ``epsilon`` and
    ``delta`` are inputs of the rule but changed the winner in no measurement, so they are not used."""
    if method != "dd-ssp" or design.task != "linear":
        return "aim"
    pairs, cells = pair_cells(design)
    return "residual" if pairs <= RESIDUAL_MAX_PAIRS and cells <= RESIDUAL_MAX_PAIR_CELLS else "aim"
