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

``method="auto"`` (issue 30, point 4; :func:`method_for`) picks the regression *method* the same way, from the same
public quantities plus epsilon:

* linear: ``dd-ssp`` when its release would be AIM's (the wide designs above, where DD-SSP from AIM beat AdaSSP by
  1.4-3.3x at every epsilon); otherwise the noise each method's release puts on ``X^T y`` decides: for the residual
  plan the mean variance ``v`` of the ``X^T y`` entries (``y^T y`` included) of its unbiased reconstruction
  (:func:`estimators.residual.regression_queries.gram_entry_variances`), for AdaSSP's Gram release the variance
  ``sigma_gram^2`` it adds to every entry (:func:`service.mechanisms.gram.calibrate`). Both are ``1 / rho`` times a
  function of the design alone, so their ratio does not depend on epsilon: ``dd-ssp`` when ``v / sigma_gram^2 <=``
  :data:`NOISE_RATIO_LIMIT`, ``adassp`` above. Measured (docs/regression-results.md, "method auto"): adult 1.06 (no
  intercept) and 0.94 (intercept), where DD-SSP wins or ties; ACSincome 2.66, salary 2.12 and titanic 4.87, where
  AdaSSP wins. A first version compared the ``X^T X`` entries instead and picked DD-SSP on salary (0.69, held out),
  where it lost: there the mean over ``X^T X`` is that of thousands of cheap one-hot-by-one-hot cells, while the
  entries that carry the fit, ``X^T y``, cost 2.1x AdaSSP's. The limit 1.5 was then set seeing all five tables.
* logistic: ``dd-ssp`` below epsilon :data:`LOGISTIC_OBJPERT_FROM`, ``objpert`` from it on: DD-SSP's AUC is ahead at
  epsilon 0.05-0.5 on every logistic table but ACSemployment at 0.5, and ObjPert's at 2 on all (issue 9's table).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

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


#: ``method="auto"``: the regression method chosen for you (module docstring).
AUTO_METHOD = "auto"
#: Linear ``auto``: DD-SSP from the residual plan while its ``X^T y`` noise is at most this many times AdaSSP's.
NOISE_RATIO_LIMIT = 1.5
#: Logistic ``auto``: ObjPert from this epsilon on, DD-SSP below it.
LOGISTIC_OBJPERT_FROM = Fraction(1)


@dataclass(frozen=True)
class MethodChoice:
    """What ``method="auto"`` chose, by which rule, why (one sentence), and the public figures it read."""

    method: str
    rule: str
    reason: str
    figures: dict[str, float]

    def to_json(self) -> dict[str, object]:
        return {"method": self.method, "rule": self.rule, "reason": self.reason, "figures": dict(self.figures)}


def noise_ratio(design: DesignEncoding, rho: Fraction) -> tuple[float, float]:
    """``(v, sigma_gram^2)`` at ``rho``: the mean noise variance of the ``X^T y`` entries DD-SSP reads from the
    residual plan, and the variance AdaSSP's Gram release adds to each (module docstring)."""
    import numpy as np

    from estimators.residual.regression_queries import gram_entry_variances, regression_plan
    from service.mechanisms import gram

    _, xty = gram_entry_variances(regression_plan(design, rho), design)
    return float(np.mean(xty)), float(gram.calibrate(design, rho).sigma_gram) ** 2


def method_for(design: DesignEncoding, epsilon: Fraction, rho: Fraction) -> MethodChoice:
    """The method ``auto`` picks for a new release at ``epsilon`` (``rho``: what a zCDP release of it is charged)
    on ``design`` (module docstring): a function of public quantities only, so choosing costs nothing."""
    if design.task == "logistic":
        if epsilon >= LOGISTIC_OBJPERT_FROM:
            return MethodChoice("objpert", "logistic-epsilon", f"epsilon {float(epsilon):g} is at least "
                                f"{float(LOGISTIC_OBJPERT_FROM):g}, where objective perturbation's AUC leads",
                                {"epsilon": float(epsilon)})
        return MethodChoice("dd-ssp", "logistic-epsilon", f"epsilon {float(epsilon):g} is below "
                            f"{float(LOGISTIC_OBJPERT_FROM):g}, where DD-SSP's AUC leads", {"epsilon": float(epsilon)})
    pairs, cells = pair_cells(design)
    if marginal_mechanism_for(design, "dd-ssp", epsilon, None) == "aim":
        return MethodChoice("dd-ssp", "wide-design", f"{pairs} pairs of {cells:,} cells: DD-SSP from AIM's "
                            "adaptive measurements", {"pairs": pairs, "pair_cells": cells})
    v, sigma2 = noise_ratio(design, rho)
    ratio = v / sigma2
    figures = {"pairs": pairs, "pair_cells": cells, "ddssp_xty_variance": v, "adassp_xty_variance": sigma2,
               "noise_ratio": ratio}
    if ratio <= NOISE_RATIO_LIMIT:
        return MethodChoice("dd-ssp", "noise-ratio", f"the residual plan's X^T y noise is {ratio:.2f}x AdaSSP's "
                            f"(at most {NOISE_RATIO_LIMIT:g})", figures)
    return MethodChoice("adassp", "noise-ratio", f"the residual plan's X^T y noise is {ratio:.2f}x AdaSSP's "
                        f"(above {NOISE_RATIO_LIMIT:g}): AdaSSP measures X^T y itself for less", figures)
