"""A fit's signal-to-noise verdict (issue 20, section 3): does the noise dominate the estimate?

From the coefficients and their standard errors (:mod:`estimators.local.uncertainty`) alone, so free. Coefficients
are the features' (the intercept a public transform implies is left out); a coefficient with standard error 0 and
value 0 was not selected (a sparse fit, conditional on its support) and is left out too.

* ``z_j = |w_j| / se_j``: coefficient ``j`` is *determined* when ``z_j >= 2`` (its ~95 % interval ``w_j +- 2 se_j``
  excludes 0, so its sign is known). A sparse fit chose its support among all ``p`` features, picking the largest
  (noise included): its kept coefficients are compared with the Bonferroni threshold ``Phi^-1(1 - 0.025 / p)``
  instead (at least 2; 2.50 at ``p = 4``, 3.48 at ``p = 100``), so pure noise is called noise-dominated with
  probability about 95 % whatever ``p`` (Dunn 1961, "Multiple comparisons among means").
* the signal-to-noise ratio ``||w|| / sqrt(sum_j se_j^2)`` (``sqrt(trace Cov)``: the expected norm of the noise).

**What the analyst uses: the predictions** (:func:`check_predictions`, :func:`assess_predictions`; issue 29, section
6). Where the campaign's public table holds the binary target, the verdict judges the predictions instead of the
coefficients, because a fit that ranks well can have coefficients that are not determined at all (near-constant
binary features of ACSemployment get standard errors of 1-150 while the fit's AUC is 0.81-0.85). From the public
rows, the fit and its covariance ``Cov`` (free: all of it public or released):

* the AUC of the fitted linear predictor ``x^T w`` on the public rows, and a 90 % range from coefficient vectors
  drawn from ``N(w, Cov)`` (the planner's fixed public stream of normals: no data, no seed a caller chooses); every
  link is increasing in ``x^T w``, so one AUC serves them all;
* the Wald test of "every slope is 0": ``W = w^T Cov^+ w``, chi-square with ``rank(Cov)`` degrees of freedom under it
  (Wald 1943; Wasserman 2004, "All of Statistics", Thm. 10.13), which weights each direction by its own precision;
* the predictions' spread over the public rows ``sqrt(w^T S w)`` (``S`` their covariance) and their standard error
  ``sqrt(tr(S Cov))`` (the root mean over rows of ``Var((x - xbar)^T w)``), reported, not judged: a few rows with a
  rare feature whose coefficient is undetermined dominate both.

``noise-dominated`` when the AUC range reaches 0.5 (a fit drawn from the noise ranks no better than chance);
``weak`` when it does not but the Wald test does not reject at 5 % (the ranking holds, the coefficients are not
jointly determined); ``ok`` otherwise. The reasons name the coefficients that are not determined (``|w_j| < 2
se_j``): what not to read, without calling the predictions noise. ``strict`` refuses only ``noise-dominated``.

**Without public labels**, a fit whose reports can be tested for dependence at all (a ``glm`` campaign: the test of
:mod:`estimators.local.glm.dependence`, on the estimated moment, free) is judged by that test in place of the AUC:
``noise-dominated`` when it does not reject "labels independent of the features" at 5 % (the reports cannot be told
from reports of labels that carry no information: neither can the predictions), ``weak`` when it rejects but the
Wald test does not (the predictions carry signal; the coefficients are not jointly determined, often because a
direction saturates the link and its delta-method errors explode), ``ok`` otherwise. Any other fit without labels is
judged by the coefficient rule below, which names the undetermined coefficients too.

Verdicts of the coefficient rule (used where a fit has no covariance or no public table): ``noise-dominated`` when no
coefficient is determined (none distinguishable from 0 at 2 standard errors, no
sign known) or the ratio is below 1 (the noise's expected norm exceeds the estimate's); ``weak`` when the ratio is
below 2; ``ok`` otherwise. A mean (``ldp-avg``) has no sign to determine: its verdict compares the width of its ~95 %
interval, ``4 se``, with the width of its feasible range ``[lower, upper]`` (:func:`assess_mean`):
``noise-dominated`` at 1 or more, ``weak`` at 1/4 or more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from estimators.base import EstimatorError
from estimators.local.glm.dependence import DependenceTest
from estimators.local.planning import AUC_QUANTILES, auc_sample, column_aucs, public_normals, symmetric_root

#: |w| / se at which a coefficient counts as distinguishable from 0 (two standard errors)
DETERMINED_Z = 2.0
#: ||w|| / sqrt(trace Cov) below which the fit is noise-dominated, and below which it is weak
NOISE_RATIO, WEAK_RATIO = 1.0, 2.0
#: a mean's 4 se / (upper - lower) at or above which it is noise-dominated, and weak
NOISE_WIDTH, WEAK_WIDTH = 1.0, 0.25
INTERCEPT = "(intercept)"


@dataclass(frozen=True)
class Quality:
    """``verdict`` (``ok``, ``weak``, ``noise-dominated`` or ``unknown``), ``reasons`` (sentences) and the numbers
    they rest on: ``signal_to_noise`` and ``determined`` (the coefficients whose sign is known)."""

    verdict: str
    reasons: tuple[str, ...]
    signal_to_noise: float | None = None
    determined: tuple[str, ...] = ()
    #: the coefficients whose sign is not known (``|w| < 2 se``), named by the prediction verdict
    undetermined: tuple[str, ...] = ()
    #: what the prediction verdict rests on (:class:`PredictionCheck`), or None for the coefficient rule
    predictions: PredictionCheck | None = None

    @property
    def warns(self) -> bool:
        return self.verdict in ("weak", "noise-dominated")

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons), "signal_to_noise": self.signal_to_noise,
                "determined": list(self.determined), "undetermined": list(self.undetermined),
                "predictions": None if self.predictions is None else self.predictions.to_json()}


#: the level of the Wald test of a constant predictor
WALD_LEVEL = 0.05


@dataclass(frozen=True)
class PredictionCheck:
    """The numbers the prediction verdict rests on (module docstring), over ``rows`` public rows: the linear
    predictor's ``spread`` and ``standard_error``, the Wald statistic ``wald`` on ``df`` degrees of freedom and its
    ``p_value``, ``auc`` (``estimate``, ``low``, ``high``) on the public table's binary target (None without one),
    and ``dependence``, the reports' test of labels independent of the features (None where the fit has none)."""

    rows: int
    spread: float
    standard_error: float
    wald: float
    df: int
    p_value: float
    auc: dict[str, float] | None
    dependence: DependenceTest | None = None

    @property
    def ratio(self) -> float:
        return math.inf if self.standard_error == 0.0 else self.spread / self.standard_error

    def to_json(self) -> dict[str, Any]:
        return {"public_rows": self.rows, "spread": self.spread, "standard_error": self.standard_error,
                "signal_to_noise": _finite(self.ratio), "wald": self.wald, "df": self.df, "p_value": self.p_value,
                "auc": self.auc, "dependence": None if self.dependence is None else self.dependence.to_json()}


def check_predictions(rows: object, slopes: object, slope_covariance: object, labels: object = None,
                      dependence: DependenceTest | None = None) -> PredictionCheck | None:
    """The linear predictor ``x^T slopes`` over the public ``rows`` (module docstring), judged against ``labels``,
    the public rows' target (None: the public table has none), or else by the reports' ``dependence`` test; ``None``
    when neither is possible (no test, and no AUC can be evaluated: no labels, a target without exactly two values,
    or one class only among the rows :func:`~estimators.local.planning.auc_sample` keeps)."""
    from scipy.stats import chi2

    try:
        sample, positive = auc_sample(rows, labels) if labels is not None else (None, None)
    except EstimatorError:
        sample, positive = None, None
    if sample is None and dependence is None:
        return None
    x = np.asarray(rows, dtype=float)
    w = np.asarray(slopes, dtype=float)
    cov = np.asarray(slope_covariance, dtype=float)
    centred = x - x.mean(axis=0)
    spread_matrix = centred.T @ centred / max(x.shape[0], 1)
    spread = math.sqrt(max(float(w @ spread_matrix @ w), 0.0))
    error = math.sqrt(max(float(np.sum(spread_matrix * cov)), 0.0))  # tr(S Cov), both symmetric
    df = int(np.linalg.matrix_rank(cov, hermitian=True))
    wald = float(w @ np.linalg.pinv(cov, hermitian=True) @ w) if df else 0.0
    p_value = float(chi2.sf(wald, df)) if df else 1.0
    auc = None
    if sample is not None:
        draws = w + public_normals(w.size) @ symmetric_root(cov)
        low, high = np.quantile(column_aucs(positive, sample @ draws.T), AUC_QUANTILES)
        auc = {"estimate": float(column_aucs(positive, (sample @ w)[:, np.newaxis])[0]), "low": float(low),
               "high": float(high)}
    return PredictionCheck(x.shape[0], spread, error, wald, df, p_value, auc, dependence)


def undetermined_names(coefficients: Mapping[str, float], standard_errors: Mapping[str, float]) -> tuple[str, ...]:
    """The coefficients (intercept aside) whose sign is not known: ``|w| < 2 se``."""
    return tuple(k for k in coefficients if k != INTERCEPT and k in standard_errors
                 and not (coefficients[k] != 0.0 and abs(coefficients[k]) >= DETERMINED_Z * standard_errors[k]))


def assess_predictions(coefficients: Mapping[str, float], standard_errors: Mapping[str, float],
                       check: PredictionCheck) -> Quality:
    """The prediction verdict (module docstring) of a fit with ``check``; ``coefficients`` and ``standard_errors``
    name the determined and undetermined coefficients."""
    undetermined = undetermined_names(coefficients, standard_errors)
    determined = tuple(k for k in coefficients if k != INTERCEPT and k in standard_errors and k not in undetermined)
    auc, dependence = check.auc, check.dependence
    measured = [] if auc is None else [
        f"AUC on {check.rows:,} public rows {auc['estimate']:.3f} (90 % range over the noise {auc['low']:.3f} to "
        f"{auc['high']:.3f})"]
    if dependence is not None:
        measured.append(f"test of labels independent of the features, on the reports: chi-square "
                        f"{dependence.statistic:.3g} on {dependence.df} degrees of freedom (p = "
                        f"{dependence.p_value:.2g})")
    reasons = ["; ".join([*measured, f"Wald chi-square of every slope 0: {check.wald:.3g} on {check.df} degrees of "
                                     f"freedom (p = {check.p_value:.2g}); the predictions vary by {check.spread:.3g} "
                                     f"(sd over the public rows) against a standard error of "
                                     f"{check.standard_error:.3g}"])]
    if undetermined:
        reasons.append(f"not determined (|coefficient| < {DETERMINED_Z:g} standard errors: do not read their values "
                       f"or signs): {', '.join(undetermined)}")
    if auc is None:
        assert dependence is not None  # noqa: S101 - check_predictions returns a check with one of them
        return _by_dependence(dependence, check, reasons, determined, undetermined)
    if auc["low"] <= 0.5:
        verdict = "noise-dominated"
        reasons.insert(0, "the AUC range reaches 0.5: a fit drawn from the noise ranks no better than chance")
    elif check.p_value > WALD_LEVEL:
        verdict = "weak"
        reasons.insert(0, f"the ranking holds (AUC range above 0.5) but the coefficients are not jointly determined "
                          f"(the Wald test does not reject at {WALD_LEVEL:.0%})")
    else:
        verdict = "ok"
    return Quality(verdict, tuple(reasons), _finite(check.ratio), determined, undetermined, check)


def _by_dependence(dependence: DependenceTest, check: PredictionCheck, reasons: list[str],
                   determined: tuple[str, ...], undetermined: tuple[str, ...]) -> Quality:
    """The verdict without public labels (module docstring): the reports' dependence test, then the Wald test."""
    if dependence.p_value > WALD_LEVEL:
        verdict = "noise-dominated"
        reasons.insert(0, f"the reports cannot be told from reports of labels independent of the features (the test "
                          f"does not reject at {WALD_LEVEL:.0%}): neither can the predictions")
    elif check.p_value > WALD_LEVEL:
        verdict = "weak"
        reasons.insert(0, f"the labels depend on the features (the reports' test rejects independence at "
                          f"{WALD_LEVEL:.0%}), so the predictions carry signal, but the coefficients are not jointly "
                          f"determined (the Wald test does not reject at {WALD_LEVEL:.0%})")
    else:
        verdict = "ok"
    return Quality(verdict, tuple(reasons), _finite(check.ratio), determined, undetermined, check)


UNKNOWN = Quality("unknown", ("this fit reports no standard errors",))


def threshold(candidates: int, selected: bool) -> float:
    """The ``|w| / se`` a coefficient must reach: 2, or Bonferroni's over ``candidates`` for a selected support."""
    if not selected:
        return DETERMINED_Z
    return max(DETERMINED_Z, NormalDist().inv_cdf(1.0 - 0.025 / max(candidates, 1)))


def assess(coefficients: Mapping[str, float], standard_errors: Mapping[str, float] | None,
           selected: bool = False) -> Quality:
    """The verdict of a regression or classification fit; ``selected``: a sparse fit's support was chosen from the
    data (module docstring)."""
    if standard_errors is None:
        return UNKNOWN
    z = threshold(sum(1 for k in coefficients if k != INTERCEPT), selected)
    names = [k for k in coefficients if k != INTERCEPT and k in standard_errors
             and not (standard_errors[k] == 0.0 and coefficients[k] == 0.0)]
    if not names:
        return Quality("noise-dominated", ("no coefficient was selected: the fit is all zeros",), 0.0)
    noise = math.sqrt(sum(standard_errors[k] ** 2 for k in names))
    signal = math.sqrt(sum(coefficients[k] ** 2 for k in names))
    ratio = math.inf if noise == 0.0 else signal / noise
    determined = tuple(k for k in names
                       if abs(coefficients[k]) >= z * standard_errors[k] and coefficients[k] != 0.0)
    reasons = []
    if not determined:
        reasons.append(f"no coefficient is distinguishable from 0 at {z:.3g} standard errors (no coefficient's sign "
                       "is determined)")
    if ratio < NOISE_RATIO:
        reasons.append(f"||w|| / sqrt(trace Cov) = {ratio:.3g} < {NOISE_RATIO:g}: the noise's expected norm exceeds "
                       "the estimate's")
    if reasons:
        return Quality("noise-dominated", tuple(reasons), _finite(ratio), determined)
    if ratio < WEAK_RATIO:
        return Quality("weak", (f"||w|| / sqrt(trace Cov) = {ratio:.3g} < {WEAK_RATIO:g}; {len(determined)} of "
                                f"{len(names)} coefficients have a determined sign",), _finite(ratio), determined)
    return Quality("ok", (f"||w|| / sqrt(trace Cov) = {_text(ratio)}; {len(determined)} of {len(names)} coefficients "
                          f"have a determined sign",), _finite(ratio), determined)


def assess_mean(name: str, standard_error: float, lower: float, upper: float) -> Quality:
    """The verdict of a mean over ``[lower, upper]`` (module docstring)."""
    width = 4.0 * standard_error / (upper - lower)
    text = f"the ~95 % interval (4 se = {4.0 * standard_error:.3g}) spans {width:.3g} of [lower, upper]"
    verdict = "noise-dominated" if width >= NOISE_WIDTH else "weak" if width >= WEAK_WIDTH else "ok"
    ratio = (upper - lower) / (4.0 * standard_error) if standard_error > 0 else None
    return Quality(verdict, (text,), ratio, (name,) if verdict != "noise-dominated" else ())


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _text(value: float) -> str:
    return "inf (no noise)" if math.isinf(value) else f"{value:.3g}"
